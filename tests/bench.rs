//! `make bench`: the release binary against the fake model server. Prints the median wall time
//! and peak RSS of several runs per scenario. A benchmark, not a test: without CRUSH_BENCH=1 it
//! does nothing, and it never asserts on time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

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
    /// User + system CPU of crush and the children it waited for: steadier than wall time on a
    /// busy machine.
    cpu: Duration,
    max_rss_kib: i64,
}

/// The binary measured: `CRUSH_BENCH_BIN`, else the one cargo built (compare two builds by
/// running the same harness against each).
fn bin() -> String {
    std::env::var("CRUSH_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_crush").to_string())
}

/// Runs `cmd` to completion and measures it with wait4 (peak RSS of that child alone).
///
/// Linux carries a parent's peak RSS into a vforked child at exec, so a child of this (growing)
/// harness would report the harness's peak. The measuring is therefore done by a fresh copy of
/// this binary (`--measure`), whose own small footprint is all a child can inherit.
fn measure(cmd: Command) -> Sample {
    let mut outer = Command::new(std::env::current_exe().expect("bench binary"));
    outer
        .arg("--measure")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => outer.env(k, v),
            None => outer.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        outer.current_dir(d);
    }
    // cargo points LD_LIBRARY_PATH at its build directories for test runs; an installed crush
    // (and the shells and git it starts) would not search them for every library.
    outer.env_remove("LD_LIBRARY_PATH");
    let out = outer
        .stdin(Stdio::null())
        .output()
        .expect("run the measuring process");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "measured run failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut it = text
        .split_whitespace()
        .map(|w| w.parse::<i64>().expect("a number"));
    let (ns, rss, cpu_us) = (
        it.next().expect("ns"),
        it.next().expect("rss"),
        it.next().expect("cpu"),
    );
    Sample {
        wall: Duration::from_nanos(ns as u64),
        cpu: Duration::from_micros(cpu_us as u64),
        max_rss_kib: rss,
    }
}

/// `--measure PROGRAM ARGS...`: run it, print "wall_ns max_rss_kib cpu_us".
fn measure_child(program: &str, args: &[String]) -> ! {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn crush");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `ru` are valid, writable locals; `pid` is our own child.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed();
    assert_eq!(r, pid, "wait4 failed");
    let st = std::process::ExitStatus::from_raw(status);
    if !st.success() {
        eprintln!("crush failed: {st:?}");
        std::process::exit(1);
    }
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    println!(
        "{} {} {}",
        wall.as_nanos(),
        ru.ru_maxrss,
        us(ru.ru_utime) + us(ru.ru_stime)
    );
    std::process::exit(0);
}

fn report(name: &str, mut samples: Vec<Sample>) {
    samples.sort_by_key(|s| s.wall);
    let median = &samples[samples.len() / 2];
    let mut rss: Vec<i64> = samples.iter().map(|s| s.max_rss_kib).collect();
    rss.sort();
    let mut cpu: Vec<Duration> = samples.iter().map(|s| s.cpu).collect();
    cpu.sort();
    println!(
        "{name:<28} median {:>8.2} ms   min {:>8.2} ms   cpu median {:>7.2} ms   peak RSS median {:>6.1} MiB  max {:>6.1} MiB   ({} runs)",
        median.wall.as_secs_f64() * 1e3,
        samples[0].wall.as_secs_f64() * 1e3,
        cpu[cpu.len() / 2].as_secs_f64() * 1e3,
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0,
        samples.len()
    );
}

/// `CRUSH_BENCH_ONLY=NAME` runs one scenario; `CRUSH_BENCH_WRAP="valgrind --tool=massif"` runs
/// the binary under a profiler (the figures then measure the profiler, not crush).
fn selected(name: &str) -> bool {
    std::env::var("CRUSH_BENCH_ONLY").map_or(true, |o| name.contains(&o))
}

fn command(env: &TestEnv) -> Command {
    match std::env::var("CRUSH_BENCH_WRAP") {
        Ok(w) if !w.trim().is_empty() => {
            let mut words = w.split_whitespace();
            let mut cmd = Command::new(words.next().unwrap_or("env"));
            cmd.args(words).arg(bin());
            let base = env.crush();
            for (k, v) in base.get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            if let Some(d) = base.get_current_dir() {
                cmd.current_dir(d);
            }
            cmd
        }
        _ => env.crush_at(std::path::Path::new(&bin())),
    }
}

fn scenario(
    env: &TestEnv,
    server: &FakeServer,
    script: impl Fn() -> Vec<Reply>,
    args: &[&str],
) -> Vec<Sample> {
    scenario_env(env, server, script, args, &[])
}

/// `scenario` with these variables in crush's environment.
fn scenario_env(
    env: &TestEnv,
    server: &FakeServer,
    script: impl Fn() -> Vec<Reply>,
    args: &[&str],
    vars: &[(&str, &str)],
) -> Vec<Sample> {
    (0..RUNS)
        .map(|_| {
            server.push_all(script());
            let mut cmd = command(env);
            cmd.args(args).envs(vars.iter().copied());
            let s = measure(cmd);
            assert_eq!(server.remaining(), 0, "the scenario did not use its script");
            s
        })
        .collect()
}

/// The REPL on a pseudo-terminal: waits for its prompt, then sends `keys` one at a time, each
/// once the screen has answered the one before, then Ctrl-D. Returns crush's CPU time.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn repl_on_pty(env: &TestEnv, keys: &[&[u8]]) -> Duration {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let (mut master, slave) = support::env::open_pty();
    let mut cmd = command(env);
    cmd.env("TERM", "xterm-256color")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    // SAFETY: setsid in the child before exec makes the pty its controlling terminal's session.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn crush");
    drop(cmd);
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let mut seen = Vec::new();
        let mut prompted = false;
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            if !prompted {
                seen.extend_from_slice(&buf[..n]);
                prompted = seen.windows(2).any(|w| w == b"> ");
                if !prompted {
                    continue;
                }
            }
            if tx.send(n).is_err() {
                break;
            }
        }
    });
    let wait = |what: &str| {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no output after {what}"));
    };
    wait("start");
    for (i, k) in keys.iter().enumerate() {
        while rx.try_recv().is_ok() {}
        master.write_all(k).unwrap();
        wait(&format!("key {i} ({k:?})"));
    }
    master.write_all(b"\x15\x04").unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `ru` are valid, writable locals; `pid` is our own child.
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut ru) }, pid);
    let us = |t: libc::timeval| (t.tv_sec * 1_000_000 + t.tv_usec) as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

/// Keystrokes at the REPL's prompt with a 10 000-entry history: typing, editing, history and
/// reverse search. Prints the CPU per keystroke (minus a run with none).
fn keystrokes(env: &TestEnv) {
    let mut bare: Vec<Duration> = (0..RUNS).map(|_| repl_on_pty(env, &[])).collect();
    bare.sort();
    let data = env.project().join(".crush");
    std::fs::create_dir_all(&data).unwrap();
    let history: String = (0..10_000)
        .map(|i| format!("prompt number {i} about topic {} and more words\n", i % 37))
        .collect();
    std::fs::write(data.join("history"), history).unwrap();
    let mut keys: Vec<&[u8]> = Vec::new();
    for round in 0..20 {
        keys.extend(std::iter::repeat_n(b"w".as_slice(), 30));
        keys.extend_from_slice(&[b"\x1b[D", b"\x7f", b"\x1b[1;5D", b"\x05", b"\x17"]);
        keys.extend_from_slice(&[b"\x1b[A", b"\x1b[A", b"\x1b[B", b"\x1b[B"]);
        // Reverse search, ending with queries no entry holds (a scan of all 10 000).
        keys.extend_from_slice(&[b"\x12", b"n", b"u", b"m", b"b", b"e", b"r", b" "]);
        keys.push(if round % 2 == 0 { b"1" } else { b"9" });
        keys.extend_from_slice(&[b"x", b"y", b"\x07", b"\x15"]);
    }
    let n = keys.len() as u32;
    let mut per_key = Vec::new();
    let mut start = Vec::new();
    for _ in 0..RUNS {
        let base = repl_on_pty(env, &[]);
        let with = repl_on_pty(env, &keys);
        start.push(base);
        per_key.push(with.saturating_sub(base) / n);
    }
    per_key.sort();
    start.sort();
    println!(
        "{:<28} cpu median {:>7.1} µs per key ({n} keys, history of 10000)   start+quit cpu median {:>7.2} ms ({:.2} ms without history)",
        "repl keystrokes (pty)",
        per_key[per_key.len() / 2].as_secs_f64() * 1e6,
        start[start.len() / 2].as_secs_f64() * 1e3,
        bare[bare.len() / 2].as_secs_f64() * 1e3,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--measure") {
        measure_child(&args[2], &args[3..]);
    }
    if std::env::var_os("CRUSH_BENCH").is_none() {
        println!("bench: skipped (run `make bench`)");
        return;
    }
    if !cfg!(debug_assertions) {
        println!("bench: release build of the test harness");
    }
    let bin = bin();
    println!(
        "binary: {bin} ({} bytes)",
        std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0)
    );

    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);

    if selected("crush --version") {
        let samples = (0..RUNS)
            .map(|_| {
                let mut cmd = command(&env);
                cmd.arg("--version");
                measure(cmd)
            })
            .collect();
        report("crush --version", samples);
    }
    if selected("repl start (pipe)") {
        let samples = (0..RUNS * 3).map(|_| measure(command(&env))).collect();
        report("repl start (pipe)", samples);
    }
    if selected("repl keystrokes (pty)") {
        keystrokes(&env);
    }
    let two_step = || {
        vec![
            Reply::tool_call("bash", json!({"command": "echo hello"})),
            Reply::text("done"),
        ]
    };
    let twenty = || {
        let mut v: Vec<Reply> = (0..19)
            .map(|i| Reply::tool_call("bash", json!({"command": format!("echo step {i}")})))
            .collect();
        v.push(Reply::text("all done"));
        v
    };
    if selected("2-step bash (openai)") {
        let s = scenario(&env, &server, two_step, &["run", "-q", "-y", "say hello"]);
        report("2-step bash (openai)", s);
    }
    if selected("20-step bash (openai)") {
        let s = scenario(&env, &server, twenty, &["run", "-q", "-y", "twenty steps"]);
        report("20-step bash (openai)", s);
    }
    // The same two with every command under the OS sandbox (crush(1) SECURITY, Sandbox).
    let sandboxed =
        |prompt: &'static str| ["run", "--sandbox", "workspace-write", "-q", "-y", prompt];
    if selected("2-step bash (openai, sandboxed)") {
        let s = scenario(&env, &server, two_step, &sandboxed("say hello"));
        report("2-step bash (openai, sandboxed)", s);
    }
    if selected("20-step bash (openai, sandboxed)") {
        let s = scenario(&env, &server, twenty, &sandboxed("twenty steps"));
        report("20-step bash (openai, sandboxed)", s);
    }
    if selected("2-step bash (anthropic)") {
        env.use_server(&server, Dialect::Anthropic);
        let s = scenario(&env, &server, two_step, &["run", "-q", "-y", "say hello"]);
        report("2-step bash (anthropic)", s);
    }
    if selected("2-step bash (gemini)") {
        env.use_server(&server, Dialect::Gemini);
        let s = scenario(&env, &server, two_step, &["run", "-q", "-y", "say hello"]);
        report("2-step bash (gemini)", s);
    }

    if selected("2-step bash (bedrock)") {
        // The catalog's bedrock provider, signed with SigV4 from the environment's keys (the
        // server checks each signature), its event stream framed and checksummed.
        let url = server.url();
        server.expect_bedrock_auth(support::bedrock::Auth::SigV4 {
            access_key_id: "AKIDBENCH".into(),
            secret: "bench/secret".into(),
            session_token: Some("BENCH-TOKEN".into()),
            region: "us-east-1".into(),
        });
        env.write_config(&json!({"providers": {"bedrock": {}}}));
        let vars = [
            ("AWS_ACCESS_KEY_ID", "AKIDBENCH"),
            ("AWS_SECRET_ACCESS_KEY", "bench/secret"),
            ("AWS_SESSION_TOKEN", "BENCH-TOKEN"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", url.as_str()),
        ];
        let model = "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0";
        let args = ["run", "-q", "-y", "-m", model, "say hello"];
        let s = scenario_env(&env, &server, two_step, &args, &vars);
        report("2-step bash (bedrock)", s);
    }

    // Hook dispatch: ten no-op PreToolUse hooks against none, and a bare fork/exec for scale.
    let hook_test = [
        "hooks",
        "test",
        "PreToolUse",
        "--tool",
        "bash",
        "--input",
        "{}",
    ];
    let runs = |args: &[&str]| -> Vec<Sample> {
        (0..RUNS * 3)
            .map(|_| {
                let mut cmd = command(&env);
                cmd.args(args);
                measure(cmd)
            })
            .collect()
    };
    env.use_server(&server, Dialect::OpenAi);
    if selected("hooks test, 0 hooks") {
        report("hooks test, 0 hooks", runs(&hook_test));
    }
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": (0..10)
        .map(|i| json!({"command": format!("true {i}")}))
        .collect::<Vec<_>>()});
    env.write_config(&cfg);
    if selected("hooks test, 10 no-op hooks") {
        report("hooks test, 10 no-op hooks", runs(&hook_test));
    }
    if selected("2-step bash + 10 hooks") {
        let s = scenario(&env, &server, two_step, &["run", "-q", "-y", "say hello"]);
        report("2-step bash + 10 hooks", s);
    }
    mcp_scenarios(&env, &server);
    if selected("skills discovery") {
        skills_scenario(&env);
    }
    edit_scenarios(&env, &server);
    if selected("stats --all, 50 x 10k rows") {
        stats_scenario(&env, &server);
    }
    if selected("bare sh -c true") {
        let bare = (0..RUNS * 3)
            .map(|_| {
                let mut cmd = Command::new("/bin/sh");
                cmd.args(["-c", "true"]);
                measure(cmd)
            })
            .collect();
        report("bare sh -c true", bare);
    }
}

/// `crush stats --all` over 50 projects with 10 000 usage rows each (crush(1) USAGE AND COST):
/// one real database from a run, filled with rows over 100 sessions, 3 models and 100 days,
/// copied 50 times and listed in projects.json.
fn stats_scenario(env: &TestEnv, server: &FakeServer) {
    env.use_server(server, Dialect::OpenAi);
    server.push_all(vec![Reply::text("ok").with_usage(1000, 200, 0, 0)]);
    let mut cmd = command(env);
    cmd.args(["run", "-q", "seed the ledger"]);
    measure(cmd);
    let seed = env.project().join(".crush").join("crush.db");
    let c = rusqlite::Connection::open(&seed).unwrap();
    c.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
         INSERT INTO sessions (id, parent_session_id, title, cost, updated_at, created_at)
         SELECT 'bench-' || i, CASE WHEN i % 10 = 0 THEN 'bench-' || (i - 1) END,
                'Session ' || i, 0, 1790000000 - i * 86400, 1790000000 - i * 86400 FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
         INSERT INTO usage (session_id, provider, model, input_tokens, output_tokens,
                            cache_read_tokens, cache_write_tokens, cost, price_source, created_at)
         SELECT 'bench-' || (1 + i % 100), 'fake',
                CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'unpriced' END,
                1000, 200, 500, 100, CASE WHEN i % 3 = 2 THEN NULL ELSE 0.006 END, 'config',
                1790000000 - (i % 100) * 86400 - i FROM n;
         UPDATE sessions SET cost = (SELECT COALESCE(SUM(cost), 0) FROM usage
                                     WHERE session_id = sessions.id);
         PRAGMA journal_mode = DELETE;",
    )
    .unwrap();
    drop(c);
    let projects: Vec<_> = (0..50)
        .map(|i| {
            let dir = env.root().join(format!("stats-{i:02}"));
            std::fs::create_dir_all(dir.join(".crush")).unwrap();
            std::fs::copy(&seed, dir.join(".crush").join("crush.db")).unwrap();
            json!({"path": dir, "data_dir": dir.join(".crush"), "last_accessed": "2026-11-01T00:00:00Z"})
        })
        .collect();
    std::fs::write(
        env.data_dir().join("projects.json"),
        json!({"projects": projects}).to_string(),
    )
    .unwrap();
    let samples = (0..RUNS)
        .map(|_| {
            let mut cmd = command(env);
            cmd.args(["stats", "--all"]);
            measure(cmd)
        })
        .collect();
    report("stats --all, 50 x 10k rows", samples);
}

/// Discovery of 100 skills and 100 custom commands, as `crush -d skills list` reports it (the
/// walk, the reads and the parsing, without the process start), and the whole command.
fn skills_scenario(env: &TestEnv) {
    for i in 0..100 {
        let dir = env.project().join(format!(".agents/skills/skill-{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: skill-{i:03}\ndescription: Does thing {i} when asked about thing {i}.\nmetadata:\n  author: bench\n---\n# Skill {i}\n\nSteps.\n"
            ),
        )
        .unwrap();
        let cmd = env.project().join(format!(".crush/commands/cmd-{i:03}.md"));
        std::fs::create_dir_all(cmd.parent().unwrap()).unwrap();
        std::fs::write(cmd, format!("Do thing {i} to $FILE. $ARGUMENTS\n")).unwrap();
    }
    let mut ms: Vec<f64> = (0..RUNS * 3)
        .map(|_| {
            let out = command(env)
                .args(["-d", "skills", "list"])
                .output()
                .expect("run crush skills list");
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err
                .lines()
                .find(|l| l.contains("skill folder(s)"))
                .expect("the discovery debug line");
            line.rsplit(" in ")
                .next()
                .and_then(|t| t.trim_end_matches(" ms").parse::<f64>().ok())
                .expect("a time in ms")
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "{:<28} median {:>8.3} ms   min {:>8.3} ms   ({} runs; 100 skills + 2 built-in, 100 commands)",
        "skills discovery",
        ms[ms.len() / 2],
        ms[0],
        ms.len()
    );
    let samples = (0..RUNS)
        .map(|_| {
            let mut cmd = command(env);
            cmd.args(["skills", "list"]);
            measure(cmd)
        })
        .collect();
    report("crush skills list", samples);
}

/// The bench binary itself as a stdio MCP server (server mode), talked to directly over pipes:
/// what the server costs on its own.
struct Direct {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Direct {
    fn start(script: &std::path::Path) -> Direct {
        let mut child = Command::new(std::env::current_exe().expect("bench binary"))
            .env(support::mcp::SERVER_ENV, script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP server");
        let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Direct {
            child,
            out,
            next: 1,
        }
    }

    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::{BufRead, Write};
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{msg}").expect("write");
        stdin.flush().expect("flush");
        loop {
            let mut line = String::new();
            self.out.read_line(&mut line).expect("read");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            if v["id"] == id {
                return v;
            }
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The medians of the `answered in N ms` debug lines for tools/call in a crush log.
fn logged_round_trips(log: &std::path::Path) -> Vec<f64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: Vec<f64> = text
        .lines()
        .filter(|l| l.contains("tools/call answered in"))
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let msg = v["msg"].as_str()?;
            msg.split("answered in ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    out.sort_by(|a, b| a.total_cmp(b));
    out
}

/// MCP: one stdio server. Its own start-up, initialize and call (direct), a tools/call round
/// trip (direct, and through crush from its debug log), `crush mcp list`, and turns calling an
/// MCP tool, to set against the bash turns above.
fn mcp_scenarios(env: &TestEnv, server: &FakeServer) {
    let dir = env.root().join("mcp-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let script = json!({"tools": [{"name": "echo", "description": "Echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "action": "echo"}]});
    let entry = support::mcp::stdio_server(&dir, "t", &script);
    let script_path = dir.join("mcp-t.json");
    if selected("mcp server start+init+call (direct)") {
        let samples = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let mut d = Direct::start(&script_path);
                d.request(
                    "initialize",
                    json!({"protocolVersion": "2025-06-18",
                    "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
                );
                d.request("tools/list", json!({}));
                d.request(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"text": "x"}}),
                );
                Sample {
                    wall: start.elapsed(),
                    cpu: Duration::ZERO,
                    max_rss_kib: 0,
                }
            })
            .collect();
        report("mcp server start+init+call (direct)", samples);
    }
    if selected("mcp tools/call round trip (direct)") {
        let mut d = Direct::start(&script_path);
        d.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        let mut rtt: Vec<Duration> = (0..200)
            .map(|_| {
                let t = Instant::now();
                d.request(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"text": "x"}}),
                );
                t.elapsed()
            })
            .collect();
        rtt.sort();
        println!(
            "{:<28} median {:>8.3} ms   p90 {:>8.3} ms   (200 calls)",
            "mcp tools/call (direct)",
            rtt[100].as_secs_f64() * 1e3,
            rtt[180].as_secs_f64() * 1e3
        );
    }
    let mut cfg = env.config_for(server, Dialect::OpenAi);
    cfg["mcp"] = json!({"t": entry});
    env.write_config(&cfg);
    if selected("mcp list (1 stdio server)") {
        let samples = (0..RUNS)
            .map(|_| {
                let mut cmd = command(env);
                cmd.args(["mcp", "list"]);
                measure(cmd)
            })
            .collect();
        report("mcp list (1 stdio server)", samples);
    }
    let mcp_step = || {
        vec![
            Reply::tool_call("mcp_t_echo", json!({"text": "hello"})),
            Reply::text("done"),
        ]
    };
    if selected("2-step mcp tool (openai)") {
        let s = scenario(env, server, mcp_step, &["run", "-q", "-y", "say hello"]);
        report("2-step mcp tool (openai)", s);
    }
    if selected("20-step mcp tool (openai)") {
        let twenty = || {
            let mut v: Vec<Reply> = (0..19)
                .map(|i| Reply::tool_call("mcp_t_echo", json!({"text": format!("step {i}")})))
                .collect();
            v.push(Reply::text("all done"));
            v
        };
        let log = env.project().join(".crush").join("logs").join("crush.log");
        let _ = std::fs::remove_file(&log);
        let s = scenario(
            env,
            server,
            twenty,
            &["run", "-q", "-y", "-d", "twenty steps"],
        );
        report("20-step mcp tool (openai)", s);
        let rtt = logged_round_trips(&log);
        if !rtt.is_empty() {
            println!(
                "{:<28} median {:>8.3} ms   p90 {:>8.3} ms   ({} calls, from the debug log)",
                "mcp tools/call (via crush)",
                rtt[rtt.len() / 2],
                rtt[rtt.len() * 9 / 10],
                rtt.len()
            );
        }
    }
    env.write_config(&env.config_for(server, Dialect::OpenAi));
}

/// An edit without a language server, with one configured for another file type (nothing may
/// wait), and with real Python servers when their commands are given (`CRUSH_BENCH_PYRIGHT`:
/// `pyright-langserver`, `CRUSH_BENCH_PYLSP`: `pylsp`), on an error and its fix; for those, the
/// waits crush logged are printed too.
fn edit_scenarios(env: &TestEnv, server: &FakeServer) {
    const OK: &str = "count: int = 0\nprint(count)";
    const BROKEN: &str = "count: int = \"zero\"\nprint(counter)";
    let edit = |old: &str, new: &str| {
        Reply::tool_call(
            "edit",
            json!({"file_path": "m.py", "old_string": old, "new_string": new}),
        )
    };
    let script = || {
        vec![
            Reply::tool_call("view", json!({"file_path": "m.py"})),
            edit(OK, BROKEN),
            edit(BROKEN, OK),
            Reply::text("done"),
        ]
    };
    env.write_project_file("m.py", &format!("{OK}\n"));
    let args = ["run", "-q", "-y", "edit m.py"];
    if selected("view + 2 edits, no LSP") {
        env.use_server(server, Dialect::OpenAi);
        report(
            "view + 2 edits, no LSP",
            scenario(env, server, script, &args),
        );
    }
    let mut cfg = env.config_for(server, Dialect::OpenAi);
    if selected("view + 2 edits, LSP for .zz") {
        cfg["lsp"] = json!({"zz": {"command": "zz-language-server", "filetypes": ["zz"]}});
        env.write_config(&cfg);
        report(
            "view + 2 edits, LSP for .zz",
            scenario(env, server, script, &args),
        );
    }
    for (name, var, args_of) in [
        ("pyright", "CRUSH_BENCH_PYRIGHT", vec!["--stdio"]),
        ("pylsp", "CRUSH_BENCH_PYLSP", vec![]),
    ] {
        let title = format!("view + 2 edits, {name}");
        let Ok(command) = std::env::var(var) else {
            continue;
        };
        if !selected(&title) {
            continue;
        }
        cfg["lsp"] = json!({name: {"command": command, "args": args_of, "filetypes": ["py"]}});
        env.write_config(&cfg);
        let log = env.project().join(".crush/logs/crush.log");
        let _ = std::fs::remove_file(&log);
        report(&title, scenario(env, server, script, &args));
        let results = server.last_request().tool_results();
        println!("  first edit's result: {:?}", results.get(1).map(|r| &r.1));
        for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
            if line.contains(&format!("LSP server {name}")) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                println!("  {}", v["msg"].as_str().unwrap_or(line));
            }
        }
    }
}
