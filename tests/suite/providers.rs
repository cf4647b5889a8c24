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

#[test]
fn providers_without_a_key_are_kept() {
    // Local servers: type openai or openai-compat, no api_key or an empty one.
    for (kind, key) in [
        ("openai", None),
        ("openai", Some("")),
        ("openai-compat", Some("")),
    ] {
        let r = one_call(
            |s| {
                let mut p =
                    json!({"type": kind, "base_url": s.openai_base_url(), "models": [{"id": "m"}]});
                if let Some(k) = key {
                    p["api_key"] = json!(k);
                }
                json!({"local": p})
            },
            "local/m",
            &[],
        );
        assert_eq!(r.header("authorization"), None, "{kind} {key:?}");
    }
}

#[test]
fn providers_that_cannot_be_used_are_listed_with_the_reason() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    let base = server.openai_base_url();
    env.write_config(&json!({"providers": {
        "empty": {"type": "openai-compat", "base_url": base},
        "gem": {"type": "gemini", "base_url": "http://127.0.0.1:1", "models": [{"id": "g1"}]},
        "cmd": {"type": "openai-compat", "base_url": base, "api_key": "$(echo nope >&2; exit 3)",
                "models": [{"id": "c1"}]},
        "openai": {"models": [{"id": "mine"}]}
    }}));
    let out = env.run(&["models", "--json"], None);
    out.assert_success();
    let rows: Value = serde_json::from_str(&out.stdout).unwrap();
    // A row's status, by PROVIDER/MODEL (`-` for a provider that lists none).
    let line = |id: &str| -> String {
        let (p, m) = id.split_once('/').unwrap();
        let row = rows.as_array().unwrap().iter().find(|r| {
            r["provider"] == p && (r["model"] == m || (m == "-" && r["model"].is_null()))
        });
        row.map(|r| r["status"].as_str().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no row {id}: {rows}"))
    };
    // Piped, only the models that can be used, one per line.
    let ids = env.run(&["models"], None).stdout;
    assert!(
        ids.lines()
            .all(|l| !l.starts_with("gem/") && !l.starts_with("cmd/")),
        "{ids}"
    );
    assert!(line("empty/-").contains("configured, no models listed"));
    assert!(
        line("gem/g1").contains("unusable:") && line("gem/g1").contains("unknown type 'gemini'")
    );
    assert!(line("cmd/c1").contains("unusable:") && line("cmd/c1").contains("failed (exit 3)"));
    assert!(
        line("openai/mine").contains("unusable: no API key: set OPENAI_API_KEY"),
        "{}",
        line("openai/mine")
    );
    // Faults of the configuration are warned about once, naming the provider.
    for id in ["gem", "cmd"] {
        let n = out
            .stderr
            .lines()
            .filter(|l| l.starts_with(&format!("crush: warning: provider '{id}' skipped")))
            .count();
        assert_eq!(n, 1, "{id}:\n{}", out.stderr);
    }
    let json_rows: Value =
        serde_json::from_str(&env.run(&["models", "--json", "empty"], None).stdout).unwrap();
    assert_eq!(json_rows[0]["model"], Value::Null);
    // A provider that works is still used; one that does not says why when it is needed.
    env.run(&["run", "-m", "empty/anything", "hi"], None)
        .assert_success();
    let out = env.run(&["run", "-m", "cmd/c1", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("provider 'cmd' cannot be used:") && out.stderr.contains("exit 3"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_crushrc_provider_of_a_type_not_supported_is_a_warning() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"local": {"type": "openai-compat",
        "base_url": server.openai_base_url(), "models": [{"id": "m"}]}}}));
    std::fs::write(
        env.config_dir().join("crushrc"),
        "provider add gem --type gemini --base-url http://127.0.0.1:1\nmodel add gem/g1\n",
    )
    .unwrap();
    let out = env.run(&["run", "-m", "local/m", "hi"], None);
    out.assert_success();
    let models = env.run(&["models", "gem", "--json"], None);
    models.assert_success();
    assert!(
        models.stdout.contains("unknown type 'gemini'"),
        "{}",
        models.stdout
    );
}
