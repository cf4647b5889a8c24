//! `crush acp` driven by a scripted editor: newline-delimited JSON-RPC on the real binary's
//! stdin and stdout, the model behind the fake server. stdout must hold protocol messages only.

use crate::support::{Dialect, FakeServer, Fault, Recorded, Reply, TestEnv};
use crossbeam_channel::Receiver;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TITLE_MARK: &str = "title of a conversation";

/// Title requests are answered off-script.
fn title_route(server: &FakeServer) {
    server.route_when(
        |r| r.system_text().contains(TITLE_MARK),
        vec![Reply::text("Editor Title")],
    );
}

fn turn_requests(server: &FakeServer) -> Vec<Recorded> {
    server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains(TITLE_MARK))
        .collect()
}

/// An editor: it writes requests to crush's stdin and reads every line of its stdout, each of
/// which must be one JSON-RPC message.
struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    stderr: Arc<Mutex<Vec<u8>>>,
    next_id: u64,
    /// Every message read so far that was not the answer a call waited for.
    seen: Vec<Value>,
}

fn read_lines(stdout: ChildStdout) -> Receiver<Value> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| json!({"not json": line, "error": e.to_string()}));
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    rx
}

impl Editor {
    fn start(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Editor {
        Editor::spawn(env, args, vars, true)
    }

    fn spawn(env: &TestEnv, args: &[&str], vars: &[(&str, &str)], read: bool) -> Editor {
        let mut cmd = env.crush();
        cmd.arg("acp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn crush acp");
        let stdin = child.stdin.take();
        let stderr = crate::support::env::collect(child.stderr.take().unwrap());
        let messages = if read {
            read_lines(child.stdout.take().unwrap())
        } else {
            crossbeam_channel::never()
        };
        Editor {
            child,
            stdin,
            messages,
            stderr,
            next_id: 100,
            seen: Vec::new(),
        }
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    fn write_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, v: Value) {
        self.write_line(&v.to_string());
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The next message crush writes.
    fn next(&mut self) -> Value {
        match self.messages.recv_timeout(crate::support::RUN_TIMEOUT) {
            Ok(v) => {
                assert!(
                    v.get("not json").is_none(),
                    "stdout holds something else than a message: {v}"
                );
                assert_eq!(v["jsonrpc"], "2.0", "{v}");
                v
            }
            Err(e) => panic!(
                "no message from crush ({e:?}); so far: {:#?}\n--- stderr ---\n{}",
                self.seen,
                self.stderr()
            ),
        }
    }

    /// Reads until `pred` holds for a message, which is returned; the others are kept in
    /// `seen`.
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + crate::support::RUN_TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            let v = self.next();
            if pred(&v) {
                return v;
            }
            self.seen.push(v);
        }
    }

    /// The answer to request `id` (its `result`, or the whole message when an error).
    fn answer(&mut self, id: u64) -> Value {
        self.until(&format!("the answer to {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    fn result(&mut self, id: u64) -> Value {
        let a = self.answer(id);
        assert!(
            a.get("error").is_none(),
            "request {id} failed: {a}\n{}",
            self.stderr()
        );
        a["result"].clone()
    }

    fn error(&mut self, id: u64) -> Value {
        let a = self.answer(id);
        assert!(a.get("error").is_some(), "request {id} did not fail: {a}");
        a["error"].clone()
    }

    /// The next request crush sends to the editor.
    fn client_request(&mut self, method: &str) -> Value {
        self.until(method, |v| v["method"] == method && v.get("id").is_some())
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.result(id)
    }

    fn initialize(&mut self, fs: bool) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities":
                {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": true},
                "clientInfo": {"name": "test-editor", "version": "1"}}),
        )
    }

    fn new_session(&mut self, env: &TestEnv) -> String {
        let r = self.call(
            "session/new",
            json!({"cwd": env.project(), "mcpServers": []}),
        );
        r["sessionId"].as_str().unwrap().to_string()
    }

    /// The message of the error a `session/new` in the project gets.
    fn new_session_error(&mut self, env: &TestEnv) -> String {
        let id = self.request(
            "session/new",
            json!({"cwd": env.project(), "mcpServers": []}),
        );
        self.error(id)["message"].as_str().unwrap().to_string()
    }

    fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// The `session/update`s of `sid` read so far, in order, forgotten once returned.
    fn updates(&mut self, sid: &str) -> Vec<Value> {
        let (mine, rest): (Vec<Value>, Vec<Value>) = std::mem::take(&mut self.seen)
            .into_iter()
            .partition(|v| v["method"] == "session/update" && v["params"]["sessionId"] == sid);
        self.seen = rest;
        mine.into_iter()
            .map(|v| v["params"]["update"].clone())
            .collect()
    }

    /// Closes stdin and waits for the exit code (crush must exit by itself).
    fn finish(mut self) -> (i32, String) {
        drop(self.stdin.take());
        self.wait_exit()
    }

    /// Waits for the exit code, stdin left as it is.
    fn wait_exit(mut self) -> (i32, String) {
        let stderr = self.stderr.clone();
        let code =
            crate::support::env::wait_exit(&mut self.child, "crush acp did not exit", || {
                String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned()
            });
        // Whatever was still on stdout must be messages too.
        while let Ok(v) = self.messages.recv_timeout(Duration::from_millis(200)) {
            assert!(v.get("not json").is_none(), "stdout: {v}");
        }
        (code, self.stderr())
    }
}

/// The kinds of updates, in order, without repeats of the same kind in a row.
fn kinds(updates: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in updates {
        let k = u["sessionUpdate"].as_str().unwrap_or("?").to_string();
        if out.last() != Some(&k) {
            out.push(k);
        }
    }
    out
}

fn text_of(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// A model whose answers stream `texts` and then stall (titles answered off-script).
fn stalled_server(texts: &[&str]) -> FakeServer {
    let server = FakeServer::start();
    for t in texts {
        server.push(Reply::text(t).fault(Fault::StallAfterContent(Duration::from_secs(60))));
    }
    title_route(&server);
    server
}

/// An editor with a session whose prompt `text` is streaming (its first chunk arrived).
fn streaming(env: &TestEnv, text: &str) -> (Editor, String, u64) {
    let mut ed = Editor::start(env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(env);
    let p = ed.prompt(&sid, text);
    ed.until("the first chunk", |v| {
        v["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    (ed, sid, p)
}

/// The session's last model call is stored as canceled.
fn assert_stored_canceled(env: &TestEnv, sid: &str) {
    let parts = env.stored_parts(sid);
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "finish" && p["data"]["reason"] == "canceled"),
        "{parts:#?}"
    );
}

fn sessions(env: &TestEnv) -> Vec<Value> {
    let out = env.run(&["sessions", "list", "--json"], None);
    out.assert_success();
    serde_json::from_str::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn initialize_speaks_v1_and_bad_input_gets_errors_while_crush_goes_on() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::start(&env, &[], &[]);
    // Invalid JSON, a batch, a request without "jsonrpc", an unknown method, a prompt for an
    // unknown session, an answer to nothing: each an error (or ignored), and crush goes on.
    ed.write_line("{this is not json");
    let e = ed.next();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null);
    ed.write_line("[1, 2]");
    assert_eq!(ed.next()["error"]["code"], -32600);
    ed.write_line(r#"{"id": 5, "method": "initialize"}"#);
    let e = ed.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );
    let id = ed.request("session/fork", json!({}));
    assert_eq!(ed.error(id)["code"], -32601);
    let id = ed.prompt("no-such-session", "hi");
    let e = ed.error(id);
    assert!(
        e["message"].as_str().unwrap().contains("no-such-session"),
        "{e}"
    );
    ed.respond(&json!(12345), json!({}));
    ed.write_line("");
    // A client asking for a later version gets 1.
    let r = ed.call(
        "initialize",
        json!({"protocolVersion": 2, "clientCapabilities": {}}),
    );
    assert_eq!(r["protocolVersion"], 1);
    let caps = &r["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["promptCapabilities"]["audio"], false);
    assert_eq!(caps["mcpCapabilities"], json!({"http": true, "sse": true}));
    assert_eq!(r["authMethods"], json!([]), "a provider is configured");
    assert_eq!(r["agentInfo"]["name"], "crush");
    assert_eq!(ed.call("authenticate", json!({"methodId": "x"})), json!({}));
    let id = ed.request("initialize", json!({"protocolVersion": "one"}));
    assert_eq!(ed.error(id)["code"], -32602);
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("parse error"), "{stderr}");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn without_a_provider_the_editor_is_told_what_to_configure() {
    let env = TestEnv::new();
    let mut ed = Editor::start(&env, &[], &[]);
    let r = ed.initialize(false);
    let methods = r["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 1, "{r}");
    assert!(
        methods[0]["description"]
            .as_str()
            .unwrap()
            .contains("no provider configured"),
        "{r}"
    );
    let id = ed.request("authenticate", json!({"methodId": "crush-config"}));
    let e = ed.error(id);
    assert_eq!(e["code"], -32000);
    let id = ed.request(
        "session/new",
        json!({"cwd": env.project(), "mcpServers": []}),
    );
    let e = ed.error(id);
    assert_eq!(e["code"], -32000, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("ANTHROPIC_API_KEY"),
        "{e}"
    );
    assert_eq!(ed.finish().0, 0);
}

#[test]
fn a_turn_streams_its_updates_in_order_and_permissions_are_asked_in_the_editor() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "write",
            json!({"file_path": "notes.txt", "content": "hello\n"}),
        )
        .with_thinking("Writing the file.", "sig"),
        Reply::text("Wrote notes.txt."),
        Reply::tool_call("bash", json!({"command": "touch refused.txt"})),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let r = ed.call(
        "session/new",
        json!({"cwd": env.project(), "mcpServers": []}),
    );
    assert_eq!(r["modes"]["currentModeId"], "default");
    let sid = r["sessionId"].as_str().unwrap().to_string();
    assert!(
        sessions(&env).is_empty(),
        "nothing is stored before the first prompt"
    );

    let p = ed.prompt(&sid, "write notes");
    let ask = ed.client_request("session/request_permission");
    assert_eq!(ask["params"]["sessionId"], sid.as_str());
    let call_id = ask["params"]["toolCall"]["toolCallId"].clone();
    let diff = ask["params"]["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        diff.contains("+hello"),
        "the question shows the diff: {ask}"
    );
    let kinds_offered: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds_offered, ["allow_once", "allow_always", "reject_once"]);
    assert!(
        !env.project().join("notes.txt").exists(),
        "asked before writing"
    );
    ed.respond(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let done = ed.result(p);
    assert_eq!(done["stopReason"], "end_turn");
    assert_eq!(env.read_project_file("notes.txt"), "hello\n");
    let ups = ed.updates(&sid);
    let k = kinds(&ups);
    let pos = |name: &str| {
        k.iter()
            .position(|x| x == name)
            .unwrap_or_else(|| panic!("no {name} in {k:?}"))
    };
    assert!(pos("agent_thought_chunk") < pos("tool_call"), "{k:?}");
    assert!(pos("tool_call") < pos("tool_call_update"), "{k:?}");
    assert!(
        pos("tool_call_update") < pos("agent_message_chunk"),
        "{k:?}"
    );
    let call = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["toolCallId"], call_id);
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["title"], "Write notes.txt");
    assert_eq!(
        call["locations"][0]["path"],
        env.project()
            .canonicalize()
            .unwrap()
            .join("notes.txt")
            .display()
            .to_string()
    );
    let finished = ups
        .iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(finished["status"], "completed");
    assert_eq!(
        finished["content"][0],
        json!({"type": "diff", "path": env.project().canonicalize().unwrap().join("notes.txt"),
            "oldText": null, "newText": "hello\n"})
    );
    assert_eq!(text_of(&ups, "agent_thought_chunk"), "Writing the file.");
    assert_eq!(text_of(&ups, "agent_message_chunk"), "Wrote notes.txt.");
    assert!(
        ups.iter()
            .any(|u| u["sessionUpdate"] == "usage_update" && u["size"] == 200000)
    );

    // Refused: the command does not run, the call fails, the turn ends.
    let p = ed.prompt(&sid, "now touch a file");
    let ask = ed.client_request("session/request_permission");
    assert!(
        ask["params"]["options"][1]["name"]
            .as_str()
            .unwrap()
            .contains("exact command"),
        "{ask}"
    );
    ed.respond(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    assert!(!env.project().join("refused.txt").exists());
    let ups = ed.updates(&sid);
    let failed = ups
        .iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(failed["status"], "failed", "{ups:#?}");
    assert_eq!(turn_requests(&server).len(), 3);
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");

    // The terminal's store: the same session, titled, continued there.
    let list = sessions(&env);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["uuid"], sid.as_str());
    assert_eq!(list[0]["title"], "Editor Title");
    let parts = env.stored_parts(&sid);
    assert!(parts.iter().any(|p| {
        p["type"] == "tool_result"
            && p["data"]["content"]
                .as_str()
                .unwrap_or("")
                .contains("Permission denied")
    }));
    server.push(Reply::text("continued"));
    let out = env.run(&["run", "-s", &sid, "go on"], None);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "continued");
    let last = turn_requests(&server).pop().unwrap();
    assert!(last.user_texts().iter().any(|t| t.contains("write notes")));
}

#[test]
fn cancel_ends_a_streaming_turn_and_a_second_prompt_meanwhile_is_refused() {
    let server = stalled_server(&["The first half of an answer", "Another half"]);
    server.push(Reply::text("after the cancels"));
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let (mut ed, sid, p) = streaming(&env, "a long answer please");
    // Two prompts at once on one session: the second is refused, the first goes on.
    let second = ed.prompt(&sid, "and another");
    let e = ed.error(second);
    assert_eq!(e["code"], -32600);
    assert!(
        e["message"].as_str().unwrap().contains("already running"),
        "{e}"
    );
    ed.notify("session/cancel", json!({"sessionId": sid}));
    assert_eq!(ed.result(p)["stopReason"], "cancelled");
    // JSON-RPC's own cancel of the prompt request does the same.
    let p = ed.prompt(&sid, "again");
    ed.until("the next chunk", |v| {
        v["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    ed.notify("$/cancel_request", json!({"requestId": p}));
    assert_eq!(ed.result(p)["stopReason"], "cancelled");
    // The session goes on.
    let p = ed.prompt(&sid, "once more");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    // What streamed before the cancel is stored, marked canceled.
    let parts = env.stored_parts(&sid);
    assert!(
        parts.iter().any(|p| p["type"] == "text"
            && p["data"]["text"]
                .as_str()
                .unwrap_or("")
                .contains("first half")),
        "{parts:#?}"
    );
    assert_stored_canceled(&env, &sid);
    assert_eq!(turn_requests(&server).len(), 3);
}

#[test]
fn sigterm_cancels_the_running_turns_stores_them_and_exits_143() {
    let server = stalled_server(&["cut short"]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let (ed, sid, _) = streaming(&env, "go");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(ed.child.id() as i32, libc::SIGTERM) };
    let (code, stderr) = ed.wait_exit();
    assert_eq!(code, 143, "{stderr}");
    // Closed as a closed database is, before anything else opens it.
    super::cancel::assert_db_at_rest(&env);
    assert_stored_canceled(&env, &sid);
}

#[test]
fn a_terminal_session_loads_in_the_editor_replayed_and_continues_there() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo from-the-terminal"})),
        Reply::text("The terminal's answer."),
        Reply::text("The editor's answer."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "-y", "start here"], None)
        .assert_success();
    let out = env.run(&["sessions", "last", "--json"], None);
    out.assert_success();
    let last: Value = serde_json::from_str(&out.stdout).unwrap();
    let sid = last["meta"]["uuid"].as_str().unwrap().to_string();
    // The editor lists the terminal's sessions.
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let list = ed.call("session/list", json!({"cwd": env.project()}));
    let s = &list["sessions"][0];
    assert_eq!(s["sessionId"], sid.as_str(), "{list}");
    assert_eq!(s["title"], last["meta"]["title"], "{list}");
    assert!(s["updatedAt"].as_str().unwrap().ends_with('Z'), "{list}");
    assert_eq!(ed.finish().0, 0);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let r = ed.call(
        "session/load",
        json!({"sessionId": sid, "cwd": env.project(), "mcpServers": []}),
    );
    assert_eq!(r["modes"]["currentModeId"], "default");
    let ups = ed.updates(&sid);
    assert_eq!(
        kinds(&ups),
        ["user_message_chunk", "tool_call", "agent_message_chunk"],
        "{ups:#?}"
    );
    assert_eq!(text_of(&ups, "user_message_chunk"), "start here");
    let call = &ups[1];
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["status"], "completed");
    assert!(
        call["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("from-the-terminal"),
        "{call}"
    );
    assert_eq!(
        text_of(&ups, "agent_message_chunk"),
        "The terminal's answer."
    );
    let p = ed.prompt(&sid, "and now from the editor");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let last = turn_requests(&server).pop().unwrap();
    let users = last.user_texts();
    assert!(users.iter().any(|t| t.contains("start here")), "{users:?}");
    // Unknown sessions are an error; the connection goes on.
    let id = ed.request(
        "session/load",
        json!({"sessionId": "no-such", "cwd": env.project(), "mcpServers": []}),
    );
    assert_eq!(ed.error(id)["code"], -32002);
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(sessions(&env).len(), 1, "continued, not copied");
}

#[test]
fn the_editors_file_methods_are_used_when_it_offers_them() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "a.txt"})),
        Reply::tool_call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "unsaved", "new_string": "edited"}),
        ),
        Reply::text("Done."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.write_project_file("a.txt", "on disk\n");
    let path = env.project().canonicalize().unwrap().join("a.txt");
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(true);
    let sid = ed.new_session(&env);
    let p = ed.prompt(&sid, "fix a.txt");
    // The editor answers crush's requests as they come: its buffer, yes, written.
    let (mut reads, mut asked, mut writes) = (0, 0, Vec::new());
    let done = loop {
        let v = ed.next();
        if v["id"] == p && v.get("method").is_none() {
            break v;
        }
        match v["method"].as_str() {
            Some("fs/read_text_file") => {
                assert_eq!(v["params"]["path"], path.display().to_string());
                assert_eq!(v["params"]["sessionId"], sid.as_str());
                reads += 1;
                ed.respond(&v["id"], json!({"content": "an unsaved buffer\n"}));
            }
            Some("session/request_permission") => {
                asked += 1;
                let diff = v["params"]["toolCall"]["content"][0]["content"]["text"].clone();
                assert!(
                    diff.as_str().unwrap_or("").contains("+an edited buffer"),
                    "the diff of the buffer: {v}"
                );
                ed.respond(
                    &v["id"],
                    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
                );
            }
            Some("fs/write_text_file") => {
                writes.push(v["params"].clone());
                ed.respond(&v["id"], json!({}));
            }
            _ => ed.seen.push(v),
        }
    };
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(reads >= 2, "view and edit read the buffer: {reads}");
    assert_eq!(asked, 1);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["path"], path.display().to_string());
    assert_eq!(writes[0]["content"], "an edited buffer\n");
    assert_eq!(
        env.read_project_file("a.txt"),
        "on disk\n",
        "the editor writes its buffer, crush does not"
    );
    // The model saw the buffer, not the disk.
    let reqs = turn_requests(&server);
    let viewed = &reqs[1].tool_results()[0].1;
    assert!(viewed.contains("an unsaved buffer"), "{viewed}");
    let ups = ed.updates(&sid);
    let diff = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .find_map(|u| {
            u["content"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "diff")
                .cloned()
        })
        .expect("a diff");
    assert_eq!(diff["oldText"], "an unsaved buffer\n");
    assert_eq!(diff["newText"], "an edited buffer\n");
    assert_eq!(ed.finish().0, 0);
}

#[test]
fn a_sandbox_that_cannot_be_had_refuses_the_session() {
    let env = TestEnv::new();
    let server = FakeServer::start();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::start(
        &env,
        &["--sandbox", "read-only"],
        &[("CRUSH_SANDBOX_FORCE_ABI", "0")],
    );
    ed.initialize(false);
    let msg = ed.new_session_error(&env);
    assert!(msg.contains("no Landlock"), "{msg}");
    assert_eq!(ed.finish().0, 0);
    // With Landlock the same flag opens it.
    let mut ed = Editor::start(&env, &["--sandbox", "read-only"], &[]);
    ed.initialize(false);
    ed.new_session(&env);
    assert_eq!(ed.finish().0, 0);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn an_untrusted_project_with_hooks_refuses_the_session_as_crush_run_does() {
    let env = TestEnv::new();
    let server = FakeServer::start();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(
        "crush.json",
        &json!({"hooks": {"UserPromptSubmit": [{"command": "true"}]}}).to_string(),
    );
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let msg = ed.new_session_error(&env);
    assert!(msg.contains("is not trusted and defines hooks"), "{msg}");
    assert!(msg.contains("--no-project-hooks"), "{msg}");
    assert_eq!(ed.finish().0, 0);
    // Run without them, on purpose.
    let mut ed = Editor::start(&env, &["--no-project-hooks"], &[]);
    ed.initialize(false);
    ed.new_session(&env);
    assert_eq!(ed.finish().0, 0);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn the_editors_mcp_servers_start_with_the_session_and_modes_switch() {
    let env = TestEnv::new();
    let dir = crate::support::mcp::scratch(&env);
    let script = json!({"tools": [{"name": "echo", "description": "Echo the text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "action": "echo"}],
        "prompts": [{"name": "review", "description": "Review a file",
            "arguments": [{"name": "file", "required": true}], "template": "Review {file}"}]});
    let entry = crate::support::mcp::stdio_server(&dir, "ed", &script);
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "mcp_ed_echo",
            json!({"text": "through the editor's server"}),
        ),
        Reply::text("Echoed."),
    ]);
    title_route(&server);
    env.use_server(&server, Dialect::OpenAi);
    let (key, value) = entry["env"].as_object().unwrap().iter().next().unwrap();
    let mut ed = Editor::start(&env, &[], &[("CRUSH_MCP_WAIT_MS", "20000")]);
    ed.initialize(false);
    let r = ed.call(
        "session/new",
        json!({"cwd": env.project(), "mcpServers": [{"name": "ed",
            "command": entry["command"], "args": [], "env": [{"name": key, "value": value}]}]}),
    );
    let sid = r["sessionId"].as_str().unwrap().to_string();
    // Its prompts are offered as commands once it has started.
    let offered = ed.until("the commands update", |v| {
        v["params"]["update"]["sessionUpdate"] == "available_commands_update"
    });
    assert_eq!(
        offered["params"]["update"]["availableCommands"],
        json!([{"name": "mcp:ed:review", "description": "Review a file",
            "input": {"hint": "FILE"}}])
    );
    // In yolo mode nothing is asked.
    let id = ed.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    ed.result(id);
    let id = ed.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "careless"}),
    );
    assert_eq!(ed.error(id)["code"], -32602);
    let p = ed.prompt(&sid, "echo something");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let reqs = turn_requests(&server);
    assert!(reqs[0].tool_names().contains(&"mcp_ed_echo".to_string()));
    assert!(
        reqs[1].tool_results()[0]
            .1
            .contains("through the editor's server"),
        "{:?}",
        reqs[1].tool_results()
    );
    assert!(
        ed.seen
            .iter()
            .all(|v| v["method"] != "session/request_permission")
    );
    let id = ed.request("session/close", json!({"sessionId": sid}));
    ed.result(id);
    let p = ed.prompt(&sid, "closed");
    assert_eq!(ed.error(p)["code"], -32002);
    assert_eq!(ed.finish().0, 0);
}

/// An OpenAI stream of `n` text deltas of `size` bytes each.
fn many_deltas(n: usize, size: usize) -> Reply {
    let mut body = String::new();
    let piece = "x".repeat(size);
    for _ in 0..n {
        body.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c", "object": "chat.completion.chunk", "model": "fake-model",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        ));
    }
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "model": "fake-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    Reply::raw_sse(&body)
}

#[test]
fn an_editor_that_stops_reading_cannot_hang_crush_and_nothing_is_lost() {
    // Far more than a pipe and the queue hold: the session waits on the editor.
    let server = FakeServer::with_script(vec![many_deltas(4000, 1000)]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::spawn(&env, &[], &[("CRUSH_TERM_GRACE", "2")], false);
    let mut out = BufReader::new(ed.child.stdout.take().unwrap());
    let mut line = String::new();
    ed.request("initialize", json!({"protocolVersion": 1}));
    out.read_line(&mut line).unwrap();
    ed.request(
        "session/new",
        json!({"cwd": env.project(), "mcpServers": []}),
    );
    line.clear();
    out.read_line(&mut line).unwrap();
    let sid = serde_json::from_str::<Value>(&line).unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    ed.prompt(&sid, "talk a lot");
    // The model answers; then the editor reads nothing more and goes away.
    let deadline = Instant::now() + crate::support::RUN_TIMEOUT;
    while turn_requests(&server).is_empty() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("stopped reading"), "{stderr}");
    drop(out);
    // The turn was canceled and what it had is stored.
    let parts = env.stored_parts(&sid);
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "text"
                && p["data"]["text"].as_str().unwrap_or("").starts_with("xxxx")),
        "{parts:#?}"
    );
}

#[test]
fn stdin_closing_mid_turn_cancels_it_and_crush_exits() {
    let server = stalled_server(&["waiting"]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let (mut ed, sid, p) = streaming(&env, "wait");
    drop(ed.stdin.take());
    // The prompt is still answered (the editor may read on), then crush exits.
    assert_eq!(ed.result(p)["stopReason"], "cancelled");
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_stored_canceled(&env, &sid);
}

#[test]
fn a_prompt_takes_text_links_embedded_files_and_images() {
    const PNG: &str = crate::support::mcp::PNG;
    for (dialect, images) in [
        (Dialect::Anthropic, true),
        (Dialect::OpenAi, true),
        (Dialect::OpenAi, false),
    ] {
        let server = FakeServer::with_script(vec![Reply::text("Seen.")]);
        title_route(&server);
        let env = TestEnv::new();
        let mut config = env.config_for(&server, dialect);
        config["providers"]["fake"]["models"][0]["supports_attachments"] = json!(images);
        env.write_config(&config);
        let mut ed = Editor::start(&env, &[], &[]);
        let init = ed.initialize(false);
        assert_eq!(
            init["agentCapabilities"]["promptCapabilities"]["image"],
            images
        );
        let sid = ed.new_session(&env);
        let file = env.project().canonicalize().unwrap().join("src/lib.rs");
        let id = ed.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [
                {"type": "text", "text": "compare "},
                {"type": "resource", "resource": {"uri": format!("file://{}", file.display()),
                    "mimeType": "text/x-rust", "text": "pub fn unsaved() {}"}},
                {"type": "text", "text": " with "},
                {"type": "resource_link", "uri": "https://example.org/spec", "name": "the spec"},
                {"type": "image", "mimeType": "image/png", "data": PNG}
            ]}),
        );
        assert_eq!(ed.result(id)["stopReason"], "end_turn");
        let body = turn_requests(&server)[0].body.to_string();
        assert!(
            body.contains("compare @src/lib.rs with [the spec](https://example.org/spec)"),
            "{body}"
        );
        assert!(body.contains("<file path='src/lib.rs'>"), "{body}");
        assert!(body.contains("pub fn unsaved() {}"), "{body}");
        assert_eq!(body.contains(PNG), images, "{body}");
        if !images {
            assert!(
                body.contains("not sent, this model is sent text only"),
                "{body}"
            );
        }
        // Audio is not offered, and is refused.
        let id = ed.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [
                {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}]}),
        );
        assert_eq!(ed.error(id)["code"], -32602);
        assert_eq!(ed.finish().0, 0);
        // The attachments are stored with the prompt, as Go Crush stores them.
        let parts = env.stored_parts(&sid);
        assert_eq!(
            parts.iter().filter(|p| p["type"] == "binary").count(),
            2,
            "{parts:#?}"
        );
    }
}

#[test]
fn a_session_waiting_on_the_user_holds_up_no_other() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "touch a.txt"})),
        Reply::text("B is done."),
        Reply::text("A is done."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let a = ed.new_session(&env);
    let b = ed.new_session(&env);
    let pa = ed.prompt(&a, "make a.txt");
    let ask = ed.client_request("session/request_permission");
    assert_eq!(ask["params"]["sessionId"], a.as_str());
    // A waits for its answer; B runs a whole turn meanwhile.
    let pb = ed.prompt(&b, "something else");
    assert_eq!(ed.result(pb)["stopReason"], "end_turn");
    assert_eq!(
        text_of(&ed.updates(&b), "agent_message_chunk"),
        "B is done."
    );
    ed.respond(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    assert_eq!(ed.result(pa)["stopReason"], "end_turn");
    assert!(env.project().join("a.txt").exists());
    assert_eq!(
        text_of(&ed.updates(&a), "agent_message_chunk"),
        "A is done."
    );
    assert_eq!(ed.finish().0, 0);
    assert_eq!(sessions(&env).len(), 2);
}

#[test]
fn custom_commands_are_offered_to_the_editor_and_expanded_in_a_prompt() {
    let server = FakeServer::with_script(vec![Reply::text("Reviewed.")]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.write_project_file(
        ".crush/commands/review.md",
        "---\ndescription: Review a file\n---\nReview $ARGUMENTS carefully.\n",
    );
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(&env);
    let offered = ed.until("the commands update", |v| {
        v["params"]["update"]["sessionUpdate"] == "available_commands_update"
    });
    let commands = offered["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .clone();
    let review = commands
        .iter()
        .find(|c| c["name"] == "project:review")
        .unwrap_or_else(|| panic!("{commands:#?}"));
    assert_eq!(review["description"], "Review a file");
    let id = ed.prompt(&sid, "/review src/lib.rs");
    assert_eq!(ed.result(id)["stopReason"], "end_turn");
    let body = turn_requests(&server)[0].body.to_string();
    assert!(body.contains("Review src/lib.rs carefully."), "{body}");
    assert!(!body.contains("/review"), "{body}");
    assert_eq!(ed.finish().0, 0);
}

#[test]
fn the_todos_tool_reaches_the_editor_as_a_plan() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "todos",
            json!({"todos": [
                {"content": "Read the code", "status": "completed", "active_form": "Reading"},
                {"content": "Fix the bug", "status": "in_progress", "active_form": "Fixing"},
                {"content": "Run the tests", "status": "pending", "active_form": "Testing"}
            ]}),
        ),
        Reply::text("Planned."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(&env);
    let id = ed.prompt(&sid, "plan the fix");
    assert_eq!(ed.result(id)["stopReason"], "end_turn");
    let updates = ed.updates(&sid);
    let plan = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan")
        .unwrap_or_else(|| panic!("{updates:#?}"));
    let entries: Vec<(String, String)> = plan["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap().to_string(),
                e["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("Read the code".to_string(), "completed".to_string()),
            ("Fix the bug".to_string(), "in_progress".to_string()),
            ("Run the tests".to_string(), "pending".to_string()),
        ]
    );
    assert_eq!(ed.finish().0, 0);
}

#[test]
fn the_editor_is_offered_agents_and_lists_the_agent_files_without_the_model() {
    let server = FakeServer::start();
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.write_project_file(
        ".crush/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews diffs.\ntools: view\n---\nReview.\n",
    );
    env.write_project_file(
        ".claude/agents/runner.md",
        "---\nname: runner\ndescription: Runs.\ntools: bash\n---\nRun.\n",
    );
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(&env);
    let offered = ed.until("the commands update", |v| {
        v["params"]["update"]["sessionUpdate"] == "available_commands_update"
    });
    let commands = offered["params"]["update"]["availableCommands"].clone();
    assert!(
        commands
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "agents"),
        "{commands:#}"
    );
    let id = ed.prompt(&sid, "/agents");
    assert_eq!(ed.result(id)["stopReason"], "end_turn");
    let text: String = ed
        .updates(&sid)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(text.contains("reviewer  [project]  active"), "{text}");
    assert!(
        text.contains("runner  [project (Claude Code)]  rejected\n"),
        "{text}"
    );
    assert!(text.contains("the project is not trusted"), "{text}");
    assert!(turn_requests(&server).is_empty(), "the model was called");
}

#[test]
fn the_plan_mode_offers_read_only_tools_and_refuses_a_write() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("write", json!({"file_path": "x.txt", "content": "no"})),
        Reply::text("1. Do it"),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let r = ed.call(
        "session/new",
        json!({"cwd": env.project(), "mcpServers": []}),
    );
    let modes: Vec<&str> = r["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(modes.contains(&"plan"), "{modes:?}");
    let sid = r["sessionId"].as_str().unwrap().to_string();
    let id = ed.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "plan"}),
    );
    ed.result(id);
    let p = ed.prompt(&sid, "plan it");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let reqs = turn_requests(&server);
    let names = reqs[0].tool_names();
    assert!(names.contains(&"view".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "write" || n == "bash"),
        "{names:?}"
    );
    assert!(
        reqs[1].tool_results()[0].1.contains("Plan mode: write"),
        "{:?}",
        reqs[1].tool_results()
    );
    // Refused before any question: nothing was asked, nothing written.
    assert!(
        ed.seen
            .iter()
            .all(|v| v["method"] != "session/request_permission")
    );
    assert!(!env.project().join("x.txt").exists());
    assert_eq!(ed.finish().0, 0);
}

/// A second project beside the test's own (a git repository of its own, so its own project
/// root, `.crush.json` and `.env`).
fn second_project(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.root().join("project-b");
    std::fs::create_dir_all(&dir).unwrap();
    env.git_init(&dir);
    dir
}

#[test]
fn sessions_of_two_projects_each_see_their_own_env_and_dotenv() {
    let show = "printf '%s|%s|%s' \"$GREETING\" \"$FROM_DOTENV\" \"${ONLY_A:-unset}\" > seen.txt";
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": show})),
        Reply::text("A done."),
        Reply::tool_call("bash", json!({"command": show})),
        Reply::text("B done."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    // The provider's key comes from the session's own variables.
    let mut cfg = env.config_for(&server, Dialect::Anthropic);
    cfg["providers"]["fake"]["api_key"] = json!("$SESSION_KEY");
    env.write_config(&cfg);
    let a = env.project();
    let b = second_project(&env);
    for (dir, name, extra) in [(&a, "a", ", \"ONLY_A\": \"1\""), (&b, "b", "")] {
        std::fs::write(
            dir.join(".crush.json"),
            format!("{{\"env\": {{\"GREETING\": \"hi-{name}\", \"SESSION_KEY\": \"key-{name}\"{extra}}}}}"),
        )
        .unwrap();
        std::fs::write(dir.join(".env"), format!("FROM_DOTENV=dot-{name}\n")).unwrap();
    }
    let mut ed = Editor::start(&env, &["--yolo"], &[("CRUSH_TRUST_PROJECT", "1")]);
    ed.initialize(false);
    let open = |ed: &mut Editor, dir: &std::path::Path| -> String {
        let r = ed.call("session/new", json!({"cwd": dir, "mcpServers": []}));
        r["sessionId"].as_str().unwrap().to_string()
    };
    let sa = open(&mut ed, &a);
    let sb = open(&mut ed, &b);
    let p = ed.prompt(&sa, "show a");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let p = ed.prompt(&sb, "show b");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    let seen = |dir: &std::path::Path| std::fs::read_to_string(dir.join("seen.txt")).unwrap();
    assert_eq!(seen(&a), "hi-a|dot-a|1");
    assert_eq!(seen(&b), "hi-b|dot-b|unset");
    let keys: Vec<String> = turn_requests(&server)
        .iter()
        .map(|r| r.header("x-api-key").unwrap_or("").to_string())
        .collect();
    assert_eq!(keys, ["key-a", "key-a", "key-b", "key-b"]);
}

/// `crush.db` is left in rollback-journal mode, as `crush run` leaves it: a reader that opens it
/// later makes no `-wal` or `-shm` beside it (byte 18 of SQLite's header: 1, not WAL's 2).
fn assert_left_without_wal(env: &TestEnv) {
    super::cancel::assert_db_at_rest(env);
    let head = std::fs::read(env.project().join(".crush/crush.db")).unwrap();
    assert_eq!(head[18], 1, "crush.db is still in WAL mode");
}

#[test]
fn an_editor_that_closes_stdin_or_cancels_first_leaves_the_database_closed() {
    // A finished turn, then the editor closes stdin.
    let server = FakeServer::with_script(vec![Reply::text("done")]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(&env);
    let p = ed.prompt(&sid, "hello");
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_left_without_wal(&env);

    // A streaming turn the editor cancels, then stdin closes.
    let server = stalled_server(&["half an answer"]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let (mut ed, sid, p) = streaming(&env, "wait");
    ed.notify("session/cancel", json!({"sessionId": sid}));
    assert_eq!(ed.result(p)["stopReason"], "cancelled");
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_left_without_wal(&env);
    assert_stored_canceled(&env, &sid);
}

#[test]
fn a_claude_code_commands_shell_line_is_asked_in_the_editor_and_its_output_sent() {
    let server = FakeServer::with_script(vec![Reply::text("Stamped.")]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.write_project_file(
        ".claude/commands/stamp.md",
        "Stamp: !`touch stamped.txt && echo stamp-made`\n",
    );
    let mut ed = Editor::start(&env, &[], &[]);
    ed.initialize(false);
    let sid = ed.new_session(&env);
    let stamped = env.project().join("stamped.txt");

    // Allowed once: the command runs and its output is in the prompt.
    let p = ed.prompt(&sid, "/stamp");
    let ask = ed.client_request("session/request_permission");
    assert_eq!(ask["params"]["sessionId"], sid.as_str());
    let offered: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["allow_once", "allow_always", "reject_once"]);
    assert!(!stamped.exists(), "asked before running");
    ed.respond(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    assert_eq!(ed.result(p)["stopReason"], "end_turn");
    assert!(stamped.exists());
    let asked_for = ed
        .updates(&sid)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap_or_default();
    assert!(
        asked_for["title"]
            .as_str()
            .unwrap_or("")
            .contains("touch stamped.txt"),
        "{asked_for}"
    );
    let requests = turn_requests(&server);
    assert_eq!(requests.len(), 1);
    let sent = requests[0].user_texts().join("\n");
    assert!(sent.contains("Stamp: stamp-made"), "{sent}");
    assert!(!sent.contains("!`"), "{sent}");

    // Rejected: nothing runs, nothing goes to the model, the editor is told why.
    std::fs::remove_file(&stamped).unwrap();
    let p = ed.prompt(&sid, "/stamp");
    let ask = ed.client_request("session/request_permission");
    ed.respond(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    assert_eq!(ed.result(p)["stopReason"], "refusal");
    assert!(!stamped.exists());
    assert_eq!(turn_requests(&server).len(), 1);
    let told = text_of(&ed.updates(&sid), "agent_message_chunk");
    assert!(
        told.contains("/project:stamp was not sent to the model")
            && told.contains("touch stamped.txt"),
        "{told}"
    );
    let (code, stderr) = ed.finish();
    assert_eq!(code, 0, "{stderr}");
}
