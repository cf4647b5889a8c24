//! Text laid out for a terminal: how many cells a character takes (`width`), word wrapping
//! (`wrap`), and how many columns to wrap to. Pure functions, but for the one query of the
//! terminal's size; the REPL, the help text, the Markdown renderer and the notices of every
//! command use them (crush(1) INTERACTIVE SESSION: the wrapping, and COLUMNS in ENVIRONMENT).

pub(crate) mod width;
#[rustfmt::skip]
mod width_table;
pub(crate) mod wrap;

/// The width to wrap to when nothing says otherwise.
pub(crate) const DEFAULT_COLUMNS: usize = 80;

/// Columns of the terminal on `fd`, if it reports a usable number.
pub(crate) fn terminal_columns(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills the zeroed winsize it is given.
    let cols = unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) != 0 {
            return None;
        }
        ws.ws_col
    };
    (cols > 0).then_some(usize::from(cols))
}

/// Columns to wrap output on `fd` to: `COLUMNS` when it is a positive number, else the
/// terminal's width, else 80.
pub(crate) fn columns(fd: libc::c_int) -> usize {
    columns_from(
        std::env::var("COLUMNS").ok().as_deref(),
        terminal_columns(fd),
    )
}

fn columns_from(env: Option<&str>, terminal: Option<usize>) -> usize {
    env.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or(terminal)
        .unwrap_or(DEFAULT_COLUMNS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_from_columns_then_the_terminal_then_80() {
        assert_eq!(columns_from(Some("100"), Some(120)), 100);
        assert_eq!(columns_from(Some("0"), Some(120)), 120);
        assert_eq!(columns_from(Some("wide"), None), 80);
        assert_eq!(columns_from(None, None), 80);
    }

    #[test]
    fn a_descriptor_that_is_no_terminal_reports_no_columns() {
        let f = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(terminal_columns(f.as_raw_fd()), None);
        assert_eq!(terminal_columns(-1), None);
    }
}
