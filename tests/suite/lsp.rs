//! Language servers end to end: the real binary, the fake model server, and the fake language
//! server of `support::lsp` (this test binary re-executed). Timeouts are shortened through the
//! entries' `timeout` and `CRUSH_LSP_*`; no test asserts on wall time.

use crate::support::env::run_command;
use crate::support::lsp::{self, SERVER_ENV, methods, read_log};
use crate::support::{Dialect, FakeServer, Output, RUN_TIMEOUT, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const TOOLS: [&str; 8] = [
    "lsp_call_hierarchy",
    "lsp_definition",
    "lsp_diagnostics",
    "lsp_references",
    "lsp_rename",
    "lsp_replace_symbol",
    "lsp_restart",
    "lsp_symbols",
];

const MAIN: &str = "def main\n  call helper\n  call helper\nend\n";
const HELPER: &str = "def helper\n  call leaf\nend\n\ndef leaf\nend\n";

/// A test environment whose global config has the fake model `server` and the fake language
/// server `fake` running `script` (logging to the returned file).
fn lsp_env(server: &FakeServer, script: Value) -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    let log = env.root().join("lsp-log.jsonl");
    let mut script = script;
    script["log"] = json!(log.to_string_lossy());
    let mut cfg = env.config_for(server, Dialect::Anthropic);
    cfg["lsp"] = json!({"fake": lsp::entry(env.root(), "fake", &script)});
    env.write_config(&cfg);
    (env, log)
}

/// `crush ARGS` with the waits after an edit shortened.
fn run(env: &TestEnv, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = env.crush();
    cmd.env("CRUSH_LSP_SETTLE_MS", "100")
        .env("CRUSH_LSP_WAIT_MS", "4000");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.args(args);
    run_command(cmd, None, RUN_TIMEOUT)
}

fn results(server: &FakeServer) -> Vec<(String, bool)> {
    server
        .last_request()
        .tool_results()
        .into_iter()
        .map(|(_, text, err)| (text, err))
        .collect()
}

/// Lines of stderr that talk about the fake language server.
fn lsp_warnings(out: &Output) -> Vec<String> {
    out.stderr
        .lines()
        .filter(|l| l.contains("LSP server fake"))
        .map(str::to_string)
        .collect()
}

fn view(file: &str) -> Reply {
    Reply::tool_call("view", json!({"file_path": file}))
}

fn edit(file: &str, old: &str, new: &str) -> Reply {
    Reply::tool_call(
        "edit",
        json!({"file_path": file, "old_string": old, "new_string": new}),
    )
}

/// How many times the server of `log` was started.
fn starts(log: &Path) -> usize {
    methods(&read_log(log))
        .iter()
        .filter(|m| *m == "initialize")
        .count()
}

/// Changes the global config.
fn edit_config(env: &TestEnv, f: impl FnOnce(&mut Value)) {
    let path = env.config_dir().join("crush.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut cfg);
    env.write_config(&cfg);
}

fn project_file(env: &TestEnv, rel: &str) -> String {
    env.project().join(rel).display().to_string()
}

#[test]
fn an_edit_that_breaks_the_code_gets_the_diagnostic_and_the_fix_clears_it() {
    let server = FakeServer::with_script(vec![
        view("a.fk"),
        edit("a.fk", "  call helper\nend", "  call helper\n  BAD\nend"),
        edit("a.fk", "  BAD\n", ""),
        Reply::tool_call(
            "write",
            json!({"file_path": "new.fk", "content": "def fresh\n  WARN\nend\n"}),
        ),
        Reply::text("done"),
    ]);
    let (env, log) = lsp_env(&server, json!({"empty_first": true}));
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", &format!("{HELPER}def other\n  call nowhere\nend\n"));
    let out = run(&env, &["run", "-q", "-y", "fix it"], &[]);
    out.assert_success();
    assert!(lsp_warnings(&out).is_empty(), "{}", out.stderr);

    let offered = server.request(0).tool_names();
    for t in TOOLS {
        assert!(offered.contains(&t.to_string()), "{t} not in {offered:?}");
    }
    let r = results(&server);
    let a = project_file(&env, "a.fk");
    let broken = &r[1].0;
    assert!(
        broken.contains(&format!(
            "Error: {a}:4:3 [fake fakecheck][E1] BAD is not allowed"
        )),
        "{broken}"
    );
    assert!(
        broken.contains("This file: 1 error, 0 warnings"),
        "{broken}"
    );
    assert!(
        broken.contains("Other files: 1 error, 0 warnings (lsp_diagnostics lists them)"),
        "the error of b.fk is counted, not listed: {broken}"
    );
    assert!(!broken.contains("undefined: nowhere"), "{broken}");
    let fixed = &r[2].0;
    assert!(!fixed.contains("BAD is not allowed"), "{fixed}");
    assert!(fixed.contains("This file: 0 errors, 0 warnings"), "{fixed}");
    let written = &r[3].0;
    assert!(
        written.contains("Warn: ") && written.contains("WARN is discouraged"),
        "{written}"
    );
    assert_eq!(env.read_project_file("a.fk"), MAIN);

    let m = methods(&read_log(&log));
    for want in [
        "initialize",
        "initialized",
        "textDocument/didOpen",
        "textDocument/didChange",
        "textDocument/didSave",
        "shutdown",
        "exit",
    ] {
        assert!(m.contains(&want.to_string()), "{want} not in {m:?}");
    }
    assert_eq!(starts(&log), 1);
}

#[test]
fn without_a_server_there_are_no_lsp_tools_and_edits_are_as_before() {
    let server = FakeServer::with_script(vec![
        view("a.fk"),
        edit("a.fk", "main", "BAD"),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.write_project_file("a.fk", MAIN);
    run(&env, &["run", "-q", "-y", "edit"], &[]).assert_success();
    let offered = server.request(0).tool_names();
    assert!(
        !offered.iter().any(|t| t.starts_with("lsp_")),
        "{offered:?}"
    );
    let r = results(&server);
    assert!(!r[1].0.contains("diagnostic"), "{}", r[1].0);
}

/// Asked first thing, the project's diagnostics and a workspace symbol search start the servers
/// that can start without a file and wait for them, rather than find none running.
#[test]
fn project_wide_calls_start_the_servers_they_need() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("lsp_diagnostics", json!({})),
        Reply::tool_call("lsp_symbols", json!({"query": "lea"})),
        Reply::text("done"),
    ]);
    let (env, log) = lsp_env(&server, json!({"publish_on_start": true}));
    env.write_project_file("b.fk", &format!("{HELPER}def other\n  call nowhere\nend\n"));
    let out = run(&env, &["run", "-q", "-y", "check"], &[]);
    out.assert_success();
    let r = results(&server);
    let b = project_file(&env, "b.fk");
    assert!(
        r[0].0.contains(&format!(
            "Error: {b}:8:8 [fake fakecheck][E2] undefined: nowhere"
        )),
        "{:?}",
        r[0]
    );
    assert!(
        r[0].0.contains("Project: 1 error, 0 warnings"),
        "{:?}",
        r[0]
    );
    assert!(!r[1].1, "{:?}", r[1]);
    assert!(r[1].0.contains("leaf"), "{:?}", r[1]);
    assert_eq!(starts(&log), 1, "one server, started once");
}

/// A server that never publishes in time, crashes, breaks the framing, floods or never
/// answers: one warning line, the edit's result without diagnostics, no hang, the edit made.
#[test]
fn bad_servers_cost_one_warning_and_never_the_edit() {
    let cases = [
        ("slow", json!({"delay_ms": 120_000}), 1.0, false),
        (
            "crash",
            json!({"fault": {"on": "textDocument/didChange", "do": "crash"}}),
            5.0,
            true,
        ),
        (
            "garbage",
            json!({"fault": {"on": "textDocument/didChange", "do": "garbage"}}),
            5.0,
            true,
        ),
        (
            "bad length",
            json!({"fault": {"on": "textDocument/didChange", "do": "bad_length"}}),
            5.0,
            true,
        ),
        (
            "100 MB",
            json!({"fault": {"on": "textDocument/didChange", "do": "huge"}}),
            5.0,
            true,
        ),
        (
            "mute initialize",
            json!({"hang_initialize": true}),
            1.0,
            true,
        ),
        (
            "hang",
            json!({"fault": {"on": "textDocument/didChange", "do": "hang"}}),
            1.0,
            false,
        ),
    ];
    for (what, script, timeout, warns) in cases {
        let server = FakeServer::with_script(vec![
            // Waits for the server (when it starts), so the edits below are changes to an open
            // file: the faults are on didChange.
            Reply::tool_call("lsp_symbols", json!({"file_path": "a.fk"})),
            view("a.fk"),
            edit("a.fk", "def main", "def main BAD"),
            edit("a.fk", "main BAD", "main BAD BAD"),
            Reply::text("done"),
        ]);
        let (env, log) = lsp_env(&server, script);
        edit_config(&env, |c| {
            c["lsp"]["fake"]["timeout"] = json!(timeout);
        });
        env.write_project_file("a.fk", MAIN);
        let out = run(&env, &["run", "-q", "-y", "edit"], &[]);
        out.assert_success();
        let r = results(&server);
        for (text, is_error) in &r[2..] {
            assert!(!is_error, "{what}: {text}");
            assert!(!text.contains("BAD is not allowed"), "{what}: {text}");
        }
        assert_eq!(
            env.read_project_file("a.fk"),
            MAIN.replace("def main", "def main BAD BAD"),
            "{what}"
        );
        let w = lsp_warnings(&out);
        if warns {
            assert_eq!(w.len(), 1, "{what}: one warning line: {}", out.stderr);
        }
        assert_eq!(
            starts(&log),
            1,
            "{what}: never started again in the session"
        );
    }
}

#[test]
fn a_server_that_dies_mid_message_is_reported_by_how_it_ended() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("lsp_references", json!({"symbol": "helper"})),
        Reply::text("done"),
    ]);
    let (env, _) = lsp_env(
        &server,
        json!({"fault": {"on": "textDocument/references", "do": "half"}}),
    );
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    let out = run(&env, &["run", "-q", "-y", "refs"], &[]);
    out.assert_success();
    let r = results(&server);
    assert!(
        r[0].1
            && r[0].0.contains("exited with code 3")
            && r[0].0.contains("ended inside a message of 50 bytes"),
        "{:?}",
        r[0]
    );
}

#[test]
fn a_server_that_exits_mid_request_fails_the_call_not_the_session() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("lsp_references", json!({"symbol": "helper"})),
        view("a.fk"),
        Reply::text("done"),
    ]);
    let (env, _) = lsp_env(
        &server,
        json!({"fault": {"on": "textDocument/references", "do": "crash"}}),
    );
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    let out = run(&env, &["run", "-q", "-y", "refs"], &[]);
    out.assert_success();
    let r = results(&server);
    assert!(r[0].1 && r[0].0.contains("exited"), "{:?}", r[0]);
    assert!(!r[1].1 && r[1].0.contains("call helper"), "{:?}", r[1]);
    assert_eq!(lsp_warnings(&out).len(), 1, "{}", out.stderr);
}

#[test]
fn the_navigation_tools_answer_through_the_server() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("lsp_definition", json!({"symbol": "helper"})),
        Reply::tool_call("lsp_references", json!({"symbol": "helper"})),
        Reply::tool_call("lsp_symbols", json!({"file_path": "b.fk"})),
        Reply::tool_call("lsp_symbols", json!({"query": "lea"})),
        Reply::tool_call(
            "lsp_call_hierarchy",
            json!({"symbol": "helper", "direction": "incoming"}),
        ),
        Reply::tool_call(
            "lsp_call_hierarchy",
            json!({"symbol": "helper", "direction": "outgoing"}),
        ),
        Reply::tool_call(
            "lsp_rename",
            json!({"symbol": "helper", "new_name": "assist"}),
        ),
        Reply::tool_call(
            "lsp_replace_symbol",
            json!({"symbol": "leaf", "file_path": "b.fk", "replacement": "def leaf\n  BAD\nend"}),
        ),
        Reply::tool_call("lsp_diagnostics", json!({})),
        Reply::tool_call("lsp_restart", json!({})),
        Reply::tool_call("lsp_restart", json!({"name": "nope"})),
        Reply::text("done"),
    ]);
    let (env, log) = lsp_env(&server, json!({}));
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    let out = run(&env, &["run", "-q", "-y", "navigate"], &[]);
    out.assert_success();
    let r = results(&server);
    let (a, b) = (project_file(&env, "a.fk"), project_file(&env, "b.fk"));
    assert!(
        r[0].0.contains(&format!("{b}:1\n")) && r[0].0.contains(">    1 | def helper"),
        "{}",
        r[0].0
    );
    assert!(
        r[1].0.contains("Found 3 reference(s) in 2 file(s)"),
        "{}",
        r[1].0
    );
    assert!(
        r[1].0
            .contains(&format!("{a} (2 reference(s)):\n  Line 2, Column 8")),
        "{}",
        r[1].0
    );
    assert!(
        r[2].0
            .contains("Function helper (lines 1-3)\nFunction leaf (lines 5-6)"),
        "{}",
        r[2].0
    );
    assert!(r[3].0.contains("Function leaf — b.fk:5"), "{}", r[3].0);
    assert!(
        r[4].0.contains("1 caller(s)") && r[4].0.contains("— main"),
        "{}",
        r[4].0
    );
    assert!(
        r[5].0.contains("1 callee(s)") && r[5].0.contains("— leaf"),
        "{}",
        r[5].0
    );
    assert!(
        r[6].0
            .contains("Renamed 'helper' to 'assist' in 2 file(s) (3 edits)"),
        "{}",
        r[6].0
    );
    assert_eq!(
        env.read_project_file("a.fk"),
        MAIN.replace("helper", "assist")
    );
    assert!(r[7].0.contains("Replaced symbol 'leaf'"), "{}", r[7].0);
    assert!(
        r[7].0.contains("BAD is not allowed"),
        "diagnostics after the change: {}",
        r[7].0
    );
    assert_eq!(
        env.read_project_file("b.fk"),
        "def assist\n  call leaf\nend\n\ndef leaf\n  BAD\nend\n"
    );
    assert!(
        r[8].0.contains("<project_diagnostics>") && r[8].0.contains("BAD is not allowed"),
        "{}",
        r[8].0
    );
    assert!(
        r[9].0
            .contains("Successfully restarted 1 LSP client(s): fake"),
        "{}",
        r[9].0
    );
    assert!(
        r[10].1 && r[10].0.contains("no LSP server named 'nope'"),
        "{:?}",
        r[10]
    );
    for (i, (text, is_error)) in r.iter().enumerate().take(10) {
        assert!(!is_error, "call {i}: {text}");
    }
    assert_eq!(starts(&log), 2, "started, then restarted once");
}

#[test]
fn a_rename_asks_like_edit_and_an_unsupported_request_is_a_clear_error() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "lsp_rename",
        json!({"symbol": "helper", "new_name": "assist"}),
    )]);
    let (env, _) = lsp_env(&server, json!({}));
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    let out = run(&env, &["run", "-q", "rename"], &[]);
    out.assert_code(3);
    assert_eq!(env.read_project_file("a.fk"), MAIN, "nothing renamed");
    assert!(out.stderr.contains("lsp_rename"), "{}", out.stderr);

    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "lsp_call_hierarchy",
            json!({"symbol": "helper", "direction": "incoming"}),
        ),
        Reply::tool_call("lsp_references", json!({"symbol": "helper"})),
        Reply::text("done"),
    ]);
    let (env, _) = lsp_env(
        &server,
        json!({"capabilities": {"textDocumentSync": 1, "definitionProvider": true}}),
    );
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    run(&env, &["run", "-q", "-y", "calls"], &[]).assert_success();
    let r = results(&server);
    assert!(
        r[0].1
            && r[0]
                .0
                .contains("does not support call hierarchy (callHierarchyProvider)"),
        "{:?}",
        r[0]
    );
    assert!(
        r[1].1 && r[1].0.contains("referencesProvider"),
        "{:?}",
        r[1]
    );
}

#[test]
fn server_requests_are_answered_and_options_passed_through() {
    let server = FakeServer::with_script(vec![
        view("a.fk"),
        edit("a.fk", "main", "start"),
        Reply::text("done"),
    ]);
    let (env, log) = lsp_env(
        &server,
        json!({"ask": [
            {"method": "workspace/configuration", "params": {"items": [{"section": "fake.lint"}, {}]}},
            {"method": "client/registerCapability", "params": {"registrations": [
                {"id": "1", "method": "workspace/didChangeWatchedFiles", "registerOptions": {"watchers": []}}]}},
            {"method": "window/workDoneProgress/create", "params": {"token": "t"}},
            {"method": "workspace/frobnicate", "params": {}}
        ]}),
    );
    edit_config(&env, |c| {
        c["lsp"]["fake"]["init_options"] = json!({"mode": "test"});
        c["lsp"]["fake"]["options"] = json!({"fake": {"lint": {"level": 2}}});
    });
    env.write_project_file("a.fk", MAIN);
    run(&env, &["run", "-q", "-y", "edit"], &[]).assert_success();
    let log = read_log(&log);
    let init = log.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(
        init["params"]["initializationOptions"],
        json!({"mode": "test"})
    );
    let root = std::fs::canonicalize(env.project()).unwrap();
    assert!(
        init["params"]["rootUri"]
            .as_str()
            .unwrap()
            .ends_with(&root.display().to_string()),
        "{init}"
    );
    let answer = |id: &str| {
        log.iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        answer("ask-0")["result"],
        json!([{"level": 2}, {"fake": {"lint": {"level": 2}}}])
    );
    assert_eq!(answer("ask-1")["result"], Value::Null);
    assert!(answer("ask-1").get("error").is_none());
    assert_eq!(answer("ask-2")["result"], Value::Null);
    assert_eq!(answer("ask-3")["error"]["code"], -32601);
    let conf = log
        .iter()
        .find(|m| m["method"] == "workspace/didChangeConfiguration")
        .unwrap();
    assert_eq!(conf["params"]["settings"]["fake"]["lint"]["level"], 2);
}

#[test]
fn files_a_shell_command_changed_are_sent_again() {
    let server = FakeServer::with_script(vec![
        // Waits for the server, so the file is open before the command changes it.
        Reply::tool_call("lsp_symbols", json!({"file_path": "a.fk"})),
        Reply::tool_call(
            "bash",
            json!({"command": "sed -i 's/call helper/BAD/' a.fk"}),
        ),
        Reply::tool_call("lsp_diagnostics", json!({})),
        Reply::text("done"),
    ]);
    let (env, log) = lsp_env(&server, json!({}));
    env.write_project_file("a.fk", MAIN);
    run(&env, &["run", "-q", "-y", "sed"], &[]).assert_success();
    let log = read_log(&log);
    let change = log
        .iter()
        .find(|m| m["method"] == "textDocument/didChange")
        .expect("a didChange after the command");
    assert!(
        change["params"]["contentChanges"][0]["text"]
            .as_str()
            .unwrap()
            .contains("BAD"),
        "{change}"
    );
    let r = results(&server);
    assert!(r[2].0.contains("BAD is not allowed"), "{}", r[2].0);
}

#[test]
fn post_tool_use_hooks_see_the_diagnostics() {
    let server = FakeServer::with_script(vec![
        view("a.fk"),
        edit("a.fk", "def main", "def main BAD"),
        Reply::text("done"),
    ]);
    let (env, _) = lsp_env(&server, json!({}));
    let seen = env.root().join("post.json");
    edit_config(&env, |c| {
        c["hooks"] = json!({"PostToolUse": [{"matcher": "^edit$",
            "command": format!("cat > {}", seen.display())}]});
    });
    env.write_project_file("a.fk", MAIN);
    run(&env, &["run", "-q", "-y", "edit"], &[]).assert_success();
    let payload: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert!(
        payload["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("BAD is not allowed"),
        "{payload}"
    );
}

/// A directory with `name` on it running this test binary (a server found on PATH).
fn fake_on_path(env: &TestEnv, name: &str) -> String {
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(std::env::current_exe().unwrap(), bin.join(name)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn untrusted_projects_start_no_server_of_their_own_nor_one_found_on_path() {
    // The project's own entry: skipped until trusted.
    let server = FakeServer::with_script(vec![view("a.fk"), Reply::text("done")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let log = env.root().join("lsp-log.jsonl");
    let entry = lsp::entry(env.root(), "fake", &json!({"log": log.to_string_lossy()}));
    env.write_project_file("crush.json", &json!({"lsp": {"fake": entry}}).to_string());
    env.write_project_file("a.fk", MAIN);
    let out = run(&env, &["run", "-q", "-y", "look"], &[]);
    out.assert_success();
    assert!(out.stderr.contains("1 LSP server"), "{}", out.stderr);
    assert!(!log.exists(), "an untrusted project's server started");
    assert!(
        !server
            .request(0)
            .tool_names()
            .iter()
            .any(|t| t.starts_with("lsp_"))
    );

    let server = FakeServer::with_script(vec![
        view("a.fk"),
        edit("a.fk", "def main", "def main BAD"),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-q", "-y", "--trust", "edit"], &[]).assert_success();
    assert!(methods(&read_log(&log)).contains(&"initialize".to_string()));
    assert!(results(&server)[1].0.contains("BAD is not allowed"));

    // A well-known server on PATH: only in a trusted project.
    let env = TestEnv::new();
    let script = env.root().join("auto.json");
    let log = env.root().join("auto-log.jsonl");
    std::fs::write(&script, json!({"log": log.to_string_lossy()}).to_string()).unwrap();
    let path = fake_on_path(&env, "pyright-langserver");
    let script = script.to_string_lossy().into_owned();
    let vars = [("PATH", path.as_str()), (SERVER_ENV, script.as_str())];
    env.write_project_file("m.py", "x = 1\n");
    let edit_py = || {
        FakeServer::with_script(vec![
            view("m.py"),
            edit("m.py", "x = 1", "x = BAD"),
            Reply::text("done"),
        ])
    };
    let server = edit_py();
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-q", "-y", "edit"], &vars).assert_success();
    assert!(
        !log.exists(),
        "a server found on PATH started in an untrusted project"
    );
    assert!(!results(&server)[1].0.contains("BAD is not allowed"));
    let list = run(&env, &["lsp", "list"], &vars);
    list.assert_success();
    assert!(list.stdout.contains("not trusted"), "{}", list.stdout);

    env.write_project_file("m.py", "x = 1\n");
    let server = edit_py();
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-q", "-y", "--trust", "edit"], &vars).assert_success();
    let r = results(&server);
    assert!(r[1].0.contains("BAD is not allowed"), "{}", r[1].0);
    assert!(r[1].0.contains("[pyright fakecheck]"), "{}", r[1].0);
    assert_eq!(starts(&log), 1);

    // `crush trust` in a project with nothing of its own to run still trusts it for them.
    let t = env.run(&["trust"], None);
    t.assert_success();
    assert!(
        t.stdout.contains("language servers found on PATH"),
        "{}",
        t.stdout
    );
    env.write_project_file("m.py", "x = 1\n");
    let server = edit_py();
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-q", "-y", "edit"], &vars).assert_success();
    assert_eq!(starts(&log), 2);
}

#[test]
fn lsp_list_starts_reports_and_stops_each_server() {
    let server = FakeServer::with_script(vec![]);
    let (env, log) = lsp_env(&server, json!({}));
    edit_config(&env, |c| {
        c["lsp"]["off"] = json!({"command": "true", "disabled": true});
        c["lsp"]["broken"] = json!({"command": "/nonexistent/lsp", "filetypes": ["zz"]});
        c["options"] = json!({"auto_lsp": false});
    });
    let out = run(&env, &["lsp", "list", "--json"], &[]);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["auto_lsp"], "off");
    let servers = v["servers"].as_array().unwrap();
    let by = |n: &str| servers.iter().find(|s| s["name"] == n).cloned().unwrap();
    assert_eq!(by("fake")["state"], "ready", "{v}");
    assert_eq!(by("fake")["server"], "fake-lsp 1.0");
    assert_eq!(by("broken")["state"], "failed");
    assert!(
        by("broken")["error"]
            .as_str()
            .unwrap()
            .contains("cannot run /nonexistent/lsp")
    );
    assert_eq!(by("off")["state"], "disabled");
    let m = methods(&read_log(&log));
    assert!(m.contains(&"shutdown".to_string()), "stopped: {m:?}");

    let out = run(&env, &["lsp", "list"], &[]);
    out.assert_success();
    assert!(out.stdout.contains("fake ("), "{}", out.stdout);
    assert!(
        out.stdout.contains(": ready, fake-lsp 1.0"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("off: disabled"), "{}", out.stdout);
    assert!(out.stdout.contains("auto_lsp is false"), "{}", out.stdout);
    assert!(!Path::new("/nonexistent/lsp").exists());
}

#[test]
fn a_sub_agent_gets_the_read_only_lookups() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "where is helper defined?"})),
        Reply::tool_call("lsp_definition", json!({"symbol": "helper"})),
        Reply::text("in b.fk"),
        Reply::text("done"),
    ]);
    let (env, _) = lsp_env(&server, json!({}));
    env.write_project_file("a.fk", MAIN);
    env.write_project_file("b.fk", HELPER);
    run(&env, &["run", "-q", "-y", "find it"], &[]).assert_success();
    let child = server.request(1).tool_names();
    for t in [
        "lsp_call_hierarchy",
        "lsp_definition",
        "lsp_symbols",
        "view",
    ] {
        assert!(child.contains(&t.to_string()), "{t} not in {child:?}");
    }
    for t in ["lsp_rename", "lsp_replace_symbol", "edit", "bash"] {
        assert!(!child.contains(&t.to_string()), "{t} in {child:?}");
    }
    let r = server.request(2).tool_results();
    assert!(r[0].1.contains("Found 1 definition(s)"), "{:?}", r[0]);
}

#[test]
fn a_cancel_ends_the_wait_for_diagnostics() {
    let server =
        FakeServer::with_script(vec![view("a.fk"), edit("a.fk", "def main", "def main BAD")]);
    let (env, log) = lsp_env(&server, json!({"delay_ms": 600_000}));
    edit_config(&env, |c| c["lsp"]["fake"]["timeout"] = json!(300));
    env.write_project_file("a.fk", MAIN);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "-y", "edit"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn crush");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !methods(&read_log(&log)).contains(&"textDocument/didChange".to_string()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the edit never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Without the cancel the wait would go on for the server's 300 s.
    let status = crate::support::env::interrupt(&mut child, deadline);
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        env.read_project_file("a.fk"),
        MAIN.replace("def main", "def main BAD")
    );
}

#[test]
fn a_project_server_whose_program_changed_since_trust_is_not_restarted() {
    // The trusted project's language server is a script of the project: once a tool rewrote
    // it, lsp_restart does not start it again.
    let server = FakeServer::with_script(vec![
        view("a.fk"),
        Reply::tool_call("bash", json!({"command": "echo '# edited' >> lsp.sh"})),
        Reply::tool_call("lsp_restart", json!({})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let log = env.root().join("lsp-log.jsonl");
    let mut fake = lsp::entry(env.root(), "fake", &json!({"log": log.to_string_lossy()}));
    let program = env.write_project_file(
        "lsp.sh",
        &format!("#!/bin/sh\nexec '{}'\n", fake["command"].as_str().unwrap()),
    );
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    fake["command"] = json!("./lsp.sh");
    env.write_project_file("crush.json", &json!({"lsp": {"fake": fake}}).to_string());
    env.write_project_file("a.fk", MAIN);
    env.run(&["trust"], None).assert_success();
    let out = run(&env, &["run", "-q", "-y", "go"], &[]);
    out.assert_success();
    let r = results(&server);
    let restart = &r[2];
    assert!(
        restart
            .0
            .contains("lsp.sh changed since the project was trusted"),
        "{restart:?}\n{}",
        out.stderr
    );
    let starts = lsp::methods(&lsp::read_log(&log))
        .iter()
        .filter(|m| *m == "initialize")
        .count();
    assert_eq!(starts, 1, "{}", out.stderr);
}
