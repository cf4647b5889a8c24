//! Cancel means cancel: Ctrl-C, SIGTERM and SIGHUP stop running hooks and commands with their
//! process groups, start nothing more, save what the session has, and exit 130, 143 or 129;
//! `crush run`'s stdout holds what the session stores.

use crate::support::env::collect;
use crate::support::{Dialect, FakeServer, Fault, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A crush process being driven by a test: its output is collected as it comes.
pub(crate) struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

fn text(b: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&b.lock().unwrap()).into_owned()
}

impl Running {
    pub(crate) fn start(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> Running {
        let mut cmd = env.crush();
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn crush");
        let mut pipe = child.stdin.take();
        if let (Some(p), Some(input)) = (pipe.as_mut(), stdin) {
            p.write_all(input.as_bytes()).unwrap();
        }
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Running {
            child,
            stdin: pipe,
            stdout,
            stderr,
        }
    }

    pub(crate) fn wait_for(&self, what: &str, mut cond: impl FnMut(&Running) -> bool) {
        let deadline = Instant::now() + crate::support::RUN_TIMEOUT;
        while !cond(self) {
            assert!(
                Instant::now() < deadline,
                "gave up waiting for {what}\n--- stderr ---\n{}",
                text(&self.stderr)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for the exit. Within the test's time limit: a crush that went on waiting for a
    /// hook's or command's 600 s is a failure, not a slow pass.
    pub(crate) fn finish(mut self) -> Output {
        let stderr = self.stderr.clone();
        let code = crate::support::env::wait_exit(
            &mut self.child,
            "crush did not stop after the signal",
            || text(&stderr),
        );
        drop(self.stdin.take());
        std::thread::sleep(Duration::from_millis(100));
        Output {
            code,
            stdout: text(&self.stdout),
            stderr: text(&self.stderr),
        }
    }
}

/// Whether `pid` is gone: no such process, or a zombie waiting for init to reap it.
pub(crate) fn is_dead(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
    stat.is_empty() || state == Some('Z') || state == Some('X')
}

pub(crate) fn wait_dead(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_dead(pid) {
        assert!(Instant::now() < deadline, "process {pid} survived crush");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every part of the latest session, in order.
fn stored_parts(env: &TestEnv) -> Vec<Value> {
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    env.stored_parts(sessions[0]["id"].as_str().unwrap())
}

fn tool_results(env: &TestEnv) -> Vec<String> {
    stored_parts(env)
        .into_iter()
        .filter(|p| p["type"] == "tool_result")
        .map(|p| p["data"]["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn ctrl_c_stops_a_running_hook_at_once_and_the_tool_never_starts() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "touch ran"}),
    )]);
    let env = TestEnv::new();
    let started = env.root().join("hook-started");
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": [{
        "name": "slow",
        "command": format!("touch {}; sleep 600", started.display()),
        "timeout": 600
    }]});
    env.write_config(&cfg);
    let run = Running::start(&env, &["run", "-q", "-y", "go"], None);
    run.wait_for("the hook to start", |_| started.exists());
    run.signal(libc::SIGINT);
    let out = run.finish();
    out.assert_code(130);
    assert!(!env.project().join("ran").exists(), "the tool ran");
    assert_eq!(
        tool_results(&env),
        ["The user canceled the turn before this tool call ran."]
    );
}

#[test]
fn sigterm_kills_the_bash_commands_group_saves_and_exits_143() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "(sleep 600; touch late) & echo $! > bg.pid; touch started; sleep 600"}),
    )]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let run = Running::start(&env, &["run", "-q", "-y", "go"], None);
    let started = env.project().join("started");
    run.wait_for("the command to start", |_| started.exists());
    run.signal(libc::SIGTERM);
    let out = run.finish();
    out.assert_code(143);
    let bg: i32 = env.read_project_file("bg.pid").trim().parse().unwrap();
    wait_dead(bg);
    let results = tool_results(&env);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("aborted"), "{results:?}");
    // No records file was left behind (a command naming no builtin needs none).
    let left: Vec<_> = std::fs::read_dir(env.data_dir().join("run"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn sighup_mid_answer_saves_the_partial_answer_and_exits_129() {
    let server = FakeServer::with_script(vec![
        Reply::text("Partial answer, still writ")
            .fault(Fault::StallAfterContent(Duration::from_secs(60))),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let run = Running::start(&env, &["run", "--json", "go"], None);
    run.wait_for("the partial text", |r| {
        text(&r.stdout).contains("still writ")
    });
    run.signal(libc::SIGHUP);
    let out = run.finish();
    out.assert_code(129);
    let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "finish");
    assert_eq!(last["reason"], "canceled");
    let parts = stored_parts(&env);
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["data"]["text"].as_str())
        .collect();
    assert!(texts.contains(&"Partial answer, still writ"), "{parts:#?}");
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "finish" && p["data"]["reason"] == "canceled"),
        "{parts:#?}"
    );
}

#[test]
fn sigterm_in_the_interactive_session_stops_the_command_and_exits_143() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "touch started; sleep 600"}),
    )]);
    // The title is generated off-script.
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A title")],
    );
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // stdin stays open: the session would wait for more input.
    let run = Running::start(&env, &["-y"], Some("go\n"));
    let started = env.project().join("started");
    run.wait_for("the command to start", |_| started.exists());
    run.signal(libc::SIGTERM);
    let out = run.finish();
    out.assert_code(143);
    assert!(tool_results(&env)[0].contains("aborted"));
}

/// `crush.db` is left as a closed database is, with no `-wal` or `-shm` beside it, so a reader
/// that snapshots the files (agrep) can open it at once.
pub(crate) fn assert_db_at_rest(env: &TestEnv) {
    let data = env.project().join(".crush");
    assert!(data.join("crush.db").is_file(), "no crush.db");
    for f in ["crush.db-wal", "crush.db-shm"] {
        assert!(!data.join(f).exists(), "{f} left behind after the signal");
    }
}

#[test]
fn sigterm_while_waiting_on_a_slow_server_leaves_the_database_closed_and_whole() {
    for (sig, code) in [
        (libc::SIGTERM, 143),
        (libc::SIGINT, 130),
        (libc::SIGHUP, 129),
    ] {
        let server = FakeServer::with_script(vec![
            Reply::text("Partial answer, still writ")
                .fault(Fault::StallAfterContent(Duration::from_secs(60))),
        ]);
        let env = TestEnv::new();
        env.use_server(&server, Dialect::OpenAi);
        let run = Running::start(&env, &["run", "--json", "go"], None);
        run.wait_for("the partial text", |r| {
            text(&r.stdout).contains("still writ")
        });
        run.signal(sig);
        let out = run.finish();
        out.assert_code(code);
        // Checked before anything else opens the database.
        assert_db_at_rest(&env);
        let parts = stored_parts(&env);
        assert!(
            parts
                .iter()
                .any(|p| p["type"] == "text" && p["data"]["text"] == "Partial answer, still writ"),
            "signal {sig}: {parts:#?}"
        );
    }
}

#[test]
fn sigterm_in_the_interactive_session_leaves_the_database_closed() {
    let server = FakeServer::with_script(vec![
        Reply::text("Still thinking").fault(Fault::StallAfterContent(Duration::from_secs(60))),
    ]);
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A title")],
    );
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let run = Running::start(&env, &["-y"], Some("go\n"));
    run.wait_for("the partial text", |r| {
        text(&r.stdout).contains("Still thinking")
    });
    run.signal(libc::SIGTERM);
    let out = run.finish();
    out.assert_code(143);
    assert_db_at_rest(&env);
    let texts: Vec<Value> = stored_parts(&env)
        .into_iter()
        .filter(|p| p["type"] == "text")
        .collect();
    assert!(!texts.is_empty(), "the partial answer is stored");
}

#[test]
fn records_files_live_in_a_private_run_dir_and_only_orphans_are_cleaned() {
    use std::os::unix::fs::PermissionsExt;
    let server = FakeServer::with_script(vec![
        // `model large` (a builtin that only prints) makes the command need its records file.
        Reply::tool_call(
            "bash",
            json!({"command": "model large >/dev/null; ls \"$CRUSH_GLOBAL_DATA/run\""}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let run_dir = env.data_dir().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A crush killed with -9 left one; a live crush (this test's process) owns the other.
    let orphan = run_dir.join("records-999999999-0-0");
    let live = run_dir.join(format!("records-{}-0-0", std::process::id()));
    std::fs::write(&orphan, "").unwrap();
    std::fs::write(&live, "").unwrap();
    env.run(&["run", "-q", "-y", "go"], None).assert_success();
    let listing = &server.request(1).tool_results()[0].1;
    let own: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with("records-") && !l.contains("-0-0"))
        .collect();
    assert_eq!(own.len(), 1, "the command's own records file: {listing}");
    assert!(!orphan.exists(), "the orphan was removed");
    assert!(live.exists(), "a live process's file is kept");
    let mode = std::fs::metadata(&run_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let left: Vec<String> = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [live.file_name().unwrap().to_string_lossy()]);
    assert!(Path::new(&env.data_dir()).join("run").is_dir());
}

#[test]
fn run_stdout_after_a_mid_stream_retry_is_the_stored_answer() {
    let server = FakeServer::with_script(vec![
        Reply::error_mid_stream("The answer is forty", "overloaded_error", "busy"),
        Reply::text("Here is the full answer: 42."),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.env("CRUSH_RETRY_BASE_MS", "10")
        .args(["run", "-q", "go"]);
    let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
    out.assert_success();
    assert_eq!(server.request_count(), 2, "the call was retried");
    let stored: Vec<String> = stored_parts(&env)
        .into_iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["data"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        stored,
        ["go", "Here is the full answer: 42."],
        "the prompt, the answer"
    );
    assert_eq!(out.stdout, "Here is the full answer: 42.\n");
}

/// Bytes waiting in the pipe `fd` (FIONREAD).
fn pipe_bytes(fd: i32) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer.
    unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    n
}

#[test]
fn a_shutdown_stuck_past_the_grace_still_leaves_the_database_closed() {
    use std::os::fd::AsRawFd;
    // An answer far larger than a pipe holds, to a stdout nobody reads: crush blocks writing it
    // and cannot act on the SIGTERM, so the watchdog ends it after the grace.
    let server = FakeServer::with_script(vec![Reply::text(&"x".repeat(1 << 20))]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.env("CRUSH_TERM_GRACE", "1")
        .args(["run", "-q", "go"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn crush");
    let stdout = child.stdout.take().unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    // Stuck: the pipe is full and stays so.
    let deadline = Instant::now() + crate::support::RUN_TIMEOUT;
    let mut last = (0, Instant::now());
    loop {
        let n = pipe_bytes(stdout.as_raw_fd());
        if n != last.0 {
            last = (n, Instant::now());
        } else if n > 0 && last.1.elapsed() > Duration::from_millis(500) {
            break;
        }
        assert!(Instant::now() < deadline, "crush never filled its stdout");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let code = crate::support::env::wait_exit(&mut child, "the watchdog did not end crush", || {
        text(&stderr)
    });
    drop(stdout);
    assert_eq!(code, 143, "{}", text(&stderr));
    // The main thread never got to close the store: the watchdog did.
    let log =
        std::fs::read_to_string(env.project().join(".crush/logs/crush.log")).unwrap_or_default();
    assert!(log.contains("did not stop in time"), "{log}");
    assert_db_at_rest(&env);
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(sessions.as_array().map(Vec::len), Some(1), "{sessions}");
}
