//! How a turn (or a summary) can fail: the session store failed, or a summary could not be made.
//! A model call that fails is not an error of the turn: it ends the turn with `Stop::Error`.

use crate::llm::LlmError;
use crate::store::StoreError;
use std::fmt;

#[derive(Debug)]
pub(crate) enum AgentError {
    /// Reading or writing the session failed.
    Store(StoreError),
    /// `/compact` on a session with no history yet.
    NothingToSummarize,
    /// The model call that writes a summary failed.
    SummaryCall(LlmError),
    SummaryCanceled,
    EmptySummary,
    /// A PreCompact hook blocked the summary (its reason).
    SummaryBlocked(String),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Store(e) => e.fmt(f),
            AgentError::NothingToSummarize => f.write_str("there is nothing to summarize yet"),
            AgentError::SummaryCall(e) => write!(f, "the summary call failed: {e}"),
            AgentError::SummaryCanceled => f.write_str("summarizing was canceled"),
            AgentError::EmptySummary => f.write_str("the model returned an empty summary"),
            AgentError::SummaryBlocked(r) => write!(f, "a PreCompact hook blocked it: {r}"),
        }
    }
}

impl std::error::Error for AgentError {}

impl From<StoreError> for AgentError {
    fn from(e: StoreError) -> Self {
        AgentError::Store(e)
    }
}
