//! SIGINT: one tiny handler that only sets a flag. The turn loop polls it and cancels.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_sigint(_: libc::c_int) {
    if let Some(f) = FLAG.get() {
        f.store(true, Ordering::SeqCst);
    }
}

/// Installs the handler (once) and returns the flag it sets.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    // SAFETY: the handler only performs an atomic store, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    flag
}
