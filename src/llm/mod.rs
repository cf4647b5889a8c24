//! Model providers: Anthropic Messages, OpenAI Chat Completions and Responses, Gemini (on
//! Google's API and Vertex AI) over SSE, and Anthropic models on Amazon Bedrock over AWS's
//! event stream, with retries.
//!
//! `stream` runs one model call on a worker thread and reports `StreamEvent`s on a channel; the
//! caller selects over that channel and its own cancel signal. On cancel the caller drops the
//! receiver and the worker is abandoned (a blocked read cannot be interrupted).
//! This module knows no tool implementation and persists nothing.

pub(crate) mod anthropic;
pub(crate) mod bedrock;
mod budget;
mod client;
pub(crate) mod dialect;
pub(crate) mod endpoints;
pub(crate) mod gemini;
pub(crate) mod history;
mod kind;
pub(crate) mod openai;
pub(crate) mod responses;
pub(crate) mod retry;
pub(crate) mod sse;
pub(crate) mod types;

pub(crate) use budget::MAX_REPLY_BYTES;
pub(crate) use kind::{ApiKind, Reasoning};
pub(crate) use types::*;

use std::fmt;
use std::time::Duration;

/// Where and how to reach a provider.
#[derive(Clone, Debug, Default)]
pub(crate) struct Endpoint {
    pub kind: ApiKind,
    /// Base URL, e.g. `https://api.anthropic.com` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// None or empty: no auth header is sent (local servers).
    pub api_key: Option<String>,
    /// Extra headers, sent as is.
    pub headers: Vec<(String, String)>,
    /// OpenAI and Azure: `Some(true)` sends every model through the Responses API, `Some(false)`
    /// none; None: the models that have it (OpenAI's GPT-4 and later, o-series, codex).
    pub responses: Option<bool>,
    /// Credentials found in the environment rather than in `api_key` (Vertex's access token) may
    /// be sent: the endpoint is the provider's own (crush(1) SECURITY).
    pub ambient_auth: bool,
    /// Bedrock: region, credentials and their refresh (None for every other kind).
    pub aws: Option<crate::aws::Settings>,
    /// A signed-in provider's credentials (crush(1) LOGIN): the bearer token of each call.
    pub login: Option<std::sync::Arc<crate::login::Credential>>,
    /// The session's variables (its `.env` and `env` map): the Vertex AI token variable is
    /// read there first, and the token command gets them.
    pub env: crate::env::Overlay,
}

#[derive(Clone, Debug)]
pub(crate) struct RetryPolicy {
    /// Total attempts, first included.
    pub max_attempts: u32,
    /// First backoff delay; doubles each attempt, capped at `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// A server asking to wait longer than this is not retried (the error says how long).
    pub max_retry_after: Duration,
    pub connect_timeout: Duration,
    /// Time to the response headers.
    pub response_timeout: Duration,
    /// Longest silence allowed between two reads of the stream.
    pub idle_timeout: Duration,
    /// Most bytes one reply may accumulate (`MAX_REPLY_BYTES`); past it the call fails with
    /// `LlmError::TooLarge`.
    pub max_reply_bytes: usize,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(120),
            max_reply_bytes: MAX_REPLY_BYTES,
        }
    }
}

/// Why a model call failed, after retries.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LlmError {
    /// Could not connect / DNS / TLS / reset before a response.
    Connect { url: String, message: String },
    /// The server answered with an error status.
    Http {
        status: u16,
        message: String,
        request_id: Option<String>,
    },
    /// No bytes for longer than the idle timeout.
    IdleTimeout { secs: u64 },
    /// The stream ended before the protocol's finish marker (`missing`): an interrupted reply,
    /// retried like a dropped connection. `server`: the host it came from (filled in by the
    /// client; empty in a dialect's own tests).
    Truncated {
        server: String,
        missing: &'static str,
    },
    /// The stream carried something we could not understand, or an error event.
    Protocol(String),
    /// The server asked to wait longer than we are willing to.
    RetryAfterTooLong { status: u16, secs: u64 },
    /// The reply grew past the limit of what one reply may hold (bytes) and was cut.
    TooLarge { limit: usize },
    /// The provider's filters blocked the prompt or the reply (Gemini's `SAFETY`...): what was
    /// blocked and why.
    Blocked(String),
    /// No credentials to sign with, or the provider refused them. `refreshable`: signing in
    /// again may fix it (the provider's `aws_auth_refresh` is run once, then the call retried).
    Auth { message: String, refreshable: bool },
    /// A stream cut short (`cause`) when the request, by crush's estimate, had filled the
    /// model's context window: what a local server that reports no usage does on overflow.
    Overflow {
        estimated: u64,
        window: u64,
        cause: Box<LlmError>,
    },
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LlmError::Connect { url, message } => write!(f, "cannot reach {url}: {message}"),
            LlmError::Http {
                status,
                message,
                request_id,
            } => {
                write!(f, "HTTP {status}: {message}")?;
                if let Some(id) = request_id {
                    write!(f, " (request id {id})")?;
                }
                Ok(())
            }
            LlmError::IdleTimeout { secs } => {
                write!(f, "the model server sent nothing for {secs} s; gave up")
            }
            LlmError::Truncated { server, missing } => {
                let from = if server.is_empty() {
                    String::new()
                } else {
                    format!(" from {server}")
                };
                write!(
                    f,
                    "the model server's stream{from} ended before {missing}: the reply is incomplete"
                )
            }
            LlmError::Protocol(m) => write!(f, "unexpected reply from the model server: {m}"),
            LlmError::TooLarge { limit } => write!(
                f,
                "unexpected reply from the model server: the reply exceeded {}",
                budget::size_text(*limit)
            ),
            LlmError::Auth { message, .. } => f.write_str(message),
            LlmError::Blocked(what) => {
                write!(f, "the provider's content filters stopped the call: {what}")
            }
            LlmError::RetryAfterTooLong { status, secs } => write!(
                f,
                "HTTP {status}: the server asks to wait {secs} s before retrying; try again later"
            ),
            LlmError::Overflow {
                estimated,
                window,
                cause,
            } => write!(
                f,
                "{cause}, with the conversation (about {estimated} tokens, estimated) at the model's {window}-token context window"
            ),
        }
    }
}

impl LlmError {
    /// A stream that ended before `missing`, its finish marker.
    pub(crate) fn truncated(missing: &'static str) -> LlmError {
        LlmError::Truncated {
            server: String::new(),
            missing,
        }
    }

    /// This error, or an [`LlmError::Overflow`] when it cut the stream short (a dropped or
    /// unfinished stream) while the request and the answer so far, `estimated` tokens, had
    /// reached the model's `window` (0: unknown).
    pub(crate) fn at_window(self, estimated: u64, window: u64) -> LlmError {
        let cut = match &self {
            LlmError::Truncated { .. } => true,
            LlmError::Connect { message, .. } => message.contains("while streaming"),
            _ => false,
        };
        if cut && window > 0 && estimated >= window {
            LlmError::Overflow {
                estimated,
                window,
                cause: Box::new(self),
            }
        } else {
            self
        }
    }

    /// The provider refused the request because the conversation exceeds the model's context
    /// window (OpenAI `context_length_exceeded`, Anthropic "prompt is too long", llama.cpp and
    /// vLLM wordings).
    pub(crate) fn is_context_overflow(&self) -> bool {
        if let LlmError::Overflow { .. } = self {
            return true;
        }
        let LlmError::Http {
            status, message, ..
        } = self
        else {
            return false;
        };
        if !matches!(status, 400 | 413 | 422) {
            return false;
        }
        let m = message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "prompt is too long",
            "context window",
            "too many tokens",
            "exceeds the context",
            "exceed_context_size",
        ]
        .iter()
        .any(|k| m.contains(k))
    }
}

impl std::error::Error for LlmError {}

/// Starts one model call on a worker thread (with retries per `policy`) and returns the channel
/// its events arrive on. The last event is `Done` or `Error`.
///
/// Before each retry a `StreamEvent::Retry` says which attempt failed (1 = the first), how long the
/// worker waits and why; whatever that attempt streamed must be discarded. The request body is
/// identical on every attempt. Requests to loopback addresses never use a proxy; others follow
/// the usual proxy environment variables.
pub(crate) fn stream(
    endpoint: &Endpoint,
    req: &ChatRequest,
    policy: &RetryPolicy,
) -> crossbeam_channel::Receiver<StreamEvent> {
    client::stream(endpoint, req, policy)
}

/// Runs one model call to its end (retries included) and returns the reply: for short calls
/// such as title generation.
pub(crate) fn complete(
    endpoint: &Endpoint,
    req: &ChatRequest,
    policy: &RetryPolicy,
) -> Result<Response, LlmError> {
    client::complete(endpoint, req, policy)
}
