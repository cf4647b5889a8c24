//! The provider catalog (crush(1) PROVIDER CATALOG) end to end: auto-update with ETag against the
//! fake server, fallbacks, the off switch, `update-providers`, `models`, model resolution and
//! catalog prices.

use crate::support::env::run_command;
use crate::support::{Dialect, FakeServer, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A one-provider catalog whose provider is `id` with model `model`.
fn catalog(id: &str, model: &str) -> String {
    json!([{
        "name": "Test Provider", "id": id, "type": "openai-compat",
        "api_key": "$TESTPROV_API_KEY", "api_endpoint": "http://127.0.0.1:9/v1",
        "default_large_model_id": model, "default_small_model_id": model,
        "models": [{"id": model, "name": "Test Model", "cost_per_1m_in": 1, "cost_per_1m_out": 2,
                    "context_window": 1000, "some_future_key": true}]
    }])
    .to_string()
}

fn json_reply(body: &str, etag: Option<&str>) -> Reply {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(t) = etag {
        headers.push(("etag", t));
    }
    Reply::raw(200, headers, body.to_string())
}

/// `crush` with auto-update on, pointed at `catwalk`, checking on every start (TTL 0).
fn online(env: &TestEnv, catwalk: &str) -> Command {
    let mut cmd = env.crush();
    cmd.env_remove("CRUSH_DISABLE_PROVIDER_AUTO_UPDATE")
        .env("CATWALK_URL", catwalk)
        .env("CRUSH_CATALOG_TTL", "0");
    cmd
}

fn run(mut cmd: Command, args: &[&str]) -> Output {
    cmd.args(args);
    run_command(cmd, None, Duration::from_secs(30))
}

fn cache(env: &TestEnv) -> PathBuf {
    env.data_dir().join("providers.json")
}

fn read_cache(env: &TestEnv) -> String {
    std::fs::read_to_string(cache(env)).unwrap_or_default()
}

fn catalog_requests(server: &FakeServer) -> Vec<crate::support::Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/v2/providers"))
        .collect()
}

/// Files in the global data dir, for spotting leftover temporary files.
fn data_files(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.data_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_200_is_cached_with_its_etag_and_sent_back_for_a_304() {
    let server = FakeServer::start();
    let body = catalog("testprov", "test-model");
    server.route_seq(
        "GET",
        "/v2/providers",
        vec![
            json_reply(&body, Some("\"tag-1\"")),
            Reply::raw(304, vec![("etag", "\"tag-1\"")], ""),
        ],
    );
    let env = TestEnv::new();
    let first = run(online(&env, &server.url()), &["models", "--all"]);
    first.assert_success();
    assert!(
        first.stdout.contains("testprov/test-model"),
        "{}",
        first.stdout
    );
    assert!(!first.stderr.contains("warning"), "{}", first.stderr);
    assert_eq!(read_cache(&env), body, "the body is cached as served");

    let second = run(online(&env, &server.url()), &["models", "--all"]);
    second.assert_success();
    assert!(second.stdout.contains("testprov/test-model"));
    assert!(!second.stderr.contains("warning"), "{}", second.stderr);
    let reqs = catalog_requests(&server);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].header("if-none-match"), None);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"tag-1\""));
    assert_eq!(read_cache(&env), body, "a 304 keeps the cache");
}

#[test]
fn a_fresh_cache_is_not_checked_again_within_the_ttl() {
    let server = FakeServer::start();
    server.route(
        "GET",
        "/v2/providers",
        json_reply(&catalog("testprov", "m"), Some("\"t\"")),
    );
    let env = TestEnv::new();
    for _ in 0..3 {
        let mut cmd = online(&env, &server.url());
        cmd.env_remove("CRUSH_CATALOG_TTL"); // the default, 24 h
        run(cmd, &["models"]).assert_success();
    }
    assert_eq!(catalog_requests(&server).len(), 1);
}

#[test]
fn a_500_falls_back_to_the_cache_then_to_the_embedded_copy() {
    let server = FakeServer::start();
    server.route("GET", "/v2/providers", Reply::status(500, "boom"));
    let env = TestEnv::new();
    // No cache: the embedded copy, with one warning line.
    let out = run(
        online(&env, &server.url()),
        &["models", "--all", "anthropic/"],
    );
    out.assert_success();
    assert!(out.stdout.contains("anthropic/claude"), "{}", out.stdout);
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("HTTP 500") && warnings[0].contains("embedded"),
        "{}",
        warnings[0]
    );
    assert!(!cache(&env).exists());

    // With a cache: the cache.
    let file = env.write_project_file("cat.json", &catalog("cachedprov", "m"));
    env.run(&["update-providers", file.to_str().unwrap()], None)
        .assert_success();
    let out = run(online(&env, &server.url()), &["models", "--all"]);
    out.assert_success();
    assert!(out.stdout.contains("cachedprov/m"), "{}", out.stdout);
    assert!(out.stderr.contains("using the cache"), "{}", out.stderr);
    assert_eq!(read_cache(&env), catalog("cachedprov", "m"));
}

#[test]
fn a_server_that_never_answers_is_abandoned_after_the_timeout() {
    // A listener that accepts connections (the kernel does) and never replies.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let env = TestEnv::new();
    let mut cmd = online(&env, &url);
    cmd.env("CRUSH_CATALOG_TIMEOUT_MS", "300")
        .args(["models", "--all", "anthropic/"]);
    // Without the cap this would hang until the harness kills it.
    let out = run_command(cmd, None, Duration::from_secs(20));
    out.assert_success();
    assert!(out.stdout.contains("anthropic/"), "{}", out.stdout);
    assert!(
        out.stderr.contains("no answer within 300 ms"),
        "{}",
        out.stderr
    );
    drop(silent);
}

#[test]
fn an_empty_or_malformed_catalog_is_rejected_and_the_cache_kept() {
    let server = FakeServer::start();
    server.route_seq(
        "GET",
        "/v2/providers",
        vec![
            json_reply("[]", Some("\"e\"")),
            json_reply("{\"error\":\"x\"}", None),
        ],
    );
    let env = TestEnv::new();
    let file = env.write_project_file("cat.json", &catalog("keep", "m"));
    env.run(&["update-providers", file.to_str().unwrap()], None)
        .assert_success();

    let out = run(online(&env, &server.url()), &["models", "--all"]);
    out.assert_success();
    assert!(out.stderr.contains("empty"), "{}", out.stderr);
    assert!(out.stdout.contains("keep/m"));
    assert_eq!(read_cache(&env), catalog("keep", "m"));

    // update-providers from a URL with a wrong shape: an error, and the cache untouched.
    let out = env.run(&["update-providers", &server.url()], None);
    out.assert_code(2);
    assert!(out.stderr.contains("array"), "{}", out.stderr);
    assert_eq!(read_cache(&env), catalog("keep", "m"));

    for bad in ["[]", "not json", "[{\"name\":\"no id\"}]"] {
        let f = env.write_project_file("bad.json", bad);
        let out = env.run(&["update-providers", f.to_str().unwrap()], None);
        out.assert_code(2);
        assert!(out.stderr.contains("bad.json"), "{}", out.stderr);
        assert_eq!(read_cache(&env), catalog("keep", "m"));
    }
    let out = env.run(&["update-providers", "http://127.0.0.1:9/"], None);
    out.assert_code(1);
    assert!(out.stderr.contains("127.0.0.1:9"), "{}", out.stderr);
    assert_eq!(read_cache(&env), catalog("keep", "m"));
}

#[test]
fn update_providers_from_a_file_a_url_a_json_url_and_embedded() {
    let server = FakeServer::start();
    server.route(
        "GET",
        "/v2/providers",
        json_reply(&catalog("fromurl", "m"), Some("\"u\"")),
    );
    server.route(
        "GET",
        "/custom/catalog.json",
        json_reply(&catalog("fromjson", "m"), None),
    );
    let env = TestEnv::new();

    let file = env.write_project_file("cat.json", &catalog("fromfile", "m"));
    let out = env.run(&["update-providers", file.to_str().unwrap()], None);
    out.assert_success();
    assert!(out.stdout.contains("1 providers"), "{}", out.stdout);
    assert_eq!(read_cache(&env), catalog("fromfile", "m"));
    // Auto-update is off in this environment: the cache is used (Go Crush ignores it).
    assert!(
        env.run(&["models", "--all"], None)
            .stdout
            .contains("fromfile/m")
    );

    let out = env.run(&["update-providers", &format!("{}/", server.url())], None);
    out.assert_success();
    assert_eq!(read_cache(&env), catalog("fromurl", "m"));

    let url = format!("{}/custom/catalog.json", server.url());
    env.run(&["update-providers", &url], None).assert_success();
    assert_eq!(read_cache(&env), catalog("fromjson", "m"));

    // No argument: $CATWALK_URL.
    let mut cmd = env.crush();
    cmd.env("CATWALK_URL", server.url());
    run(cmd, &["update-providers"]).assert_success();
    assert_eq!(read_cache(&env), catalog("fromurl", "m"));

    env.run(&["update-providers", "embedded"], None)
        .assert_success();
    assert!(read_cache(&env).contains("\"id\":\"anthropic\""));
    assert!(
        env.run(&["models", "--all"], None)
            .stdout
            .contains("anthropic/")
    );

    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        ["/v2/providers", "/custom/catalog.json", "/v2/providers"]
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.header("if-none-match").is_none())
    );
    assert_eq!(
        data_files(&env)
            .iter()
            .filter(|f| f.contains("tmp"))
            .count(),
        0
    );
}

#[test]
fn the_off_switch_makes_no_request() {
    let catwalk = FakeServer::start();
    catwalk.route("GET", "/v2/providers", json_reply(&catalog("x", "m"), None));
    let model = FakeServer::with_script(vec![Reply::text("one"), Reply::text("two")]);
    let env = TestEnv::new();
    env.use_server(&model, Dialect::OpenAi);

    // The environment variable (TestEnv's default).
    let mut cmd = env.crush();
    cmd.env("CATWALK_URL", catwalk.url())
        .env("CRUSH_CATALOG_TTL", "0");
    run(cmd, &["models"]).assert_success();
    let mut cmd = env.crush();
    cmd.env("CATWALK_URL", catwalk.url());
    let out = run(cmd, &["run", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "one\n");

    // The configuration option.
    let mut config = env.config_for(&model, Dialect::OpenAi);
    config["options"] = json!({"disable_provider_auto_update": true});
    env.write_config(&config);
    let out = run(online(&env, &catwalk.url()), &["run", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "two\n");
    assert_eq!(catwalk.request_count(), 0, "{:?}", catwalk.requests());
}

#[test]
fn a_failed_write_never_leaves_a_half_written_cache() {
    let env = TestEnv::new();
    let small = env.write_project_file("small.json", &catalog("old", "m"));
    env.run(&["update-providers", small.to_str().unwrap()], None)
        .assert_success();
    let before = read_cache(&env);

    // A catalog bigger than the file size limit the process gets: the write fails half-way.
    let models: Vec<Value> = (0..200)
        .map(|i| json!({"id": format!("model-{i}"), "name": "A model with a long enough name"}))
        .collect();
    let big = json!([{"id": "new", "type": "openai-compat", "models": models}]).to_string();
    assert!(big.len() > 8192);
    let big = env.write_project_file("big.json", &big);
    let mut cmd = env.crush();
    cmd.args(["update-providers", big.to_str().unwrap()]);
    // SAFETY: async-signal-safe calls between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run_command(cmd, None, Duration::from_secs(30));
    out.assert_code(1);
    assert!(
        out.stderr.contains("cannot write") && out.stderr.contains("providers.json"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("left unchanged"), "{}", out.stderr);
    assert_eq!(read_cache(&env), before);
    let files = data_files(&env);
    assert!(
        files.iter().all(|f| !f.contains("tmp")),
        "a temporary file was left behind: {files:?}"
    );

    // A data dir that cannot be created (a file is in the way): a clear error too.
    let blocked = env.root().join("blocked");
    std::fs::write(&blocked, "").unwrap();
    let mut cmd = env.crush();
    cmd.env("CRUSH_GLOBAL_DATA", blocked.join("crush"));
    let out = run(cmd, &["update-providers", "embedded"]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("cannot create the directory"),
        "{}",
        out.stderr
    );
}

#[test]
fn models_lists_configured_and_unconfigured_models() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    let out = run(cmd, &["models", "--all", "--json"]);
    out.assert_success();
    let rows: Value = serde_json::from_str(&out.stdout).unwrap();
    let lines: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}/{} {}",
                r["provider"].as_str().unwrap(),
                r["model"].as_str().unwrap_or("-"),
                r["status"].as_str().unwrap()
            )
        })
        .collect();
    let line = |needle: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(needle))
            .cloned()
            .unwrap_or_else(|| panic!("{needle}: {lines:?}"))
    };
    assert!(line("fake/fake-model").contains("configured"));
    assert!(line("anthropic/claude-sonnet-4-6").contains("configured"));
    assert!(line("openai/").contains("set OPENAI_API_KEY"));
    // Configured providers come first.
    let first_unconfigured = lines.iter().position(|l| l.contains("set ")).unwrap();
    let last_configured = lines
        .iter()
        .rposition(|l| l.contains(" configured"))
        .unwrap();
    assert!(last_configured < first_unconfigured);
    // Without --all, the configured ones only.
    let mut cmd = env.crush();
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    let piped = run(cmd, &["models"]).stdout;
    assert!(piped.lines().any(|l| l == "fake/fake-model"), "{piped}");
    assert!(piped.contains("anthropic/claude-sonnet-4-6"), "{piped}");
    assert!(!piped.contains("openai/"), "{piped}");

    let mut cmd = env.crush();
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    let out = run(cmd, &["models", "FAKE", "--json"]);
    out.assert_success();
    let rows: Value = serde_json::from_str(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["provider"], "fake");
    assert_eq!(rows[0]["configured"], true);
    assert_eq!(rows[0]["price_source"], "config");
    assert_eq!(rows[0]["role"], json!(["large", "small"]));
}

#[test]
fn an_ambiguous_model_id_is_an_error_listing_the_candidates() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    let p = |url: String| json!({"type": "openai-compat", "base_url": url, "models": [{"id": "shared"}, {"id": "solo"}]});
    env.write_config(&json!({"providers": {
        "alpha": p(server.openai_base_url()),
        "beta": {"type": "openai-compat", "base_url": server.openai_base_url(), "models": [{"id": "shared"}]}
    }}));
    let out = env.run(&["run", "-m", "shared", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("alpha/shared") && out.stderr.contains("beta/shared"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
    let out = env.run(&["run", "-m", "nope", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("'nope'"), "{}", out.stderr);
    // A catalog provider without its key: the error says which variable to set.
    let out = env.run(&["run", "-m", "anthropic/claude-sonnet-4-6", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
}

fn usage_cost(stdout: &str) -> Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["type"] == "usage")
        .map(|e| e["cost"].clone())
        .unwrap_or_else(|| panic!("no usage event in {stdout}"))
}

fn price_sources(env: &TestEnv) -> Vec<String> {
    let db = rusqlite::Connection::open(env.project().join(".crush/crush.db")).unwrap();
    let mut st = db
        .prepare("SELECT price_source FROM usage ORDER BY rowid")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn an_api_key_alone_enables_a_catalog_provider_with_its_defaults_and_prices() {
    let server = FakeServer::with_script(vec![
        Reply::text("priced").with_usage(1000, 100, 0, 0),
        Reply::text("flat").with_usage(1000, 100, 0, 0),
    ]);
    let env = TestEnv::new(); // no crush.json at all
    let mut cmd = env.crush();
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_API_ENDPOINT", server.anthropic_base_url());
    let out = run(cmd, &["run", "--json", "hi"]);
    out.assert_success();
    let req = server.last_request();
    assert_eq!(req.dialect, Some(Dialect::Anthropic));
    // The catalog's default large model, priced from the catalog ($3 in, $15 out per 1M).
    assert_eq!(req.body["model"], "claude-sonnet-4-6");
    assert_eq!(req.header("x-api-key"), Some("test-key"));
    let cost = usage_cost(&out.stdout).as_f64().expect("a cost");
    assert!(
        (cost - (3.0 * 1000.0 + 15.0 * 100.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );

    // A flat-rate provider is unpriced, never $0.
    env.write_config(&json!({"providers": {"anthropic": {"flat_rate": true}}}));
    let mut cmd = env.crush();
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_API_ENDPOINT", server.anthropic_base_url());
    let out = run(cmd, &["run", "--json", "hi"]);
    out.assert_success();
    assert_eq!(usage_cost(&out.stdout), Value::Null);
    assert_eq!(price_sources(&env), ["catalog", "unpriced"]);
}

#[test]
fn a_user_provider_with_a_catalog_id_overrides_url_key_and_headers() {
    let server = FakeServer::always_text("ok");
    let env = TestEnv::new();
    let file = env.write_project_file(
        "cat.json",
        &json!([{"id": "router", "name": "Router", "type": "openrouter",
            "api_key": "$ROUTER_KEY", "api_endpoint": "http://127.0.0.1:9/v1",
            "default_large_model_id": "vendor/big", "default_small_model_id": "vendor/small",
            "default_headers": {"X-Title": "Crush", "HTTP-Referer": "https://charm.land"},
            "models": [{"id": "vendor/big", "cost_per_1m_in": 2, "cost_per_1m_out": 4},
                       {"id": "vendor/small"}]}])
        .to_string(),
    );
    env.run(&["update-providers", file.to_str().unwrap()], None)
        .assert_success();
    env.write_config(&json!({"providers": {"router": {
        "base_url": server.openai_base_url(), "api_key": "user-key",
        "extra_headers": {"x-title": "Mine"},
        "models": [{"id": "mine/first"}]}}}));
    let out = env.run(&["run", "-m", "vendor/big", "hi"], None);
    out.assert_success();
    let req = server.last_request();
    assert_eq!(req.body["model"], "vendor/big");
    assert_eq!(req.header("authorization"), Some("Bearer user-key"));
    assert_eq!(req.header("x-title"), Some("Mine"));
    assert_eq!(req.header("http-referer"), Some("https://charm.land"));
    let out = env.run(&["models", "router/", "--json"], None);
    let rows: Value = serde_json::from_str(&out.stdout).unwrap();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mine/first", "vendor/big", "vendor/small"]);
}

/// Piped, `crush models` is Go Crush's list: one PROVIDER/MODEL per configured model; the
/// catalog's other providers only with `--all`; nothing configured says where to look.
#[test]
fn models_lists_the_configured_ones_one_per_line_when_piped() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, crate::support::Dialect::OpenAi);
    let out = env.run(&["models"], None);
    out.assert_success();
    assert_eq!(out.stdout, "fake/fake-model\n");
    let all = env.run(&["models", "--all"], None);
    all.assert_success();
    assert!(all.stdout.lines().count() > 10, "{}", all.stdout);
    assert!(
        all.stdout
            .lines()
            .all(|l| l.split('/').count() >= 2 && !l.contains(' ')),
        "{}",
        all.stdout
    );
    assert!(all.stdout.contains("anthropic/"), "{}", all.stdout);
    let none = TestEnv::new();
    let out = none.run(&["models"], None);
    out.assert_success();
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("crush models --all"), "{}", out.stderr);
}
