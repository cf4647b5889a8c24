//! `crush` with no command (the REPL), driven through a pipe and through a pseudo-terminal
//! (tmux) against the fake model server.

use crate::support::env::run_command;
use crate::support::{
    Dialect, FakeServer, Output, RUN_TIMEOUT, Recorded, Reply, TestEnv, ToolCall,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TITLE_MARK: &str = "title of a conversation";

/// Title requests are answered off-script, so the script holds only the turns' replies.
pub(super) fn title_route(server: &FakeServer, title: &str) {
    server.route_when(
        |r| r.system_text().contains(TITLE_MARK),
        vec![Reply::text(title)],
    );
}

fn is_title(r: &Recorded) -> bool {
    r.system_text().contains(TITLE_MARK)
}

/// Model requests of the turns (title requests left out).
pub(super) fn turns(server: &FakeServer) -> Vec<Recorded> {
    server
        .model_requests()
        .into_iter()
        .filter(|r| !is_title(r))
        .collect()
}

pub(super) fn setup(replies: Vec<Reply>) -> (FakeServer, TestEnv) {
    let server = FakeServer::with_script(replies);
    title_route(&server, "Generated Title");
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    (server, env)
}

fn repl(env: &TestEnv, args: &[&str], input: &str) -> Output {
    let out = env.run(args, Some(input));
    assert_no_escapes(&out);
    out
}

fn assert_no_escapes(out: &Output) {
    assert!(
        !out.stdout.contains('\x1b') && !out.stderr.contains('\x1b'),
        "escape codes in piped output:\n{out:?}"
    );
}

fn sessions(env: &TestEnv) -> Vec<Value> {
    let out = env.run(&["sessions", "list", "--json"], None);
    out.assert_success();
    serde_json::from_str::<Value>(&out.stdout)
        .expect("sessions list --json")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn show(env: &TestEnv, id: &str) -> Value {
    let out = env.run(&["sessions", "show", id, "--json"], None);
    out.assert_success();
    serde_json::from_str(&out.stdout).expect("sessions show --json")
}

/// Every part of every message, as `(role, part)`.
fn parts(session: &Value) -> Vec<(String, Value)> {
    session["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| {
            let role = m["role"].as_str().unwrap_or("").to_string();
            m["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |p| (role.clone(), p))
        })
        .collect()
}

#[test]
fn without_colour_a_terminal_still_gets_answers_wrapped_at_words() {
    let long =
        "The sea is wide and deep, and ships cross it with care; **every** sailor knows its moods.";
    let (_server, env) = setup(vec![Reply::text(long)]);
    let out = env.run_on_terminal_with(
        &[],
        Some("tell me of the sea\n"),
        &[("NO_COLOR", "1"), ("COLUMNS", "30")],
    );
    out.assert_success();
    let colour = regex_lite::Regex::new(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;)[0-9;]*m").unwrap();
    assert!(
        !colour.is_match(&out.stdout),
        "no colours: {:?}",
        out.stdout
    );
    let text = regex_lite::Regex::new(r"\x1b\[[0-9;]*m")
        .unwrap()
        .replace_all(&out.stdout, "")
        .into_owned();
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .collect();
    assert!(lines.len() >= 3, "wrapped: {lines:?}");
    assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:?}");
    let words = |s: &str| {
        s.replace("**", "")
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(words(&lines.join(" ")), words(long));
}

#[test]
fn a_filtered_or_empty_answer_is_shown_as_an_error() {
    let empty = Reply::stream(crate::support::Stream {
        thinking: None,
        text: None,
        tool_calls: Vec::new(),
        usage: None,
        stop_reason: None,
        fault: None,
    });
    let (_server, env) = setup(vec![
        Reply::text("Half an").stop_reason("content_filter"),
        empty,
    ]);
    let out = repl(&env, &[], "first\nsecond\n");
    assert_eq!(out.stdout, "Half an\n");
    for want in [
        "error: the provider's content filter stopped the answer: what was shown is incomplete",
        "error: the model returned an empty answer",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
}

#[test]
fn a_single_slot_local_server_answers_the_turn_before_the_title() {
    let (server, env) = setup(vec![Reply::text("The answer.")]);
    server.set_single_slot(Duration::from_millis(300));
    let out = repl(&env, &[], "hello there\n");
    out.assert_success();
    assert_eq!(out.stdout, "The answer.\n", "{}", out.stderr);
    assert_eq!(server.abandoned(), 0, "a side request interrupted the turn");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 2, "the turn and the title");
    assert!(
        !is_title(&reqs[0]) && is_title(&reqs[1]),
        "the title comes after"
    );
    assert_eq!(sessions(&env)[0]["title"], "Generated Title");
}

#[test]
fn prompts_from_a_pipe_stream_answers_and_skip_empty_lines() {
    let (server, env) = setup(vec![
        Reply::text("First answer."),
        Reply::text("Second answer."),
    ]);
    let out = repl(&env, &[], "\n   \nfirst question\n\nsecond question\n");
    out.assert_success();
    assert_eq!(out.stdout, "First answer.\nSecond answer.\n");
    let t = turns(&server);
    assert_eq!(t.len(), 2);
    assert_eq!(
        t[1].user_texts(),
        vec!["first question".to_string(), "second question".to_string()],
        "the second prompt continues the same session"
    );
    let list = sessions(&env);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["title"], "Generated Title");
    let id = list[0]["id"].as_str().unwrap();
    assert!(
        out.stderr.contains(&format!("crush -s {}", &id[..7])),
        "{}",
        out.stderr
    );
    // The title call is in the ledger too.
    let export = env.run(&["sessions", "export", &id[..8], "--format", "json"], None);
    export.assert_success();
    let doc: Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(doc["usage"].as_array().unwrap().len(), 3, "{doc:#}");
    assert_eq!(doc["meta"]["total_prompt_tokens"], 300);
    assert_eq!(
        doc["meta"]["prompt_tokens"], 100,
        "Go Crush's: the last call"
    );
}

#[test]
fn title_falls_back_to_the_first_words_when_the_title_call_fails() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    server.route_when(
        |r| r.system_text().contains(TITLE_MARK),
        vec![Reply::api_error(400, "invalid_request_error", "no titles")],
    );
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    repl(&env, &[], "please refactor the parser module\n").assert_success();
    assert_eq!(
        sessions(&env)[0]["title"],
        "please refactor the parser module"
    );
}

#[test]
fn multi_line_blocks_and_continued_lines_are_one_prompt_each() {
    let (server, env) = setup(vec![Reply::text("a"), Reply::text("b"), Reply::text("c")]);
    let input = "{\nline one\n  /not a command\n}\nfirst \\\nsecond\n{py\n}\npy}\n";
    repl(&env, &[], input).assert_success();
    let t = turns(&server);
    assert_eq!(t.len(), 3);
    assert_eq!(
        t[2].user_texts(),
        vec![
            "line one\n  /not a command".to_string(),
            "first \nsecond".to_string(),
            "}".to_string()
        ]
    );
}

#[test]
fn slash_commands_with_prefixes_and_suggestions() {
    let (server, env) = setup(vec![Reply::text("answer")]);
    let input = "/he\n/hlep\n/co\n/sessions\nhello\n/ses\n/cos\n/mod\n/model small fake/fake-model\n\
                 /perm allow grep\n/permissions\n/opt progress false\n/option\n/new\n/cost\n/quit\nnever sent\n";
    let out = repl(&env, &[], input);
    out.assert_success();
    assert!(out.stdout.contains("/resume ID"), "help:\n{}", out.stdout);
    assert!(
        out.stderr
            .contains("unknown command /hlep; did you mean /help?"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("/co is ambiguous: it could be /compact or /cost"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("No sessions yet"), "{}", out.stderr);
    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    assert!(
        out.stdout.contains(&format!("* {}", &id[..7])),
        "/sessions marks the current session:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("model calls  2"),
        "the turn and the title: {}",
        out.stdout
    );
    assert!(
        out.stdout.contains("large  fake/fake-model"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("model small = fake/fake-model (for this session only)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("allowed_tools  grep"), "{}", out.stdout);
    assert!(out.stdout.contains("progress  false"), "{}", out.stdout);
    assert!(
        out.stderr.contains("No session yet"),
        "/cost after /new: {}",
        out.stderr
    );
    assert_eq!(turns(&server).len(), 1, "nothing after /quit was sent");
}

#[test]
fn continue_and_resume_pick_up_the_conversation() {
    let (server, env) = setup(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
    ]);
    repl(&env, &[], "alpha\n").assert_success();
    let first = sessions(&env)[0]["id"].as_str().unwrap().to_string();

    let out = repl(&env, &["-C"], "beta\n");
    out.assert_success();
    assert!(out.stderr.contains("Resumed session"), "{}", out.stderr);
    assert_eq!(
        turns(&server)[1].user_texts(),
        vec!["alpha".to_string(), "beta".to_string()]
    );
    assert_eq!(sessions(&env).len(), 1);

    // A new session, then back to the first one by prefix; an unknown id is only an error.
    let out = repl(
        &env,
        &[],
        &format!("gamma\n/resume zzzz\n/resume {}\ndelta\n", &first[..6]),
    );
    out.assert_success();
    assert!(
        out.stderr.contains("no session matches 'zzzz'"),
        "{}",
        out.stderr
    );
    let t = turns(&server);
    assert_eq!(t[2].user_texts(), vec!["gamma".to_string()]);
    assert_eq!(
        t[3].user_texts(),
        vec!["alpha".to_string(), "beta".to_string(), "delta".to_string()]
    );
    assert_eq!(sessions(&env).len(), 2);

    // -s with a prefix, in the REPL and in run.
    server.push(Reply::text("five"));
    let out = env.run(&["run", "-s", &first[..8], "epsilon"], None);
    out.assert_success();
    assert_eq!(turns(&server)[4].user_texts().len(), 4);
    let out = env.run(&["-s", "zzzz"], Some("hi\n"));
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("no session matches"), "{}", out.stderr);
}

#[test]
fn export_in_both_formats_from_the_repl_and_the_command_line() {
    let (_server, env) = setup(vec![Reply::text("The answer is `42`.")]);
    let out = repl(
        &env,
        &[],
        "what is it?\n/export\n/export json out.json\n/expo md notes/x.md\n",
    );
    out.assert_success();
    assert!(out.stdout.contains("# "), "{}", out.stdout);
    assert!(
        out.stdout.contains("## User\n\nwhat is it?"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("## Assistant (fake-model)\n\nThe answer is `42`."),
        "{}",
        out.stdout
    );
    let doc: Value =
        serde_json::from_str(&env.read_project_file("out.json")).expect("exported JSON");
    assert_eq!(doc["messages"].as_array().unwrap().len(), 2);
    assert!(doc["meta"]["id"].is_string());
    assert!(
        out.stderr.contains("cannot write"),
        "a missing directory is an error: {}",
        out.stderr
    );

    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    let md = env.run(&["sessions", "export", &id[..8]], None);
    md.assert_success();
    assert!(
        md.stdout.contains("## User\n\nwhat is it?"),
        "{}",
        md.stdout
    );
    let js = env.run(&["sessions", "export", &id, "--json"], None);
    js.assert_success();
    let v: Value = serde_json::from_str(&js.stdout).unwrap();
    assert_eq!(v["meta"]["id"], id.as_str());

    env.run(&["sessions", "rename", &id[..8], "Renamed", "title"], None)
        .assert_success();
    assert_eq!(sessions(&env)[0]["title"], "Renamed title");
    let listed = env.run(&["sessions", "list"], None);
    assert!(
        listed.stdout.starts_with(&format!("{} ", &id[..7])),
        "Go Crush's 7-digit hash ids: {}",
        listed.stdout
    );
    env.run(&["sessions", "delete", &id[..8]], None)
        .assert_success();
    assert!(sessions(&env).is_empty());
    assert_eq!(env.run(&["sessions", "delete", &id], None).code, 2);
}

#[test]
fn compact_summarizes_the_session_and_later_turns_start_from_the_summary() {
    let (server, env) = setup(vec![
        Reply::text("hi"),
        Reply::text("SUMMARY: we said hello."),
        Reply::text("continuing"),
    ]);
    let out = repl(&env, &[], "hello\n/compact\nnext\n");
    out.assert_success();
    assert!(out.stderr.contains("Compacted"), "{}", out.stderr);
    let t = turns(&server);
    assert_eq!(t.len(), 3);
    assert!(
        t[1].user_texts().last().unwrap().contains("summary"),
        "{:?}",
        t[1].user_texts()
    );
    // The next turn starts from the summary, not from "hello".
    let last = t[2].user_texts();
    assert_eq!(last.len(), 2, "{last:?}");
    assert!(last[0].contains("SUMMARY: we said hello."), "{last:?}");
    assert_eq!(last[1], "next");
    // Same session; the summary call is in its ledger: turn, title, summary, turn.
    let list = sessions(&env);
    assert_eq!(list.len(), 1);
    let id = list[0]["id"].as_str().unwrap();
    let doc: Value =
        serde_json::from_str(&env.run(&["sessions", "export", id, "--json"], None).stdout).unwrap();
    assert_eq!(doc["usage"].as_array().unwrap().len(), 4);
}

#[test]
fn bang_runs_a_command_and_records_it_as_a_shell_command_part() {
    let (server, env) = setup(vec![Reply::text("I see the file.")]);
    env.write_project_file("hello.txt", "hi there\n");
    let out = repl(&env, &[], "!cat hello.txt; exit 4\nwhat did you see?\n");
    out.assert_success();
    assert!(out.stdout.starts_with("hi there\n"), "{}", out.stdout);
    assert!(out.stderr.contains("exit 4"), "{}", out.stderr);
    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    let s = show(&env, &id);
    let shell: Vec<Value> = parts(&s)
        .into_iter()
        .filter(|(_, p)| p["type"] == "shell_command")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(shell.len(), 1, "{s:#}");
    assert_eq!(shell[0]["data"]["command"], "cat hello.txt; exit 4");
    assert_eq!(shell[0]["data"]["output"], "hi there\n");
    assert_eq!(shell[0]["data"]["exit_code"], 4);
    // The model sees it with the next prompt.
    let texts = turns(&server)[0].user_texts().join("\n");
    assert!(texts.contains("hi there"), "{texts}");
}

#[test]
fn a_prompt_while_the_server_is_down_is_an_error_and_the_repl_goes_on() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {"fake": {"type": "openai-compat", "base_url": format!("http://127.0.0.1:{port}/v1"),
            "api_key": "k", "models": [{"id": "fake-model"}]}},
        "models": {"large": {"provider": "fake", "model": "fake-model"}}
    }));
    let mut cmd = env.crush();
    cmd.env("CRUSH_RETRY_BASE_MS", "1");
    let out = run_command(cmd, Some("hello?\n/sessions\n"), RUN_TIMEOUT);
    assert_no_escapes(&out);
    out.assert_success();
    assert!(out.stderr.contains("error:"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("hello?"),
        "the REPL went on to /sessions: {}",
        out.stdout
    );
}

#[test]
fn permission_yes_runs_the_command() {
    let (_server, env) = setup(vec![
        Reply::tool_call("bash", json!({"command": "echo yes > y.txt"})),
        Reply::text("done"),
    ]);
    let out = repl(&env, &[], "make y.txt\ny\n");
    out.assert_success();
    assert!(
        out.stderr
            .contains("Allow bash: echo yes > y.txt? [y]es / [a]lways this session / [N]o"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("[bash] echo yes > y.txt"),
        "{}",
        out.stderr
    );
    assert_eq!(env.read_project_file("y.txt"), "yes\n");
    assert_eq!(out.stdout, "done\n");
}

#[test]
fn permission_no_ends_the_turn_and_the_model_is_told() {
    let (server, env) = setup(vec![
        Reply::tool_call("bash", json!({"command": "echo no > n.txt"})),
        Reply::text("understood"),
    ]);
    let out = repl(&env, &[], "make n.txt\nn\nwhat now?\n");
    out.assert_success();
    assert!(!env.project().join("n.txt").exists());
    assert!(
        out.stderr.contains("permission was refused"),
        "{}",
        out.stderr
    );
    let t = turns(&server);
    assert_eq!(
        t.len(),
        2,
        "no model call after the refusal until the next prompt"
    );
    let results = t[1].tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("refused"), "{results:?}");
    assert_eq!(
        t[1].user_texts().last().map(String::as_str),
        Some("what now?")
    );
}

#[test]
fn permission_always_covers_that_exact_command_for_the_session() {
    let (_server, env) = setup(vec![
        Reply::tool_call("bash", json!({"command": "echo a >> a.txt"})),
        Reply::tool_call("bash", json!({"command": "echo a >> a.txt"})),
        Reply::tool_call("bash", json!({"command": "echo b >> a.txt"})),
        Reply::text("done"),
    ]);
    // One "always" for the first command; the repeat is not asked; a different command is.
    let out = repl(&env, &[], "append\na\ny\n");
    out.assert_success();
    assert_eq!(env.read_project_file("a.txt"), "a\na\nb\n");
    assert_eq!(
        out.stderr.matches("Allow bash:").count(),
        2,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Allow bash: echo b >> a.txt?"));
}

#[test]
fn write_shows_the_diff_and_always_covers_that_tool_in_that_directory() {
    let (server, env) = setup(vec![
        Reply::tool_call("write", json!({"file_path": "a.txt", "content": "alpha\n"})),
        Reply::tool_call("write", json!({"file_path": "b.txt", "content": "beta\n"})),
        Reply::tool_call(
            "write",
            json!({"file_path": "sub/c.txt", "content": "gamma\n"}),
        ),
    ]);
    // The denial ends the turn: no fourth model request.
    let out = repl(&env, &[], "write files\nalways\nn\n");
    out.assert_success();
    assert!(
        out.stderr.contains("+alpha"),
        "the diff is shown: {}",
        out.stderr
    );
    assert_eq!(env.read_project_file("a.txt"), "alpha\n");
    assert_eq!(
        env.read_project_file("b.txt"),
        "beta\n",
        "same tool, same directory"
    );
    assert!(
        !env.project().join("sub/c.txt").exists(),
        "another directory is asked"
    );
    assert_eq!(
        out.stderr.matches("Allow write:").count(),
        2,
        "{}",
        out.stderr
    );
    assert_eq!(turns(&server).len(), 3);
}

/// A running REPL fed through a pipe, its stderr and stdout watched live.
struct Live {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::sync::Arc<std::sync::Mutex<String>>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Live {
    fn start(mut cmd: std::process::Command) -> Live {
        use std::io::Read;
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn crush");
        let watch = |mut r: Box<dyn Read + Send>| {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let b = buf.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = r.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    b.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            });
            buf
        };
        let stdout = watch(Box::new(child.stdout.take().unwrap()));
        let stderr = watch(Box::new(child.stderr.take().unwrap()));
        Live {
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
        }
    }

    fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }

    fn wait_for(&self, what: &str, pred: impl Fn(&str, &str) -> bool) {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let (out, err) = (
                self.stdout.lock().unwrap().clone(),
                self.stderr.lock().unwrap().clone(),
            );
            if pred(&out, &err) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn sigint(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
    }

    /// Closes stdin (Ctrl-D) and returns the exit code.
    fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        self.wait()
    }

    /// Waits for the exit (stdin stays open) and returns the exit code.
    fn wait(mut self) -> i32 {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("crush did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn sigint_twice_at_the_prompt_exits_130() {
    let (_server, env) = setup(vec![]);
    let mut live = Live::start(env.crush());
    // Ready once it answered a command (the SIGINT handler is in place by then).
    live.send("/sessions");
    live.wait_for("/sessions", |_, err| err.contains("No sessions yet"));
    live.sigint();
    live.wait_for("the hint", |_, err| err.contains("Ctrl-C again"));
    assert!(
        live.child.try_wait().unwrap().is_none(),
        "one Ctrl-C does not exit"
    );
    live.sigint();
    assert_eq!(live.wait(), 130);
}

#[test]
fn ctrl_c_during_a_tool_kills_it_and_the_session_goes_on() {
    let (server, env) = setup(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "touch started; sleep 30; echo late > late.txt"}),
        ),
        Reply::text("after the cancel"),
    ]);
    let mut live = Live::start(env.crush());
    live.send("run the slow thing");
    live.send("y");
    // Once the command runs (not merely announced), the answer "y" was consumed.
    let started = env.project().join("started");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    live.sigint();
    live.wait_for("the cancel notice", |_, err| err.contains("canceled"));
    live.send("next");
    live.wait_for("the next answer", |out, _| out.contains("after the cancel"));
    assert_eq!(live.finish(), 0, "Ctrl-D exits 0");
    assert!(
        !env.project().join("late.txt").exists(),
        "the process group was killed"
    );
    // The interrupted call has a result, so the next request was well-formed.
    let t = turns(&server);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].tool_results().len(), 1, "{:?}", t[1].tool_results());
    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    let reasons: Vec<String> = parts(&show(&env, &id))
        .iter()
        .filter(|(_, p)| p["type"] == "finish")
        .map(|(_, p)| p["data"]["reason"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(reasons, vec!["tool_use", "end_turn"]);
}

/// A tmux server on a private socket, killed when dropped.
pub(super) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(super) fn cmd(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    pub(super) fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["capture-pane", "-p", "-t", "t", "-S", "-200"])
                .stdout,
        )
        .into_owned()
    }

    pub(super) fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        let out = self.cmd(&args);
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Starts crush (with `env`'s environment) in a private tmux server; returns it and the file
/// the wrapping shell writes crush's exit status to (then the terminal's mode, `stty -a`, to
/// `stty` beside it).
pub(super) fn start_in_tmux(env: &TestEnv, name: &str) -> (Tmux, std::path::PathBuf) {
    start_in_tmux_with(env, name, &[], &[])
}

/// `start_in_tmux` with arguments for crush and more environment variables.
pub(super) fn start_in_tmux_with(
    env: &TestEnv,
    name: &str,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (Tmux, std::path::PathBuf) {
    start_in_tmux_at(env, name, args, vars, 120)
}

/// `start_in_tmux_with` on a terminal `columns` wide.
pub(super) fn start_in_tmux_at(
    env: &TestEnv,
    name: &str,
    args: &[&str],
    vars: &[(&str, &str)],
    columns: u16,
) -> (Tmux, std::path::PathBuf) {
    // The same environment as env.run, written out as a shell command for tmux.
    let cmd = env.crush();
    // The shell survives the terminal's Ctrl-C (a trap, unlike an ignore, is not inherited) to
    // write crush's exit status.
    let mut script = format!(
        "trap true INT; cd {} && env -i",
        shell_quote(&env.project().to_string_lossy())
    );
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            script.push_str(&format!(
                " {}={}",
                k.to_string_lossy(),
                shell_quote(&v.to_string_lossy())
            ));
        }
    }
    script.push_str(" TERM=screen");
    for (k, v) in vars {
        script.push_str(&format!(" {k}={}", shell_quote(v)));
    }
    for k in ["PATH"] {
        if let Ok(v) = std::env::var(k) {
            script.push_str(&format!(" {k}={}", shell_quote(&v)));
        }
    }
    let status_file = env.root().join("status");
    let mut argv = shell_quote(env!("CARGO_BIN_EXE_crush"));
    for a in args {
        argv.push(' ');
        argv.push_str(&shell_quote(a));
    }
    // The mode first: the status file is what tests wait for.
    script.push_str(&format!(
        " {argv}; code=$?; stty -a > {}; echo $code > {}",
        shell_quote(&env.root().join("stty").to_string_lossy()),
        shell_quote(&status_file.to_string_lossy())
    ));
    let tmux = Tmux {
        socket: format!("crush-test-{name}-{}", std::process::id()),
    };
    let out = tmux.cmd(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        &columns.to_string(),
        "-y",
        "40",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
    (tmux, status_file)
}

pub(super) fn tmux_available() -> bool {
    std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok()
}

pub(super) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Waits for the first model request (not a title call).
fn wait_for_turn(server: &FakeServer) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    while turns(server).is_empty() {
        assert!(Instant::now() < deadline, "the turn never started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The row of the activity line on `screen`, if shown.
fn activity_row(screen: &str) -> Option<&str> {
    screen.lines().find(|l| l.contains("Ctrl-C cancels"))
}

/// The activity line is up within 200 ms of a model call that keeps the user waiting, counts
/// the seconds, and is gone once the call ends; in the REPL and in `crush run`, at 80 and 120
/// columns.
#[test]
fn the_activity_line_shows_while_the_model_is_silent_and_is_erased_after() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    for (columns, run) in [(80, false), (120, true)] {
        let (server, env) = setup(vec![Reply::stall(Duration::from_secs(60))]);
        let args: &[&str] = if run { &["run", "wait for it"] } else { &[] };
        let name = format!("activity-{columns}");
        let (tmux, status_file) = start_in_tmux_at(&env, &name, args, &[], columns);
        // The screen stays after `crush run` exits.
        tmux.cmd(&["set-option", "-t", "t", "remain-on-exit", "on"]);
        if !run {
            tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
            tmux.keys(&["wait for it", "Enter"]);
        }
        wait_for_turn(&server);
        let seen = Instant::now();
        let screen = tmux.wait_for("the activity line", |s| activity_row(s).is_some());
        assert!(
            seen.elapsed() < Duration::from_millis(200),
            "the activity line took {:?}:\n{screen}",
            seen.elapsed()
        );
        let row = activity_row(&screen).unwrap().to_string();
        assert!(row.contains("waiting for the model"), "{screen}");
        assert!(row.chars().count() < columns as usize, "{row}");
        // It is animated: the seconds go on while the model says nothing.
        tmux.wait_for("the seconds to count", |s| {
            activity_row(s).is_some_and(|r| r.contains(" 2 s "))
        });
        tmux.keys(&["C-c"]);
        let screen = tmux.wait_for("the cancel", |s| {
            s.contains(if run { "interrupted" } else { "canceled" })
        });
        assert!(activity_row(&screen).is_none(), "{screen}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(activity_row(&tmux.screen()).is_none(), "{}", tmux.screen());
        if run {
            let deadline = Instant::now() + RUN_TIMEOUT;
            while !status_file.exists() {
                assert!(Instant::now() < deadline, "crush run did not exit");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// What the model got from a command is previewed under its tool line: the last lines and
/// the exit status, on the terminal (REPL) and on stderr (`crush run`).
#[test]
fn a_commands_output_is_previewed_under_its_tool_line() {
    let script = "seq 1 9; echo done-marker";
    let replies = || {
        vec![
            Reply::tool_call("bash", json!({"command": script})),
            Reply::text("Ran it."),
        ]
    };
    let (_server, env) = setup(replies());
    let out = env.run(&["--yolo", "run", "go"], None);
    out.assert_success();
    let err = &out.stderr;
    let preview: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("[bash]"))
        .collect();
    assert_eq!(
        preview.get(1..6),
        Some(&["  7", "  8", "  9", "  done-marker", "  exit 0"][..]),
        "{err}"
    );
    assert!(!err.contains("  6\n"), "{err}");
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let (_server, env) = setup(replies());
    let (tmux, _) = start_in_tmux_at(&env, "preview", &["--yolo"], &[], 80);
    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    tmux.keys(&["go", "Enter"]);
    let screen = tmux.wait_for("the answer", |s| s.contains("Ran it."));
    assert!(screen.contains("done-marker"), "{screen}");
    assert!(screen.contains("exit 0"), "{screen}");
}

#[test]
fn terminal_smoke_test_with_ctrl_c_mid_stream() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let (server, env) = setup(vec![
        Reply::text("Hello from the terminal."),
        Reply::stall(Duration::from_secs(60)),
        Reply::text("After the cancel."),
    ]);
    let (tmux, status_file) = start_in_tmux(&env, "smoke");

    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    tmux.keys(&["say hello", "Enter"]);
    tmux.wait_for("the answer", |s| s.contains("Hello from the terminal."));

    tmux.keys(&["wait for it", "Enter"]);
    let deadline = Instant::now() + RUN_TIMEOUT;
    while turns(&server).len() < 2 {
        assert!(Instant::now() < deadline, "the second turn never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    tmux.keys(&["C-c"]);
    tmux.wait_for("the cancel notice", |s| s.contains("canceled"));

    // The session goes on after the cancel.
    tmux.keys(&["and now?", "Enter"]);
    tmux.wait_for("the third answer", |s| s.contains("After the cancel."));

    // Ctrl-C twice at an empty prompt exits 130.
    tmux.keys(&["C-c"]);
    tmux.wait_for("the exit hint", |s| s.contains("Ctrl-C again"));
    tmux.keys(&["C-c"]);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let code = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            break s.trim().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "crush did not exit; screen:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, "130", "screen:\n{}", tmux.screen());

    // The session reloads consistently: the canceled answer is kept and marked, and the third
    // turn carried the whole conversation.
    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    let s = show(&env, &id);
    let finishes: Vec<String> = parts(&s)
        .iter()
        .filter(|(_, p)| p["type"] == "finish")
        .map(|(_, p)| p["data"]["reason"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(finishes, vec!["end_turn", "canceled", "end_turn"], "{s:#}");
    assert_eq!(
        turns(&server)[2].user_texts(),
        vec![
            "say hello".to_string(),
            "wait for it".to_string(),
            "and now?".to_string()
        ]
    );
}

#[test]
fn first_start_in_an_untrusted_project_asks_and_lists_what_would_run() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let (_server, env) = setup(Vec::new());
    let marker = env.root().join("crushrc-ran");
    env.write_project_file(
        "crushrc",
        &format!(
            "touch {}\noption progress false\n",
            shell_quote(&marker.to_string_lossy())
        ),
    );
    // Declined: nothing of the project's runs.
    let (tmux, _) = start_in_tmux(&env, "trust-no");
    let screen = tmux.wait_for("the trust question", |s| s.contains("[y/N]"));
    assert!(screen.contains("crushrc"), "lists the crushrc:\n{screen}");
    tmux.keys(&["n", "Enter"]);
    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    assert!(!marker.exists(), "an untrusted crushrc must not run");
    drop(tmux);
    // Accepted: the crushrc runs, and the answer is remembered.
    let (tmux, _) = start_in_tmux(&env, "trust-yes");
    tmux.wait_for("the trust question", |s| s.contains("[y/N]"));
    tmux.keys(&["y", "Enter"]);
    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    assert!(marker.exists(), "a trusted crushrc runs");
    drop(tmux);
    std::fs::remove_file(&marker).unwrap();
    let (tmux, _) = start_in_tmux(&env, "trust-again");
    let screen = tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    assert!(!screen.contains("[y/N]"), "asked again:\n{screen}");
    assert!(marker.exists());
}

#[test]
fn escape_sequences_from_the_model_are_shown_and_cannot_redraw_the_question() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    // The command erases the question's line, moves up and writes a harmless-looking one.
    let attack = "touch pwned # \x1b[2K\r\x1b[1A\x1b[2KAllow bash: ls -la";
    let (_server, env) = setup(vec![Reply::text_then_tools(
        "Plan: \x1b[31mred\x1b[0m then run it.",
        vec![ToolCall::new("bash", json!({ "command": attack }))],
    )]);
    let (tmux, _) = start_in_tmux(&env, "escapes");
    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    tmux.keys(&["do it", "Enter"]);
    let screen = tmux.wait_for("the question", |s| s.contains("[N]o"));
    let question = screen
        .lines()
        .rev()
        .find(|l| l.contains("[N]o"))
        .unwrap()
        .trim_end();
    assert_eq!(
        question,
        "Allow bash: touch pwned # ^[[2K^M^[[1A^[[2KAllow bash: ls -la? [y]es / [a]lways this session / [N]o",
        "screen:\n{screen}"
    );
    assert!(
        !screen.lines().any(|l| l.starts_with("Allow bash: ls -la?")),
        "screen:\n{screen}"
    );
    // The answer and the tool line show the escapes too.
    assert!(
        screen.contains("Plan: ^[[31mred^[[0m then run it."),
        "{screen}"
    );
    assert!(
        screen
            .lines()
            .any(|l| l.contains("bash") && l.contains("touch pwned # ^[[2K^M")),
        "{screen}"
    );
    tmux.keys(&["n"]);
    tmux.wait_for("the refusal", |s| s.contains("permission was refused"));
    assert!(!env.project().join("pwned").exists());
}

#[test]
fn a_multi_line_command_is_shown_above_the_question_that_names_it() {
    let (_server, env) = setup(vec![Reply::tool_call(
        "bash",
        json!({"command": "touch a\nAllow bash: ls? [y]es / [a]lways this session / [N]o"}),
    )]);
    let out = repl(&env, &[], "do it\nn\n");
    out.assert_success();
    assert!(
        out.stderr.contains(
            "  │ touch a\n  │ Allow bash: ls? [y]es / [a]lways this session / [N]o\nAllow bash: the 2 lines above? [y]es / [a]lways this session / [N]o"
        ),
        "{}",
        out.stderr
    );
    assert!(!env.project().join("a").exists());
}

#[test]
fn cost_shows_unreported_tokens_as_unknown_and_the_context_as_estimated() {
    let server = FakeServer::with_script(vec![Reply::text("hi there").without_usage()]);
    server.route_when(
        |r| r.system_text().contains(TITLE_MARK),
        vec![Reply::text("Greeting").without_usage()],
    );
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = repl(&env, &[], "hello\n/cost\n/quit\n");
    out.assert_success();
    assert!(
        out.stdout
            .contains("tokens in    unknown (the server reported no usage)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("tokens out   unknown"),
        "{}",
        out.stdout
    );
    let context = out
        .stdout
        .lines()
        .find(|l| l.starts_with("context"))
        .unwrap_or_default();
    assert!(
        context.starts_with("context      ~") && context.ends_with("(estimated)"),
        "{}",
        out.stdout
    );
}

/// The screen with rows the terminal wrapped joined again: a line longer than the terminal is
/// one the output did not wrap itself.
fn joined_screen(tmux: &Tmux) -> String {
    let out = tmux.cmd(&["capture-pane", "-p", "-J", "-t", "t", "-S", "-200"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn at_prompt(s: &str) -> bool {
    s.lines().any(|l| l.trim_end() == ">")
}

/// At 80 and at 120 columns: an answer wraps between words (a list item under its text, a URL
/// whole), and `/help` fits the terminal.
#[test]
fn answers_and_help_wrap_at_words_to_the_terminal() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let url = "https://example.com/a/really/long/path/that/goes/on/and/on/for/sure";
    let answer = format!(
        "A paragraph with distinctive words such as extraordinary, incomprehensibilities, \
         characteristically and counterrevolutionaries, which never split across two rows of \
         the terminal however narrow it is.\n\n- a list item that is long enough to run past the \
         right edge of an eighty column terminal window, twice over for the wider one: onward \
         and upward and onward again\n\nSee {url} for more."
    );
    for columns in [80u16, 120] {
        let (_server, env) = setup(vec![Reply::text(&answer)]);
        let (tmux, _) = start_in_tmux_at(&env, &format!("wrap{columns}"), &[], &[], columns);
        tmux.wait_for("the prompt", at_prompt);
        tmux.keys(&["explain", "Enter"]);
        let screen = tmux.wait_for("the answer", |s| s.contains("more."));
        for word in [
            "extraordinary,",
            "incomprehensibilities,",
            "characteristically",
            "counterrevolutionaries,",
            "terminal",
            "onward",
            url,
        ] {
            assert!(
                screen.contains(word),
                "{word} broken at {columns}:\n{screen}"
            );
        }
        let rows: Vec<&str> = screen.lines().collect();
        let item = rows
            .iter()
            .position(|l| l.starts_with("• a list item"))
            .unwrap();
        assert!(
            rows[item + 1].starts_with("  ") && !rows[item + 1].starts_with("   "),
            "the item's next row hangs under its text:\n{screen}"
        );
        tmux.wait_for("the prompt", at_prompt);
        tmux.keys(&["/help", "Enter"]);
        tmux.wait_for("the help", |s| s.contains("Ctrl-D quits."));
        let joined = joined_screen(&tmux);
        for l in joined.lines() {
            assert!(
                l.trim_end().chars().count() <= usize::from(columns),
                "a line over {columns} columns: {l:?}\n{joined}"
            );
        }
        assert!(joined.contains("/resume ID"), "{joined}");
    }
}

/// On a terminal a permission question takes one key; Enter alone is its default, no.
#[test]
fn a_single_key_answers_a_permission_question() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let (_server, env) = setup(vec![
        Reply::tool_call("bash", json!({"command": "echo yes > y.txt"})),
        Reply::text("made it"),
        Reply::tool_call("bash", json!({"command": "echo no > n.txt"})),
    ]);
    let (tmux, _) = start_in_tmux_at(&env, "onekey", &[], &[], 80);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["make y", "Enter"]);
    tmux.wait_for("the question", |s| s.contains("[N]o"));
    tmux.keys(&["y"]);
    tmux.wait_for("the answer", |s| s.contains("made it"));
    assert_eq!(env.read_project_file("y.txt"), "yes\n");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["make n", "Enter"]);
    tmux.wait_for("the second question", |s| s.matches("[N]o").count() == 2);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the refusal", |s| s.contains("permission was refused"));
    assert!(!env.project().join("n.txt").exists());
}

/// `/model` with no argument shows the configured models as a list; a number and Enter pick
/// the large model. `/sessions` shows the sessions the same way; Esc keeps the current one.
#[test]
fn model_and_sessions_pick_from_a_numbered_list() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let (server, env) = setup(vec![Reply::text("from the other")]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["providers"]["fake"]["models"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"id": "other-model", "name": "Other Model", "context_window": 100000,
                     "default_max_tokens": 1024}),
        );
    env.write_config(&cfg);
    let (tmux, _) = start_in_tmux_at(&env, "picker", &[], &[], 80);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["/model", "Enter"]);
    let screen = tmux.wait_for("the list", |s| s.contains("Enter picks"));
    assert!(
        screen.contains("> 1) fake/fake-model  Fake Model")
            && screen.contains("  2) fake/other-model  Other Model"),
        "{screen}"
    );
    tmux.keys(&["2", "Enter"]);
    let screen = tmux.wait_for("the switch", |s| {
        s.contains("model large = fake/other-model (for this session only)")
    });
    assert!(
        !screen.contains("Enter picks"),
        "the list is erased:\n{screen}"
    );
    tmux.keys(&["hello", "Enter"]);
    tmux.wait_for("the answer", |s| s.contains("from the other"));
    assert_eq!(turns(&server)[0].body["model"], "other-model");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["/sessions", "Enter"]);
    let screen = tmux.wait_for("the sessions", |s| s.contains("Enter picks"));
    let id = sessions(&env)[0]["id"].as_str().unwrap().to_string();
    assert!(
        screen.contains(&format!("> 1) {}", &id[..7])) && screen.contains("(current)"),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.wait_for("the list to go", |s| !s.contains("Enter picks"));
}

/// A change allowed without asking (`--yolo`) still shows its diff: on the terminal (REPL) and
/// on stderr (`crush run`), not with `-q`.
#[test]
fn an_allowed_edits_diff_is_shown() {
    let replies = || {
        vec![
            Reply::tool_call(
                "write",
                json!({"file_path": "notes.txt", "content": "first-added-line\n"}),
            ),
            Reply::text("Wrote it."),
        ]
    };
    let (_server, env) = setup(replies());
    let out = env.run(&["--yolo", "run", "go"], None);
    out.assert_success();
    assert!(out.stderr.contains("+first-added-line"), "{}", out.stderr);
    assert!(out.stderr.contains("+++ "), "{}", out.stderr);
    let (_server, env) = setup(replies());
    let out = env.run(&["--yolo", "run", "-q", "go"], None);
    out.assert_success();
    assert!(!out.stderr.contains("first-added-line"), "{}", out.stderr);
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    for cols in [80, 120] {
        let (_server, env) = setup(replies());
        let (tmux, _) = start_in_tmux_at(&env, &format!("diff{cols}"), &["--yolo"], &[], cols);
        tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
        tmux.keys(&["go", "Enter"]);
        let screen = tmux.wait_for("the answer", |s| s.contains("Wrote it."));
        assert!(screen.contains("+first-added-line"), "{screen}");
    }
}

/// `options.tool_preview_lines` sets the preview's length; `/expand` prints the whole last
/// result.
#[test]
fn preview_length_is_an_option_and_expand_prints_the_whole_result() {
    let replies = || {
        vec![
            Reply::tool_call("bash", json!({"command": "seq 1 30"})),
            Reply::text("Counted."),
        ]
    };
    let (server, env) = setup(replies());
    let mut config = env.config_for(&server, Dialect::OpenAi);
    config["options"]["tool_preview_lines"] = json!(2);
    env.write_config(&config);
    let out = env.run(&["--yolo", "run", "go"], None);
    out.assert_success();
    let preview: Vec<&str> = out
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("[bash]"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(preview, ["  30", "  exit 0"], "{}", out.stderr);
    let (_server, env) = setup(replies());
    let out = repl(&env, &["--yolo"], "go\n/expand\n");
    out.assert_success();
    let lines: Vec<&str> = out.stdout.lines().collect();
    for n in ["1", "15", "30"] {
        assert!(lines.contains(&n), "{n} missing: {}", out.stdout);
    }
}

/// `/model` on a terminal lists the models a local server lists too (a provider defined with a
/// `base_url` only), not just those a configuration names.
#[test]
fn model_picker_lists_the_models_a_local_server_lists() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let server = FakeServer::with_script(vec![Reply::text("from the listed one")]);
    title_route(&server, "Picked");
    server.route(
        "GET",
        "/v1/models",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            r#"{"object":"list","data":[{"id":"listed-a","max_model_len":8192},{"id":"listed-b","max_model_len":8192}]}"#,
        ),
    );
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {"local": {"type": "openai-compat", "base_url": server.openai_base_url()}},
        "models": {"large": {"provider": "local", "model": "listed-a"},
                   "small": {"provider": "local", "model": "listed-a"}}
    }));
    let (tmux, _) = start_in_tmux_at(&env, "localpick", &[], &[], 80);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["/model", "Enter"]);
    let screen = tmux.wait_for("the list", |s| s.contains("Enter picks"));
    assert!(
        screen.contains("local/listed-a") && screen.contains("local/listed-b"),
        "{screen}"
    );
    tmux.keys(&["2", "Enter"]);
    tmux.wait_for("the switch", |s| {
        s.contains("model large = local/listed-b (for this session only)")
    });
    tmux.keys(&["hello", "Enter"]);
    tmux.wait_for("the answer", |s| s.contains("from the listed one"));
    assert_eq!(turns(&server)[0].body["model"], "listed-b");
}
