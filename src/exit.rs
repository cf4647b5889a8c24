//! The exit statuses of every command (crush(1) EXIT STATUS).

/// How crush ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// 0.
    Success,
    /// 1: a runtime failure (the model server unreachable after retries, I/O).
    Failure,
    /// 2: a usage or configuration error.
    Usage,
    /// 3: stopped by policy (a hook denied or halted, a needed permission was refused).
    Policy,
    /// 4: the budget stopped the run before a model call (crush(1) USAGE AND COST, Budget).
    Budget,
    /// 129: ended by SIGHUP.
    Hangup,
    /// 130: interrupted by SIGINT.
    Interrupted,
    /// 143: ended by SIGTERM.
    Terminated,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failure => 1,
            ExitCode::Usage => 2,
            ExitCode::Policy => 3,
            ExitCode::Budget => 4,
            ExitCode::Hangup => 129,
            ExitCode::Interrupted => 130,
            ExitCode::Terminated => 143,
        }
    }

    /// The status of a process ended by `sig` (SIGINT, SIGTERM or SIGHUP; anything else counts
    /// as a failure).
    pub fn from_signal(sig: i32) -> ExitCode {
        match sig {
            libc::SIGHUP => ExitCode::Hangup,
            libc::SIGINT => ExitCode::Interrupted,
            libc::SIGTERM => ExitCode::Terminated,
            _ => ExitCode::Failure,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(c: ExitCode) -> Self {
        std::process::ExitCode::from(c.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_signals() {
        assert_eq!(ExitCode::Policy.code(), 3);
        assert_eq!(ExitCode::from_signal(libc::SIGTERM).code(), 143);
        assert_eq!(ExitCode::from_signal(libc::SIGHUP).code(), 129);
        assert_eq!(ExitCode::from_signal(libc::SIGINT), ExitCode::Interrupted);
    }
}
