//! The job server: crush re-executed once (`SERVER_ARG`), with stdin the socket whose other end
//! only crush holds. It runs each requested command leading a process group of its own, reaps
//! (as a subreaper, what the commands leave running is reparented to it), reports how each
//! command ended and when nothing of its group is left, signals a group only while some of it is
//! left, and kills every group it started (and, being their subreaper, what left those groups)
//! as soon as the socket reaches its end: crush is gone, however it ended.

use super::wire::{self, Reply, Request};
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The write end of the pipe the signal handler wakes the loop with.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// A SIGTERM, SIGINT or SIGHUP asked the server to end.
static QUIT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig != libc::SIGCHLD {
        QUIT.store(true, Ordering::SeqCst);
    }
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; the pipe lives as long as the process. A full
        // pipe (EAGAIN) already holds a wake-up.
        unsafe {
            libc::write(fd, (&b as *const u8).cast(), 1);
        }
    }
}

/// One command the server started.
struct Served {
    id: u64,
    /// The leader's pid, which is the group's id.
    pgid: i32,
    /// The leader was reaped (its exit reported).
    exited: bool,
}

struct Server {
    sock: UnixStream,
    jobs: Vec<Served>,
}

impl Server {
    fn report(&self, id: u64, reply: Reply) {
        // A failed write means crush is gone: the read side sees the end next.
        let _ = (&self.sock).write_all(reply.line(id).as_bytes());
    }

    fn spawn(
        &mut self,
        id: u64,
        argv: Vec<OsString>,
        cwd: OsString,
        sandbox: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        fds: Vec<OwnedFd>,
    ) {
        let mut fds = fds.into_iter();
        let (Some(out), Some(err), Some((program, args))) =
            (fds.next(), fds.next(), argv.split_first())
        else {
            self.report(id, Reply::Error("malformed request".into()));
            return;
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(env)
            .current_dir(&cwd)
            .process_group(0)
            // A third descriptor is the command's stdin (a protocol server's requests).
            .stdin(fds.next().map_or_else(Stdio::null, Stdio::from))
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if !sandbox.is_empty() {
            // The policy crush sent, prepared here, applied in the command (crush(1) SECURITY,
            // sandbox); one that cannot be had fails the command rather than run it unconfined.
            let prepared = crate::sandbox::Policy::decode(&sandbox)
                .ok_or_else(|| "malformed sandbox policy".to_string())
                .and_then(|p| crate::sandbox::Sandbox::new(p).map_err(|e| e.to_string()));
            match prepared {
                // SAFETY: `apply` only makes syscalls on what was prepared before the fork.
                Ok(sb) => unsafe {
                    cmd.pre_exec(move || sb.apply());
                },
                Err(e) => {
                    self.report(id, Reply::Error(format!("cannot sandbox the command: {e}")));
                    return;
                }
            }
        }
        let spawned = cmd.spawn();
        // The output pipes now live only in the command.
        drop(cmd);
        match spawned {
            Ok(child) => {
                let pid = child.id() as i32;
                self.jobs.push(Served {
                    id,
                    pgid: pid,
                    exited: false,
                });
                self.report(id, Reply::Started(pid));
            }
            Err(e) => self.report(
                id,
                Reply::Error(format!("cannot run {}: {e}", program.to_string_lossy())),
            ),
        }
    }

    fn signal(&self, id: u64, sig: i32) {
        // A job stays listed until no process of its group is left (`reap`), and its group id
        // cannot be reused while one is: the signal reaches that group or nobody.
        if let Some(j) = self.jobs.iter().find(|j| j.id == id) {
            // SAFETY: a plain syscall on a group this server started and saw alive.
            unsafe {
                libc::killpg(j.pgid, sig);
            }
        }
    }

    /// Reaps every child that ended, reports the commands that ended, and the jobs of which
    /// nothing is left.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: reaps any ended child of this process into a local.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if pid <= 0 {
                break;
            }
            let Some(j) = self.jobs.iter_mut().find(|j| j.pgid == pid && !j.exited) else {
                continue;
            };
            j.exited = true;
            let id = j.id;
            let reply = if libc::WIFSIGNALED(status) {
                Reply::Signal(libc::WTERMSIG(status))
            } else {
                Reply::Exit(libc::WEXITSTATUS(status))
            };
            self.report(id, reply);
        }
        let mut gone = Vec::new();
        self.jobs.retain(|j| {
            // SAFETY: signal 0 only asks whether the group has a member.
            let empty = j.exited
                && unsafe { libc::killpg(j.pgid, 0) } < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if empty {
                gone.push(j.id);
            }
            !empty
        });
        for id in gone {
            self.report(id, Reply::Gone);
        }
    }

    /// Kills every group that may have a member left, then what left its group, and ends the
    /// server.
    fn end(&self) -> ! {
        for j in &self.jobs {
            // SAFETY: groups this server started, not yet seen empty.
            unsafe {
                libc::killpg(j.pgid, libc::SIGKILL);
            }
        }
        #[cfg(target_os = "linux")]
        kill_children();
        std::process::exit(0)
    }
}

/// Kills and reaps this process's children until none is left (a second at most). A process
/// that left its command's group (`setsid`) escapes the group's SIGKILL; but the server is a
/// subreaper, so once its parent is gone it is the server's child, and it is listed here.
#[cfg(target_os = "linux")]
fn kill_children() {
    let children = format!("/proc/{0}/task/{0}/children", std::process::id());
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        // SAFETY: reaps any ended child of this process.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        let Ok(list) = std::fs::read_to_string(&children) else {
            return;
        };
        let pids: Vec<i32> = list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() || std::time::Instant::now() >= end {
            return;
        }
        for pid in pids {
            // SAFETY: an unreaped child of this process (only this thread reaps), so the pid
            // is still its own.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The server's whole life (`crush __crush-job-server`, stdin the socket).
pub(crate) fn serve() -> ! {
    // SAFETY: fd 0 is the socket crush passed as stdin; from here on this is its only owner.
    let sock = unsafe { UnixStream::from_raw_fd(0) };
    let mut server = Server {
        sock,
        jobs: Vec::new(),
    };
    let mut pipe = [-1 as libc::c_int; 2];
    // SAFETY: plain syscalls. pipe2 fills the two descriptors; the handler only stores to
    // atomics and writes to the pipe. Handlers, unlike SIG_IGN, are reset in the commands at
    // exec.
    unsafe {
        #[cfg(target_os = "linux")]
        {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            // The requests it read (environments included) stay out of other processes'
            // reach (crush(1) SECURITY, Environments).
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            // Started as /proc/self/exe, it would show as "exe" in ps and top.
            libc::prctl(libc::PR_SET_NAME, c"crush-jobs".as_ptr(), 0, 0, 0);
        }
        if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
            server.end();
        }
        WAKE.store(pipe[1], Ordering::SeqCst);
        for sig in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let sock_fd = server.sock.as_raw_fd();
    loop {
        // A group can lose its last member to a process that is not ours to reap (one that
        // left the group with `setsid`): look again now and then while a command ended and its
        // group is not known empty.
        let timeout = if server.jobs.iter().any(|j| j.exited) {
            2000
        } else {
            -1
        };
        let mut fds = [
            libc::pollfd {
                fd: sock_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pipe[0],
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: polls two descriptors this process owns.
        unsafe {
            libc::poll(fds.as_mut_ptr(), 2, timeout);
        }
        let mut drain = [0u8; 64];
        // SAFETY: reads into a local buffer from the non-blocking pipe this process owns.
        while unsafe { libc::read(pipe[0], drain.as_mut_ptr().cast(), drain.len()) } > 0 {}
        if QUIT.load(Ordering::SeqCst) {
            server.end();
        }
        server.reap();
        if fds[0].revents != 0 {
            match wire::recv(&server.sock) {
                Ok(Some((
                    Request::Spawn {
                        id,
                        argv,
                        cwd,
                        sandbox,
                        env,
                    },
                    fds,
                ))) => server.spawn(id, argv, cwd, sandbox, env, fds),
                Ok(Some((Request::Signal { id, sig }, _))) => server.signal(id, sig),
                // The end of the socket: crush is gone.
                Ok(None) | Err(_) => server.end(),
            }
        }
    }
}
