//! A throw-away environment for running the real `crush` binary: temp HOME, XDG and Crush
//! directories, a git project, a config pointing at the fake server, and a run with a hard timeout.

use super::reply::Dialect;
use super::server::FakeServer;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A run that takes longer than this is killed and the test fails.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The result of one run of the binary.
#[derive(Clone, Debug)]
pub(crate) struct Output {
    /// The exit code; `128 + signal` if killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub(crate) fn success(&self) -> bool {
        self.code == 0
    }

    /// Panics with both streams unless the exit code is `code`.
    pub(crate) fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub(crate) fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    /// The first stdout line that starts with `start`; panics showing stdout if none does.
    pub(crate) fn stdout_line(&self, start: &str) -> String {
        self.stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting with {start:?}:\n{}", self.stdout))
            .to_string()
    }
}

/// Temp directories laid out as:
/// `home/`, `config/` (CRUSH_GLOBAL_CONFIG), `data/` (CRUSH_GLOBAL_DATA), `xdg_config/`,
/// `xdg_data/`, `xdg_cache/` and `project/` (a git repository, the working directory).
pub(crate) struct TestEnv {
    dir: tempfile::TempDir,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

/// Environment variables removed from every run (besides `CRUSH_*` and `*_API_KEY`).
const SCRUBBED: &[&str] = &[
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "ftp_proxy",
    "OPENROUTER_API_KEY",
];

fn scrubbed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("CRUSH")
        || upper.starts_with("ANTHROPIC_")
        || upper.starts_with("OPENAI_")
        || upper.starts_with("AWS_")
        || upper.starts_with("AZURE_")
        || upper.starts_with("GOOGLE_")
        || upper.starts_with("VERTEXAI_")
        || upper.starts_with("GEMINI_")
        || upper.starts_with("GIT_")
        || upper.starts_with("CLAUDE_")
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_PROXY")
        || SCRUBBED.iter().any(|s| s.eq_ignore_ascii_case(name))
}

impl TestEnv {
    pub(crate) fn new() -> TestEnv {
        let dir = tempfile::Builder::new()
            .prefix("crush-test-")
            .tempdir()
            .expect("create temp dir");
        let env = TestEnv { dir };
        for d in [
            env.home(),
            env.config_dir(),
            env.data_dir(),
            env.xdg_config(),
            env.xdg_data(),
            env.xdg_cache(),
            env.project(),
        ] {
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
        }
        env.git_init(&env.project());
        env
    }

    /// Makes `dir` a git repository, so that it is a project root; a missing git is tolerated.
    pub(crate) fn git_init(&self, dir: &Path) {
        let _ = Command::new("git")
            .args(["-c", "init.defaultBranch=main", "init", "-q"])
            .current_dir(dir)
            .env("HOME", self.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }
    pub(crate) fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    /// `CRUSH_GLOBAL_CONFIG`
    pub(crate) fn config_dir(&self) -> PathBuf {
        self.root().join("config")
    }
    /// `CRUSH_GLOBAL_DATA`
    pub(crate) fn data_dir(&self) -> PathBuf {
        self.root().join("data")
    }
    pub(crate) fn xdg_config(&self) -> PathBuf {
        self.root().join("xdg_config")
    }
    pub(crate) fn xdg_data(&self) -> PathBuf {
        self.root().join("xdg_data")
    }
    pub(crate) fn xdg_cache(&self) -> PathBuf {
        self.root().join("xdg_cache")
    }
    /// The working directory of every run.
    pub(crate) fn project(&self) -> PathBuf {
        self.root().join("project")
    }

    /// Writes `config/crush.json` (the global config).
    pub(crate) fn write_config(&self, config: &Value) {
        let text = serde_json::to_string_pretty(config).expect("serialize config");
        self.write(&self.config_dir().join("crush.json"), &text);
    }

    /// Writes a file relative to the project directory, creating parent directories.
    pub(crate) fn write_project_file(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.project().join(rel);
        self.write(&p, content);
        p
    }

    /// Reads a file relative to the project directory.
    pub(crate) fn read_project_file(&self, rel: &str) -> String {
        let p = self.project().join(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    }

    fn write(&self, path: &Path, content: &str) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// A config whose provider `fake` (model `fake-model`, large and small) is `server`.
    pub(crate) fn config_for(&self, server: &FakeServer, dialect: Dialect) -> Value {
        let (kind, base_url) = match dialect {
            Dialect::Anthropic => ("anthropic", server.anthropic_base_url()),
            Dialect::OpenAi => ("openai-compat", server.openai_base_url()),
            Dialect::Gemini => ("google", server.url()),
            Dialect::Responses => ("openai", server.openai_base_url()),
            Dialect::AnthropicVertex => ("google-vertex", server.vertex_base_url()),
            Dialect::Bedrock => ("bedrock", server.url()),
        };
        let mut cfg = json!({
            "providers": {"fake": {
                "type": kind, "base_url": base_url, "api_key": "test-key",
                "models": [{"id": "fake-model", "name": "Fake Model", "context_window": 200000,
                    "default_max_tokens": 4096, "cost_per_1m_in": 3.0, "cost_per_1m_out": 15.0,
                    "cost_per_1m_in_cached": 3.75, "cost_per_1m_out_cached": 0.3}]}},
            "models": {"large": {"provider": "fake", "model": "fake-model"},
                       "small": {"provider": "fake", "model": "fake-model"}}
        });
        match dialect {
            // A server of your own speaks the Responses API only when told to.
            Dialect::Responses => cfg["providers"]["fake"]["use_responses_api"] = json!(true),
            Dialect::AnthropicVertex => {
                cfg["providers"]["fake"]["project"] = json!("fake-project");
                cfg["providers"]["fake"]["location"] = json!("global");
                for m in ["large", "small"] {
                    cfg["models"][m]["model"] = json!("claude-fake");
                }
                cfg["providers"]["fake"]["models"][0]["id"] = json!("claude-fake");
            }
            _ => {}
        }
        cfg
    }

    /// `write_config(config_for(server, dialect))`.
    pub(crate) fn use_server(&self, server: &FakeServer, dialect: Dialect) {
        self.write_config(&self.config_for(server, dialect));
    }

    /// The binary with a clean environment pointed at the temp dirs, cwd = `project/`.
    pub(crate) fn crush(&self) -> Command {
        self.crush_at(Path::new(env!("CARGO_BIN_EXE_crush")))
    }

    /// Like [`crush`](Self::crush) with another build of the binary (an absolute path: the
    /// command runs in `project/`).
    pub(crate) fn crush_at(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        for (name, _) in std::env::vars_os() {
            if let Some(n) = name.to_str()
                && scrubbed(n)
            {
                cmd.env_remove(n);
            }
        }
        cmd.env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.xdg_config())
            .env("XDG_DATA_HOME", self.xdg_data())
            .env("XDG_CACHE_HOME", self.xdg_cache())
            .env("CRUSH_GLOBAL_CONFIG", self.config_dir())
            .env("CRUSH_SYSTEM_CONFIG", self.root().join("etc-crush.json"))
            .env("CRUSH_GLOBAL_DATA", self.data_dir())
            .env("CRUSH_DISABLE_PROVIDER_AUTO_UPDATE", "1")
            // No test asks this machine's ollama, LM Studio or llama.cpp ports.
            .env("CRUSH_LOCAL_PROBE", "")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.project());
        cmd
    }

    /// Runs `crush ARGS` with extra environment variables and no stdin.
    pub(crate) fn run_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = self.crush();
        cmd.args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        run_command(cmd, None, RUN_TIMEOUT)
    }

    /// Every stored part of session `id` (`crush sessions show ID --json`), in order.
    pub(crate) fn stored_parts(&self, id: &str) -> Vec<Value> {
        let show = self.run(&["sessions", "show", id, "--json"], None);
        show.assert_success();
        let s: Value = serde_json::from_str(&show.stdout).expect("sessions show --json");
        s["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// Runs `crush ARGS` with its stdout on a pseudo-terminal (stdin closed, stderr a pipe):
    /// what it writes to a terminal, as the terminal received it.
    pub(crate) fn run_on_terminal(&self, args: &[&str]) -> Output {
        self.run_on_terminal_with(args, None, &[])
    }

    /// [`run_on_terminal`](Self::run_on_terminal) with `stdin` piped in (closed if `None`) and
    /// `env` set.
    pub(crate) fn run_on_terminal_with(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> Output {
        let (mut master, slave) = open_pty();
        let mut cmd = self.crush();
        cmd.args(args)
            .env("TERM", "xterm-256color")
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(slave)
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn crush");
        drop(cmd);
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).expect("write stdin");
        }
        let err = collect(child.stderr.take().expect("stderr"));
        // The master reads EIO once the child (the last holder of the slave) is gone.
        let out = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = master.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            buf
        });
        let code = wait_exit(&mut child, "crush on a terminal did not end", || {
            String::from_utf8_lossy(&err.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
        });
        let stdout = out.join().expect("pty reader");
        let stderr = err.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Output {
            code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    /// Runs `crush ARGS` with `stdin` (closed if `None`), killed after [`RUN_TIMEOUT`].
    pub(crate) fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.crush();
        cmd.args(args);
        run_command(cmd, stdin, RUN_TIMEOUT)
    }
}

/// A pseudo-terminal: (master, slave).
pub(crate) fn open_pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: the usual posix_openpt sequence; every descriptor is checked and owned.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(s >= 0);
        let ws = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        libc::ioctl(s, libc::TIOCSWINSZ, &ws);
        (std::fs::File::from_raw_fd(m), std::fs::File::from_raw_fd(s))
    }
}

/// Sends SIGINT to `child` and waits for it to end; the test fails if it still runs at
/// `deadline`.
pub(crate) fn interrupt(
    child: &mut std::process::Child,
    deadline: Instant,
) -> std::process::ExitStatus {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    loop {
        if let Some(s) = child.try_wait().expect("wait for crush") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("crush did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Collects what `pipe` carries, on a thread of its own, as it comes.
pub(crate) fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let b = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

/// Waits for `child` to exit and returns its code (`128 + signal` if a signal killed it). Past
/// [`RUN_TIMEOUT`] it is killed and the test fails with `what` and what `output` says: a crush
/// that goes on waiting is a failure, not a slow pass.
pub(crate) fn wait_exit(
    child: &mut std::process::Child,
    what: &str,
    output: impl Fn() -> String,
) -> i32 {
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for crush") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}\n--- stderr ---\n{}", output());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Runs `cmd` to completion with `stdin`, in its own process group. Past `timeout` the whole
/// group is killed and the test panics showing the output so far.
pub(crate) fn run_command(mut cmd: Command, stdin: Option<&str>, timeout: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    let desc = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {desc}: {e}"));
    let pid = child.id() as libc::pid_t;

    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let input = input.to_owned();
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes()); // EPIPE if the child doesn't read: fine
        });
    }
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<()>();
    let collect = |pipe: Option<Box<dyn Read + Send>>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = pipe {
            let (buf, done) = (buf.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
                let _ = done.send(());
            });
        } else {
            let _ = done_tx.send(());
        }
        buf
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let text = |b: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&b.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    };

    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // SAFETY: plain syscalls on the group we created for this child.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{desc} still running after {timeout:?}: killed\n--- stdout so far ---\n{}\n--- stderr so far ---\n{}",
                    text(&out),
                    text(&err)
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("wait for {desc}: {e}"),
        }
    };
    // Readers end at EOF; a leftover grandchild may hold the pipes, so don't wait forever.
    let grace = Instant::now() + Duration::from_secs(5);
    let drained = (0..2).all(|_| done_rx.recv_deadline(grace).is_ok());
    if !drained {
        // Stragglers of the child's own process group still hold the pipes.
        // SAFETY: a plain syscall on the group created for this child.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Output {
        code,
        stdout: text(&out),
        stderr: text(&err),
    }
}
