//! The terminal under the line editor: raw mode on and off (with bracketed paste), its width, and
//! input bytes with a timeout. The saved mode is put back on every way out: leaving the editor,
//! the exit hooks of `crate::signal` (exit, SIGTERM/SIGHUP watchdog) and a panic hook (release
//! builds abort on panic, so no destructor would run).

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const STDIN: libc::c_int = 0;
const STDERR: libc::c_int = 2;
const PASTE_ON: &[u8] = b"\x1b[?2004h";
const PASTE_OFF: &[u8] = b"\x1b[?2004l";

/// The mode the terminal had before the first switch to raw mode.
static SAVED: OnceLock<libc::termios> = OnceLock::new();
/// Raw mode is on.
static RAW: AtomicBool = AtomicBool::new(false);

/// Writes to the terminal (stderr), ignoring errors: the terminal may be gone (SIGHUP).
pub(super) fn write(bytes: &[u8]) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(bytes).and_then(|_| err.flush());
}

fn get_mode() -> Option<libc::termios> {
    // SAFETY: tcgetattr fills the zeroed struct it is given.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        (libc::tcgetattr(STDIN, &mut t) == 0).then_some(t)
    }
}

/// Puts the saved mode back if raw mode is on; safe to call from any thread and more than once.
pub(super) fn restore() {
    if !RAW.swap(false, Ordering::SeqCst) {
        return;
    }
    write(PASTE_OFF);
    if let Some(t) = SAVED.get() {
        // SAFETY: sets the terminal's attributes from a struct tcgetattr filled.
        unsafe {
            libc::tcsetattr(STDIN, libc::TCSADRAIN, t);
        }
    }
}

/// Registers the restore with the exit hooks and a panic hook, once.
fn install_restore() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        crate::signal::on_exit(restore);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            write(b"\r\n");
            previous(info);
        }));
    });
}

/// Raw mode for as long as the guard lives: no echo, no line buffering, no signals from keys
/// (Ctrl-C, Ctrl-Z and Ctrl-\ arrive as bytes), bracketed paste on. Output processing stays on.
pub(super) struct Raw(());

impl Raw {
    pub(super) fn enter() -> std::io::Result<Raw> {
        let orig = match SAVED.get() {
            Some(t) => *t,
            None => {
                let t = get_mode().ok_or_else(std::io::Error::last_os_error)?;
                *SAVED.get_or_init(|| t)
            }
        };
        install_restore();
        let mut t = orig;
        t.c_iflag &= !(libc::BRKINT
            | libc::ICRNL
            | libc::INLCR
            | libc::IGNCR
            | libc::ISTRIP
            | libc::IXON
            | libc::PARMRK
            | libc::INPCK);
        t.c_lflag &= !(libc::ECHO | libc::ECHONL | libc::ICANON | libc::ISIG | libc::IEXTEN);
        t.c_cc[libc::VMIN] = 1;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: sets the terminal's attributes from a copy of what tcgetattr filled.
        if unsafe { libc::tcsetattr(STDIN, libc::TCSADRAIN, &t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        RAW.store(true, Ordering::SeqCst);
        write(PASTE_ON);
        Ok(Raw(()))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        restore();
    }
}

/// Columns of the terminal the editor draws on, if it reports a usable number.
pub(super) fn width() -> Option<usize> {
    crate::text::terminal_columns(STDERR)
}

/// What one wait for input got.
pub(super) enum Got {
    Bytes(usize),
    Timeout,
    /// End of input: the terminal hung up, or stdin failed.
    End,
}

/// Waits up to `timeout` for input and reads what is there into `buf`.
pub(super) fn read(buf: &mut [u8], timeout: Duration) -> Got {
    let mut p = libc::pollfd {
        fd: STDIN,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: polls one descriptor described by a valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        return if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            Got::Timeout
        } else {
            Got::End
        };
    }
    if n == 0 {
        return Got::Timeout;
    }
    if p.revents & libc::POLLIN == 0 {
        return Got::End;
    }
    // SAFETY: reads at most buf.len() bytes into buf.
    let r = unsafe { libc::read(STDIN, buf.as_mut_ptr().cast(), buf.len()) };
    match r {
        0 => Got::End,
        r if r > 0 => Got::Bytes(r as usize),
        _ => match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => Got::Timeout,
            _ => Got::End,
        },
    }
}

/// Stops the process as Ctrl-Z would have (raw mode keeps the key from doing it), with the
/// terminal restored; raw mode is back when it continues.
pub(super) fn suspend() {
    restore();
    // SAFETY: raise(2) with a standard signal; the default action stops the process.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
}

/// Whether the line editor can run: stdin and stderr are terminals, and `TERM` is not `dumb`.
pub(super) fn editor_usable(
    stdin_tty: bool,
    stderr_tty: bool,
    term: Option<&std::ffi::OsStr>,
) -> bool {
    stdin_tty && stderr_tty && term.is_some_and(|t| !t.is_empty() && t != "dumb")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A new pseudo-terminal: (master, slave).
    fn open_pty() -> (OwnedFd, OwnedFd) {
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
            (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s))
        }
    }

    fn lflag(fd: &OwnedFd) -> libc::tcflag_t {
        use std::os::fd::AsRawFd;
        // SAFETY: tcgetattr fills the zeroed struct it is given.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(fd.as_raw_fd(), &mut t), 0);
            t.c_lflag
        }
    }

    const CHILD: &str = "CRUSH_TEST_PANIC_IN_RAW_MODE";

    /// Release builds abort on panic, so no destructor restores the terminal: the panic hook
    /// must. The child (this test, run again on a pseudo-terminal) enters raw mode, forgets the
    /// guard and panics.
    #[test]
    fn a_panic_in_raw_mode_puts_the_terminal_back() {
        if std::env::var_os(CHILD).is_some() {
            let raw = Raw::enter().unwrap();
            if get_mode().unwrap().c_lflag & libc::ICANON != 0 {
                std::process::exit(3);
            }
            std::mem::forget(raw);
            panic!("on purpose, in raw mode");
        }
        let (_master, slave) = open_pty();
        assert_ne!(lflag(&slave) & libc::ICANON, 0);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "repl::tty::tests::a_panic_in_raw_mode_puts_the_terminal_back",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .stdin(std::process::Stdio::from(slave.try_clone().unwrap()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(3), "raw mode never came: {text}");
        assert!(text.contains("on purpose, in raw mode"), "{text}");
        let l = lflag(&slave);
        assert!(l & libc::ICANON != 0 && l & libc::ECHO != 0 && l & libc::ISIG != 0);
    }

    #[test]
    fn the_editor_needs_two_terminals_and_a_real_term() {
        let t = Some(OsStr::new("xterm"));
        assert!(editor_usable(true, true, t));
        assert!(!editor_usable(false, true, t));
        assert!(!editor_usable(true, false, t));
        assert!(!editor_usable(true, true, Some(OsStr::new("dumb"))));
        assert!(!editor_usable(true, true, None));
    }
}
