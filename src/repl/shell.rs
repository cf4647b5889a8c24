//! `!command`: `/bin/sh -c` in its own process group, stdout and stderr through one pipe so they
//! keep their order, streamed to the caller as they come and kept (head and tail) for the
//! session. Ctrl-C kills the whole group.

use crossbeam_channel::RecvTimeoutError;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes of output kept for the session (half from the start, half from the end).
pub const KEEP: usize = 32 * 1024;

pub struct Ran {
    /// The output as stored: capped, lossily decoded.
    pub output: String,
    /// Exit code, or 128 + signal.
    pub exit_code: i32,
    pub canceled: bool,
}

/// Head and tail of a byte stream.
#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
}

impl Kept {
    fn push(&mut self, b: &[u8]) {
        let half = KEEP / 2;
        let room = half.saturating_sub(self.head.len());
        let (h, rest) = b.split_at(room.min(b.len()));
        self.head.extend_from_slice(h);
        self.tail.extend(rest);
        while self.tail.len() > half {
            self.tail.pop_front();
            self.dropped += 1;
        }
    }

    fn text(&self) -> String {
        let mut v = self.head.clone();
        if self.dropped > 0 {
            v.extend_from_slice(format!("\n[… {} bytes omitted …]\n", self.dropped).as_bytes());
        }
        v.extend(self.tail.iter());
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// Runs `command`; `show` receives the output as it arrives.
pub fn run(
    command: &str,
    cwd: &Path,
    cancel: &Arc<AtomicBool>,
    show: &mut dyn FnMut(&[u8]),
) -> std::io::Result<Ran> {
    let (mut reader, writer) = std::io::pipe()?;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0)
        .spawn()?;
    let pgid = child.id() as libc::pid_t;
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    let mut kept = Kept::default();
    let mut canceled = false;
    let mut killed_at: Option<Instant> = None;
    let mut exited_at: Option<Instant> = None;
    let mut status = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(chunk) => {
                show(&chunk);
                kept.push(&chunk);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => {
                if status.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if status.is_none() {
            status = child.try_wait()?;
            if status.is_some() {
                exited_at = Some(Instant::now());
            }
        }
        // Something started in the background may hold the pipe: do not wait for it long.
        if exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(500)) {
            break;
        }
        if status.is_none() && cancel.load(Ordering::SeqCst) {
            match killed_at {
                None => {
                    canceled = true;
                    // SAFETY: signalling the process group this function created.
                    unsafe { libc::killpg(pgid, libc::SIGTERM) };
                    killed_at = Some(Instant::now());
                }
                Some(t) if t.elapsed() > Duration::from_secs(1) => {
                    // SAFETY: as above.
                    unsafe { libc::killpg(pgid, libc::SIGKILL) };
                }
                Some(_) => {}
            }
        }
    }
    if canceled {
        // SAFETY: as above; whatever of the group is left goes too.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    let status = match status {
        Some(s) => s,
        None => child.wait()?,
    };
    let exit_code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok(Ran {
        output: kept.text(),
        exit_code,
        canceled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_it(cmd: &str) -> (Ran, Vec<u8>) {
        let mut shown = Vec::new();
        let cancel = Arc::new(AtomicBool::new(false));
        let r = run(cmd, Path::new("/"), &cancel, &mut |b| {
            shown.extend_from_slice(b)
        })
        .unwrap();
        (r, shown)
    }

    #[test]
    fn output_in_order_and_exit_code() {
        let (r, shown) = run_it("echo out; echo err >&2; exit 3");
        assert_eq!(r.output, "out\nerr\n");
        assert_eq!(shown, b"out\nerr\n");
        assert_eq!(r.exit_code, 3);
        assert!(!r.canceled);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let (r, shown) = run_it("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done");
        assert!(shown.len() > KEEP);
        assert!(r.output.starts_with("line0\n"));
        assert!(r.output.ends_with("line4999\n"));
        assert!(r.output.contains("bytes omitted"));
        assert!(r.output.len() < KEEP + 100);
    }

    #[test]
    fn cancel_kills_the_group() {
        let cancel = Arc::new(AtomicBool::new(true));
        let r = run("sleep 30 & sleep 30", Path::new("/"), &cancel, &mut |_| {}).unwrap();
        assert!(r.canceled);
        assert!(r.exit_code >= 128, "{}", r.exit_code);
    }
}
