//! Jobs: children that may outlive the call that started them (the bash tool's commands, which
//! move to the background), with their output kept in capped buffers a reader can poll, and a
//! guarantee that none of them outlives crush, even a crush killed with SIGKILL.
//!
//! A job runs under a supervisor: crush re-executes itself (`SUPERVISOR_ARG`), and that small
//! process leads the job's process group, runs the command in it, and holds one end of a socket
//! whose other end only crush holds. However crush ends (exit, crash, `kill -9`), the kernel
//! closes crush's end; the supervisor reads end-of-file and kills its whole group. A
//! parent-death signal (`PR_SET_PDEATHSIG`) would only cover the supervisor itself and fires
//! when the spawning *thread* ends; the socket covers the group and any thread. On Linux the
//! supervisor is also a subreaper, so what the command leaves running (`server &`) stays its
//! descendant and in its group: the supervisor stays until the last of them is gone, and crush
//! kills the group (leader unreaped, so the id is still theirs) when the session or process
//! ends. Over the same socket the supervisor reports the command's exit status as soon as it is
//! known.
//!
//! Where the supervisor cannot run (unit tests, whose executable is the test harness), the
//! command is started directly in a group of its own and what it leaves behind is killed when
//! it exits.

use super::{Capped, Ev, Group, Keep, Program, Spec, reap, spawn_reader};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::ffi::OsString;
use std::io::{self, BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The first argument that makes the crush binary a job supervisor (`main` checks it before
/// anything else).
pub const SUPERVISOR_ARG: &str = "__crush-job-supervisor";

/// How a job's command ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    fn from_status(s: ExitStatus) -> Exit {
        Exit {
            code: s.code(),
            signal: s.signal(),
        }
    }

    /// The shell convention: the exit code, or 128 + signal, or -1 when unknown.
    pub fn code(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => -1,
        }
    }
}

/// Why a job was stopped before it ended on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Its `Spec::timeout` expired.
    TimedOut,
    /// `Job::stop`.
    Killed,
}

#[derive(Default)]
struct State {
    exit: Option<Exit>,
    exited_at: Option<Instant>,
    open_pipes: usize,
    stopped: Option<Stopped>,
    /// The supervisor (or the direct child) is reaped: nothing of the job is left.
    gone: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Present while the group's leader is unreaped (only then may it be signalled).
    group: Mutex<Option<Group>>,
    out: Arc<Mutex<Capped>>,
    err: Arc<Mutex<Capped>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn signal(&self, sig: i32) {
        if let Some(g) = lock(&self.group).as_ref() {
            g.signal(sig);
        }
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut lock(&self.state));
        self.changed.notify_all();
    }
}

/// A running (or finished) job.
pub struct Job {
    started: Instant,
    shared: Arc<Shared>,
    /// Crush's end of the supervisor's socket: closing it kills the job's group.
    _lifeline: Option<UnixStream>,
    linger: Duration,
    grace: Duration,
}

/// What a job's command is and how it ended so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// None while the command runs.
    pub exit: Option<Exit>,
    pub stopped: Option<Stopped>,
    /// Nothing of the job is left running (what the command left behind included).
    pub gone: bool,
    pub elapsed: Duration,
}

/// The program that supervises jobs: this executable, unless it is a unit-test harness.
fn supervisor_program() -> Option<PathBuf> {
    if cfg!(test) {
        return None;
    }
    let proc_exe = PathBuf::from("/proc/self/exe");
    if proc_exe.exists() {
        return Some(proc_exe);
    }
    std::env::current_exe().ok()
}

impl Job {
    /// Starts `spec` (program, cwd, environment, timeout, output cap, kill grace, linger) as a
    /// job; stdin is /dev/null. Err when it cannot be started.
    pub fn start(spec: &Spec) -> io::Result<Job> {
        let argv: Vec<OsString> = match &spec.program {
            Program::Shell(script) => vec![
                super::shell_path().as_os_str().to_owned(),
                "-c".into(),
                script.into(),
            ],
            Program::Exec(argv) => argv.iter().map(OsString::from).collect(),
        };
        if argv.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
        }
        let supervisor = supervisor_program();
        let (mut cmd, lifeline) = match &supervisor {
            Some(exe) => {
                let (ours, theirs) = UnixStream::pair()?;
                let mut c = Command::new(exe);
                c.arg(SUPERVISOR_ARG).args(&argv);
                c.stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
                (c, Some(ours))
            }
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]).stdin(Stdio::null());
                (c, None)
            }
        };
        spec.configure(&mut cmd);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let (mut child, group) = Group::spawn(&mut cmd)?;
        // The supervisor's end of the socket now lives only in the supervisor.
        drop(cmd);
        let pid = child.id();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            group: Mutex::new(Some(group)),
            out: Arc::new(Mutex::new(Capped::new(spec.output_cap, Keep::HeadTail))),
            err: Arc::new(Mutex::new(Capped::new(spec.output_cap, Keep::HeadTail))),
        });
        let (tx, rx) = crossbeam_channel::unbounded::<Ev>();
        let mut pipes = 0;
        if let Some(p) = child.stdout.take() {
            pipes += spawn_reader(p, shared.out.clone(), false, tx.clone()) as usize;
        }
        if let Some(p) = child.stderr.take() {
            pipes += spawn_reader(p, shared.err.clone(), false, tx.clone()) as usize;
        }
        lock(&shared.state).open_pipes = pipes;
        let status_reader = match &lifeline {
            Some(l) => Some(l.try_clone()?),
            None => None,
        };
        spawn_status(pid as i32, status_reader, shared.clone(), tx);
        let started = Instant::now();
        let monitor = Monitor {
            shared: shared.clone(),
            child,
            direct: supervisor.is_none(),
            deadline: spec.timeout.map(|t| started + t),
            grace: spec.kill_grace,
        };
        std::thread::Builder::new()
            .name("job-monitor".into())
            .spawn(move || monitor.run(rx))?;
        Ok(Job {
            started,
            shared,
            _lifeline: lifeline,
            linger: spec.linger,
            grace: spec.kill_grace,
        })
    }

    pub fn status(&self) -> Status {
        let st = lock(&self.shared.state);
        Status {
            exit: st.exit,
            stopped: st.stopped,
            gone: st.gone,
            elapsed: self.started.elapsed(),
        }
    }

    /// Whether the command ended and its output was read to the end (or stopped being
    /// waited for `linger` after the command ended, when something it started holds it open).
    fn finished(&self, st: &State) -> bool {
        match st.exited_at {
            Some(at) => st.open_pipes == 0 || at.elapsed() >= self.linger,
            None => false,
        }
    }

    /// Waits until the job finished (true), `until` passed, or `cancel` is set (false).
    pub fn wait(&self, until: Option<Instant>, cancel: Option<&AtomicBool>) -> bool {
        let mut st = lock(&self.shared.state);
        loop {
            if self.finished(&st) {
                return true;
            }
            let now = Instant::now();
            if until.is_some_and(|u| now >= u) || cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                return false;
            }
            // Polled: a cancel flag has no way to wake the condition variable, and the linger
            // after the exit ends without an event.
            let mut step = Duration::from_millis(20);
            if let Some(u) = until {
                step = step.min(u - now);
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stops the job: SIGTERM to its group, SIGKILL after the grace. Returns at once when it
    /// already ended.
    pub fn stop(&self) {
        {
            let mut st = lock(&self.shared.state);
            if st.exit.is_some() && st.gone {
                return;
            }
            if st.exit.is_none() {
                st.stopped = Some(Stopped::Killed);
            }
        }
        self.shared.signal(libc::SIGTERM);
        let end = Instant::now() + self.grace;
        let mut st = lock(&self.shared.state);
        while st.exit.is_none() && Instant::now() < end {
            st = self
                .shared
                .changed
                .wait_timeout(st, end.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(st);
        // Always: what the command started may ignore SIGTERM.
        self.shared.signal(libc::SIGKILL);
    }

    /// Everything kept of stdout and stderr (head and tail, a marker between when something
    /// was dropped), and how many bytes of each were dropped.
    pub fn output(&self) -> (Vec<u8>, usize, Vec<u8>, usize) {
        let (out, out_dropped) = lock(&self.shared.out).kept();
        let (err, err_dropped) = lock(&self.shared.err).kept();
        (out, out_dropped, err, err_dropped)
    }

    /// What stdout and stderr received since the last call, with the number of bytes of each
    /// that were lost meanwhile (more arrived than the buffers keep).
    pub fn unread(&self) -> (Vec<u8>, usize, Vec<u8>, usize) {
        let (out, out_lost) = lock(&self.shared.out).unread();
        let (err, err_lost) = lock(&self.shared.err).unread();
        (out, out_lost, err, err_lost)
    }
}

/// Reports the command's exit: from the supervisor's status line (then, when the supervisor
/// itself exits, `Ev::Gone`), or, with no supervisor, when the child exits.
fn spawn_status(pid: i32, lifeline: Option<UnixStream>, shared: Arc<Shared>, tx: Sender<Ev>) {
    let _ = std::thread::Builder::new()
        .name("job-status".into())
        .spawn(move || {
            if let Some(sock) = lifeline {
                let mut line = String::new();
                let _ = io::BufReader::new(sock).read_line(&mut line);
                if let Some(exit) = parse_status(&line, &shared) {
                    let _ = tx.send(Ev::Status(exit));
                }
            }
            if super::wait_exit_keeping_zombie(pid) {
                let _ = tx.send(Ev::Gone);
            }
        });
}

/// The supervisor's status line: `exit N`, `signal N`, or `error MESSAGE` (the command could
/// not be started: the message goes to its stderr).
fn parse_status(line: &str, shared: &Shared) -> Option<Exit> {
    let (kind, rest) = line.trim_end().split_once(' ')?;
    match kind {
        "exit" => Some(Exit {
            code: rest.parse().ok(),
            signal: None,
        }),
        "signal" => Some(Exit {
            code: None,
            signal: rest.parse().ok(),
        }),
        "error" => {
            lock(&shared.err).push(format!("{rest}\n").as_bytes());
            Some(Exit {
                code: Some(127),
                signal: None,
            })
        }
        _ => None,
    }
}

/// Owns the child and the events of one job: records them, enforces the timeout, and reaps
/// the child once the job is gone.
struct Monitor {
    shared: Arc<Shared>,
    child: Child,
    direct: bool,
    deadline: Option<Instant>,
    grace: Duration,
}

impl Monitor {
    fn run(mut self, rx: Receiver<Ev>) {
        let mut kill_at: Option<Instant> = None;
        loop {
            let (exited, gone, pipes) = {
                let st = lock(&self.shared.state);
                (st.exit.is_some(), st.gone, st.open_pipes)
            };
            if gone && pipes == 0 {
                return;
            }
            let mut until = Instant::now() + Duration::from_secs(3600);
            if !exited {
                if let Some(d) = self.deadline {
                    until = until.min(d);
                }
                if let Some(k) = kill_at {
                    until = until.min(k);
                }
            }
            match rx.recv_deadline(until) {
                Ok(Ev::Eof) => self
                    .shared
                    .update(|st| st.open_pipes = st.open_pipes.saturating_sub(1)),
                Ok(Ev::Status(exit)) => self.exited(Some(exit)),
                Ok(Ev::Gone) => self.gone(),
                Ok(Ev::Chunk(_) | Ev::Exited) => {}
                Err(RecvTimeoutError::Timeout) => {
                    if exited {
                        continue;
                    }
                    if kill_at.is_some_and(|k| Instant::now() >= k) {
                        self.shared.signal(libc::SIGKILL);
                        kill_at = None;
                    } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
                        self.deadline = None;
                        self.shared
                            .update(|st| st.stopped = st.stopped.or(Some(Stopped::TimedOut)));
                        self.shared.signal(libc::SIGTERM);
                        kill_at = Some(Instant::now() + self.grace);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    // Every helper is gone: nothing more will come.
                    if !lock(&self.shared.state).gone {
                        self.gone();
                    }
                    self.shared.update(|st| st.open_pipes = 0);
                    return;
                }
            }
        }
    }

    fn exited(&self, exit: Option<Exit>) {
        self.shared.update(|st| {
            if st.exit.is_none() {
                st.exit = exit;
                st.exited_at = Some(Instant::now());
            }
        });
    }

    /// The supervisor (or the direct child) exited: what the command left behind is killed
    /// (direct) or already gone (supervised), the group unregistered, the child reaped.
    fn gone(&mut self) {
        {
            let mut group = lock(&self.shared.group);
            if self.direct
                && let Some(g) = group.as_ref()
            {
                g.signal(libc::SIGKILL);
            }
            *group = None;
        }
        let status = reap(&mut self.child);
        self.exited(Some(status.map(Exit::from_status).unwrap_or_default()));
        self.shared.update(|st| st.gone = true);
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// The supervisor's whole life (`crush __crush-job-supervisor PROGRAM ARGS...`, stdin the
/// socket crush holds the other end of): runs the command in its own group, reports its exit
/// status on the socket, reaps what the command left behind, and kills the whole group when the
/// socket reaches its end (crush is gone).
pub fn supervise(argv: Vec<OsString>) -> ! {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 0 is the socket crush passed as stdin; from here on this is its only owner.
    let lifeline = unsafe { UnixStream::from_raw_fd(0) };
    // SAFETY: plain syscalls with constant arguments. Handlers, unlike SIG_IGN, are reset to the
    // default in the command at exec: termination signals are the command's, and the
    // supervisor stays to report how it ended.
    unsafe {
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(sig, ignore_signal as *const () as libc::sighandler_t);
        }
    }
    if let Ok(mut watch) = lifeline.try_clone() {
        let _ = std::thread::Builder::new()
            .name("lifeline".into())
            .spawn(move || {
                let mut buf = [0u8; 64];
                loop {
                    match watch.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                // SAFETY: kills this process's own group (the command, what it started, and
                // the supervisor itself).
                unsafe {
                    libc::kill(0, libc::SIGKILL);
                }
            });
    }
    let report = |line: String| {
        let _ = (&lifeline).write_all(line.as_bytes());
    };
    let Some((program, args)) = argv.split_first() else {
        report("error no command\n".to_string());
        std::process::exit(127);
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            report(format!(
                "error cannot run {}: {e}\n",
                program.to_string_lossy()
            ));
            std::process::exit(127);
        }
    };
    let exit = match child.wait() {
        Ok(s) => Exit::from_status(s),
        Err(_) => Exit::default(),
    };
    report(match (exit.code, exit.signal) {
        (None, Some(sig)) => format!("signal {sig}\n"),
        _ => format!("exit {}\n", exit.code()),
    });
    // What the command left running was reparented here: wait for the last of it.
    #[cfg(target_os = "linux")]
    loop {
        // SAFETY: reaps any child of this process; a null status pointer is allowed.
        let r = unsafe { libc::wait(std::ptr::null_mut()) };
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    std::process::exit(exit.code().clamp(0, 255))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(script: &str, dir: &std::path::Path) -> Spec {
        let mut s = Spec::shell(script, dir);
        s.linger = Duration::from_millis(200);
        s.kill_grace = Duration::from_millis(300);
        s
    }

    #[test]
    fn a_job_reports_its_output_and_exit() {
        let d = tempfile::tempdir().unwrap();
        let job = Job::start(&spec("echo out; echo err >&2; exit 3", d.path())).unwrap();
        assert!(job.wait(Some(Instant::now() + Duration::from_secs(10)), None));
        let st = job.status();
        assert_eq!(st.exit.map(|e| e.code()), Some(3));
        assert_eq!(st.stopped, None);
        let (out, _, err, _) = job.output();
        assert_eq!(
            (out.as_slice(), err.as_slice()),
            (&b"out\n"[..], &b"err\n"[..])
        );
    }

    #[test]
    fn unread_output_comes_once_and_the_job_can_be_stopped() {
        let d = tempfile::tempdir().unwrap();
        let job = Job::start(&spec(
            "echo one; while [ ! -f go ]; do sleep 0.02; done; echo two; sleep 30",
            d.path(),
        ))
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while !seen.ends_with(b"one\n") {
            assert!(Instant::now() < deadline);
            seen.extend(job.unread().0);
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::write(d.path().join("go"), "").unwrap();
        let mut more = Vec::new();
        while !more.ends_with(b"two\n") {
            assert!(Instant::now() < deadline);
            more.extend(job.unread().0);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(more, b"two\n");
        assert!(!job.wait(Some(Instant::now() + Duration::from_millis(50)), None));
        job.stop();
        assert!(job.wait(Some(Instant::now() + Duration::from_secs(10)), None));
        let st = job.status();
        assert_eq!(st.stopped, Some(Stopped::Killed));
        assert!(st.exit.is_some_and(|e| e.signal.is_some()), "{st:?}");
    }

    #[test]
    fn a_timeout_kills_the_job_even_if_it_ignores_sigterm() {
        let d = tempfile::tempdir().unwrap();
        let mut s = spec("trap '' TERM; sleep 30", d.path());
        s.timeout = Some(Duration::from_millis(200));
        let job = Job::start(&s).unwrap();
        assert!(job.wait(Some(Instant::now() + Duration::from_secs(10)), None));
        let st = job.status();
        assert_eq!(st.stopped, Some(Stopped::TimedOut));
        assert_eq!(st.exit.and_then(|e| e.signal), Some(libc::SIGKILL));
    }

    #[test]
    fn flooding_output_keeps_the_head_and_tail_and_counts_what_was_lost() {
        let d = tempfile::tempdir().unwrap();
        let mut s = spec(
            "echo START; i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done; echo END",
            d.path(),
        );
        s.output_cap = 200;
        let job = Job::start(&s).unwrap();
        assert!(job.wait(Some(Instant::now() + Duration::from_secs(20)), None));
        let (out, dropped, ..) = job.output();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("START\n") && text.ends_with("END\n"),
            "{text}"
        );
        assert!(dropped > 10_000 && out.len() < 300);
        let (new, lost, ..) = job.unread();
        assert_eq!(lost, dropped);
        assert!(new.len() <= 200);
        assert_eq!(job.unread().0, b"");
    }
}
