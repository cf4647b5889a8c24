//! Runs a process the way the bash tool and hooks need it: its own process group, a working
//! directory, extra environment, optional stdin bytes, stdout and stderr captured on their own
//! threads into capped buffers (head and tail kept), a timeout and a cancel flag. On timeout or
//! cancel the whole group gets SIGTERM, then SIGKILL after a grace period. A grandchild that keeps
//! the pipes open cannot hang the caller: after the main process exits (or is killed) the pipes
//! are waited for only briefly.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

/// What to run.
#[derive(Clone, Debug)]
pub enum Program {
    /// `/bin/sh -c <script>`.
    Shell(String),
    /// A program and its arguments, run directly (no shell).
    Exec(Vec<String>),
}

#[derive(Clone, Debug)]
pub struct ShellSpec {
    pub program: Program,
    pub cwd: PathBuf,
    /// Added to (or overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment.
    pub env_remove: Vec<String>,
    /// Bytes written to the process's stdin (from their own thread; a process that does not read
    /// them is fine). None: stdin is /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// None: no time limit.
    pub timeout: Option<Duration>,
    /// Polled about every 20 ms; when set, the process group is killed.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Bytes kept per stream (half from the start, half from the end).
    pub output_cap: usize,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// How long to keep reading after the main process exited while something it started in the
    /// background still holds the output pipes. Such processes are left running.
    pub linger: Duration,
}

impl ShellSpec {
    /// `/bin/sh -c command` in `cwd` with defaults: no stdin, no timeout, 256 KB per stream,
    /// 1 s grace, 1 s linger.
    pub fn shell(command: impl Into<String>, cwd: impl Into<PathBuf>) -> ShellSpec {
        ShellSpec::new(Program::Shell(command.into()), cwd)
    }

    /// A program with arguments (no shell), same defaults as `shell`.
    pub fn exec(argv: Vec<String>, cwd: impl Into<PathBuf>) -> ShellSpec {
        ShellSpec::new(Program::Exec(argv), cwd)
    }

    fn new(program: Program, cwd: impl Into<PathBuf>) -> ShellSpec {
        ShellSpec {
            program,
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: None,
            timeout: None,
            cancel: None,
            output_cap: 256 * 1024,
            kill_grace: Duration::from_secs(1),
            linger: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShellResult {
    /// The process id, which is also the process group id.
    pub pid: u32,
    /// The exit code, when the process exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the process, if any.
    pub signal: Option<i32>,
    /// Decoded lossily; when over the cap the middle is replaced by a marker line.
    pub stdout: String,
    pub stderr: String,
    /// Bytes dropped from the middle of each stream.
    pub stdout_dropped: usize,
    pub stderr_dropped: usize,
    pub timed_out: bool,
    pub canceled: bool,
    pub duration: Duration,
}

impl ShellResult {
    /// The shell convention: the exit code, or 128 + signal, or -1 when unknown.
    pub fn code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => -1,
        }
    }

    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.canceled
    }
}

/// Head-and-tail capped byte buffer.
struct Capped {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    dropped: usize,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        let head_cap = cap / 2;
        Capped {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            dropped: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        let n = (self.head_cap - self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..n]);
        let rest = &data[n..];
        if rest.is_empty() {
            return;
        }
        if rest.len() >= self.tail_cap {
            self.dropped += self.tail.len() + rest.len() - self.tail_cap;
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_cap..]);
        } else {
            self.tail.extend(rest);
            let over = self.tail.len().saturating_sub(self.tail_cap);
            self.tail.drain(..over);
            self.dropped += over;
        }
    }

    fn render(&self) -> (String, usize) {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.dropped == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return (String::from_utf8_lossy(&all).into_owned(), 0);
        }
        let text = format!(
            "{}\n[... {} bytes truncated ...]\n{}",
            String::from_utf8_lossy(&self.head),
            self.dropped,
            String::from_utf8_lossy(&tail)
        );
        (text, self.dropped)
    }
}

fn spawn_reader(
    mut src: impl Read + Send + 'static,
    buf: Arc<Mutex<Capped>>,
    done: crossbeam_channel::Sender<()>,
) {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match src.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    if let Ok(mut b) = buf.lock() {
                        b.push(&chunk[..n]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

fn killpg(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: plain syscall; a group that no longer exists yields ESRCH, which we ignore.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
}

fn status_parts(status: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => (s.code(), s.signal()),
        None => (None, None),
    }
}

/// Waits on the pipe-reader completion channel for up to `d` (or until both readers finished).
fn wait_readers(done_rx: &Receiver<()>, finished: &mut usize, d: Duration) {
    let until = Instant::now() + d;
    while *finished < 2 {
        let now = Instant::now();
        if now >= until {
            break;
        }
        match done_rx.recv_timeout(until - now) {
            Ok(()) => *finished += 1,
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// Runs the spec to completion (or timeout/cancel). Err only when the process cannot be started
/// (missing working directory, missing program, ...).
pub fn run(spec: &ShellSpec) -> io::Result<ShellResult> {
    use std::os::unix::process::CommandExt;

    let mut cmd = match &spec.program {
        Program::Shell(script) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(script);
            c
        }
        Program::Exec(argv) => {
            let Some((prog, args)) = argv.split_first() else {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
            };
            let mut c = Command::new(prog);
            c.args(args);
            c
        }
    };
    cmd.current_dir(&spec.cwd)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }

    let start = Instant::now();
    let mut child: Child = cmd.spawn()?;
    let pgid = child.id() as i32;

    if let (Some(payload), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        thread::spawn(move || {
            // EPIPE (the process does not read its stdin) is fine.
            let _ = stdin.write_all(&payload);
        });
    }

    let cap = spec.output_cap.max(2);
    let out_buf = Arc::new(Mutex::new(Capped::new(cap)));
    let err_buf = Arc::new(Mutex::new(Capped::new(cap)));
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<()>();
    let mut finished = 0usize;
    match child.stdout.take() {
        Some(s) => spawn_reader(s, out_buf.clone(), done_tx.clone()),
        None => finished += 1,
    }
    match child.stderr.take() {
        Some(s) => spawn_reader(s, err_buf.clone(), done_tx.clone()),
        None => finished += 1,
    }
    drop(done_tx);

    let deadline = spec.timeout.map(|t| start + t);
    let poll = Duration::from_millis(20);
    let mut status: Option<ExitStatus> = None;
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut canceled = false;

    loop {
        if status.is_none()
            && let Ok(Some(s)) = child.try_wait()
        {
            status = Some(s);
            exited_at = Some(Instant::now());
        }
        if let Some(at) = exited_at
            && (finished >= 2 || at.elapsed() >= spec.linger)
        {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            break;
        }
        if spec
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            canceled = true;
            break;
        }
        wait_readers(&done_rx, &mut finished, poll);
        if finished >= 2 && status.is_none() {
            // Pipes closed; the process is almost surely exiting. Look again soon, without
            // spinning on the closed channel.
            thread::sleep(Duration::from_micros(200));
        }
    }

    if timed_out || canceled {
        killpg(pgid, libc::SIGTERM);
        let grace_end = Instant::now() + spec.kill_grace;
        while Instant::now() < grace_end {
            if status.is_none()
                && let Ok(Some(s)) = child.try_wait()
            {
                status = Some(s);
            }
            if status.is_some() && finished >= 2 {
                break;
            }
            wait_readers(&done_rx, &mut finished, poll);
            if finished >= 2 {
                thread::sleep(Duration::from_millis(2));
            }
        }
        // Anything of the group still alive (including background children) dies now.
        killpg(pgid, libc::SIGKILL);
        let reap_end = Instant::now() + Duration::from_secs(2);
        while status.is_none() && Instant::now() < reap_end {
            match child.try_wait() {
                Ok(Some(s)) => status = Some(s),
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        wait_readers(&done_rx, &mut finished, Duration::from_millis(200));
    }

    let (exit_code, signal) = status_parts(status);
    let (stdout, stdout_dropped) = out_buf.lock().map(|b| b.render()).unwrap_or_default();
    let (stderr, stderr_dropped) = err_buf.lock().map(|b| b.render()).unwrap_or_default();
    Ok(ShellResult {
        pid: pgid as u32,
        exit_code,
        signal,
        stdout,
        stderr,
        stdout_dropped,
        stderr_dropped,
        timed_out,
        canceled,
        duration: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn group_alive(pgid: i32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::killpg(pgid, 0) == 0 }
    }

    #[test]
    fn captures_streams_and_exit_code() {
        let d = tmp();
        let mut spec = ShellSpec::shell(
            "echo out; echo err >&2; pwd; echo $CRUSH_T; exit 3",
            d.path(),
        );
        spec.env.push(("CRUSH_T".into(), "yes".into()));
        let r = run(&spec).unwrap();
        assert_eq!(r.exit_code, Some(3));
        let cwd = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(r.stdout, format!("out\n{}\nyes\n", cwd.display()));
        assert_eq!(r.stderr, "err\n");
        assert!(!r.timed_out && !r.canceled && !r.success());
    }

    #[test]
    fn stdin_payload_and_ignored_stdin() {
        let d = tmp();
        let mut spec = ShellSpec::shell("cat", d.path());
        spec.stdin = Some(b"hello".to_vec());
        assert_eq!(run(&spec).unwrap().stdout, "hello");
        // A large payload the process never reads must not hang or fail.
        let mut spec = ShellSpec::shell("true", d.path());
        spec.stdin = Some(vec![b'x'; 1 << 20]);
        assert!(run(&spec).unwrap().success());
        // No payload: stdin is /dev/null, so cat ends immediately.
        assert_eq!(run(&ShellSpec::shell("cat", d.path())).unwrap().stdout, "");
    }

    #[test]
    fn output_cap_keeps_head_and_tail() {
        let d = tmp();
        let mut spec = ShellSpec::shell(
            "echo START; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo END",
            d.path(),
        );
        spec.output_cap = 200;
        let r = run(&spec).unwrap();
        assert!(r.stdout.starts_with("START\n"), "{}", r.stdout);
        assert!(r.stdout.ends_with("END\n"));
        assert!(r.stdout_dropped > 10_000);
        assert!(r.stdout.contains("bytes truncated ...]"));
        assert!(r.stdout.len() < 300);
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let d = tmp();
        let pidfile = d.path().join("bg.pid");
        let mut spec = ShellSpec::shell(
            format!("sleep 30 & echo $! > {}; sleep 30", pidfile.display()),
            d.path(),
        );
        spec.timeout = Some(Duration::from_millis(300));
        let started = Instant::now();
        let r = run(&spec).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(r.timed_out);
        assert!(r.exit_code.is_none());
        let bg: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background sleep shared the group; it is dead (possibly a zombie until init reaps
        // it, so check the group through its members' state rather than kill(0)).
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{bg}/stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
            if stat.is_empty() || state == Some('Z') || state == Some('X') {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "background child still running: {stat}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn cancel_flag_stops_the_process() {
        let d = tmp();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut spec = ShellSpec::shell("echo begun; sleep 30", d.path());
        spec.cancel = Some(cancel.clone());
        let c2 = cancel.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            c2.store(true, Ordering::Relaxed);
        });
        let started = Instant::now();
        let r = run(&spec).unwrap();
        t.join().unwrap();
        assert!(r.canceled);
        assert_eq!(r.stdout, "begun\n");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn term_ignoring_process_gets_killed() {
        let d = tmp();
        let mut spec = ShellSpec::shell("trap '' TERM; sleep 30", d.path());
        spec.timeout = Some(Duration::from_millis(200));
        spec.kill_grace = Duration::from_millis(200);
        let started = Instant::now();
        let r = run(&spec).unwrap();
        assert!(r.timed_out);
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn background_holder_of_pipes_does_not_hang() {
        let d = tmp();
        let mut spec = ShellSpec::shell("echo hi; sleep 5 &", d.path());
        spec.linger = Duration::from_millis(200);
        let started = Instant::now();
        let r = run(&spec).unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.stdout, "hi\n");
        // The straggler was left running in the group; clean it up.
        let pgid = r.pid as i32;
        assert!(group_alive(pgid));
        killpg(pgid, libc::SIGKILL);
    }

    #[test]
    fn exec_and_spawn_errors() {
        let d = tmp();
        let r = run(&ShellSpec::exec(
            vec!["printf".into(), "%s-%s".into(), "a b".into(), "c".into()],
            d.path(),
        ))
        .unwrap();
        assert_eq!(r.stdout, "a b-c");
        assert!(run(&ShellSpec::exec(vec!["/nonexistent/prog".into()], d.path())).is_err());
        assert!(run(&ShellSpec::shell("true", d.path().join("missing"))).is_err());
        assert!(run(&ShellSpec::exec(vec![], d.path())).is_err());
    }
}
