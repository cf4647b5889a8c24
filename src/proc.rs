//! The one process runner: every child process crush starts goes through here — the bash tool,
//! hooks, crushrc files and `$(...)` values, the REPL's `!command`, git for the system prompt,
//! and long-lived protocol servers.
//!
//! - Each child leads a new process group, so a timeout or a cancel reaches everything it
//!   started.
//! - stdin is /dev/null, bytes written from their own thread (a child that never reads them is
//!   fine), or a pipe handed to the caller (`spawn_piped`).
//! - stdout and stderr are read on their own threads into capped buffers (the head, or the head
//!   and the tail), optionally streamed to a callback, or merged into one pipe so they keep their
//!   order.
//! - A group is signalled only while its leader is unreaped (the exit is observed with
//!   `waitid(WNOWAIT)`), so the group id can never name somebody else's group.
//! - Timeout or cancel: SIGTERM to the group, SIGKILL after a grace. A grandchild that keeps the
//!   pipes open after the child exited is abandoned after `linger` (or killed, with
//!   `kill_leftovers`).
//! - Every live group is registered; `kill_all` (called by the signal owner, `signal.rs`, when
//!   crush ends) kills them.
//! - Jobs (`job.rs`): children that may outlive their call, run by one job server per crush that
//!   kills their groups when crush ends, however it ends. The children of `run` and
//!   `spawn_piped` are started by the job server too, so what they leave running dies with crush
//!   as well (crush(1) SECURITY, Children); where no job server runs (unit tests), crush starts
//!   them itself.

pub(crate) mod job;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Program {
    /// `SHELL -c SCRIPT` with the shell of `shell_path`.
    Shell(String),
    /// A program and its arguments, run directly.
    Exec(Vec<String>),
}

/// Which part of a stream longer than the cap is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The first `cap` bytes; the rest is read and discarded.
    Head,
    /// Half the cap from the start and half from the end, with a marker line between.
    HeadTail,
}

/// How to run one child to completion.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub program: Program,
    pub cwd: PathBuf,
    /// Start from an empty environment instead of crush's own.
    pub env_clear: bool,
    /// Removed from the inherited environment.
    pub env_remove: Vec<String>,
    /// Added to (or replacing values of) the environment.
    pub env: Vec<(String, String)>,
    /// Bytes written to stdin; None: stdin is /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// None: no time limit.
    pub timeout: Option<Duration>,
    /// Watched while the child runs; when set, the child's group is stopped.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Bytes kept per stream.
    pub output_cap: usize,
    pub keep: Keep,
    /// stderr goes into stdout's pipe, so the two keep their order (`Outcome::stdout`).
    pub merge_output: bool,
    /// Between SIGTERM and SIGKILL when the child is stopped.
    pub kill_grace: Duration,
    /// How long to keep reading after the child exited while something it started still holds
    /// the output pipes.
    pub linger: Duration,
    /// When the child exits, kill whatever it left running in its group. Otherwise background
    /// processes it started (`cmd &`) live on.
    pub kill_leftovers: bool,
    /// Run confined (crush(1) SECURITY, sandbox): applied in the child between fork and exec,
    /// inherited by all it starts; `TMPDIR` becomes the sandbox's private directory.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// crush's own short command with fixed arguments, waited for and bounded by `timeout`
    /// (the git status of the system prompt): started by crush itself, so a run that needs no
    /// job server starts none.
    pub direct: bool,
}

impl Spec {
    /// `SHELL -c command` in `cwd`: no stdin, no time limit, 256 KiB per stream (head and tail),
    /// 1 s grace, 1 s linger.
    pub(crate) fn shell(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Spec {
        Spec::new(Program::Shell(command.into()), cwd)
    }

    /// A program with its arguments, no shell; the same defaults as `shell`.
    pub(crate) fn exec(argv: Vec<String>, cwd: impl Into<PathBuf>) -> Spec {
        Spec::new(Program::Exec(argv), cwd)
    }

    pub(crate) fn new(program: Program, cwd: impl Into<PathBuf>) -> Spec {
        Spec {
            program,
            cwd: cwd.into(),
            env_clear: false,
            env_remove: Vec::new(),
            env: Vec::new(),
            stdin: None,
            timeout: None,
            cancel: None,
            output_cap: 256 * 1024,
            keep: Keep::HeadTail,
            merge_output: false,
            kill_grace: Duration::from_secs(1),
            linger: Duration::from_secs(1),
            kill_leftovers: false,
            sandbox: None,
            direct: false,
        }
    }

    fn command(&self) -> io::Result<Command> {
        let mut cmd = match &self.program {
            Program::Shell(script) => {
                let mut c = Command::new(shell_path());
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
        self.configure(&mut cmd);
        Ok(cmd)
    }

    /// Sets `cmd`'s working directory and environment as the spec says, and makes it lead a new
    /// process group.
    fn configure(&self, cmd: &mut Command) {
        cmd.current_dir(&self.cwd).process_group(0);
        if self.env_clear {
            cmd.env_clear();
        }
        for k in &self.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        if let Some(sb) = self.sandbox.clone() {
            // SAFETY: `apply` only makes syscalls on what was prepared before the fork.
            unsafe {
                cmd.pre_exec(move || sb.apply());
            }
        }
    }

    /// The variables added to the environment: `env`, then the sandbox's.
    fn env(&self) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        if let Some(sb) = &self.sandbox {
            env.extend(sb.env());
        }
        env
    }
}

/// The shell of every script crush runs — `Program::Shell`, the bash tool, hooks, crushrc files,
/// `$(...)` values, the REPL's `!command` (crush(1) ENVIRONMENT, CRUSH_SHELL): `CRUSH_SHELL`
/// when set (a path, or a name looked up on PATH), else `bash` on PATH, else /bin/sh. Chosen
/// once per process; falling back to /bin/sh prints one notice line on stderr.
/// Read from the process environment alone, like crush's other CRUSH_* settings (crush(1)
/// CONFIGURATION): the shell runs crushrc files and `$(...)` values before any session's
/// variables exist, and one process may serve several sessions (crush acp).
pub(crate) fn shell_path() -> &'static Path {
    static SHELL: OnceLock<PathBuf> = OnceLock::new();
    SHELL.get_or_init(|| {
        let (path, notice) = choose_shell(std::env::var_os("CRUSH_SHELL"), || which("bash"));
        if let Some(n) = notice {
            crate::ewriteln!("crush: {n}");
        }
        path
    })
}

/// The shell's name as a user knows it (`bash`, `sh`, `zsh`).
pub(crate) fn shell_name() -> String {
    let p = shell_path();
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// The shell for `CRUSH_SHELL` (`env`) and the bash found on PATH, and the notice to print.
fn choose_shell(
    env: Option<std::ffi::OsString>,
    bash: impl FnOnce() -> Option<PathBuf>,
) -> (PathBuf, Option<String>) {
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        if p.components().count() > 1 || p.is_absolute() {
            return (p, None);
        }
        return (which(&v.to_string_lossy()).unwrap_or(p), None);
    }
    match bash() {
        Some(b) => (b, None),
        None => (
            PathBuf::from("/bin/sh"),
            Some(
                "bash is not on PATH: the bash tool, hooks and crushrc files run with /bin/sh (set CRUSH_SHELL to choose a shell)"
                    .to_string(),
            ),
        ),
    }
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `name` looked up on PATH (an executable regular file).
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// Whether `p` names an executable regular file.
pub(crate) fn executable(p: &Path) -> bool {
    is_executable(p)
}

/// What a finished (or stopped) child left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The child's pid, which is also its process group id; 0 when the child was never started
    /// (the cancel flag was already set).
    pub pid: u32,
    /// The exit code, when the child exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the child, if one did.
    pub signal: Option<i32>,
    /// What was kept of each stream (see `Keep`); with `merge_output`, both streams in stdout.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes not kept.
    pub stdout_dropped: usize,
    pub stderr_dropped: usize,
    pub timed_out: bool,
    pub canceled: bool,
    /// The child exited but something it started kept the pipes open; reading stopped.
    pub abandoned: bool,
    pub duration: Duration,
}

impl Outcome {
    /// The shell convention: the exit code, or 128 + signal, or -1 when unknown.
    pub(crate) fn code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => -1,
        }
    }

    pub(crate) fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.canceled
    }

    pub(crate) fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A stream kept up to a cap.
struct Capped {
    keep: Keep,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    dropped: usize,
    /// How much of the stream a reader has seen (`unread`).
    read_pos: usize,
}

impl Capped {
    fn new(cap: usize, keep: Keep) -> Capped {
        let cap = cap.max(2);
        let head_cap = match keep {
            Keep::Head => cap,
            Keep::HeadTail => cap / 2,
        };
        Capped {
            keep,
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            dropped: 0,
            read_pos: 0,
        }
    }

    /// Bytes pushed so far.
    fn total(&self) -> usize {
        self.head.len() + self.dropped + self.tail.len()
    }

    /// What was pushed since the last call, and how many of those bytes are lost (they fell
    /// between the head and the tail).
    fn unread(&mut self) -> (Vec<u8>, usize) {
        let (h, tail_start) = (self.head.len(), self.head.len() + self.dropped);
        let p = self.read_pos;
        self.read_pos = self.total();
        let mut out = Vec::new();
        let mut skipped = 0;
        if p < h {
            out.extend_from_slice(&self.head[p..]);
            skipped = self.dropped;
            out.extend(self.tail.iter());
        } else if p < tail_start {
            skipped = tail_start - p;
            out.extend(self.tail.iter());
        } else {
            out.extend(self.tail.iter().skip(p - tail_start));
        }
        (out, skipped)
    }

    /// A copy of what `take` returns, leaving the stream as it is.
    fn kept(&self) -> (Vec<u8>, usize) {
        let mut out = self.head.clone();
        if self.dropped > 0 && self.keep == Keep::HeadTail {
            out.extend_from_slice(
                format!("\n[... {} bytes truncated ...]\n", self.dropped).as_bytes(),
            );
        }
        out.extend(self.tail.iter());
        (out, self.dropped)
    }

    fn push(&mut self, data: &[u8]) {
        let n = (self.head_cap - self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..n]);
        let rest = &data[n..];
        if rest.is_empty() {
            return;
        }
        if self.tail_cap == 0 {
            self.dropped += rest.len();
        } else if rest.len() >= self.tail_cap {
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

    /// The kept bytes; head and tail are joined by a marker line when something was dropped.
    fn take(&mut self) -> (Vec<u8>, usize) {
        let kept = self.kept();
        self.head.clear();
        self.tail.clear();
        kept
    }
}

/// What the helper threads of one child report.
enum Ev {
    /// A chunk of output (only when the caller streams it).
    Chunk(Vec<u8>),
    /// One output pipe reached its end.
    Eof,
    /// The child exited (it is not reaped yet).
    Exited,
    /// A job's command ended so (the job server's report).
    Status(job::Exit),
    /// No process of a job's group is left (the job server's report).
    Gone,
    /// The job server started the command (its pid).
    Started(i32),
    /// The job server could not start the command (why).
    Failed(String),
}

/// Reads `pipe` to its end on a thread of its own; false when no thread could be started (the
/// pipe is then closed and the child gets EPIPE, which it survives).
fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    buf: Arc<Mutex<Capped>>,
    stream: bool,
    tx: Sender<Ev>,
) -> bool {
    std::thread::Builder::new()
        .name("proc-output".into())
        .spawn(move || {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(&chunk[..n]);
                        if stream && tx.send(Ev::Chunk(chunk[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(Ev::Eof);
        })
        .is_ok()
}

/// Waits until `pid` (our child) exits, without reaping it. False when that cannot be known.
fn wait_exit_keeping_zombie(pid: i32) -> bool {
    loop {
        // SAFETY: waitid on our own child with a zeroed siginfo it fills in; WNOWAIT leaves the
        // child to be reaped by `Child::wait`.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above: `info` is a valid, writable siginfo for the call.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

fn spawn_waiter(pid: i32, tx: Sender<Ev>) {
    let _ = std::thread::Builder::new()
        .name("proc-wait".into())
        .spawn(move || {
            if wait_exit_keeping_zombie(pid) {
                let _ = tx.send(Ev::Exited);
            }
        });
}

/// Process groups crush started and has not reaped the leader of.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// A registered process group: the child leads it and is not reaped while this lives.
struct Group {
    pgid: i32,
}

impl Group {
    /// Spawns `cmd` (already set to lead a new group) and registers its group, under the lock
    /// `kill_all` takes, so no group escapes it.
    fn spawn(cmd: &mut Command) -> io::Result<(Child, Group)> {
        let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
        let child = cmd.spawn()?;
        let pgid = child.id() as i32;
        groups.push(pgid);
        Ok((child, Group { pgid }))
    }

    fn signal(&self, sig: i32) {
        if self.pgid > 0 {
            // SAFETY: a plain syscall on the group this runner created; its leader is not reaped
            // yet, so the id still names that group. A group with no member left gives ESRCH.
            unsafe {
                libc::killpg(self.pgid, sig);
            }
        }
    }
}

impl Drop for Group {
    /// Unregisters the group; the caller reaps the leader after this.
    fn drop(&mut self) {
        GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&g| g != self.pgid);
    }
}

/// Keeps crush's own environment from the processes it starts (crush(1) SECURITY,
/// Environments), at start-up, before any thread: the values of secret-looking variables are
/// moved out of the block the kernel wrote at exec, which /proc/PID/environ shows to any
/// process of the same user (and to root), and the block's copy is zeroed; and the process is
/// made not dumpable, which closes its /proc/PID/environ and its memory to other processes of
/// the same user. No core dump is written then, and a debugger or strace attaches only as root.
/// Children are unaffected: exec makes a program dumpable again.
pub(crate) fn hide_environment() {
    #[cfg(target_os = "linux")]
    {
        scrub_exec_environment();
        // SAFETY: a plain prctl on this process.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
}

/// The range of this process's memory /proc/self/environ shows (fields 50 and 51 of its stat).
#[cfg(target_os = "linux")]
fn exec_environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which ends with the last ')', start at field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some((field(50)?, field(51)?))
}

#[cfg(target_os = "linux")]
fn scrub_exec_environment() {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    unsafe extern "C" {
        static environ: *const *mut libc::c_char;
    }
    let Some((start, end)) = exec_environment_block() else {
        return;
    };
    let entries = || {
        let mut out = Vec::new();
        // SAFETY: start-up, before any thread: `environ` is the NULL-terminated array of
        // NUL-terminated strings libc keeps, and nothing changes it meanwhile.
        unsafe {
            let mut p = environ;
            while !p.is_null() && !(*p).is_null() {
                out.push(*p);
                p = p.add(1);
            }
        }
        out
    };
    for entry in entries() {
        if !(start..end).contains(&(entry as usize)) {
            continue;
        }
        // SAFETY: an entry of `environ`, inside the block the kernel wrote.
        let bytes = unsafe { CStr::from_ptr(entry) }.to_bytes().to_vec();
        let Some(eq) = bytes.iter().position(|&b| b == b'=') else {
            continue;
        };
        let Ok(name) = std::str::from_utf8(&bytes[..eq]) else {
            continue;
        };
        if name.is_empty() || !crate::env::secret_name(name) {
            continue;
        }
        let value = std::ffi::OsStr::from_bytes(&bytes[eq + 1..]);
        // SAFETY: start-up, before any thread reads or writes the environment.
        unsafe { std::env::set_var(name, value) };
        // The variable now lives in a copy; the block's bytes are zeroed only when nothing
        // points at them any more (a name listed twice keeps its second entry).
        if entries().contains(&entry) {
            continue;
        }
        // SAFETY: the value's bytes of a string inside the exec block, which no entry of
        // `environ` points at any more; the terminating NUL stays.
        unsafe {
            std::ptr::write_bytes(entry.add(eq + 1), 0, bytes.len() - eq - 1);
        }
    }
}

/// Kills every process group crush started whose leader is not reaped yet, and every job (at
/// exit).
pub(crate) fn kill_all() {
    job::kill_all();
    let groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    for &g in groups.iter() {
        // SAFETY: registered groups have unreaped leaders (see `Group`).
        unsafe {
            libc::killpg(g, libc::SIGKILL);
        }
    }
}

/// Reaps an exited (or killed) child, waiting at most two seconds.
fn reap(child: &mut Child) -> Option<ExitStatus> {
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(2)),
            _ => return None,
        }
    }
}

/// Runs `spec` to completion, timeout or cancel. Err only when the child cannot be started
/// (missing program or working directory).
pub(crate) fn run(spec: &Spec) -> io::Result<Outcome> {
    run_inner(spec, None)
}

/// `run`, with each chunk of output passed to `on_output` as it arrives.
pub(crate) fn run_streaming(spec: &Spec, on_output: &mut dyn FnMut(&[u8])) -> io::Result<Outcome> {
    run_inner(spec, Some(on_output))
}

/// Where streamed output goes (None: it is only kept).
type OnOutput<'a> = Option<&'a mut dyn FnMut(&[u8])>;

fn run_inner(spec: &Spec, mut on_output: OnOutput) -> io::Result<Outcome> {
    if spec
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::SeqCst))
    {
        // Canceled before it started: nothing runs.
        return Ok(Outcome {
            canceled: true,
            ..Outcome::default()
        });
    }
    let (in_r, in_w) = match spec.stdin {
        Some(_) => io::pipe().map(|(r, w)| (Some(r), Some(w)))?,
        None => (None, None),
    };
    let (out_r, out_w) = io::pipe()?;
    // Merged: stderr goes into stdout's pipe.
    let (err_r, err_w) = if spec.merge_output {
        (None, out_w.try_clone()?)
    } else {
        io::pipe().map(|(r, w)| (Some(r), w))?
    };
    let start = Instant::now();
    let mut fds = vec![out_w.as_raw_fd(), err_w.as_raw_fd()];
    fds.extend(in_r.as_ref().map(|r| r.as_raw_fd()));
    let (tx, rx) = crossbeam_channel::unbounded::<Ev>();
    let served = if spec.direct {
        None
    } else {
        job::Served::start(spec, &fds)
    };
    let runner = match served {
        Some(served) => {
            let served = served?;
            // The server's report of the end, passed on; nothing after it is needed here.
            let (events, tx) = (served.events.clone(), tx.clone());
            let _ = std::thread::Builder::new()
                .name("proc-served".into())
                .spawn(move || {
                    for ev in events {
                        if let Ev::Status(_) = ev {
                            let _ = tx.send(ev);
                            break;
                        }
                    }
                });
            Runner::Served(served)
        }
        None => {
            let mut cmd = spec.command()?;
            cmd.stdin(match &in_r {
                Some(r) => Stdio::from(r.try_clone()?),
                None => Stdio::null(),
            })
            .stdout(out_w.try_clone()?)
            .stderr(err_w.try_clone()?);
            let (child, group) = Group::spawn(&mut cmd)?;
            spawn_waiter(group.pgid, tx.clone());
            Runner::Direct(child, Some(group))
        }
    };
    // The child's ends now live only in the child.
    drop((in_r, out_w, err_w));
    let pgid = runner.pid();

    if let (Some(payload), Some(mut stdin)) = (spec.stdin.clone(), in_w) {
        let _ = std::thread::Builder::new()
            .name("proc-stdin".into())
            .spawn(move || {
                // EPIPE (the child does not read its stdin) is fine.
                let _ = stdin.write_all(&payload);
            });
    }

    let stream = on_output.is_some();
    let out = Arc::new(Mutex::new(Capped::new(spec.output_cap, spec.keep)));
    let err = Arc::new(Mutex::new(Capped::new(spec.output_cap, spec.keep)));
    let mut open_pipes = spawn_reader(out_r, out.clone(), stream, tx.clone()) as usize;
    if let Some(p) = err_r {
        open_pipes += spawn_reader(p, err.clone(), stream, tx.clone()) as usize;
    }
    drop(tx);
    let mut status: Option<job::Exit> = None;

    let mut show = |ev: &Ev| {
        if let (Ev::Chunk(c), Some(f)) = (ev, on_output.as_mut()) {
            f(c);
        }
    };
    let deadline = spec.timeout.map(|t| start + t);
    let poll = Duration::from_millis(20);
    let mut exited_at: Option<Instant> = None;
    let (mut timed_out, mut canceled, mut abandoned) = (false, false, false);
    loop {
        if exited_at.is_some() && open_pipes == 0 {
            break;
        }
        let now = Instant::now();
        if let Some(at) = exited_at {
            if now >= at + spec.linger {
                abandoned = true;
                break;
            }
        } else if deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            break;
        } else if spec
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::SeqCst))
        {
            canceled = true;
            break;
        }
        let mut until = match exited_at {
            Some(at) => at + spec.linger,
            None => deadline.unwrap_or(now + Duration::from_secs(3600)),
        };
        if exited_at.is_none() && spec.cancel.is_some() {
            until = until.min(now + poll);
        }
        match rx.recv_deadline(until) {
            Ok(ev @ (Ev::Exited | Ev::Status(_))) => {
                if let Ev::Status(exit) = ev {
                    status = Some(exit);
                }
                exited_at = Some(Instant::now());
                if spec.kill_leftovers {
                    runner.signal(libc::SIGKILL);
                }
            }
            Ok(Ev::Eof) => open_pipes = open_pipes.saturating_sub(1),
            Ok(ev) => show(&ev),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                // Every helper is gone: the pipes are closed and the exit was seen (or cannot
                // be): nothing more will come.
                if exited_at.is_none() {
                    exited_at = Some(Instant::now());
                }
                open_pipes = 0;
            }
        }
    }

    if timed_out || canceled {
        runner.signal(libc::SIGTERM);
        let grace_end = Instant::now() + spec.kill_grace;
        while exited_at.is_none() || open_pipes > 0 {
            match rx.recv_deadline(grace_end) {
                Ok(Ev::Exited) => exited_at = Some(Instant::now()),
                Ok(Ev::Status(exit)) => {
                    status = Some(exit);
                    exited_at = Some(Instant::now());
                }
                Ok(Ev::Eof) => open_pipes = open_pipes.saturating_sub(1),
                Ok(ev) => show(&ev),
                Err(_) => break,
            }
        }
        // Always, even when the child died of SIGTERM: something it started may ignore SIGTERM.
        runner.signal(libc::SIGKILL);
        let end = Instant::now() + Duration::from_millis(200);
        while open_pipes > 0 {
            match rx.recv_deadline(end) {
                Ok(Ev::Eof) => open_pipes -= 1,
                Ok(Ev::Status(exit)) => status = Some(exit),
                Ok(ev) => show(&ev),
                Err(_) => break,
            }
        }
    }
    let status = match runner {
        Runner::Direct(mut child, group) => {
            drop(group);
            reap(&mut child).map(job::Exit::from_status)
        }
        Runner::Served(_) => {
            // The server reports the end a moment after it.
            let end = Instant::now() + Duration::from_secs(2);
            while status.is_none() {
                match rx.recv_deadline(end) {
                    Ok(Ev::Status(exit)) => status = Some(exit),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            status
        }
    };
    let (stdout, stdout_dropped) = out.lock().unwrap_or_else(|e| e.into_inner()).take();
    let (stderr, stderr_dropped) = err.lock().unwrap_or_else(|e| e.into_inner()).take();
    Ok(Outcome {
        pid: pgid as u32,
        exit_code: status.and_then(|s| s.code),
        signal: status.and_then(|s| s.signal),
        stdout,
        stderr,
        stdout_dropped,
        stderr_dropped,
        timed_out,
        canceled,
        abandoned: abandoned && !timed_out && !canceled,
        duration: start.elapsed(),
    })
}

/// Who started a child `run` waits for.
enum Runner {
    /// The job server (crush(1) SECURITY, Children).
    Served(job::Served),
    /// Crush itself, where no job server runs (unit tests): the child and its registered group.
    Direct(Child, Option<Group>),
}

impl Runner {
    fn pid(&self) -> i32 {
        match self {
            Runner::Served(s) => s.pid,
            Runner::Direct(c, _) => c.id() as i32,
        }
    }

    fn signal(&self, sig: i32) {
        match self {
            Runner::Served(s) => s.signal(sig),
            Runner::Direct(_, Some(g)) => g.signal(sig),
            Runner::Direct(_, None) => {}
        }
    }
}

/// A long-lived child that speaks over its stdin and stdout (a protocol server). Its stderr is
/// passed line by line to a callback. Dropping it stops the child's group.
pub(crate) struct Piped {
    backend: Backend,
    /// The child's stdin; take it to write.
    pub stdin: Option<io::PipeWriter>,
    /// The child's stdout; take it to read.
    pub stdout: Option<io::PipeReader>,
    has_exited: bool,
    status: Option<ExitStatus>,
}

/// Who started a `Piped` child, and so how it is signalled and how its end is learnt.
enum Backend {
    /// The job server (crush(1) SECURITY, Children); `None` once stopped.
    Served(Option<job::Served>),
    /// Crush itself, where no job server runs (unit tests).
    Direct {
        child: Child,
        group: Option<Group>,
        exited: Receiver<Ev>,
    },
}

/// Starts `spec` (its program, cwd and environment; stdin and stdout become pipes for the
/// caller) and passes each line of its stderr to `on_stderr`. The job server starts it, so
/// that its whole tree, what left its group included, dies with crush however crush ends.
pub(crate) fn spawn_piped(
    spec: &Spec,
    mut on_stderr: Box<dyn FnMut(&str) + Send>,
) -> io::Result<Piped> {
    let (in_r, in_w) = io::pipe()?;
    let (out_r, out_w) = io::pipe()?;
    let (err_r, err_w) = io::pipe()?;
    let fds = [out_w.as_raw_fd(), err_w.as_raw_fd(), in_r.as_raw_fd()];
    let backend = match job::Served::start(spec, &fds) {
        Some(served) => Backend::Served(Some(served?)),
        None => {
            let mut cmd = spec.command()?;
            cmd.stdin(in_r.try_clone()?)
                .stdout(out_w.try_clone()?)
                .stderr(err_w.try_clone()?);
            let (child, group) = Group::spawn(&mut cmd)?;
            let (tx, rx) = crossbeam_channel::bounded(1);
            spawn_waiter(group.pgid, tx);
            Backend::Direct {
                child,
                group: Some(group),
                exited: rx,
            }
        }
    };
    // The child's ends now live only in the child.
    drop((in_r, out_w, err_w));
    let _ = std::thread::Builder::new()
        .name("proc-stderr".into())
        .spawn(move || {
            let mut r = io::BufReader::new(err_r);
            let mut line = Vec::new();
            loop {
                line.clear();
                match io::BufRead::read_until(&mut r, b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        // Lines are capped so a child cannot fill memory with one.
                        line.truncate(64 * 1024);
                        let text = String::from_utf8_lossy(&line);
                        on_stderr(text.trim_end_matches(['\n', '\r']));
                    }
                }
            }
        });
    Ok(Piped {
        backend,
        stdin: Some(in_w),
        stdout: Some(out_r),
        has_exited: false,
        status: None,
    })
}

impl Piped {
    /// Whether the child is still running.
    pub(crate) fn running(&mut self) -> bool {
        self.poll(Duration::ZERO);
        !self.has_exited
    }

    /// Waits up to `d` for the child to exit; records it.
    fn poll(&mut self, d: Duration) {
        if self.has_exited {
            return;
        }
        let end = Instant::now() + d;
        match &mut self.backend {
            Backend::Served(Some(s)) => loop {
                match s.events.recv_deadline(end) {
                    Ok(Ev::Status(exit)) => {
                        self.has_exited = true;
                        self.status = Some(ExitStatus::from_raw(match exit.signal {
                            Some(sig) => sig,
                            None => (exit.code.unwrap_or(0) & 0xff) << 8,
                        }));
                        return;
                    }
                    Ok(_) => {}
                    // Timeout; or the server is gone, and its children with it.
                    Err(RecvTimeoutError::Timeout) => return,
                    Err(RecvTimeoutError::Disconnected) => {
                        self.has_exited = true;
                        return;
                    }
                }
            },
            Backend::Served(None) => self.has_exited = true,
            Backend::Direct { exited, .. } => {
                if exited.recv_deadline(end).is_ok() {
                    self.has_exited = true;
                }
            }
        }
    }

    /// Stops the child's group: its stdin is closed, then SIGTERM, then SIGKILL after `grace`.
    /// Returns the child's exit status when it could be learnt.
    pub(crate) fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        let signal = |b: &Backend, sig| match b {
            Backend::Served(Some(s)) => s.signal(sig),
            Backend::Direct { group: Some(g), .. } => g.signal(sig),
            _ => {}
        };
        if !self.has_exited {
            signal(&self.backend, libc::SIGTERM);
            self.poll(grace);
        }
        signal(&self.backend, libc::SIGKILL);
        if matches!(self.backend, Backend::Served(_)) {
            // Reported by the server a moment after the SIGKILL.
            self.poll(Duration::from_millis(500));
        }
        match &mut self.backend {
            Backend::Served(s) => {
                *s = None;
                self.status
            }
            Backend::Direct { child, group, .. } => {
                *group = None;
                reap(child)
            }
        }
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        if matches!(
            self.backend,
            Backend::Served(Some(_)) | Backend::Direct { group: Some(_), .. }
        ) {
            self.stop(Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn group_alive(pgid: i32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::killpg(pgid, 0) == 0 }
    }

    /// Whether `pid` is gone: no such process, or a zombie waiting for init to reap it.
    fn is_dead(pid: i32) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
        stat.is_empty() || state == Some('Z') || state == Some('X')
    }

    fn read_pid(file: &Path) -> i32 {
        std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn wait_dead(pid: i32) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while !is_dead(pid) {
            assert!(Instant::now() < deadline, "process {pid} still running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn captures_streams_exit_code_env_and_cwd() {
        let d = tmp();
        let mut spec = Spec::shell(
            "echo out; echo err >&2; pwd; echo $CRUSH_T; exit 3",
            d.path(),
        );
        spec.env.push(("CRUSH_T".into(), "yes".into()));
        let r = run(&spec).unwrap();
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.code(), 3);
        let cwd = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(r.stdout_text(), format!("out\n{}\nyes\n", cwd.display()));
        assert_eq!(r.stderr_text(), "err\n");
        assert!(!r.timed_out && !r.canceled && !r.abandoned && !r.success());
    }

    #[test]
    fn environment_can_be_cleared_and_trimmed() {
        let d = tmp();
        let mut spec = Spec::shell("echo \"[$HOME][$KEEP]\"", d.path());
        spec.env_clear = true;
        spec.env.push(("KEEP".into(), "k".into()));
        assert_eq!(run(&spec).unwrap().stdout_text(), "[][k]\n");
        let mut spec = Spec::shell("echo \"[$HOME]\"", d.path());
        spec.env_remove.push("HOME".into());
        assert_eq!(run(&spec).unwrap().stdout_text(), "[]\n");
    }

    #[test]
    fn stdin_payload_and_a_child_that_never_reads_it() {
        let d = tmp();
        let mut spec = Spec::shell("cat", d.path());
        spec.stdin = Some(b"hello".to_vec());
        assert_eq!(run(&spec).unwrap().stdout_text(), "hello");
        // Bigger than any pipe buffer: the writer would block if anything waited on it.
        let mut spec = Spec::shell("echo ok", d.path());
        spec.stdin = Some(vec![b'x'; 4 << 20]);
        let r = run(&spec).unwrap();
        assert!(r.success());
        assert_eq!(r.stdout_text(), "ok\n");
        // No payload: stdin is /dev/null, so cat ends at once.
        assert_eq!(
            run(&Spec::shell("cat", d.path())).unwrap().stdout_text(),
            ""
        );
    }

    #[test]
    fn output_cap_keeps_head_and_tail_or_head() {
        let d = tmp();
        let script =
            "echo START; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo END";
        let mut spec = Spec::shell(script, d.path());
        spec.output_cap = 200;
        let r = run(&spec).unwrap();
        let text = r.stdout_text();
        assert!(text.starts_with("START\n"), "{text}");
        assert!(text.ends_with("END\n"));
        assert!(r.stdout_dropped > 10_000);
        assert!(text.contains("bytes truncated ...]"));
        assert!(text.len() < 300);
        spec.keep = Keep::Head;
        let r = run(&spec).unwrap();
        assert_eq!(r.stdout.len(), 200);
        assert!(r.stdout_text().starts_with("START\nline0\n"));
        assert!(r.stdout_dropped > 10_000);
    }

    #[test]
    fn merged_output_keeps_its_order_and_streams() {
        let d = tmp();
        let mut spec = Spec::shell("echo a; echo b >&2; echo c", d.path());
        spec.merge_output = true;
        let mut shown = Vec::new();
        let r = run_streaming(&spec, &mut |b| shown.extend_from_slice(b)).unwrap();
        assert_eq!(r.stdout_text(), "a\nb\nc\n");
        assert_eq!(shown, b"a\nb\nc\n");
        assert!(r.stderr.is_empty());
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let d = tmp();
        let pidfile = d.path().join("bg.pid");
        let mut spec = Spec::shell(
            format!("sleep 30 & echo $! > {}; sleep 30", pidfile.display()),
            d.path(),
        );
        spec.timeout = Some(Duration::from_millis(300));
        let r = run(&spec).unwrap();
        assert!(r.timed_out);
        assert!(r.exit_code.is_none());
        let bg = read_pid(&pidfile);
        wait_dead(bg);
    }

    #[test]
    fn cancel_stops_the_child_and_keeps_its_output() {
        let d = tmp();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut spec = Spec::shell("echo begun; sleep 30", d.path());
        spec.cancel = Some(cancel.clone());
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c2.store(true, Ordering::SeqCst);
        });
        let r = run(&spec).unwrap();
        t.join().unwrap();
        assert!(r.canceled);
        assert!(!r.success());
        assert_eq!(r.stdout_text(), "begun\n");
    }

    #[test]
    fn nothing_starts_once_canceled() {
        let d = tmp();
        let marker = d.path().join("ran");
        let mut spec = Spec::shell(format!("touch {}", marker.display()), d.path());
        spec.cancel = Some(Arc::new(AtomicBool::new(true)));
        let r = run(&spec).unwrap();
        assert!(r.canceled && r.pid == 0 && !r.success());
        assert!(!marker.exists());
    }

    #[test]
    fn a_term_ignoring_child_is_killed() {
        let d = tmp();
        let mut spec = Spec::shell("trap '' TERM; sleep 30", d.path());
        spec.timeout = Some(Duration::from_millis(200));
        spec.kill_grace = Duration::from_millis(200);
        let r = run(&spec).unwrap();
        assert!(r.timed_out);
        assert_eq!(r.signal, Some(libc::SIGKILL));
    }

    #[test]
    fn a_background_holder_of_the_pipes_is_abandoned_and_left_running() {
        let d = tmp();
        let mut spec = Spec::shell("echo hi; sleep 5 &", d.path());
        spec.linger = Duration::from_millis(200);
        let r = run(&spec).unwrap();
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.stdout_text(), "hi\n");
        assert!(r.abandoned);
        let pgid = r.pid as i32;
        assert!(group_alive(pgid));
        // SAFETY: the test's own leftover group.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }

    #[test]
    fn leftovers_are_killed_when_asked() {
        let d = tmp();
        let pidfile = d.path().join("bg.pid");
        let mut spec = Spec::shell(
            format!("sleep 30 & echo $! > {}; echo done", pidfile.display()),
            d.path(),
        );
        spec.kill_leftovers = true;
        let r = run(&spec).unwrap();
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.stdout_text(), "done\n");
        let bg = read_pid(&pidfile);
        wait_dead(bg);
    }

    #[test]
    fn exec_and_spawn_errors() {
        let d = tmp();
        let r = run(&Spec::exec(
            vec!["printf".into(), "%s-%s".into(), "a b".into(), "c".into()],
            d.path(),
        ))
        .unwrap();
        assert_eq!(r.stdout_text(), "a b-c");
        assert!(run(&Spec::exec(vec!["/nonexistent/prog".into()], d.path())).is_err());
        assert!(run(&Spec::shell("true", d.path().join("missing"))).is_err());
        assert!(run(&Spec::exec(vec![], d.path())).is_err());
    }

    #[test]
    fn finished_groups_are_unregistered() {
        let d = tmp();
        let r = run(&Spec::shell("true", d.path())).unwrap();
        let pgid = r.pid as i32;
        assert!(!GROUPS.lock().unwrap().contains(&pgid));
    }

    #[test]
    fn the_shell_is_crush_shell_else_bash_else_sh_with_a_notice() {
        let bash = || Some(PathBuf::from("/opt/bin/bash"));
        let none = || None;
        assert_eq!(
            choose_shell(None, bash),
            (PathBuf::from("/opt/bin/bash"), None)
        );
        assert_eq!(
            choose_shell(Some("".into()), bash).0,
            PathBuf::from("/opt/bin/bash")
        );
        let (sh, notice) = choose_shell(None, none);
        assert_eq!(sh, PathBuf::from("/bin/sh"));
        assert!(notice.unwrap().contains("bash is not on PATH"));
        assert_eq!(
            choose_shell(Some("/bin/dash".into()), none),
            (PathBuf::from("/bin/dash"), None)
        );
        let (by_name, notice) = choose_shell(Some("sh".into()), bash);
        assert!(
            by_name.is_absolute() && by_name.ends_with("sh"),
            "{by_name:?}"
        );
        assert!(notice.is_none());
    }

    #[test]
    fn scripts_run_with_bash_when_it_is_on_path() {
        if which("bash").is_none() {
            return;
        }
        let d = tmp();
        let r = run(&Spec::shell(
            "set -o pipefail; a=(x y); [[ ${a[1]} == y ]] && echo {p,q}",
            d.path(),
        ))
        .unwrap();
        assert_eq!(r.stdout_text(), "p q\n", "{}", r.stderr_text());
        assert_eq!(shell_name(), "bash");
    }

    #[test]
    fn which_finds_programs_on_path() {
        assert!(which("sh").is_some_and(|p| p.is_absolute()));
        assert!(which("no-such-program-crush-test").is_none());
    }

    #[test]
    fn a_piped_server_talks_and_is_stopped_with_its_group() {
        let d = tmp();
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = lines.clone();
        let pidfile = d.path().join("bg.pid");
        let spec = Spec::shell(
            format!(
                "sleep 30 & echo $! > {}; echo started >&2; while read l; do echo \"got $l\"; done",
                pidfile.display()
            ),
            d.path(),
        );
        let mut p = spawn_piped(
            &spec,
            Box::new(move |l| seen.lock().unwrap().push(l.to_string())),
        )
        .unwrap();
        let mut stdin = p.stdin.take().unwrap();
        let mut stdout = io::BufReader::new(p.stdout.take().unwrap());
        writeln!(stdin, "ping").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "got ping\n");
        assert!(p.running());
        let bg = read_pid(&pidfile);
        drop(p);
        wait_dead(bg);
        let deadline = Instant::now() + Duration::from_secs(3);
        while lines.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(lines.lock().unwrap().as_slice(), ["started"]);
    }
}
