//! Writes to stderr that can never panic. `eprintln!` panics when stderr is closed or broken
//! (`crush run --verbose 2>&1 | head -1`), and the release profile aborts on a panic; these macros
//! drop what cannot be written instead: stderr carries diagnostics, and a diagnostic nobody can
//! read is no reason to end a turn (crush(1) EXIT STATUS). std's print macros are denied by
//! clippy (`print_stderr`, `print_stdout`) so that every write goes through here or through a
//! writer whose errors are handled (stdout is the answer: a closed stdout ends the run).

use std::io::Write;

/// Writes `s` to stderr in one write; an error (closed, broken, full) is ignored.
pub(crate) fn stderr(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// `eprintln!` that never panics: the line is dropped when stderr cannot take it.
#[macro_export]
macro_rules! ewriteln {
    () => {
        $crate::stdio::stderr("\n")
    };
    ($($arg:tt)*) => {
        $crate::stdio::stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics: the text is dropped when stderr cannot take it.
#[macro_export]
macro_rules! ewrite {
    ($($arg:tt)*) => {
        $crate::stdio::stderr(&format!($($arg)*))
    };
}
