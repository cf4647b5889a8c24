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
pub(crate) enum Dialect {
    Anthropic,
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    Gemini,
}

/// Builds a `Response` from one dialect's stream events. Pure: feed events, then `finish`.
pub(crate) trait Accumulator: Default {
    /// The reply cap the accumulator counts its bytes against.
    fn budget(&mut self) -> &mut Budget;

    /// Takes one event; progress for the display goes to `out`. Returns whether the reply is
    /// complete (the dialect's final event).
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure>;

    /// What the stream still lacks, said in the message when it ends there (`message_stop`,
    /// `a finish_reason`); None once the reply is complete.
    fn missing(&self) -> Option<&'static str> {
        None
    }

    /// The response, whatever state the stream is in.
    fn into_response(self) -> Response;

    /// The response once the stream ended; `Truncated` (retried) when it ended before the
    /// dialect's finish marker.
    fn finish(self) -> Result<Response, Failure> {
        match self.missing() {
            Some(what) => Err(Failure::retry(LlmError::truncated(what))),
            None => Ok(self.into_response()),
        }
    }

    /// An accumulator that fails once the reply holds more than `limit` bytes (the default is
    /// `MAX_REPLY_BYTES`).
    fn with_limit(limit: usize) -> Self {
        let mut acc = Self::default();
        *acc.budget() = Budget::new(limit);
        acc
    }
}

/// What is done with the accumulator of a call's dialect (see [`Dialect::visit`]).
pub(crate) trait Visit {
    type Out;
    fn visit<A: Accumulator>(self) -> Self::Out;
}

impl Dialect {
    /// `v` run with this dialect's accumulator type: the one place that names each dialect's
    /// accumulator.
    pub(crate) fn visit<V: Visit>(self, v: V) -> V::Out {
        match self {
            Dialect::Anthropic => v.visit::<anthropic::Accumulator>(),
            Dialect::Chat => v.visit::<openai::Accumulator>(),
            Dialect::Responses => v.visit::<responses::Accumulator>(),
            Dialect::Gemini => v.visit::<gemini::Accumulator>(),
        }
    }

    /// A whole (non-streamed) reply in this dialect, from a server that ignored the request to
    /// stream; None when `v` is not one.
    pub(crate) fn whole_reply(self, v: &Value) -> Option<Response> {
        match self {
            Dialect::Anthropic => anthropic::response_from_json(v),
            Dialect::Chat => openai::response_from_json(v),
            Dialect::Responses => responses::response_from_json(v),
            Dialect::Gemini => gemini::response_from_json(v),
        }
    }
}

/// A reply with an error status, as a `Signer` reads it.
pub(crate) struct ErrorReply<'a> {
    pub status: u16,
    pub headers: &'a [(String, String)],
    pub body: &'a str,
    /// Where `Signer::sign` took the credentials from.
    pub credentials: Option<String>,
}

/// How a streamed reply's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events (`text/event-stream`), read by the dialect's accumulator.
    Sse,
    /// AWS's event stream (`application/vnd.amazon.eventstream`), Bedrock's.
    EventStream,
}

impl Framing {
    /// The content type a streamed reply has.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::EventStream => "application/vnd.amazon.eventstream",
        }
    }
}

/// The headers that sign one attempt, and where the credentials came from (for messages).
pub(crate) type Signed = (Vec<(String, String)>, Option<String>);

/// What a provider does to each attempt beyond its fixed headers, and how it reads a refusal:
/// AWS's SigV4 signature and credential refresh for Bedrock. The client calls it for every
/// attempt; a provider without one sends its fixed headers only.
pub(crate) trait Signer: Send + Sync {
    /// Headers that sign one attempt of `body` to `url` now (none when the provider sends a
    /// key instead), and where the credentials came from, for messages.
    fn sign(&self, url: &str, body: &[u8]) -> Result<Signed, Failure>;

    /// An error reply, said in the provider's terms.
    fn classify(&self, reply: &ErrorReply, policy: &RetryPolicy) -> Failure;

    /// After `err` (refused or expired credentials): refreshes them, when the provider can
    /// (None: it cannot; Err: the refresh failed, said with `err`). Progress goes to `tx`.
    fn refresh(&self, err: &LlmError, tx: &Sender<StreamEvent>) -> Option<Result<(), LlmError>>;
}

/// `base` trimmed, or `default` when it is empty.
pub(crate) fn base_or<'a>(base: &'a str, default: &'a str) -> &'a str {
    let base = base.trim();
    if base.is_empty() { default } else { base }
}

/// A base URL before its query string, without a trailing slash.
pub(crate) fn head(base: &str) -> &str {
    base.split('?').next().unwrap_or(base).trim_end_matches('/')
}

/// The JSON of a stream event's `data` (already trimmed); `what` names the event in the error.
pub(crate) fn event_json(data: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(data).map_err(|e| {
        Failure::retry(LlmError::Protocol(format!(
            "invalid JSON in {what}: {e}: {}",
            snippet(data, 120)
        )))
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! What the dialects' tests share: a stream run through an accumulator.
    use super::*;
    use crate::llm::sse::SseReader;
    use std::io::Cursor;

    /// `stream` (SSE text) fed to `acc` until its final event or the end, then finished: the
    /// result and the progress events.
    pub(crate) fn run_with<A: Accumulator>(
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
