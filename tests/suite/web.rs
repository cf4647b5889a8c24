//! The network tools (fetch, download, sourcegraph, agentic_fetch with web_fetch and
//! web_search) against the fake server: every endpoint overridden, nothing leaves the machine.

use crate::support::env::run_command;
use crate::support::{Dialect, FakeServer, RUN_TIMEOUT, Reply, TestEnv};
use serde_json::json;

/// The text and error flag of the last tool result the model was sent in model request `i`.
pub(super) fn last_result(server: &FakeServer, i: usize) -> (String, bool) {
    let r = server.model_requests()[i].tool_results();
    let (_, text, err) = r.last().cloned().expect("a tool result");
    (text, err)
}

#[test]
fn download_overwrites_binary_bytes_refuses_a_redirect_to_file_and_undo_restores_them() {
    let server = FakeServer::start();
    let url = server.url();
    server.push_all(vec![
        Reply::tool_call(
            "download",
            json!({"url": format!("{url}/blob.bin"), "file_path": "out/blob.bin"}),
        ),
        Reply::tool_call(
            "download",
            json!({"url": format!("{url}/evil"), "file_path": "out/evil"}),
        ),
        Reply::text("done"),
    ]);
    let new: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    server.route(
        "GET",
        "/blob.bin",
        Reply::raw(
            200,
            vec![("content-type", "application/octet-stream")],
            new.clone(),
        ),
    );
    server.route(
        "GET",
        "/evil",
        Reply::raw(302, vec![("location", "file:///etc/passwd")], ""),
    );
    super::repl::title_route(&server, "Downloads");
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let old: Vec<u8> = vec![0xff, 0xfe, 0, 1, b'\r', b'\n', 0x80];
    std::fs::create_dir_all(env.project().join("out")).unwrap();
    std::fs::write(env.project().join("out/blob.bin"), &old).unwrap();
    let new_file = env.root().join("new.bin");
    std::fs::write(&new_file, &new).unwrap();
    let old_file = env.root().join("old.bin");
    std::fs::write(&old_file, &old).unwrap();
    let input = format!(
        "fetch it\n!cmp out/blob.bin {} && echo DOWNLOADED\n/undo\n!cmp out/blob.bin {} && echo RESTORED\n",
        new_file.display(),
        old_file.display()
    );
    let out = env.run(&["-y"], Some(&input));
    out.assert_success();
    assert!(
        out.stdout.contains("DOWNLOADED"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains("RESTORED"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let turns = super::repl::turns(&server);
    let result = |i: usize| turns[i].tool_results().last().cloned().unwrap();
    let (_, saved, err) = result(1);
    assert!(
        !err && saved.starts_with("Successfully downloaded 3000 bytes"),
        "{saved}"
    );
    let (_, refused, err) = result(2);
    assert!(err && refused.contains("file:///etc/passwd"), "{refused}");
    assert!(!env.project().join("out/evil").exists());
}

#[test]
fn a_download_needs_its_own_permission_in_crush_run() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "download",
        json!({"url": "https://example.invalid/x", "file_path": "x"}),
    )]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let out = env.run(&["run", "-q", "get x"], None);
    out.assert_code(3);
    assert!(out.stderr.contains("download"), "{}", out.stderr);
    assert!(!env.project().join("x").exists());
}

#[test]
fn the_web_tools_go_through_the_environment_s_proxy() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "fetch",
            json!({"url": "http://example.invalid/proxied", "format": "text"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "-y", "fetch"])
        .env("HTTP_PROXY", server.url());
    let out = run_command(cmd, None, RUN_TIMEOUT);
    out.assert_success();
    // The fake server is no proxy: it refuses the tunnel, and the fetch fails saying so.
    let (text, _) = last_result(&server, 1);
    assert!(text.contains("proxy"), "{text}");
    let tunnel = server
        .requests()
        .into_iter()
        .find(|r| r.method == "CONNECT")
        .expect("the request went to the proxy");
    assert_eq!(tunnel.path, "example.invalid:80");
}

/// Runs `crush --trust run -q -y PROMPT` in a project whose `.env` names `server` as the HTTP
/// proxy (the process has no proxy variables); the hosts tunnelled to through it, in order.
pub(crate) fn tunnels_through_a_dotenv_proxy(
    env: &TestEnv,
    server: &FakeServer,
    prompt: &str,
) -> Vec<String> {
    std::fs::write(
        env.project().join(".env"),
        format!("HTTP_PROXY={}\n", server.url()),
    )
    .unwrap();
    let mut cmd = env.crush();
    cmd.args(["run", "--trust", "-q", "-y", prompt]);
    for k in [
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        cmd.env_remove(k);
    }
    run_command(cmd, None, RUN_TIMEOUT).assert_success();
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == "CONNECT")
        .map(|r| r.path)
        .collect()
}

#[test]
fn the_web_tools_go_through_the_proxy_a_project_s_dotenv_names() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "fetch",
            json!({"url": "http://example.invalid/from-dotenv", "format": "text"}),
        ),
        Reply::tool_call(
            "agentic_fetch",
            json!({"url": "http://other.invalid/page", "prompt": "summarize"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let tunnels = tunnels_through_a_dotenv_proxy(&env, &server, "fetch");
    // fetch's request, then agentic_fetch's page.
    assert_eq!(tunnels, ["example.invalid:80", "other.invalid:80"]);
}

#[test]
fn sourcegraph_searches_its_endpoint_and_turns_itself_off_when_the_network_is_unreachable() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "sourcegraph",
            json!({"query": "lang:rust fn main", "count": 1}),
        ),
        Reply::text("done"),
    ]);
    server.route(
        "POST",
        "/.api/graphql",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            json!({"data": {"search": {"results": {"matchCount": 1, "resultCount": 1,
                "results": [{"__typename": "FileMatch", "repository": {"name": "github.com/x/y"},
                    "file": {"path": "main.rs", "url": "", "content": "fn main() {}"},
                    "lineMatches": [{"preview": "fn main() {}", "lineNumber": 1}]}]}}}})
            .to_string(),
        ),
    );
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "-y", "search"]).env(
        "CRUSH_SOURCEGRAPH_URL",
        format!("{}/.api/graphql", server.url()),
    );
    let out = run_command(cmd, None, RUN_TIMEOUT);
    out.assert_success();
    let (text, err) = last_result(&server, 1);
    assert!(
        !err && text.contains("## Result 1: github.com/x/y/main.rs"),
        "{text}"
    );
    let sent = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/.api/graphql"))
        .unwrap();
    assert_eq!(sent.body["variables"]["query"], "lang:rust fn main");

    // Nothing listens on the port: the first call says so, the next one is off at once.
    // (Port 9, discard, is closed here; a port freed by the test could be reused by the next
    // fake server bound in parallel.)
    let dead = "http://127.0.0.1:9/.api/graphql".to_string();
    let server = FakeServer::with_script(vec![
        Reply::tool_call("sourcegraph", json!({"query": "a"})),
        Reply::tool_call("sourcegraph", json!({"query": "b"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::Anthropic);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "-y", "search"])
        .env("CRUSH_SOURCEGRAPH_URL", &dead);
    run_command(cmd, None, RUN_TIMEOUT).assert_success();
    let (first, err) = last_result(&server, 1);
    assert!(err && first.contains("could not be reached"), "{first}");
    let (second, err) = last_result(&server, 2);
    assert!(err && second.contains("sourcegraph is off"), "{second}");
}

#[test]
fn agentic_fetch_reads_the_page_then_its_sub_agent_searches_and_fetches_offline() {
    let server = FakeServer::start();
    let url = server.url();
    server.push_all(vec![
        Reply::tool_call(
            "agentic_fetch",
            json!({"prompt": "What is the answer?", "url": format!("{url}/page")}),
        ),
        Reply::tool_call("web_search", json!({"query": "the answer"})),
        Reply::tool_call("web_fetch", json!({"url": format!("{url}/other")})),
        Reply::text(&format!("The answer is 42.\n\n## Sources\n- {url}/other")),
        Reply::text("done"),
    ]);
    let html = |body: &str| Reply::raw(200, vec![("content-type", "text/html")], body.to_string());
    server.route("GET", "/page", html("<h1>Start</h1><p>See elsewhere.</p>"));
    server.route(
        "GET",
        "/lite/",
        html(&format!(
            "<a href=\"{url}/other\" class=\"result-link\">Other page</a>\
             <td class=\"result-snippet\">It knows.</td>"
        )),
    );
    server.route("GET", "/other", html("<p>The answer is <b>42</b>.</p>"));
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "-y", "find it"])
        .env("CRUSH_WEB_SEARCH_URL", format!("{url}/lite/"));
    let out = run_command(cmd, None, RUN_TIMEOUT);
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 5);
    // The sub-agent: its own tools, the page in its prompt, the search and page as results.
    assert_eq!(
        reqs[1].tool_names(),
        [
            "glob",
            "grep",
            "sourcegraph",
            "view",
            "web_fetch",
            "web_search"
        ]
    );
    let first = reqs[1].user_texts().join("\n");
    assert!(
        first.contains("<webpage_content>\n# Start\n\nSee elsewhere.\n</webpage_content>"),
        "{first}"
    );
    let (search, _) = last_result(&server, 2);
    assert!(
        search.contains("1. Other page") && search.contains("It knows."),
        "{search}"
    );
    let (page, _) = last_result(&server, 3);
    assert!(page.contains("The answer is **42**."), "{page}");
    // The main agent gets the sub-agent's answer.
    let (answer, err) = last_result(&server, 4);
    assert!(!err && answer.starts_with("The answer is 42."), "{answer}");
    assert!(reqs[0].tool_names().contains(&"agentic_fetch".to_string()));
    assert!(!reqs[0].tool_names().contains(&"web_fetch".to_string()));
    // Its working directory is gone.
    let data = env.project().join(".crush");
    let left: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("crush-fetch-"))
        .collect();
    assert!(left.is_empty());
}
