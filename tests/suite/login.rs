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
