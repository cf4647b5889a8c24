//! The one owner of signals and exit cleanup.
//!
//! SIGINT, SIGTERM and SIGHUP go to one tiny handler that only stores to atomics (and, for
//! TERM/HUP, writes a byte to a pipe): the turn loop and the front ends poll the flag and
//! cancel. SIGINT is a cancel: the front end decides what it means (cancel a turn, clear an
//! input line, quit at the second one). SIGTERM and SIGHUP also cancel, and the front end then
//! exits with 128 + the signal; should it not manage within a grace (`CRUSH_TERM_GRACE`
//! seconds, default 3), a watchdog thread kills every process group crush started, runs the
//! exit hooks (terminal restore), gives each open session store its last word, and ends the
//! process itself.
//!
//! The last word (`on_forced_exit`) is how the store is left closed although the thread that
//! owns it is stuck: the store's connection is opened in SQLite's serialized mode, so the
//! watchdog may use it from its own thread; it takes the connection's mutex only if it is free
//! (the owner is not inside an SQLite call, which may be a write), and checkpoints and leaves
//! WAL mode only when no transaction is open. Otherwise the `-wal` file stays: SQLite recovers
//! from it when the database is next opened, where a checkpoint torn by the exit could lose a
//! commit (crush(1) EXIT STATUS).
//!
//! `cleanup` (and `exit`) kill every process group crush started (`proc::kill_all`) and run the
//! registered exit hooks, once.

use crate::exit::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The SIGTERM or SIGHUP received (0: none).
static TERMINATING: AtomicI32 = AtomicI32::new(0);
/// The write end of the watchdog's pipe (-1: no watchdog).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

type Hook = Box<dyn Fn() + Send>;
static EXIT_HOOKS: Mutex<Vec<Hook>> = Mutex::new(Vec::new());
static CLEANED: AtomicBool = AtomicBool::new(false);
/// What the watchdog runs just before it ends the process, by registration number.
static LAST_WORDS: Mutex<Vec<(u64, Hook)>> = Mutex::new(Vec::new());
static NEXT_LAST_WORD: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if let Some(f) = FLAG.get() {
        f.store(true, Ordering::SeqCst);
    }
    if sig != libc::SIGINT {
        let _ = TERMINATING.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        let fd = WAKE_FD.load(Ordering::SeqCst);
        if fd >= 0 {
            let b = 1u8;
            // SAFETY: write(2) is async-signal-safe; the pipe lives as long as the process.
            unsafe {
                libc::write(fd, (&b as *const u8).cast(), 1);
            }
        }
    }
}

/// How long crush has to end after a SIGTERM or SIGHUP (`CRUSH_TERM_GRACE` seconds, default 3).
pub(crate) fn grace() -> Duration {
    crate::env::seconds("CRUSH_TERM_GRACE").unwrap_or(Duration::from_secs(3))
}

/// Starts the thread that ends the process when a SIGTERM/SIGHUP is not acted on in time.
fn start_watchdog() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two descriptors it creates.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_fd = fds[0];
    let spawned = std::thread::Builder::new()
        .name("signal-watchdog".into())
        .spawn(move || {
            let mut b = 0u8;
            loop {
                // SAFETY: reading one byte into a local from the pipe this thread owns.
                let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                if n == 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    return;
                }
            }
            std::thread::sleep(grace());
            let sig = TERMINATING.load(Ordering::SeqCst);
            crate::log::warn(&format!(
                "signal {sig}: the session did not stop in time; ending the process"
            ));
            cleanup();
            last_words();
            // SAFETY: ends the process at once, as the signal's default action would have.
            unsafe { libc::_exit(i32::from(ExitCode::from_signal(sig).code())) };
        });
    if spawned.is_ok() {
        WAKE_FD.store(fds[1], Ordering::SeqCst);
    }
}

/// Installs the handlers (once) and returns the flag they set. Every Ctrl-C, SIGTERM or SIGHUP
/// sets it; whoever acts on it clears it.
pub(crate) fn interrupt_flag() -> Arc<AtomicBool> {
    let mut first = false;
    let flag = FLAG
        .get_or_init(|| {
            first = true;
            Arc::new(AtomicBool::new(false))
        })
        .clone();
    if first {
        start_watchdog();
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only performs atomic stores and write(2), which are
        // async-signal-safe; glibc's signal() keeps SA_RESTART, so blocked reads go on.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    flag
}

/// The SIGTERM or SIGHUP that asked crush to end, if one did.
pub(crate) fn terminating() -> Option<i32> {
    match TERMINATING.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// How crush ends after a Ctrl-C (130), or after the SIGTERM (143) or SIGHUP (129) that asked
/// it to end.
pub(crate) fn interrupted() -> ExitCode {
    terminating().map_or(ExitCode::Interrupted, ExitCode::from_signal)
}

/// Registers something to run at exit (and before the watchdog ends the process), such as
/// restoring the terminal.
pub(crate) fn on_exit(f: impl Fn() + Send + 'static) {
    EXIT_HOOKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(f));
}

/// Registered with `on_forced_exit`: dropping it takes the registration back, waiting while
/// the watchdog runs it (so what it refers to outlives the run).
#[must_use = "dropping it takes the registration back"]
pub(crate) struct LastWord(u64);

impl Drop for LastWord {
    fn drop(&mut self) {
        LAST_WORDS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.0);
    }
}

/// Registers something the watchdog runs, from its own thread, just before it ends a process
/// whose shutdown overran the grace, such as closing the session store. It must not wait on
/// anything the stuck thread may hold.
pub(crate) fn on_forced_exit(f: impl Fn() + Send + 'static) -> LastWord {
    let id = NEXT_LAST_WORD.fetch_add(1, Ordering::SeqCst);
    LAST_WORDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, Box::new(f)));
    LastWord(id)
}

/// Runs the `on_forced_exit` registrations. The lock is held until the process ends: a thread
/// taking one back waits, and what the registration uses stays alive.
fn last_words() {
    let words = LAST_WORDS.lock().unwrap_or_else(|e| e.into_inner());
    for (_, f) in words.iter() {
        f();
    }
    std::mem::forget(words);
}

/// Kills every process group crush started and runs the exit hooks; only the first call acts.
pub(crate) fn cleanup() {
    if CLEANED.swap(true, Ordering::SeqCst) {
        return;
    }
    crate::proc::kill_all();
    // try_lock: the watchdog must not wait on a lock the stopped main thread may hold.
    if let Ok(hooks) = EXIT_HOOKS.try_lock() {
        for h in hooks.iter() {
            h();
        }
    }
}

/// Writes `bytes` to stdout. A closed stdout (a reader such as `head` that left) ends the
/// process quietly with 0, as SIGPIPE would; any other failure ends it with 1, saying why
/// (crush(1) EXIT STATUS).
pub(crate) fn write_stdout(bytes: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            exit(ExitCode::Success);
        }
        crate::ewriteln!("crush: cannot write to stdout: {e}");
        exit(ExitCode::Failure);
    }
}

/// `cleanup`, then ends the process with `code`.
pub(crate) fn exit(code: ExitCode) -> ! {
    cleanup();
    std::process::exit(i32::from(code.code()))
}
