//! A cap on what one reply may make us hold. The SSE reader caps one event; this caps their sum,
//! so a server streaming fast enough never to trip the idle timer still cannot fill memory.

use super::LlmError;
use super::retry::Failure;

/// The most text, reasoning and tool-argument bytes one reply may accumulate.
pub(crate) const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

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
        Err(Failure::fatal(LlmError::TooLarge { limit: self.limit }))
    }
}

/// `64 MiB`, `64 KiB`, or `1000 bytes`.
pub(super) fn size_text(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
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
        assert_eq!(f.error, LlmError::TooLarge { limit: 10 });
        assert!(b.take(0).is_err());
        let f = Budget::default().take(MAX_REPLY_BYTES + 1).unwrap_err();
        assert_eq!(
            f.error,
            LlmError::TooLarge {
                limit: MAX_REPLY_BYTES
            }
        );
    }
}
