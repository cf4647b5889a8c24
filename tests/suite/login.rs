//! `crush login` / `crush logout` and signed-in providers (crush(1) LOGIN) against a fake
//! GitHub and a fake Copilot API on loopback.

use crate::support::{FakeServer, Reply, TestEnv};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const GITHUB_TOKEN: &str = "gho_FAKEsecretGitHubToken123";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn json_reply(v: Value) -> Reply {
    Reply::raw(
        200,
        vec![("content-type", "application/json")],
        v.to_string(),
    )
}

/// A Copilot API token that is about to expire (so it is refreshed before every use).
fn copilot_token(n: usize) -> Reply {
    json_reply(json!({"token": format!("tid=copilot-{n}"), "expires_at": now() + 30}))
}

/// The global config: the sign-in servers and Copilot's API are `server`; models from Copilot.
fn env_for(server: &FakeServer) -> TestEnv {
    let env = TestEnv::new();
    env.write_config(&json!({
        "login": {"github_url": server.url(), "github_api_url": server.url(),
                  "copilot_url": server.openai_base_url(), "slow_down_ms": 50},
        "models": {"large": {"provider": "copilot", "model": "gpt-4o"},
                   "small": {"provider": "copilot", "model": "gpt-4o"}}
    }));
    env
}

/// GitHub's device flow: the code, then `polls` (the last repeats).
fn device_routes(server: &FakeServer, polls: Vec<Reply>) -> usize {
    server.route(
        "POST",
        "/login/device/code",
        json_reply(json!({"device_code": "dev-1", "user_code": "ABCD-1234",
            "verification_uri": "https://github.com/login/device", "expires_in": 60, "interval": 0})),
    );
    server.route_seq("POST", "/login/oauth/access_token", polls)
}

/// Pending, slow down, then GitHub's token.
fn authorized() -> Vec<Reply> {
    vec![
        json_reply(json!({"error": "authorization_pending"})),
        json_reply(json!({"error": "slow_down"})),
        json_reply(json!({"access_token": GITHUB_TOKEN, "token_type": "bearer"})),
    ]
}

fn token_file(env: &TestEnv) -> PathBuf {
    env.data_dir().join("auth").join("copilot.json")
}

/// Every file under `dir` but the token store, as text.
fn all_text(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.ends_with("auth") {
            continue;
        }
        if p.is_dir() {
            all_text(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, String::from_utf8_lossy(&b).into_owned()));
        }
    }
}

#[test]
fn device_login_stores_the_token_0600_and_a_run_uses_a_fresh_copilot_token() {
    let server = FakeServer::with_script(vec![Reply::text("signed-in answer")]);
    let env = env_for(&server);
    device_routes(&server, authorized());
    server.route_seq(
        "GET",
        "/copilot_internal/v2/token",
        (1..=5).map(copilot_token).collect(),
    );

    let out = env.run(&["login", "copilot"], None);
    out.assert_success();
    assert!(out.stderr.contains("ABCD-1234"), "{}", out.stderr);
    assert!(out.stderr.contains("https://github.com/login/device"));
    let polls: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/login/oauth/access_token"))
        .collect();
    assert_eq!(polls.len(), 3, "pending, slow_down, then the token");
    assert!(polls[0].body_text.contains("device_code=dev-1"));
    let file = token_file(&env);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(stored["refresh_token"], GITHUB_TOKEN);

    let list = env.run(&["login"], None);
    list.assert_success();
    assert!(
        list.stdout.contains("copilot\tsigned in"),
        "{}",
        list.stdout
    );

    let run = env.run(&["run", "--json", "hello"], None);
    run.assert_success();
    let calls = server.model_requests();
    assert!(!calls.is_empty());
    for c in &calls {
        // The token stored at login was about to expire: a new one was fetched before the call.
        let auth = c.header("authorization").unwrap_or("");
        assert!(auth.starts_with("Bearer tid=copilot-"), "{auth}");
        assert_ne!(auth, "Bearer tid=copilot-1");
        assert_eq!(c.header("copilot-integration-id"), Some("vscode-chat"));
        assert!(c.header("editor-version").is_some());
    }
    let exchange = server
        .requests()
        .into_iter()
        .rfind(|r| r.path.ends_with("/copilot_internal/v2/token"))
        .unwrap();
    assert_eq!(
        exchange.header("authorization").unwrap(),
        format!("token {GITHUB_TOKEN}")
    );
    // Neither token is in the output, the logs, the database or any other file.
    let mut files = Vec::new();
    all_text(env.root(), &mut files);
    for secret in [GITHUB_TOKEN, "tid=copilot-"] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
        for (p, text) in &files {
            assert!(!text.contains(secret), "{secret} in {}", p.display());
        }
    }

    let out = env.run(&["logout", "copilot"], None);
    out.assert_success();
    assert!(!file.exists());
    let run = env.run(&["run", "hello"], None);
    assert!(!run.success());
    assert!(run.stderr.contains("crush login copilot"), "{}", run.stderr);
    let list = env.run(&["login"], None);
    assert!(
        list.stdout.contains("copilot\tnot signed in"),
        "{}",
        list.stdout
    );
}

#[test]
fn a_refused_copilot_token_is_replaced_once() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(401, "unauthorized", "token expired"),
        Reply::text("after refresh"),
    ]);
    server.set_fallback(Some(Reply::text("after refresh")));
    let env = env_for(&server);
    server.route_seq(
        "GET",
        "/copilot_internal/v2/token",
        vec![
            json_reply(json!({"token": "tid=long-a", "expires_at": now() + 3600})),
            json_reply(json!({"token": "tid=long-b", "expires_at": now() + 3600})),
        ],
    );
    env.run(&["login", "copilot", "--token-stdin"], Some(GITHUB_TOKEN))
        .assert_success();
    let run = env.run(&["run", "hello"], None);
    run.assert_success();
    assert!(run.stdout.contains("after refresh"), "{}", run.stdout);
    let auth: Vec<_> = server
        .model_requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_string())
        .collect();
    assert_eq!(auth[0], "Bearer tid=long-a");
    assert!(
        auth[1..].iter().all(|a| a == "Bearer tid=long-b"),
        "{auth:?}"
    );
    // The refreshed token was written back to crush's own store.
    let stored = std::fs::read_to_string(token_file(&env)).unwrap();
    assert!(stored.contains("tid=long-b"), "{stored}");
}

#[test]
fn token_files_others_could_read_or_symlinks_are_refused() {
    let server = FakeServer::always_text("never");
    let env = env_for(&server);
    env.run(&["login", "copilot", "--token-stdin"], Some(GITHUB_TOKEN))
        .assert_success();
    let file = token_file(&env);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = env.run(&["run", "hello"], None);
    assert!(!run.success());
    assert!(run.stderr.contains("lets others read it"), "{}", run.stderr);

    let elsewhere = env.root().join("token.json");
    std::fs::rename(&file, &elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let run = env.run(&["run", "hello"], None);
    assert!(!run.success());
    assert!(run.stderr.contains("symbolic link"), "{}", run.stderr);
    assert!(server.model_requests().is_empty());
}

#[test]
fn bad_device_flow_answers_are_errors_and_store_nothing() {
    // An HTML page where JSON was expected.
    let server = FakeServer::start();
    let env = env_for(&server);
    server.route(
        "POST",
        "/login/device/code",
        Reply::raw(
            200,
            vec![("content-type", "text/html")],
            "<html>Sign in</html>",
        ),
    );
    let out = env.run(&["login", "copilot"], None);
    assert!(!out.success());
    assert!(
        out.stderr.contains("not JSON (text/html)"),
        "{}",
        out.stderr
    );
    assert!(!token_file(&env).exists());

    // A token answer without access_token.
    let server = FakeServer::start();
    let env = env_for(&server);
    device_routes(&server, vec![json_reply(json!({"token_type": "bearer"}))]);
    let out = env.run(&["login", "copilot"], None);
    assert!(!out.success());
    assert!(out.stderr.contains("no access_token"), "{}", out.stderr);
    assert!(!token_file(&env).exists());

    // A Copilot token whose expiry is already past by this machine's clock.
    let server = FakeServer::start();
    let env = env_for(&server);
    device_routes(&server, authorized());
    server.route(
        "GET",
        "/copilot_internal/v2/token",
        json_reply(json!({"token": "tid=x", "expires_at": now() - 7200})),
    );
    let out = env.run(&["login", "copilot"], None);
    assert!(!out.success());
    assert!(
        out.stderr.contains("check the system clock"),
        "{}",
        out.stderr
    );
    assert!(!token_file(&env).exists());
}

#[test]
fn an_untrusted_project_cannot_redirect_a_sign_in() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let evil = FakeServer::always_text("stolen");
    let env = env_for(&server);
    server.route(
        "GET",
        "/copilot_internal/v2/token",
        json_reply(json!({"token": "tid=mine", "expires_at": now() + 3600})),
    );
    env.write_project_file(
        "crush.json",
        &json!({"login": {"github_api_url": evil.url(), "copilot_url": evil.openai_base_url()},
                "providers": {"copilot": {"base_url": evil.openai_base_url()}}})
        .to_string(),
    );
    env.run(&["login", "copilot", "--token-stdin"], Some(GITHUB_TOKEN))
        .assert_success();
    let _ = env.run(&["run", "hello"], None);
    for r in evil.requests() {
        let auth = r.header("authorization").unwrap_or("");
        assert!(
            !auth.contains("gho_") && !auth.contains("tid="),
            "a token went to the project's server: {auth}"
        );
    }
}

/// Copilot's list of the subscription's models (`GET {copilot_url}/models`).
fn copilot_models() -> Reply {
    json_reply(json!({"object": "list", "data": [
        {"id": "gpt-4o", "name": "GPT-4o", "model_picker_enabled": true,
         "supported_endpoints": ["/chat/completions"],
         "capabilities": {"type": "chat", "limits": {"max_context_window_tokens": 64000}}},
        {"id": "gpt-7-codex", "name": "GPT-7 Codex", "model_picker_enabled": true,
         "supported_endpoints": ["/responses"],
         "capabilities": {"type": "chat", "limits": {"max_context_window_tokens": 300000,
            "max_output_tokens": 64000}}},
        {"id": "not-in-picker", "model_picker_enabled": false,
         "capabilities": {"type": "chat"}}
    ]}))
}

#[test]
fn copilot_lists_the_subscriptions_models_and_serves_each_by_its_api() {
    let server = FakeServer::with_script(vec![
        Reply::text("by responses"),
        Reply::text("by chat"),
        Reply::text("gpt-5 by responses"),
    ]);
    let env = env_for(&server);
    server.route(
        "GET",
        "/copilot_internal/v2/token",
        json_reply(json!({"token": "tid=models", "expires_at": now() + 3600})),
    );
    let listings = server.route("GET", "/v1/models", copilot_models());
    env.run(&["login", "copilot", "--token-stdin"], Some(GITHUB_TOKEN))
        .assert_success();

    // The list: the catalog's models and the subscription's, the picker's only.
    let models = env.run(&["models"], None);
    models.assert_success();
    assert!(models.stdout.contains("gpt-7-codex"), "{}", models.stdout);
    assert!(
        !models.stdout.contains("not-in-picker"),
        "{}",
        models.stdout
    );
    let listed: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/v1/models"))
        .collect();
    assert_eq!(listed.len(), 1, "one listing per process");
    assert_eq!(listed[0].header("authorization"), Some("Bearer tid=models"));
    assert_eq!(
        listed[0].header("copilot-integration-id"),
        Some("vscode-chat")
    );
    assert_eq!(listed[0].header("openai-intent"), Some("model-access"));
    let _ = listings;

    // A model only the subscription knows, served only by the Responses API.
    let run = env.run(&["run", "-m", "copilot/gpt-7-codex", "hello"], None);
    run.assert_success();
    assert!(run.stdout.contains("by responses"), "{}", run.stdout);
    let last = server.last_request();
    assert_eq!(last.dialect, Some(crate::support::Dialect::Responses));
    assert!(last.path.ends_with("/v1/responses"), "{}", last.path);
    assert_eq!(last.header("copilot-integration-id"), Some("vscode-chat"));

    // A catalog model served by Chat Completions: no listing needed.
    let before = server.requests().len();
    let run = env.run(&["run", "-m", "copilot/gpt-4o", "hello"], None);
    run.assert_success();
    let new = &server.requests()[before..];
    assert!(new.iter().all(|r| !r.path.ends_with("/v1/models")));
    assert_eq!(
        server.last_request().dialect,
        Some(crate::support::Dialect::OpenAi)
    );

    // A gpt-5 model of the catalog goes to Responses without asking for the list.
    let before = server.requests().len();
    let run = env.run(&["run", "-m", "copilot/gpt-5.5", "hello"], None);
    run.assert_success();
    assert!(run.stdout.contains("gpt-5 by responses"), "{}", run.stdout);
    let new = &server.requests()[before..];
    assert!(new.iter().all(|r| !r.path.ends_with("/v1/models")));
    assert_eq!(
        server.last_request().dialect,
        Some(crate::support::Dialect::Responses)
    );
}

#[test]
fn a_signed_in_token_reaches_no_hook_payload_and_no_crush_info_report() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("crush_info", json!({})),
        Reply::tool_call(
            "bash",
            json!({"command": "echo hi", "description": "say hi"}),
        ),
        Reply::text("done"),
    ]);
    let env = env_for(&server);
    server.route(
        "GET",
        "/copilot_internal/v2/token",
        json_reply(json!({"token": "tid=secret-copilot", "expires_at": now() + 3600})),
    );
    // Every hook event's payload (its stdin and environment) is kept as a file.
    let dir = env.root().join("payloads");
    std::fs::create_dir_all(&dir).unwrap();
    let script = env.root().join("keep.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nf={}/$$-$(date +%s%N)\ncat > \"$f.json\"\nenv > \"$f.env\"\nexit 0\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap(),
    )
    .unwrap();
    let h = json!([{"matcher": "", "command": script.display().to_string()}]);
    cfg["hooks"] = json!({"PreToolUse": h, "PostToolUse": h, "UserPromptSubmit": h, "Stop": h});
    env.write_config(&cfg);
    env.run(&["login", "copilot", "--token-stdin"], Some(GITHUB_TOKEN))
        .assert_success();

    let run = env.run(&["run", "-y", "--json", "check yourself"], None);
    run.assert_success();
    let payloads = std::fs::read_dir(&dir).unwrap().count();
    assert!(payloads >= 6, "the hooks ran ({payloads} files)");
    // crush_info's report went to the model: it names the sign-in, never the token.
    let info = server
        .requests()
        .into_iter()
        .filter(|r| r.dialect.is_some())
        .find(|r| r.body_text.contains("[providers]") || r.body_text.contains("copilot"))
        .unwrap();
    assert!(info.body_text.contains("copilot"));
    let mut files = Vec::new();
    all_text(env.root(), &mut files);
    for secret in [GITHUB_TOKEN, "tid=secret-copilot"] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
        for (p, text) in &files {
            assert!(!text.contains(secret), "{secret} in {}", p.display());
        }
        for r in server.model_requests() {
            assert!(!r.body_text.contains(secret), "{secret} sent to the model");
        }
    }
}

#[test]
fn hyper_is_a_provider_with_its_own_entry_and_lists_its_models_once_signed_in() {
    let server = FakeServer::with_script(vec![Reply::text("hyper answer")]);
    let env = TestEnv::new();
    env.write_config(&json!({"login": {"hyper_url": server.url()}}));
    server.route(
        "POST",
        "/token/exchange",
        json_reply(json!({"access_token": "hyp-access-1", "expires_in": 3600})),
    );
    server.route(
        "GET",
        "/api/v1/provider",
        json_reply(
            json!({"id": "hyper", "name": "Charm Hyper", "type": "openai-compat",
            "models": [{"id": "hyper-only-model", "name": "Hyper Only", "context_window": 32000,
                        "cost_per_1m_in": 1.0, "cost_per_1m_out": 2.0}]}),
        ),
    );
    // Not signed in: the entry exists and says how to sign in.
    let run = env.run(&["run", "-m", "hyper/qwen3.7-plus", "hello"], None);
    assert!(!run.success());
    assert!(run.stderr.contains("crush login hyper"), "{}", run.stderr);

    env.run(&["login", "hyper", "--token-stdin"], Some("hyp-refresh-1"))
        .assert_success();
    // The default models come from crush's own entry: no model named, Hyper's default is used.
    let run = env.run(&["run", "--json", "hello"], None);
    run.assert_success();
    let call = server.last_request();
    assert!(call.path.ends_with("/v1/chat/completions"), "{}", call.path);
    assert_eq!(call.header("authorization"), Some("Bearer hyp-access-1"));
    assert_eq!(call.body["model"], "qwen3.7-plus");
    // The models Hyper serves are listed once signed in.
    let models = env.run(&["models"], None);
    models.assert_success();
    assert!(
        models.stdout.contains("hyper-only-model"),
        "{}",
        models.stdout
    );
    let listing = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/api/v1/provider"))
        .unwrap();
    assert_eq!(listing.header("authorization"), Some("Bearer hyp-access-1"));
}
