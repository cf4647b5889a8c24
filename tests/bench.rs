//! `make bench`: the release binary against the fake model server. Prints the median wall time
//! and peak RSS of several runs per scenario. A benchmark, not a test: without CRUSH_BENCH=1 it
//! does nothing, and it never asserts on time.

#[path = "support/mod.rs"]
mod support;

use serde_json::json;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Dialect, FakeServer, Reply, TestEnv};

const RUNS: usize = 7;

struct Sample {
    wall: Duration,
    max_rss_kib: i64,
}

/// Runs `cmd` to completion and measures it with wait4 (peak RSS of that child alone).
fn measure(mut cmd: Command) -> Sample {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn crush");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed();
    assert_eq!(r, pid, "wait4 failed");
    let st = std::process::ExitStatus::from_raw(status);
    assert!(st.success(), "crush failed: {st:?}");
    drop(child);
    Sample {
        wall,
        max_rss_kib: ru.ru_maxrss,
    }
}

fn report(name: &str, mut samples: Vec<Sample>) {
    samples.sort_by_key(|s| s.wall);
    let median = &samples[samples.len() / 2];
    let mut rss: Vec<i64> = samples.iter().map(|s| s.max_rss_kib).collect();
    rss.sort();
    println!(
        "{name:<28} median {:>8.2} ms   min {:>8.2} ms   peak RSS median {:>6.1} MiB  max {:>6.1} MiB   ({} runs)",
        median.wall.as_secs_f64() * 1e3,
        samples[0].wall.as_secs_f64() * 1e3,
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0,
        samples.len()
    );
}

fn scenario(
    env: &TestEnv,
    server: &FakeServer,
    script: impl Fn() -> Vec<Reply>,
    args: &[&str],
) -> Vec<Sample> {
    (0..RUNS)
        .map(|_| {
            server.push_all(script());
            let mut cmd = env.crush();
            cmd.args(args);
            let s = measure(cmd);
            assert_eq!(server.remaining(), 0, "the scenario did not use its script");
            s
        })
        .collect()
}

fn main() {
    if std::env::var_os("CRUSH_BENCH").is_none() {
        println!("bench: skipped (run `make bench`)");
        return;
    }
    if !cfg!(debug_assertions) {
        println!("bench: release build of the test harness");
    }
    let bin = env!("CARGO_BIN_EXE_crush");
    println!(
        "binary: {bin} ({} bytes)",
        std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0)
    );

    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);

    let samples = (0..RUNS)
        .map(|_| {
            let mut cmd = env.crush();
            cmd.arg("--version");
            measure(cmd)
        })
        .collect();
    report("crush --version", samples);

    let two = scenario(
        &env,
        &server,
        || {
            vec![
                Reply::tool_call("bash", json!({"command": "echo hello"})),
                Reply::text("done"),
            ]
        },
        &["run", "-q", "-y", "say hello"],
    );
    report("2-step bash (openai)", two);

    let twenty = scenario(
        &env,
        &server,
        || {
            let mut v: Vec<Reply> = (0..19)
                .map(|i| Reply::tool_call("bash", json!({"command": format!("echo step {i}")})))
                .collect();
            v.push(Reply::text("all done"));
            v
        },
        &["run", "-q", "-y", "twenty steps"],
    );
    report("20-step bash (openai)", twenty);

    env.use_server(&server, Dialect::Anthropic);
    let two_a = scenario(
        &env,
        &server,
        || {
            vec![
                Reply::tool_call("bash", json!({"command": "echo hello"})),
                Reply::text("done"),
            ]
        },
        &["run", "-q", "-y", "say hello"],
    );
    report("2-step bash (anthropic)", two_a);

    // Hook dispatch: ten no-op PreToolUse hooks against none, and a bare fork/exec for scale.
    env.use_server(&server, Dialect::OpenAi);
    let hook_test = [
        "hooks",
        "test",
        "PreToolUse",
        "--tool",
        "bash",
        "--input",
        "{}",
    ];
    let run = |args: &[&str]| -> Vec<Sample> {
        (0..RUNS * 3)
            .map(|_| {
                let mut cmd = env.crush();
                cmd.args(args);
                measure(cmd)
            })
            .collect()
    };
    report("hooks test, 0 hooks", run(&hook_test));
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": (0..10)
        .map(|i| json!({"command": format!("true {i}")}))
        .collect::<Vec<_>>()});
    env.write_config(&cfg);
    report("hooks test, 10 no-op hooks", run(&hook_test));
    let hooked = scenario(
        &env,
        &server,
        || {
            vec![
                Reply::tool_call("bash", json!({"command": "echo hello"})),
                Reply::text("done"),
            ]
        },
        &["run", "-q", "-y", "say hello"],
    );
    report("2-step bash + 10 hooks", hooked);
    let bare = (0..RUNS * 3)
        .map(|_| {
            let mut cmd = Command::new("/bin/sh");
            cmd.args(["-c", "true"]);
            measure(cmd)
        })
        .collect();
    report("bare sh -c true", bare);
}
