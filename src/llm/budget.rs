//! A cap on what one reply may make us hold. The SSE reader caps one event; this caps their sum,
//! so a server streaming fast enough never to trip the idle timer still cannot fill memory.

use super::LlmError;
use super::retry::Failure;

/// The most text, reasoning and tool-argument bytes one reply may accumulate.
pub const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// What a new block or tool call costs besides its text (its bookkeeping), so that a flood of
/// empty blocks is counted too.
pub(crate) const BLOCK_COST: usize = 64;

/// Bytes accumulated so far against a limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    used: usize,
    limit: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_REPLY_BYTES)
    }
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Budget {
        Budget { used: 0, limit }
    }

    /// Counts `n` more bytes; past the limit, a failure that is not retried (a server that sent
    /// this much once will likely do it again).
    pub(crate) fn take(&mut self, n: usize) -> Result<(), Failure> {
        self.used = self.used.saturating_add(n);
        if self.used <= self.limit {
            return Ok(());
        }
        const MIB: usize = 1024 * 1024;
        let limit = if self.limit.is_multiple_of(MIB) {
            format!("{} MiB", self.limit / MIB)
        } else {
            format!("{} bytes", self.limit)
        };
        Err(Failure::fatal(LlmError::Protocol(format!(
            "the reply exceeded {limit}"
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_past_the_limit_and_stays_failed() {
        let mut b = Budget::new(10);
        assert!(b.take(4).is_ok() && b.take(6).is_ok());
        let f = b.take(1).unwrap_err();
        assert!(!f.retryable);
        assert_eq!(
            f.error,
            LlmError::Protocol("the reply exceeded 10 bytes".into())
        );
        assert!(b.take(0).is_err());
        let f = Budget::default().take(MAX_REPLY_BYTES + 1).unwrap_err();
        assert_eq!(
            f.error,
            LlmError::Protocol("the reply exceeded 64 MiB".into())
        );
    }
}
