//! `!command`: a shell child of the process runner in its own process group, stdout and stderr
//! through one pipe so they keep their order, streamed to the caller as they come and kept (head
//! and tail) for the session. Ctrl-C stops the whole group.

use crate::proc::{self, Keep, Spec};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Bytes of output kept for the session (half from the start, half from the end).
pub(super) const KEEP: usize = 32 * 1024;

pub(super) struct Ran {
    /// The output as stored: capped, lossily decoded.
    pub output: String,
    /// Exit code, or 128 + signal.
    pub exit_code: i32,
    pub canceled: bool,
}

/// Runs `command`; `show` receives the output as it arrives.
pub(super) fn run(
    command: &str,
    cwd: &Path,
    env: &crate::env::Overlay,
    cancel: &Arc<AtomicBool>,
    show: &mut dyn FnMut(&[u8]),
) -> std::io::Result<Ran> {
    let mut spec = Spec::shell(command, cwd);
    // The user's own command: crush's environment whole, with the session's variables.
    spec.env = env.vars();
    spec.cancel = Some(cancel.clone());
    spec.merge_output = true;
    spec.output_cap = KEEP;
    spec.keep = Keep::HeadTail;
    // Something started in the background may hold the pipe: do not wait for it long.
    spec.linger = Duration::from_millis(500);
    let r = proc::run_streaming(&spec, show)?;
    Ok(Ran {
        output: r.stdout_text(),
        exit_code: r.code(),
        canceled: r.canceled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_it(cmd: &str) -> (Ran, Vec<u8>) {
        let mut shown = Vec::new();
        let cancel = Arc::new(AtomicBool::new(false));
        let r = run(
            cmd,
            Path::new("/"),
            &Default::default(),
            &cancel,
            &mut |b| shown.extend_from_slice(b),
        )
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
        assert!(r.output.contains("bytes truncated"));
        assert!(r.output.len() < KEEP + 100);
    }

    #[test]
    fn cancel_kills_the_group() {
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let r = run(
            "sleep 30 & sleep 30",
            Path::new("/"),
            &Default::default(),
            &cancel,
            &mut |_| {},
        )
        .unwrap();
        setter.join().unwrap();
        assert!(r.canceled);
        assert!(r.exit_code >= 128, "{}", r.exit_code);
    }
}
