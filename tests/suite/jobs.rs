//! Background jobs of the bash tool: `run_in_background`, the move to the background of a slow
//! command, `job_output`, `job_kill`, and no job outliving crush, even one killed with SIGKILL.

use super::cancel::{Running, is_dead, wait_dead};
use crate::support::echo::ECHO_ENV;
use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::json;
use std::time::Duration;

/// The text of the last tool result the model was sent in model request `i`.
fn last_result(server: &FakeServer, i: usize) -> (String, bool) {
    let r = server.model_requests()[i].tool_results();
    let (_, text, err) = r.last().cloned().expect("a tool result");
    (text, err)
}

/// The pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) && !is_dead(pid) {
            out.push(pid);
        }
    }
    out
}

/// The parent of process `pid`.
fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit(')').next().unwrap();
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn pid_in(path: &std::path::Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_background_server_answers_while_the_turn_goes_on_and_dies_with_crush_run() {
    let env = TestEnv::new();
    let dir = env.root().join("echo");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = std::env::current_exe().unwrap();
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": format!("{ECHO_ENV}={} {}", dir.display(), bin.display()),
                   "run_in_background": true, "description": "echo server"}),
        ),
        Reply::tool_call(
            "bash",
            json!({"command": format!(
                "until [ -s {d}/port ]; do sleep 0.05; done; exec 3<>/dev/tcp/127.0.0.1/$(cat {d}/port); echo ping >&3; head -n1 <&3",
                d = dir.display()
            )}),
        ),
        Reply::tool_call("job_output", json!({"shell_id": "001"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "-y", "serve"], None);
    out.assert_success();
    let (started, _) = last_result(&server, 1);
    assert!(
        started.starts_with("Background shell started with ID: 001"),
        "{started}"
    );
    let (answer, _) = last_result(&server, 2);
    assert!(answer.starts_with("pong ping"), "{answer}");
    let (status, _) = last_result(&server, 3);
    assert!(status.starts_with("Status: running"), "{status}");
    // crush run is over: the server went with it.
    wait_dead(pid_in(&dir.join("pid")));
}

#[test]
fn kill_9_of_crush_leaves_no_job_behind() {
    let env = TestEnv::new();
    let marker = format!("crushjob-{}", std::process::id());
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": format!("echo $$ > job.pid; exec -a {marker} sleep 300"),
                   "run_in_background": true}),
        ),
        Reply::stall(Duration::from_secs(120)),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    let run = Running::start(&env, &["run", "-q", "-y", "go"], None);
    let pidfile = env.project().join("job.pid");
    run.wait_for("the job and the next model call", |_| {
        server.model_requests().len() >= 2 && pidfile.exists()
    });
    let pid = pid_in(&pidfile);
    assert!(!is_dead(pid), "the job should run until crush dies");
    // The job alone runs the command, a child of crush's one job server.
    assert_eq!(processes_with(&marker), [pid]);
    let server = parent_of(pid);
    assert_eq!(parent_of(server), run.pid());
    let cmdline = std::fs::read(format!("/proc/{server}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("__crush-job-server"),
        "{cmdline:?}"
    );
    // Named for ps and top.
    let comm = std::fs::read_to_string(format!("/proc/{server}/comm")).unwrap();
    assert_eq!(comm.trim(), "crush-jobs");
    run.signal(libc::SIGKILL);
    let out = run.finish();
    out.assert_code(137);
    wait_dead(pid);
    wait_dead(server);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !processes_with(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slow_command_moves_to_the_background_and_job_tools_read_and_kill_it() {
    let env = TestEnv::new();
    let marker = format!("crushslow-{}", std::process::id());
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": format!("echo started; exec -a {marker} sleep 300"),
                   "auto_background_after": 1}),
        ),
        Reply::tool_call("job_output", json!({"shell_id": "001"})),
        Reply::tool_call("job_kill", json!({"shell_id": "001"})),
        Reply::tool_call("job_kill", json!({"shell_id": "001"})),
        Reply::tool_call(
            "bash",
            json!({"command": "seq 1 2000000; sleep 300", "run_in_background": true}),
        ),
        Reply::tool_call("job_output", json!({"shell_id": "002"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::Anthropic);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    let (moved, _) = last_result(&server, 1);
    assert!(
        moved.contains("moved to background") && moved.contains("Background shell ID: 001"),
        "{moved}"
    );
    let (output, _) = last_result(&server, 2);
    assert!(
        output.starts_with("Status: running") && output.contains("started"),
        "{output}"
    );
    let (killed, err) = last_result(&server, 3);
    assert_eq!(killed, "Background shell 001 terminated successfully");
    assert!(!err);
    assert!(
        processes_with(&marker).is_empty(),
        "job_kill left it running"
    );
    let (unknown, err) = last_result(&server, 4);
    assert!(
        err && unknown.contains("background shell not found: 001"),
        "{unknown}"
    );
    // 2000000 lines (about 15 MB) flood the job: what is kept is capped and says what it lost.
    let (flood, _) = last_result(&server, 6);
    assert!(
        flood.contains("bytes of output were dropped"),
        "{}",
        &flood[..200]
    );
    assert!(flood.contains("2000000"));
    assert!(flood.chars().count() < 32_000, "{}", flood.len());
}

#[test]
fn a_dead_job_server_ends_its_jobs_and_the_next_command_starts_another() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo $$ > job.pid; exec sleep 300", "run_in_background": true}),
        ),
        // A command's parent is the job server.
        Reply::tool_call("bash", json!({"command": "kill -9 $PPID"})),
        Reply::tool_call("job_output", json!({"shell_id": "001"})),
        Reply::tool_call("bash", json!({"command": "echo after"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    // What the dead server ran is out of crush's reach now: the test ends it.
    let orphan = pid_in(&env.project().join("job.pid"));
    // SAFETY: signalling the test's own sleep, whose pid it just read.
    unsafe { libc::kill(orphan, libc::SIGKILL) };
    out.assert_success();
    let (status, _) = last_result(&server, 3);
    assert!(
        status.starts_with("Status: completed") && status.ends_with("Exit code -1"),
        "{status}"
    );
    let (killer, _) = last_result(&server, 2);
    assert!(killer.starts_with("Exit code -1"), "{killer}");
    let (after, err) = last_result(&server, 4);
    assert!(!err && after.starts_with("after"), "{after}");
}

#[test]
fn a_nul_byte_in_a_command_is_refused_not_run_elsewhere() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![
        // Sent as is, the part after the NUL would be taken for the working directory.
        Reply::tool_call("bash", json!({"command": "pwd; echo x\u{0}/"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    let (text, _) = last_result(&server, 1);
    assert!(
        text.contains("failed to start the command: nul byte"),
        "{text}"
    );
}

#[test]
fn what_a_command_moved_to_a_session_of_its_own_dies_with_crush_too() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![
        // Outside the command's group: `setsid` in place, and a daemon whose parent exits.
        Reply::tool_call(
            "bash",
            json!({"command": "setsid bash -c 'echo $$ > a.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
                (setsid bash -c 'echo $$ > b.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &)
                until [ -s a.pid ] && [ -s b.pid ]; do sleep 0.02; done; echo started"}),
        ),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    let (text, _) = last_result(&server, 1);
    assert!(text.starts_with("started"), "{text}");
    let pids = ["a.pid", "b.pid"].map(|f| pid_in(&env.project().join(f)));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !pids.iter().all(|&p| is_dead(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = pids.into_iter().filter(|&p| !is_dead(p)).collect();
    for &p in &left {
        // SAFETY: signalling the test's own sleeps, whose pids it just read.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "survived crush: {left:?}");
}

/// `entry` (an MCP or LSP server entry running this test binary) run through bash, which first
/// leaves a grandchild in a session of its own (`setsid`) that writes its pid to `pidfile`.
fn with_setsid_grandchild(
    mut entry: serde_json::Value,
    pidfile: &std::path::Path,
) -> serde_json::Value {
    let program = entry["command"].clone();
    entry["command"] = json!("bash");
    let script = r#"setsid bash -c 'echo $$ > "$0"; exec sleep 300' "$1" </dev/null >/dev/null 2>&1 & exec "$0""#;
    entry["args"] = json!([
        "-c",
        // The configuration expands `$`: `$$` is a literal one.
        script.replace('$', "$$"),
        program,
        pidfile.to_string_lossy(),
    ]);
    entry
}

#[test]
fn kill_9_of_crush_takes_the_setsid_grandchildren_of_servers_hooks_and_crushrc() {
    use crate::support::{lsp, mcp};
    let env = TestEnv::new();
    let dir = mcp::scratch(&env);
    let pidfile = |name: &str| dir.join(format!("{name}-grandchild.pid"));
    let pidfiles = ["mcp", "lsp", "hook", "crushrc"].map(pidfile);
    // Waits for the grandchild: what a crushrc leaves in its group is killed as it exits.
    let leave = |pidfile: &std::path::Path| {
        format!(
            "setsid bash -c 'echo $$ > {p}; exec sleep 300' </dev/null >/dev/null 2>&1 &
             until [ -s {p} ]; do sleep 0.01; done",
            p = pidfile.display()
        )
    };
    std::fs::write(env.config_dir().join("crushrc"), leave(&pidfiles[3]) + "\n").unwrap();
    env.write_project_file("a.fk", "fn main() {}\n");
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "a.fk"})),
        Reply::stall(Duration::from_secs(120)),
    ]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    let tool = json!({"name": "echo", "description": "Echo", "action": "echo",
                      "inputSchema": {"type": "object", "properties": {}}});
    cfg["mcp"] = json!({"t": with_setsid_grandchild(
        mcp::stdio_server(&dir, "t", &json!({"tools": [tool]})), &pidfiles[0])});
    cfg["lsp"] = json!({"fake": with_setsid_grandchild(
        lsp::entry(&dir, "fake", &json!({})), &pidfiles[1])});
    cfg["hooks"] = json!({"PreToolUse": [{"command": leave(&pidfiles[2])}]});
    env.write_config(&cfg);
    let run = Running::start(&env, &["run", "-q", "-y", "go"], None);
    run.wait_for("every grandchild", |_| {
        server.model_requests().len() >= 2
            && pidfiles
                .iter()
                .all(|p| std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n')))
    });
    let grandchildren = pidfiles.clone().map(|p| pid_in(&p));
    for pid in grandchildren {
        assert!(!is_dead(pid), "{pid} should run until crush dies");
    }
    run.signal(libc::SIGKILL);
    run.finish().assert_code(137);
    for pid in grandchildren {
        wait_dead(pid);
    }
}
