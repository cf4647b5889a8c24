//! Providers as configured (crush(1) CONFIGURATION, SECURITY): where keys may go, providers that
//! cannot be used, and what `crush models` says about them.

use crate::support::{FakeServer, Reply, TestEnv};
use serde_json::{Value, json};

/// One `crush run -m MODEL hi` against a fresh server with `providers` (a function of the
/// server) and `vars` in the environment; returns the recorded request.
fn one_call(
    providers: impl Fn(&FakeServer) -> Value,
    model: &str,
    vars: &[(&str, &str)],
) -> crate::support::Recorded {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.write_config(&json!({"providers": providers(&server)}));
    let out = env.run_with_env(&["run", "-m", model, "hi"], vars);
    out.assert_success();
    server.last_request()
}

#[test]
fn a_key_from_the_environment_goes_only_to_its_own_endpoint() {
    let keys = [
        ("OPENAI_API_KEY", "sk-openai-user"),
        ("ANTHROPIC_API_KEY", "sk-ant-user"),
        ("OPENROUTER_API_KEY", "sk-or-user"),
    ];
    // A user-defined openai provider pointed at another server.
    let r = one_call(
        |s| json!({"local": {"type": "openai", "base_url": s.openai_base_url(), "models": [{"id": "m"}]}}),
        "local/m",
        &keys,
    );
    assert_eq!(r.header("authorization"), None);
    // Catalog providers pointed elsewhere.
    let r = one_call(
        |s| json!({"anthropic": {"base_url": s.anthropic_base_url()}}),
        "anthropic/claude-sonnet-4-5",
        &keys,
    );
    assert_eq!(r.header("x-api-key"), None);
    let r = one_call(
        |s| json!({"openrouter": {"base_url": s.openai_base_url()}}),
        "openrouter/some/model",
        &keys,
    );
    assert_eq!(r.header("authorization"), None);
    // A key the provider's own definition names is sent, wherever the provider points.
    let r = one_call(
        |s| json!({"anthropic": {"base_url": s.anthropic_base_url(), "api_key": "$ANTHROPIC_API_KEY"}}),
        "anthropic/claude-sonnet-4-5",
        &keys,
    );
    assert_eq!(r.header("x-api-key"), Some("sk-ant-user"));
    let r = one_call(
        |s| json!({"local": {"type": "openai-compat", "base_url": s.openai_base_url(), "api_key": "lit", "models": [{"id": "m"}]}}),
        "local/m",
        &keys,
    );
    assert_eq!(r.header("authorization"), Some("Bearer lit"));
}

#[test]
fn required_and_alternative_forms_in_provider_values() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    let path = env.config_dir().join("crush.json");
    let text = format!(
        r#"{{
  "providers": {{
    "p": {{
      "type": "openai-compat",
      "base_url": "{}",
      "api_key": "${{P_KEY:?export P_KEY first}}",
      "extra_headers": {{"X-Org": "${{ORG:+org-$ORG}}", "X-None": "${{NOPE:+x}}"}},
      "models": [{{"id": "m"}}]
    }}
  }}
}}"#,
        server.openai_base_url()
    );
    std::fs::write(&path, text).unwrap();
    let out = env.run(&["run", "-m", "p/m", "hi"], None);
    out.assert_code(2);
    let want = format!(
        "{}:6: providers.p.api_key: P_KEY is not set: export P_KEY first",
        path.display()
    );
    assert!(out.stderr.contains(&want), "{}", out.stderr);
    let out = env.run_with_env(
        &["run", "-m", "p/m", "hi"],
        &[("P_KEY", "k1"), ("ORG", "acme")],
    );
    out.assert_success();
    let r = server.last_request();
    assert_eq!(r.header("authorization"), Some("Bearer k1"));
    assert_eq!(r.header("x-org"), Some("org-acme"));
    assert_eq!(r.header("x-none"), None);
}
