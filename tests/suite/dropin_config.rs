//! Go Crush users' files as Go Crush reads them (crush(1) CONFIGURATION): its workspace config,
//! `.env`, the switch that hides the catalog's providers.

use crate::support::{FakeServer, Reply, TestEnv};
use serde_json::{Value, json};

/// `config show --origin --json`, parsed, with extra environment variables.
fn show(env: &TestEnv, vars: &[(&str, &str)]) -> (Value, String) {
    let out = env.run_with_env(&["config", "show", "--origin", "--json"], vars);
    out.assert_success();
    let v = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    (v, out.stderr)
}

#[test]
fn go_crushs_workspace_config_is_workspace_state_below_the_users_files() {
    let env = TestEnv::new();
    let go = env.write_project_file(
        ".crush/crush.json",
        "{\n  \"models\": {\"large\": {\"provider\": \"p\", \"model\": \"go-chosen\"},\n             \"small\": {\"provider\": \"p\", \"model\": \"go-small\"}},\n  \"providers\": {\"p\": {\"api_key\": \"x\"}}\n}\n",
    );
    let (s, stderr) = show(&env, &[]);
    assert_eq!(s["config"]["models"]["large"]["model"], json!("go-chosen"));
    let o = &s["origins"]["/models/large/model"];
    assert_eq!(o["layer"], json!(3), "{o}");
    assert_eq!(o["layer_name"], json!("workspace state"));
    assert_eq!(o["file"], json!(go.to_string_lossy()));
    assert_eq!(o["line"], json!(2));
    // Only what a workspace file may set.
    assert_eq!(s["config"]["providers"], Value::Null);
    assert!(stderr.contains("crush.json: ignored providers"), "{stderr}");
    // Our state.json is above it, the user's files above both.
    env.write_project_file(
        ".crush/state.json",
        &json!({"models": {"large": {"provider": "p", "model": "ours"}}}).to_string(),
    );
    let (s, _) = show(&env, &[]);
    assert_eq!(s["config"]["models"]["large"]["model"], json!("ours"));
    assert_eq!(s["config"]["models"]["small"]["model"], json!("go-small"));
    env.write_config(&json!({"models": {"large": {"provider": "p", "model": "mine"}}}));
    let (s, _) = show(&env, &[]);
    assert_eq!(s["config"]["models"]["large"]["model"], json!("mine"));
    assert_eq!(s["origins"]["/models/large/model"]["layer"], json!(4));
}

#[test]
fn disable_default_providers_hides_the_catalogs_providers() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"local": {"type": "openai-compat",
        "base_url": server.openai_base_url(), "models": [{"id": "m"}]}}}));
    let key = ("ANTHROPIC_API_KEY", "sk-ant");
    let models = env.run_with_env(&["models"], &[key]);
    models.assert_success();
    assert!(models.stdout.contains("anthropic/"), "{}", models.stdout);
    let off = [key, ("CRUSH_DISABLE_DEFAULT_PROVIDERS", "1")];
    let models = env.run_with_env(&["models"], &off);
    models.assert_success();
    assert!(!models.stdout.contains("anthropic/"), "{}", models.stdout);
    assert!(models.stdout.contains("local/m"), "{}", models.stdout);
    // With the catalog hidden, the default model is the user's, not Anthropic's.
    env.run_with_env(&["run", "hi"], &off).assert_success();
    assert_eq!(server.request_count(), 1);
    // The option in a file does the same; with no provider of one's own it says why.
    env.write_config(&json!({"options": {"disable_default_providers": true}}));
    let out = env.run_with_env(&["run", "hi"], &[key]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("the catalog's providers are disabled"),
        "{}",
        out.stderr
    );
}

#[test]
fn dotenv_loads_once_trusted_and_never_overrides_the_environment() {
    let server = FakeServer::with_script(vec![Reply::text("ok"), Reply::text("ok")]);
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {"local": {"type": "openai-compat", "base_url": server.openai_base_url(),
            "api_key": "$LOCAL_KEY", "extra_headers": {"X-Preset": "$PRESET"},
            "models": [{"id": "m"}]}}
    }));
    env.write_project_file(".env", "LOCAL_KEY=from-dotenv\nPRESET=from-dotenv\n");
    let shell = [("PRESET", "from-shell")];
    // Untrusted: skipped, and the notice says so.
    let out = env.run_with_env(&["run", "hi"], &shell);
    out.assert_success();
    assert!(
        out.stderr
            .contains("is not trusted: skipped the .env file;"),
        "{}",
        out.stderr
    );
    assert_eq!(server.last_request().header("authorization"), None);
    let t = env.run(&["trust"], None);
    t.assert_success();
    assert!(
        t.stdout.contains("environment file") && t.stdout.contains("sets LOCAL_KEY, PRESET"),
        "{}",
        t.stdout
    );
    // Trusted: loaded, below what the environment already sets.
    let out = env.run_with_env(&["run", "hi"], &shell);
    out.assert_success();
    assert!(!out.stderr.contains("not trusted"), "{}", out.stderr);
    let r = server.last_request();
    assert_eq!(r.header("authorization"), Some("Bearer from-dotenv"));
    assert_eq!(r.header("x-preset"), Some("from-shell"));
}

#[test]
fn a_crushrc_removing_what_is_not_defined_gets_warnings_not_a_failed_load() {
    let env = TestEnv::new();
    let rc = env.config_dir().join("crushrc");
    std::fs::write(
        &rc,
        "provider remove ghost || true\n\
         model remove ghost/m\n\
         mcp remove ghost\n\
         lsp rm ghost\n\
         hook remove PreToolUse --name ghost\n\
         option progress false\n",
    )
    .unwrap();
    let (s, stderr) = show(&env, &[]);
    assert_eq!(s["config"]["options"]["progress"], json!(false));
    for (line, what) in [
        (1, "no provider 'ghost'"),
        (2, "no model 'm' of provider 'ghost'"),
        (3, "no MCP server 'ghost'"),
        (4, "no LSP server 'ghost'"),
        (5, "no hook PreToolUse 'ghost'"),
    ] {
        let want = format!(
            "crush: warning: {}:{line}: {what} to remove: nothing changed",
            rc.display()
        );
        assert!(stderr.contains(&want), "{want:?} not in:\n{stderr}");
    }
}

#[test]
fn commits_carry_the_attribution_go_crush_asks_for() {
    let server = FakeServer::with_script(vec![Reply::text("ok"), Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, crate::support::Dialect::OpenAi);
    // Go Crush's default: assisted-by, with the generated-with line.
    env.run(&["run", "commit it"], None).assert_success();
    let system = server.last_request().system_text();
    assert!(
        system.contains("💘 Generated with Crush\n\nAssisted-by: Crush:fake-model"),
        "{system}"
    );
    // A project may choose its own (options.attribution is on the trust allow-list).
    env.write_project_file(
        ".crush.json",
        &json!({"options": {"attribution": {"trailer_style": "co-authored-by", "generated_with": false}}})
            .to_string(),
    );
    env.run(&["run", "commit it"], None).assert_success();
    let system = server.last_request().system_text();
    assert!(
        system.contains("Co-Authored-By: Crush <crush@charm.land>")
            && !system.contains("Generated with")
            && !system.contains("Assisted-by"),
        "{system}"
    );
}
