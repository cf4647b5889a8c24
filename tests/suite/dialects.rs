//! The dialects beyond Anthropic and Chat Completions, end to end against the fake server:
//! Gemini (Google's API and Vertex AI), Anthropic on Vertex AI, OpenAI's Responses API, Azure;
//! and the model options each request carries (crush(1) CONFIGURATION, model options).

use crate::support::{Dialect, FakeServer, Recorded, Reply, TestEnv, ToolCall};
use serde_json::{Value, json};

fn stats(env: &TestEnv) -> Value {
    let out = env.run(&["stats", "--json"], None);
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap()
}

/// The catalog's Gemini provider, its endpoint variable pointed at the fake server.
fn gemini_vars(server: &FakeServer) -> Vec<(&'static str, String)> {
    vec![
        ("GEMINI_API_KEY", "gem-key".to_string()),
        ("GEMINI_API_ENDPOINT", server.url()),
    ]
}

fn run_with(env: &TestEnv, args: &[&str], vars: &[(&str, String)]) -> crate::support::Output {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.run_with_env(args, &vars)
}

#[test]
fn gemini_two_steps_with_thoughts_signatures_and_usage() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo hi"}))
            .with_thinking("I should run it.", "c2lnLXRob3VnaHQ=")
            .with_usage(1000, 40, 800, 0),
        Reply::text("It printed hi.").with_usage(1100, 10, 0, 0),
    ]);
    let env = TestEnv::new();
    let out = run_with(
        &env,
        &[
            "run",
            "-q",
            "-y",
            "-m",
            "gemini/gemini-3.5-flash",
            "run echo hi",
        ],
        &gemini_vars(&server),
    );
    out.assert_success();
    assert!(out.stdout.contains("It printed hi."), "{}", out.stdout);
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 2);
    let first = &reqs[0];
    assert_eq!(first.dialect, Some(Dialect::Gemini));
    assert_eq!(
        first.path,
        "/v1beta/models/gemini-3.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(first.header("x-goog-api-key"), Some("gem-key"));
    assert!(first.tool_names().contains(&"bash".to_string()));
    assert!(
        first.system_text().contains("Crush"),
        "{}",
        first.system_text()
    );
    // The catalog model reasons at its default level.
    let g = &first.body["generationConfig"];
    assert_eq!(
        g["thinkingConfig"],
        json!({"thinkingLevel": "medium", "includeThoughts": true})
    );
    assert!(g["maxOutputTokens"].as_u64().unwrap() > 0);
    // The second step carries the call back with its signature, and the result.
    let model = &reqs[1].body["contents"][1];
    assert_eq!(model["role"], "model");
    let call = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap();
    assert_eq!(call["functionCall"]["name"], "bash");
    assert_eq!(
        call["thoughtSignature"],
        "c2lnLWNhbGwtMA==".replace("MA==", "0")
    );
    let results = reqs[1].tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("hi"), "{results:?}");
    // promptTokenCount includes the cached tokens: the ledger has them apart.
    let v = stats(&env);
    assert_eq!(v["total"]["input_tokens"], 1000 + 1100);
    assert_eq!(v["total"]["cache_read_tokens"], 800);
    assert_eq!(v["total"]["output_tokens"], 50);
}

#[test]
fn gemini_faults_are_retried_and_a_safety_block_is_one_line() {
    let server = FakeServer::with_script(vec![
        Reply::cut_mid_stream("partial"),
        Reply::malformed_sse(),
        Reply::text("recovered"),
    ]);
    let env = TestEnv::new();
    let mut vars = gemini_vars(&server);
    vars.push(("CRUSH_RETRY_BASE_MS", "1".into()));
    let out = run_with(
        &env,
        &["run", "-q", "-m", "gemini/gemini-3.5-flash", "hi"],
        &vars,
    );
    out.assert_success();
    assert!(out.stdout.contains("recovered"), "{}", out.stdout);
    assert_eq!(server.model_requests().len(), 3);

    // Blocked by the safety filters: reported, not retried, and the session goes on.
    let blocked = Reply::tool_calls(vec![]).stop_reason("SAFETY");
    server.push_all(vec![blocked, Reply::text("fine now")]);
    let out = run_with(
        &env,
        &["run", "-q", "-m", "gemini/gemini-3.5-flash", "something"],
        &vars,
    );
    out.assert_code(1);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("SAFETY"))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(line.contains("blocked"), "{line}");
    let out = run_with(
        &env,
        &[
            "run",
            "-q",
            "-C",
            "-m",
            "gemini/gemini-3.5-flash",
            "and now?",
        ],
        &vars,
    );
    out.assert_success();
    assert!(out.stdout.contains("fine now"), "{}", out.stdout);
}

#[test]
fn vertex_ai_gemini_and_anthropic_models() {
    let server = FakeServer::with_script(vec![
        Reply::text("from gemini"),
        Reply::tool_call("bash", json!({"command": "echo v"})).with_thinking("hmm", "sig-v"),
        Reply::text("from claude"),
    ]);
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"vertexai": {
        "project": "fake-project", "location": "global",
        "base_url": server.vertex_base_url(), "api_key": "$GOOGLE_OAUTH_ACCESS_TOKEN",
        "models": [{"id": "claude-fake@1", "can_reason": true, "default_max_tokens": 8000}]}}}));
    let vars = [("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.token".to_string())];
    let out = run_with(
        &env,
        &["run", "-q", "-m", "vertexai/gemini-3.5-flash", "hi"],
        &vars,
    );
    out.assert_success();
    let r = server.last_request();
    assert_eq!(
        r.path,
        "/v1/projects/fake-project/locations/global/publishers/google/models/gemini-3.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(r.header("authorization"), Some("Bearer ya29.token"));
    // Vertex refuses function ids.
    assert_eq!(server.violations(), Vec::<String>::new());

    let out = run_with(
        &env,
        &[
            "run",
            "-q",
            "-y",
            "-m",
            "vertexai/claude-fake@1",
            "run echo v",
        ],
        &vars,
    );
    out.assert_success();
    assert!(out.stdout.contains("from claude"), "{}", out.stdout);
    let reqs = server.model_requests();
    let claude = &reqs[2];
    assert_eq!(claude.dialect, Some(Dialect::AnthropicVertex));
    assert!(
        claude
            .path
            .ends_with("/publishers/anthropic/models/claude-fake@1:streamRawPredict"),
        "{}",
        claude.path
    );
    assert_eq!(claude.body["anthropic_version"], "vertex-2023-10-16");
    // The thinking block and its signature go back on the next step.
    let assistant = &claude.body["messages"].as_array().unwrap().clone();
    let _ = assistant;
    let second = &server.last_request().body["messages"][1]["content"][0];
    assert_eq!(
        *second,
        json!({"type": "thinking", "thinking": "hmm", "signature": "sig-v"})
    );
}

#[test]
fn vertex_ai_needs_a_project_and_keeps_the_environments_token_home() {
    let env = TestEnv::new();
    let out = env.run(&["run", "-m", "vertexai/gemini-3.5-flash", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("VERTEXAI_PROJECT"), "{}", out.stderr);
    // Pointed at another server, the environment's token is not sent.
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    env.write_config(&json!({"providers": {"vertexai": {"base_url": server.vertex_base_url()}}}));
    let out = env.run_with_env(
        &["run", "-m", "vertexai/gemini-3.5-flash", "hi"],
        &[
            ("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.secret"),
            ("VERTEXAI_PROJECT", "fake-project"),
            ("VERTEXAI_LOCATION", "global"),
        ],
    );
    out.assert_success();
    assert_eq!(server.last_request().header("authorization"), None);
}

#[test]
fn an_expired_vertex_token_is_one_clear_line() {
    let server = FakeServer::with_script(vec![Reply::api_error(
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials.",
    )]);
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"vertexai": {
        "project": "p", "location": "global", "base_url": server.vertex_base_url(),
        "api_key": "$GOOGLE_OAUTH_ACCESS_TOKEN"}}}));
    let out = env.run_with_env(
        &["run", "-m", "vertexai/gemini-3.5-flash", "hi"],
        &[("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.expired")],
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("401") && out.stderr.contains("vertexai"),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[test]
fn responses_api_carries_encrypted_reasoning_and_stores_nothing() {
    let server = FakeServer::with_script(vec![
        Reply::text_then_tools(
            "Checking.",
            vec![ToolCall::new("bash", json!({"command": "echo r"}))],
        )
        .with_thinking("Plan: run it.", "enc-blob-1")
        .with_usage(2000, 300, 1500, 0),
        Reply::text("Done.").with_usage(2100, 20, 0, 0),
    ]);
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {"local": {"type": "openai", "base_url": server.openai_base_url(),
            "api_key": "k", "use_responses_api": true,
            "models": [{"id": "gpt-5-local", "can_reason": true,
                "reasoning_levels": ["low", "high"], "default_reasoning_effort": "low"}]}},
        "models": {"large": {"provider": "local", "model": "gpt-5-local",
            "reasoning_effort": "high", "max_tokens": 4000}}}));
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    assert!(out.stdout.contains("Done."), "{}", out.stdout);
    let reqs = server.model_requests();
    assert_eq!(reqs[0].dialect, Some(Dialect::Responses));
    assert_eq!(reqs[0].path, "/v1/responses");
    let b = &reqs[0].body;
    assert_eq!(b["store"], false);
    assert_eq!(b["reasoning"], json!({"effort": "high", "summary": "auto"}));
    assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(b["max_output_tokens"], 4000);
    let input = reqs[1].body["input"].as_array().unwrap().clone();
    let at = input
        .iter()
        .position(|i| i["type"] == "reasoning")
        .expect("the reasoning item is carried back");
    assert_eq!(input[at]["encrypted_content"], "enc-blob-1");
    assert_eq!(input[at]["summary"][0]["text"], "Plan: run it.");
    assert_eq!(
        input[at + 1],
        json!({"role": "assistant", "content": "Checking."})
    );
    assert_eq!(input[at + 2]["type"], "function_call");
    assert_eq!(reqs[1].tool_results().len(), 1);
    let v = stats(&env);
    assert_eq!(v["total"]["input_tokens"], 2000 + 2100);
    assert_eq!(v["total"]["cache_read_tokens"], 1500);
    assert_eq!(v["total"]["output_tokens"], 320);

    // An openai-compat server speaks Chat Completions unless told otherwise.
    server.push(Reply::text("chat"));
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap(),
    )
    .unwrap();
    let local = cfg["providers"]["local"].as_object_mut().unwrap();
    local.remove("use_responses_api");
    local.insert("type".into(), json!("openai-compat"));
    env.write_config(&cfg);
    env.run(&["run", "-q", "hi"], None).assert_success();
    assert_eq!(server.last_request().path, "/v1/chat/completions");
}

/// A published gateway setup: `type: openai` with the base URL of a proxy in front of OpenAI.
/// Go Crush sends GPT-4 and GPT-5 models there to the Responses API whatever the URL; other
/// models, and the same models at an openai-compat provider, speak Chat Completions.
#[test]
fn openai_provider_behind_a_gateway_uses_responses_for_gpt_models() {
    let server = FakeServer::with_script(vec![
        Reply::text("five"),
        Reply::text("four"),
        Reply::text("llama"),
        Reply::text("compat"),
    ]);
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {
            "gateway": {"type": "openai", "base_url": server.openai_base_url(), "api_key": "k",
                "models": [{"id": "gpt-5-mini"}, {"id": "gpt-4.1"}, {"id": "llama-3.3-70b"}]},
            "compat": {"type": "openai-compat", "base_url": server.openai_base_url(),
                "api_key": "k", "models": [{"id": "gpt-4.1"}]}},
        "models": {"large": {"provider": "gateway", "model": "gpt-5-mini"}}}));
    for (model, want, path) in [
        ("gateway/gpt-5-mini", "five", "/v1/responses"),
        ("gateway/gpt-4.1", "four", "/v1/responses"),
        ("gateway/llama-3.3-70b", "llama", "/v1/chat/completions"),
        ("compat/gpt-4.1", "compat", "/v1/chat/completions"),
    ] {
        let out = env.run(&["run", "-q", "-m", model, "hi"], None);
        out.assert_success();
        assert!(out.stdout.contains(want), "{model}: {}", out.stdout);
        let req = server.last_request();
        assert_eq!(req.path, path, "{model}");
        let dialect = if path.ends_with("responses") {
            Dialect::Responses
        } else {
            Dialect::OpenAi
        };
        assert_eq!(req.dialect, Some(dialect), "{model}");
    }
}

#[test]
fn azure_resource_and_deployment_urls() {
    let server =
        FakeServer::with_script(vec![Reply::text("via responses"), Reply::text("via chat")]);
    let env = TestEnv::new();
    let endpoint = format!("{}/openai/v1", server.url());
    let vars = [
        ("AZURE_OPENAI_API_KEY", "az-key"),
        ("AZURE_OPENAI_API_ENDPOINT", endpoint.as_str()),
        ("AZURE_OPENAI_API_VERSION", "preview"),
    ];
    let out = env.run_with_env(&["run", "-q", "-m", "azure/gpt-5", "hi"], &vars);
    out.assert_success();
    let r = server.last_request();
    assert_eq!(r.path, "/openai/v1/responses?api-version=preview");
    assert_eq!(r.header("api-key"), Some("az-key"));
    assert_eq!(r.header("authorization"), None);
    // The catalog's default effort for gpt-5 on Azure.
    assert_eq!(r.body["reasoning"]["effort"], "minimal");
    // A deployment whose name is not a model's speaks Chat Completions.
    let out = env.run_with_env(&["run", "-q", "-m", "azure/my-deployment", "hi"], &vars);
    out.assert_success();
    let r = server.last_request();
    assert_eq!(r.path, "/openai/v1/chat/completions?api-version=preview");
    assert_eq!(r.body["model"], "my-deployment");
    assert!(r.body.get("max_completion_tokens").is_some() || r.body.get("max_tokens").is_none());
}

#[test]
fn model_options_reach_every_dialect() {
    // Anthropic: think with a budget, the interleaved-thinking beta, no sampling settings.
    let server = FakeServer::with_script(vec![Reply::text("a")]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::Anthropic);
    cfg["providers"]["fake"]["models"][0]["can_reason"] = json!(true);
    cfg["models"]["large"] = json!({"provider": "fake", "model": "fake-model", "think": true,
        "top_p": 0.9, "temperature": 0.4, "provider_options": {"metadata": {"user_id": "u1"}}});
    env.write_config(&cfg);
    env.run(&["run", "-q", "hi"], None).assert_success();
    let r = server.last_request();
    assert_eq!(
        r.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert_eq!(
        r.header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14")
    );
    assert!(r.body.get("temperature").is_none() && r.body.get("top_p").is_none());
    assert_eq!(r.body["metadata"]["user_id"], "u1");

    // OpenAI-compatible: sampling, penalties, effort, provider options and extra_body.
    let server = FakeServer::with_script(vec![Reply::text("b")]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["providers"]["fake"]["extra_body"] = json!({"chat_template_kwargs": {"x": 1}});
    cfg["providers"]["fake"]["provider_options"] = json!({"parallel_tool_calls": false});
    cfg["models"]["large"] = json!({"provider": "fake", "model": "fake-model",
        "top_p": 0.8, "top_k": 30, "frequency_penalty": 0.5, "presence_penalty": 0.25,
        "temperature": 0.1, "reasoning_effort": "low"});
    env.write_config(&cfg);
    env.run(&["run", "-q", "hi"], None).assert_success();
    let b = server.last_body();
    for (k, v) in [
        ("top_p", json!(0.8)),
        ("top_k", json!(30)),
        ("frequency_penalty", json!(0.5)),
        ("presence_penalty", json!(0.25)),
        ("temperature", json!(0.1)),
        ("reasoning_effort", json!("low")),
        ("parallel_tool_calls", json!(false)),
        ("chat_template_kwargs", json!({"x": 1})),
    ] {
        assert_eq!(b[k], v, "{k}");
    }

    // Gemini: the same settings under generationConfig.
    let server = FakeServer::with_script(vec![Reply::text("c")]);
    let mut cfg = env.config_for(&server, Dialect::Gemini);
    cfg["models"]["large"] = json!({"provider": "fake", "model": "fake-model",
        "top_p": 0.7, "top_k": 12, "temperature": 0.3, "max_tokens": 900,
        "provider_options": {"thinking_config": {"thinking_budget": 4096}}});
    env.write_config(&cfg);
    env.run(&["run", "-q", "hi"], None).assert_success();
    let g = &server.last_body()["generationConfig"];
    assert_eq!(
        *g,
        json!({"maxOutputTokens": 900, "temperature": 0.3, "topP": 0.7, "topK": 12,
            "thinkingConfig": {"thinkingBudget": 4096}})
    );
}

#[test]
fn refused_keys_and_unknown_models_say_what_is_wrong() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(401, "authentication_error", "invalid x-api-key"),
        Reply::api_error(404, "not_found_error", "model: claude-sonet-4-6"),
    ]);
    let env = TestEnv::new();
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-bad"),
        ("ANTHROPIC_API_ENDPOINT", &*server.url()),
    ];
    let out = env.run_with_env(&["run", "-m", "anthropic/claude-sonnet-4-6", "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "provider 'anthropic' refused the key (from ANTHROPIC_API_KEY): invalid x-api-key"
        ),
        "{}",
        out.stderr
    );
    let out = env.run_with_env(&["run", "-m", "anthropic/claude-sonet-4-6", "hi"], &vars);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("model 'claude-sonet-4-6' sent to provider 'anthropic'")
            && out.stderr.contains("close matches: claude-sonnet-4-6"),
        "{}",
        out.stderr
    );
    // A catalog provider that is not configured says what it needs.
    let out = env.run(&["run", "-m", "gemini/gemini-3.5-flash", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("set GEMINI_API_KEY"), "{}", out.stderr);
}

#[test]
fn a_local_server_without_models_listed_is_asked_for_them() {
    let server = FakeServer::with_script(vec![Reply::text("local answer")]);
    let list = server.route(
        "GET",
        "/v1/models",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            r#"{"object":"list","data":[{"id":"qwen3-coder","object":"model"},{"id":"llama3.3","object":"model"}]}"#,
        ),
    );
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"local": {"type": "openai-compat",
        "base_url": server.openai_base_url()}}}));
    let out = env.run(&["run", "-q", "hi"], None);
    out.assert_success();
    assert!(out.stdout.contains("local answer"), "{}", out.stdout);
    assert_eq!(server.last_request().body["model"], "qwen3-coder");
    // Asked once for the whole run.
    let asked = |s: &FakeServer| {
        s.requests()
            .iter()
            .filter(|r| r.source == crate::support::Source::Route(list))
            .count()
    };
    assert_eq!(asked(&server), 1);
    let out = env.run(&["models", "local"], None);
    out.assert_success();
    assert!(
        out.stdout.contains("local/qwen3-coder") && out.stdout.contains("local/llama3.3"),
        "{}",
        out.stdout
    );
    // A model named by id alone is found among them.
    server.push(Reply::text("llama here"));
    env.run(&["run", "-q", "-m", "llama3.3", "hi"], None)
        .assert_success();
    assert_eq!(server.last_request().body["model"], "llama3.3");

    // ollama: its own list at the server's root when /models is not there.
    let ollama = FakeServer::with_script(vec![Reply::text("from ollama")]);
    ollama.route(
        "GET",
        "/api/tags",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            r#"{"models":[{"name":"gemma3:4b","model":"gemma3:4b","size":1}]}"#,
        ),
    );
    env.write_config(&json!({"providers": {"ollama": {"type": "ollama",
        "base_url": ollama.openai_base_url()}}}));
    env.run(&["run", "-q", "hi"], None).assert_success();
    assert_eq!(ollama.last_request().body["model"], "gemma3:4b");

    // Nothing listed and nothing to list: the same error as before, and a log line.
    env.write_config(&json!({"providers": {"dead": {"type": "openai-compat",
        "base_url": "http://127.0.0.1:9/v1"}}}));
    let out = env.run(&["run", "-q", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("no model selected"), "{}", out.stderr);
    // ... saying why the server gave none.
    assert!(
        out.stderr
            .contains("; provider 'dead' listed no models (http://127.0.0.1:9/v1/models: "),
        "{}",
        out.stderr
    );
    // `crush models` says it too, one short line on stderr; the listing still prints.
    let out = env.run(&["models", "--json"], None);
    out.assert_success();
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("cannot list its models"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with(
            "crush: provider 'dead': cannot list its models: http://127.0.0.1:9/v1/models: "
        ),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("dead"), "{}", out.stdout);
}

#[test]
fn discovered_models_get_their_context_window_from_the_server() {
    let json_reply = |body: &str| Reply::raw(200, vec![("content-type", "application/json")], body);
    let windows = |env: &TestEnv, provider: &str| -> Vec<(String, Value)> {
        let out = env.run(&["models", provider, "--json"], None);
        out.assert_success();
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["model"].as_str().unwrap_or("").to_string(),
                    m["context_window"].clone(),
                )
            })
            .collect()
    };
    let env = TestEnv::new();
    // llama.cpp: one model, its n_ctx in /props.
    let llama = FakeServer::start();
    llama.route(
        "GET",
        "/v1/models",
        json_reply(r#"{"data":[{"id":"smollm2"}]}"#),
    );
    llama.route(
        "GET",
        "/props",
        json_reply(r#"{"default_generation_settings":{"n_ctx":4096}}"#),
    );
    env.write_config(&json!({"providers": {"local": {"type": "openai-compat",
        "base_url": llama.openai_base_url()}}}));
    assert_eq!(
        windows(&env, "local"),
        vec![("smollm2".to_string(), json!(4096))]
    );
    // LM Studio: the loaded context, else the model's maximum; vLLM: max_model_len in the list.
    let lms = FakeServer::start();
    lms.route(
        "GET",
        "/v1/models",
        json_reply(r#"{"data":[{"id":"a"},{"id":"b"},{"id":"c","max_model_len":32768}]}"#),
    );
    lms.route(
        "GET",
        "/api/v0/models",
        json_reply(
            r#"{"data":[{"id":"a","max_context_length":131072,"loaded_context_length":8192},
            {"id":"b","max_context_length":65536}]}"#,
        ),
    );
    env.write_config(&json!({"providers": {"lms": {"type": "openai-compat",
        "base_url": lms.openai_base_url()}}}));
    assert_eq!(
        windows(&env, "lms"),
        vec![
            ("a".to_string(), json!(8192)),
            ("b".to_string(), json!(65536)),
            ("c".to_string(), json!(32768)),
        ]
    );
}

#[test]
fn ollama_windows_come_from_api_show_and_a_silent_local_server_gets_the_fallback() {
    let json_reply = |body: &str| Reply::raw(200, vec![("content-type", "application/json")], body);
    let models = |env: &TestEnv, provider: &str| -> (Vec<(String, Value, Value)>, String) {
        let out = env.run(&["models", provider, "--json"], None);
        out.assert_success();
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let rows = v
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["model"].as_str().unwrap_or("").to_string(),
                    m["context_window"].clone(),
                    m["context_window_source"].clone(),
                )
            })
            .collect();
        (rows, out.stderr)
    };
    let env = TestEnv::new();
    // ollama: /v1/models lists, /api/version tells it is ollama, /api/show per model.
    let ollama = FakeServer::start();
    ollama.route(
        "GET",
        "/v1/models",
        json_reply(
            r#"{"data":[{"id":"qwen2.5-coder:7b"},{"id":"llama3:8b"},{"id":"mine:latest"}]}"#,
        ),
    );
    ollama.route("GET", "/api/version", json_reply(r#"{"version":"0.12.3"}"#));
    let show = |model: &'static str, body: &'static str| {
        (
            move |r: &Recorded| {
                r.method == "POST" && r.path == "/api/show" && r.body["model"] == model
            },
            json_reply(body),
        )
    };
    for (pred, reply) in [
        show(
            "qwen2.5-coder:7b",
            r#"{"model_info":{"general.architecture":"qwen2","qwen2.context_length":32768}}"#,
        ),
        show(
            "llama3:8b",
            r#"{"parameters":"num_ctx 8192\nstop \"<|eot_id|>\"","model_info":{"general.architecture":"llama","llama.context_length":131072}}"#,
        ),
    ] {
        ollama.route_when(pred, vec![reply]);
    }
    // A model the user lists without a window takes the server's; one with a window keeps it.
    env.write_config(&json!({"providers": {"ollama": {"type": "openai-compat",
        "base_url": ollama.openai_base_url(), "discover_models": true,
        "models": [{"id": "llama3:8b"}, {"id": "mine:latest", "context_window": 2048}]}}}));
    let (rows, _) = models(&env, "ollama");
    assert_eq!(
        rows,
        vec![
            ("llama3:8b".into(), json!(8192), json!("server")),
            ("mine:latest".into(), json!(2048), json!("config")),
            ("qwen2.5-coder:7b".into(), json!(32768), json!("server")),
        ],
        "num_ctx wins over the architecture's window"
    );
    let shows: Vec<Value> = ollama
        .requests()
        .iter()
        .filter(|r| r.path == "/api/show")
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        shows,
        vec![
            json!("qwen2.5-coder:7b"),
            json!("llama3:8b"),
            json!("mine:latest")
        ],
        "each listed model is asked once, with the model field"
    );
    // The table (a terminal's view) says where each window came from.
    let text = env.run_on_terminal(&["models", "ollama"]);
    assert!(text.stdout.contains(" FROM "), "{}", text.stdout);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.contains("ollama/qwen2.5-coder:7b") && l.contains(" 32K  server ")),
        "{}",
        text.stdout
    );

    // llama-cpp-python: a list and nothing else; a local server gets the fallback, with a notice.
    let silent = FakeServer::start();
    silent.route("GET", "/v1/models", json_reply(r#"{"object":"list","data":[{"id":"smollm2","object":"model","owned_by":"me","permissions":[]}]}"#));
    env.write_config(&json!({"providers": {"local": {"type": "openai-compat",
        "base_url": silent.openai_base_url()}}}));
    let (rows, stderr) = models(&env, "local");
    assert_eq!(
        rows,
        vec![("smollm2".into(), json!(4096), json!("fallback"))]
    );
    assert!(
        stderr.contains("provider 'local' does not say the context window of smollm2; assuming 4096 tokens (set providers.local.models[].context_window"),
        "{stderr}"
    );
}

#[test]
fn model_calls_go_through_the_proxy_unless_no_proxy_names_the_host() {
    let proxy = FakeServer::start();
    proxy.expect_violations();
    let env = TestEnv::new();
    env.write_config(&json!({"providers": {"remote": {"type": "openai-compat",
        "base_url": "http://models.invalid/v1", "models": [{"id": "m"}]}}}));
    let vars = [
        ("HTTP_PROXY", proxy.url()),
        ("CRUSH_RETRY_BASE_MS", "1".to_string()),
    ];
    let out = run_with(&env, &["run", "-q", "hi"], &vars);
    out.assert_code(1);
    let r = proxy.requests();
    assert!(!r.is_empty(), "{}", out.stderr);
    assert_eq!(r[0].method, "CONNECT");
    assert!(r[0].path.starts_with("models.invalid:80"), "{}", r[0].path);
    let seen = r.len();
    let mut vars = vars.to_vec();
    vars.push(("NO_PROXY", "localhost,.invalid".to_string()));
    run_with(&env, &["run", "-q", "hi"], &vars).assert_code(1);
    assert_eq!(proxy.requests().len(), seen);
}
