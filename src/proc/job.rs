//! Jobs: children that may outlive the call that started them (the bash tool's commands, which
//! move to the background), with their output kept in capped buffers a reader can poll, and a
//! guarantee that none of them outlives crush, even a crush killed with SIGKILL.
//!
//! Jobs run under one job server per crush process (`server.rs`): crush re-executes itself once
//! (`SERVER_ARG`), at the first job, and that small process holds one end of a socket whose
//! other end only crush holds. Over the socket crush asks it to start a command (the argument
//! vector, working directory and whole environment, with the output pipes passed along) or to
//! signal one; the server starts each command leading a process group of its own, and reports
//! how the command ended and, later, that no process of its group is left. However crush ends
//! (exit, crash, `kill -9`), the kernel closes crush's end; the server reads end-of-file and
//! kills every group it started. A parent-death signal (`PR_SET_PDEATHSIG`) would only cover
//! one process and fires when the spawning *thread* ends; the socket covers the groups and any
//! thread. On Linux the server is also a subreaper, so what a command leaves running
//! (`server &`) stays in reach: the server reaps it and knows when the group is empty, and what
//! left the group (`setsid`) is its child once its parent is gone, killed with the rest. It
//! signals a group only while some of it is left, so a group id is never mistaken for a later
//! one. Should the server die (killed from outside), its jobs are reported ended, what they
//! left running is out of crush's reach, and the next job starts a new server.
//!
//! The server also starts the children of `proc::run` and `proc::spawn_piped` (`Served`), with
//! a third descriptor for their stdin, under the same rule.
//!
//! Where the server cannot run (unit tests, whose executable is the test harness), the
//! command is started directly in a group of its own and what it leaves behind is killed when
//! it exits.

mod server;
mod wire;

pub(crate) use server::serve;

use super::{Capped, Ev, Group, Keep, Program, Spec, reap, spawn_reader};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wire::{Reply, Request};

/// The first argument that makes the crush binary a job server (`main` checks it before
/// anything else).
pub(crate) const SERVER_ARG: &str = "__crush-job-server";

/// How a job's command ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    pub(super) fn from_status(s: ExitStatus) -> Exit {
        Exit {
            code: s.code(),
            signal: s.signal(),
        }
    }

    /// The shell convention: the exit code, or 128 + signal, or -1 when unknown.
    pub(crate) fn code(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => -1,
        }
    }
}

/// Why a job was stopped before it ended on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stopped {
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
    /// Nothing of the job is left: no process of its group (or, started directly, the child
    /// is reaped and what it left killed).
    gone: bool,
}

/// Where a job's signals go.
enum Target {
    /// Its group, whose leader (our child) is unreaped while this lives.
    Direct(Group),
    /// Job `id` of the job server, which signals the group only while some of it is left.
    Served { server: Arc<Server>, id: u64 },
}

impl Target {
    fn signal(&self, sig: i32) {
        match self {
            Target::Direct(g) => g.signal(sig),
            Target::Served { server, id } => server.signal(*id, sig),
        }
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Present until the job is gone (only then may it be signalled).
    target: Mutex<Option<Target>>,
    out: Arc<Mutex<Capped>>,
    err: Arc<Mutex<Capped>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn signal(&self, sig: i32) {
        if let Some(t) = lock(&self.target).as_ref() {
            t.signal(sig);
        }
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut lock(&self.state));
        self.changed.notify_all();
    }
}

/// What the job server's reports of one job go to: its monitor, and its stderr buffer (for
/// why it could not be started), if it has one.
struct Watcher {
    tx: Sender<Ev>,
    err: Option<Arc<Mutex<Capped>>>,
}

/// Crush's side of the job server.
struct Server {
    /// Crush's end of the socket: closing it (or crush ending) kills every job.
    sock: UnixStream,
    /// Held while a request is written, so requests do not interleave.
    send: Mutex<()>,
    jobs: Mutex<HashMap<u64, Watcher>>,
    next_id: AtomicU64,
    /// The server's end of the socket closed: it is gone, a new one is needed.
    dead: AtomicBool,
    /// Disconnected once the server is reaped.
    reaped: Receiver<()>,
}

/// This process's job server, once started.
static SERVER: Mutex<Option<Arc<Server>>> = Mutex::new(None);

impl Server {
    /// The running server, started now if there is none (or the last one died).
    fn get(exe: &PathBuf) -> io::Result<Arc<Server>> {
        let mut slot = lock(&SERVER);
        if let Some(s) = slot.as_ref().filter(|s| !s.dead.load(Ordering::SeqCst)) {
            return Ok(s.clone());
        }
        let (ours, theirs) = UnixStream::pair()?;
        let mut cmd = Command::new(exe);
        cmd.arg(SERVER_ARG)
            // No environment at all: each request carries its command's whole environment,
            // and a command reads its parent's at /proc/PPID/environ (crush(1) SECURITY,
            // Environments).
            .env_clear()
            .current_dir("/")
            // Its own group: the terminal's Ctrl-C is not for it.
            .process_group(0)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn()?;
        // The server's end of the socket now lives only in the server.
        drop(cmd);
        let reader = ours.try_clone()?;
        let (reaped_tx, reaped) = crossbeam_channel::bounded::<()>(0);
        let server = Arc::new(Server {
            sock: ours,
            send: Mutex::new(()),
            jobs: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            dead: AtomicBool::new(false),
            reaped,
        });
        let s = server.clone();
        std::thread::Builder::new()
            .name("job-server".into())
            .spawn(move || {
                s.listen(reader, child);
                drop(reaped_tx);
            })?;
        *slot = Some(server.clone());
        Ok(server)
    }

    fn request(&self, req: &Request, fds: &[std::os::fd::RawFd]) -> io::Result<()> {
        let _guard = lock(&self.send);
        wire::send(&self.sock, req, fds)
    }

    fn signal(&self, id: u64, sig: i32) {
        // A dead server has no job left to signal.
        let _ = self.request(&Request::Signal { id, sig }, &[]);
    }

    /// Passes the server's reports on to the jobs, until it is gone; then its jobs are gone too.
    fn listen(&self, sock: UnixStream, mut child: Child) {
        for line in io::BufReader::new(sock).lines() {
            let Ok(line) = line else { break };
            let Some((id, reply)) = Reply::parse(&line) else {
                continue;
            };
            let mut jobs = lock(&self.jobs);
            let Some(w) = jobs.get(&id) else { continue };
            let exit = match reply {
                Reply::Started(pid) => {
                    let _ = w.tx.send(Ev::Started(pid));
                    continue;
                }
                Reply::Exit(code) => Exit {
                    code: Some(code),
                    signal: None,
                },
                Reply::Signal(sig) => Exit {
                    code: None,
                    signal: Some(sig),
                },
                Reply::Error(message) => {
                    if let Some(err) = &w.err {
                        lock(err).push(format!("{message}\n").as_bytes());
                    }
                    let _ = w.tx.send(Ev::Failed(message));
                    let _ = w.tx.send(Ev::Status(Exit {
                        code: Some(127),
                        signal: None,
                    }));
                    let _ = w.tx.send(Ev::Gone);
                    jobs.remove(&id);
                    continue;
                }
                Reply::Gone => {
                    let _ = w.tx.send(Ev::Gone);
                    jobs.remove(&id);
                    continue;
                }
            };
            let _ = w.tx.send(Ev::Status(exit));
        }
        self.dead.store(true, Ordering::SeqCst);
        for (_, w) in lock(&self.jobs).drain() {
            let _ = w.tx.send(Ev::Gone);
        }
        // The server exits as its socket ends (or is gone already).
        let _ = child.wait();
    }

    /// Starts `argv` as job `id`; its stdout and stderr go to the first two descriptors, its
    /// stdin comes from the third (/dev/null without one), its reports go to `watcher`.
    fn spawn(
        &self,
        argv: &[OsString],
        spec: &Spec,
        pipes: &[std::os::fd::RawFd],
        watcher: Watcher,
    ) -> io::Result<u64> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut env: Vec<(OsString, OsString)> = if spec.env_clear {
            Vec::new()
        } else {
            std::env::vars_os()
                .filter(|(k, _)| !spec.env_remove.iter().any(|r| k.as_os_str() == r.as_str()))
                .collect()
        };
        for (k, v) in spec.env() {
            env.retain(|(e, _)| e.as_os_str() != k.as_str());
            env.push((k.into(), v.into()));
        }
        let req = Request::Spawn {
            id,
            argv: argv.to_vec(),
            cwd: spec.cwd.clone().into_os_string(),
            sandbox: spec
                .sandbox
                .as_ref()
                .map(|s| s.policy().encode())
                .unwrap_or_default(),
            env,
        };
        // Registered first: the reports may come before `request` returns.
        lock(&self.jobs).insert(id, watcher);
        let sent = self.request(&req, pipes);
        if let Err(e) = sent {
            lock(&self.jobs).remove(&id);
            self.dead.store(true, Ordering::SeqCst);
            return Err(e);
        }
        Ok(id)
    }
}

/// Closes crush's end of the job server's socket, so the server kills every job, and waits (a
/// moment at most) until it is reaped: what it and its commands used is crush's to account for.
/// At exit; a later job starts a new server.
pub(crate) fn kill_all() {
    let Some(s) = lock(&SERVER).take() else {
        return;
    };
    // SAFETY: shuts down a socket this process owns; it stays open (and closed for I/O) until
    // its last handle drops.
    unsafe {
        libc::shutdown(s.sock.as_raw_fd(), libc::SHUT_RDWR);
    }
    let _ = s.reaped.recv_timeout(Duration::from_secs(2));
}

/// A running (or finished) job.
pub(crate) struct Job {
    started: Instant,
    shared: Arc<Shared>,
    linger: Duration,
    grace: Duration,
}

/// What a job's command is and how it ended so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    /// None while the command runs.
    pub exit: Option<Exit>,
    pub stopped: Option<Stopped>,
    /// Nothing of the job is left running (what the command left behind included).
    pub gone: bool,
    pub elapsed: Duration,
}

/// The program that serves jobs: this executable, unless it is a unit-test harness.
fn server_program() -> Option<PathBuf> {
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
    pub(crate) fn start(spec: &Spec) -> io::Result<Job> {
        let argv = argv_of(spec)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            target: Mutex::new(None),
            out: Arc::new(Mutex::new(Capped::new(spec.output_cap, Keep::HeadTail))),
            err: Arc::new(Mutex::new(Capped::new(spec.output_cap, Keep::HeadTail))),
        });
        let (tx, rx) = crossbeam_channel::unbounded::<Ev>();
        let child = match server_program() {
            Some(exe) => {
                start_served(&exe, &argv, spec, &shared, &tx)?;
                None
            }
            None => Some(start_direct(&argv, spec, &shared, &tx)?),
        };
        drop(tx);
        let started = Instant::now();
        let monitor = Monitor {
            shared: shared.clone(),
            child,
            deadline: spec.timeout.map(|t| started + t),
            grace: spec.kill_grace,
        };
        std::thread::Builder::new()
            .name("job-monitor".into())
            .spawn(move || monitor.run(rx))?;
        Ok(Job {
            started,
            shared,
            linger: spec.linger,
            grace: spec.kill_grace,
        })
    }

    pub(crate) fn status(&self) -> Status {
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
    pub(crate) fn wait(&self, until: Option<Instant>, cancel: Option<&AtomicBool>) -> bool {
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
    pub(crate) fn stop(&self) {
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
    pub(crate) fn output(&self) -> (Vec<u8>, usize, Vec<u8>, usize) {
        let (out, out_dropped) = lock(&self.shared.out).kept();
        let (err, err_dropped) = lock(&self.shared.err).kept();
        (out, out_dropped, err, err_dropped)
    }

    /// What stdout and stderr received since the last call, with the number of bytes of each
    /// that were lost meanwhile (more arrived than the buffers keep).
    pub(crate) fn unread(&self) -> (Vec<u8>, usize, Vec<u8>, usize) {
        let (out, out_lost) = lock(&self.shared.out).unread();
        let (err, err_lost) = lock(&self.shared.err).unread();
        (out, out_lost, err, err_lost)
    }
}

impl Drop for Job {
    /// What is left of a job nobody holds any more is killed, as when crush ends.
    fn drop(&mut self) {
        if let Some(t @ Target::Served { .. }) = lock(&self.shared.target).as_ref() {
            t.signal(libc::SIGKILL);
        }
    }
}

/// Asks the job server (started now if need be, again if it died) to start `argv` as `spec`
/// says, with `fds` as its stdout, stderr and (optionally) stdin; its reports go to `tx`.
fn request_spawn(
    exe: &PathBuf,
    argv: &[OsString],
    spec: &Spec,
    fds: &[std::os::fd::RawFd],
    tx: &Sender<Ev>,
    err: Option<&Arc<Mutex<Capped>>>,
) -> io::Result<(Arc<Server>, u64)> {
    // The request's fields end with NUL: one inside a field would shift the fields after it
    // (the rest of a script read as the directory, the directory as a variable). Refused, as
    // `Command` refuses it.
    let nul = |b: &[u8]| b.contains(&0);
    if argv.iter().any(|a| nul(a.as_bytes()))
        || nul(spec.cwd.as_os_str().as_bytes())
        || spec
            .env
            .iter()
            .any(|(k, v)| nul(k.as_bytes()) || nul(v.as_bytes()))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        ));
    }
    // The server runs in `/`: the directory is sent whole, and checked here, where a missing
    // one is an error to the caller, as for any child.
    let mut spec = spec.clone();
    spec.cwd = std::path::absolute(&spec.cwd)?;
    if !std::fs::metadata(&spec.cwd)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", spec.cwd.display()),
        ));
    }
    let mut retried = false;
    loop {
        let server = Server::get(exe)?;
        let watcher = Watcher {
            tx: tx.clone(),
            err: err.cloned(),
        };
        match server.spawn(argv, &spec, fds, watcher) {
            Ok(id) => return Ok((server, id)),
            // The server died since the last job: once more with a new one.
            Err(_) if !retried => retried = true,
            Err(e) => return Err(e),
        }
    }
}

/// Starts `argv` under the job server.
fn start_served(
    exe: &PathBuf,
    argv: &[OsString],
    spec: &Spec,
    shared: &Arc<Shared>,
    tx: &Sender<Ev>,
) -> io::Result<()> {
    let (out_r, out_w) = io::pipe()?;
    let (err_r, err_w) = io::pipe()?;
    let (server, id) = request_spawn(
        exe,
        argv,
        spec,
        &[out_w.as_raw_fd(), err_w.as_raw_fd()],
        tx,
        Some(&shared.err),
    )?;
    // The write ends now live only in the command.
    drop((out_w, err_w));
    // Before the monitor starts, so before anything can mark the job gone.
    *lock(&shared.target) = Some(Target::Served { server, id });
    let pipes = spawn_reader(out_r, shared.out.clone(), false, tx.clone()) as usize
        + spawn_reader(err_r, shared.err.clone(), false, tx.clone()) as usize;
    lock(&shared.state).open_pipes = pipes;
    Ok(())
}

/// A child the job server started for `proc` (`run`, `spawn_piped`): its whole tree dies with crush,
/// however crush ends, as a job's does (crush(1) SECURITY, Children).
pub(super) struct Served {
    server: Arc<Server>,
    id: u64,
    /// The command's pid, which is its group's id.
    pub pid: i32,
    /// The server's reports: `Ev::Status` when the command ended, `Ev::Gone` when nothing of
    /// its group is left.
    pub events: Receiver<Ev>,
}

impl Served {
    /// Starts `spec` under the job server with `fds` as its stdout, stderr and stdin, and
    /// waits until it started. None where no job server can run (unit tests) or none could be
    /// reached (it cannot be started, it died before answering): the caller starts the child
    /// itself, and reports the child's own errors (a missing directory, a NUL in an argument).
    pub(super) fn start(spec: &Spec, fds: &[std::os::fd::RawFd]) -> Option<io::Result<Served>> {
        let exe = server_program()?;
        let argv = match argv_of(spec) {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        let (tx, events) = crossbeam_channel::unbounded::<Ev>();
        let (server, id) = request_spawn(&exe, &argv, spec, fds, &tx, None).ok()?;
        drop(tx);
        // Started or not, the server says so at once.
        match events.recv_timeout(Duration::from_secs(10)) {
            Ok(Ev::Started(pid)) => Some(Ok(Served {
                server,
                id,
                pid,
                events,
            })),
            Ok(Ev::Failed(message)) => {
                let prefix = format!("cannot run {}: ", argv[0].to_string_lossy());
                let why = message.strip_prefix(&prefix).unwrap_or(&message);
                let kind = if why.contains("(os error 2)") {
                    io::ErrorKind::NotFound
                } else {
                    io::ErrorKind::Other
                };
                Some(Err(io::Error::new(kind, why.to_string())))
            }
            // The server died with whatever it started.
            Err(RecvTimeoutError::Disconnected) => None,
            _ => Some(Err(io::Error::other("the job server did not start it"))),
        }
    }

    /// Signals the child's group, while some of it is left.
    pub(super) fn signal(&self, sig: i32) {
        self.server.signal(self.id, sig);
    }
}

/// The argument vector `spec` runs.
fn argv_of(spec: &Spec) -> io::Result<Vec<OsString>> {
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
    Ok(argv)
}

/// Starts `argv` as crush's own child, leading a group of its own.
fn start_direct(
    argv: &[OsString],
    spec: &Spec,
    shared: &Arc<Shared>,
    tx: &Sender<Ev>,
) -> io::Result<Child> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    spec.configure(&mut cmd);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let (mut child, group) = Group::spawn(&mut cmd)?;
    *lock(&shared.target) = Some(Target::Direct(group));
    let mut pipes = 0;
    if let Some(p) = child.stdout.take() {
        pipes += spawn_reader(p, shared.out.clone(), false, tx.clone()) as usize;
    }
    if let Some(p) = child.stderr.take() {
        pipes += spawn_reader(p, shared.err.clone(), false, tx.clone()) as usize;
    }
    lock(&shared.state).open_pipes = pipes;
    super::spawn_waiter(child.id() as i32, tx.clone());
    Ok(child)
}

/// Owns the events of one job (and its child, when started directly): records them, enforces
/// the timeout, and reaps the child once the job is gone.
struct Monitor {
    shared: Arc<Shared>,
    child: Option<Child>,
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
                Ok(Ev::Gone | Ev::Exited) => self.gone(),
                Ok(Ev::Chunk(_) | Ev::Started(_) | Ev::Failed(_)) => {}
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

    /// Nothing of the job is left (served), or the direct child exited: what it left behind is
    /// killed, the group unregistered, the child reaped.
    fn gone(&mut self) {
        let target = lock(&self.shared.target).take();
        if let Some(Target::Direct(g)) = &target {
            g.signal(libc::SIGKILL);
        }
        drop(target);
        let status = match self.child.as_mut() {
            Some(c) => reap(c).map(Exit::from_status),
            None => None,
        };
        self.exited(Some(status.unwrap_or_default()));
        self.shared.update(|st| st.gone = true);
    }
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
