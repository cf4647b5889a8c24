//! The seam every wire dialect implements: an `Accumulator` folds one call's stream events into
//! a `Response`, and `Dialect` names the dialects, each with its accumulator in one match arm.

use super::budget::Budget;
use super::retry::{Failure, snippet};
use super::sse::SseEvent;
use super::{LlmError, Response, RetryPolicy, StreamEvent, anthropic, gemini, openai, responses};
use crossbeam_channel::Sender;
use serde_json::Value;

/// The wire dialect of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Anthropic,
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    Gemini,
}

/// Builds a `Response` from one dialect's stream events. Pure: feed events, then `finish`.
pub trait Accumulator: Default {
    /// The reply cap the accumulator counts its bytes against.
    fn budget(&mut self) -> &mut Budget;

    /// Takes one event; progress for the display goes to `out`. Returns whether the reply is
    /// complete (the dialect's final event).
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure>;

    /// The response once the stream ended; `Truncated` (retried) when it ended before the
    /// dialect's finish marker.
    fn finish(self) -> Result<Response, Failure>;

    /// A whole reply (not streamed), from a server that ignored the request to stream; None
    /// when `v` is not one.
    fn from_json(v: &Value) -> Option<Response>;

    /// An accumulator that fails once the reply holds more than `limit` bytes (the default is
    /// `MAX_REPLY_BYTES`).
    fn with_limit(limit: usize) -> Self {
        let mut acc = Self::default();
        *acc.budget() = Budget::new(limit);
        acc
    }
}

/// What is done with the accumulator of a call's dialect (see [`Dialect::visit`]).
pub trait Visit {
    type Out;
    fn visit<A: Accumulator>(self) -> Self::Out;
}

impl Dialect {
    /// `v` run with this dialect's accumulator type: the one place that names each dialect's
    /// accumulator.
    pub fn visit<V: Visit>(self, v: V) -> V::Out {
        match self {
            Dialect::Anthropic => v.visit::<anthropic::Accumulator>(),
            Dialect::Chat => v.visit::<openai::Accumulator>(),
            Dialect::Responses => v.visit::<responses::Accumulator>(),
            Dialect::Gemini => v.visit::<gemini::Accumulator>(),
        }
    }

    /// A whole (non-streamed) reply in this dialect; None when `v` is not one.
    pub fn from_json(self, v: &Value) -> Option<Response> {
        struct Whole<'a>(&'a Value);
        impl Visit for Whole<'_> {
            type Out = Option<Response>;
            fn visit<A: Accumulator>(self) -> Option<Response> {
                A::from_json(self.0)
            }
        }
        self.visit(Whole(v))
    }
}

/// How a streamed reply's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (`text/event-stream`), read by the dialect's accumulator.
    Sse,
    /// AWS's event stream (`application/vnd.amazon.eventstream`), Bedrock's.
    EventStream,
}

impl Framing {
    /// The content type a streamed reply has.
    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::EventStream => "application/vnd.amazon.eventstream",
        }
    }
}

/// What a provider does to each attempt beyond its fixed headers, and how it reads a refusal:
/// AWS's SigV4 signature and credential refresh for Bedrock. The client calls it for every
/// attempt; a provider without one sends its fixed headers only.
pub trait Signer: Send + Sync {
    /// Headers that sign one attempt of `body` to `url` now (none when the provider sends a
    /// key instead), and where the credentials came from, for messages.
    fn sign(
        &self,
        url: &str,
        body: &[u8],
    ) -> Result<(Vec<(String, String)>, Option<String>), Failure>;

    /// An error reply, said in the provider's terms; `credentials`: where `sign` took them.
    fn classify(
        &self,
        status: u16,
        headers: &[(String, String)],
        body: &str,
        policy: &RetryPolicy,
        credentials: Option<String>,
    ) -> Failure;

    /// After `err` (refused or expired credentials): refreshes them, when the provider can
    /// (None: it cannot; Err: the refresh failed, said with `err`). Progress goes to `tx`.
    fn refresh(&self, err: &LlmError, tx: &Sender<StreamEvent>) -> Option<Result<(), LlmError>>;
}

/// The JSON of a stream event's `data` (already trimmed); `what` names the event in the error.
pub fn event_json(data: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(data).map_err(|e| {
        Failure::retry(LlmError::Protocol(format!(
            "invalid JSON in {what}: {e}: {}",
            snippet(data, 120)
        )))
    })
}

#[cfg(test)]
pub mod testing {
    //! What the dialects' tests share: a stream run through an accumulator.
    use super::*;
    use crate::llm::sse::SseReader;
    use std::io::Cursor;

    /// `stream` (SSE text) fed to `acc` until its final event or the end, then finished: the
    /// result and the progress events.
    pub fn run_with<A: Accumulator>(
        mut acc: A,
        stream: &str,
    ) -> (Result<Response, Failure>, Vec<StreamEvent>) {
        let mut out = Vec::new();
        for ev in SseReader::new(Cursor::new(stream.as_bytes().to_vec())) {
            match acc.feed(&ev.unwrap(), &mut out) {
                Ok(true) => break,
                Ok(false) => {}
                Err(f) => return (Err(f), out),
            }
        }
        (acc.finish(), out)
    }
}
