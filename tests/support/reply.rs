//! Scripted replies of the fake model server, and how one reply renders in each dialect.
//!
//! A [`Reply`] is dialect-neutral: the server renders it as Anthropic Messages SSE or OpenAI Chat
//! Completions SSE depending on the request path (see `Dialect`).

use serde_json::{Value, json};
use std::time::Duration;

/// Which API a request speaks, chosen from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `POST …/v1/messages`
    Anthropic,
    /// `POST …/chat/completions`
    OpenAi,
    /// `POST …/models/MODEL:streamGenerateContent?alt=sse` (Gemini API and Vertex AI)
    Gemini,
    /// `POST …/responses` (OpenAI Responses API)
    Responses,
    /// `POST …/publishers/anthropic/models/MODEL:streamRawPredict` (Anthropic on Vertex AI):
    /// answered as Anthropic.
    AnthropicVertex,
    /// `POST …/model/{model id}/invoke-with-response-stream` (Amazon Bedrock's event stream).
    Bedrock,
}

impl Dialect {
    /// The dialect of a request path (query string ignored), if it is a model endpoint.
    pub(crate) fn from_path(path: &str) -> Option<Dialect> {
        let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if path.ends_with("/messages") {
            Some(Dialect::Anthropic)
        } else if path.ends_with("/chat/completions") {
            Some(Dialect::OpenAi)
        } else if path.ends_with(":streamGenerateContent") {
            Some(Dialect::Gemini)
        } else if path.ends_with("/responses") {
            Some(Dialect::Responses)
        } else if path.ends_with(":streamRawPredict") {
            Some(Dialect::AnthropicVertex)
        } else if path.contains("/model/") && path.ends_with("/invoke-with-response-stream") {
            Some(Dialect::Bedrock)
        } else {
            None
        }
    }
}

/// Token usage reported by one model call, in ledger terms (crush(1) SESSION STORE, usage).
///
/// Anthropic reports `input` as `input_tokens`; OpenAI reports `prompt_tokens = input + cache_read +
/// cache_write`, `cached_tokens = cache_read` and, when non-zero, `cache_write_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// What a reply reports unless told otherwise.
    pub(crate) const DEFAULT: Usage = Usage {
        input: 100,
        output: 20,
        cache_read: 0,
        cache_write: 0,
    };

    pub(crate) fn new(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
        }
    }
}

/// One tool call the fake model makes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolCall {
    /// `None`: the server makes one up (`toolu_fake_<request>_<i>` / `call_fake_<request>_<i>`).
    pub id: Option<String>,
    pub name: String,
    /// The arguments exactly as streamed (normally JSON text, possibly invalid on purpose).
    pub arguments: String,
}

impl ToolCall {
    pub(crate) fn new(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: None,
            name: name.to_owned(),
            arguments: input.to_string(),
        }
    }

    /// A call whose arguments are sent verbatim, e.g. invalid JSON.
    pub(crate) fn raw(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: None,
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    pub(crate) fn with_id(mut self, id: &str) -> ToolCall {
        self.id = Some(id.to_owned());
        self
    }
}

/// Something that goes wrong after the 200 headers were sent.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fault {
    /// Send the content so far, then half an event line, then close: no stop event, no usage, no
    /// `message_stop` / `[DONE]`. The last tool call (if any) loses its last argument piece.
    CutMidStream,
    /// A data line holding invalid JSON right after the first event; the rest of the stream,
    /// terminator included, follows normally.
    Malformed,
    /// Send the first event, then nothing for this long, then close.
    Stall(Duration),
    /// Send the content (text and tool call pieces), then nothing for this long, then close
    /// without the final events: a reply cut off while the model was still writing.
    StallAfterContent(Duration),
    /// Send the content, then end the body cleanly without the protocol's finish marker: OpenAI
    /// `[DONE]` with no `finish_reason`, Anthropic and Bedrock no `message_stop`, Responses no
    /// `response.completed`, Gemini no `finishReason`. A server that gave up mid-reply.
    NoFinish,
    /// Send the content, then a mid-stream error event (Anthropic `event: error`; OpenAI a chunk
    /// with top-level `error` and `finish_reason:"error"`, then `[DONE]`).
    ErrorEvent { kind: String, message: String },
}

/// A streamed (HTTP 200, `text/event-stream`) model answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stream {
    /// `(thinking, signature)`: an Anthropic thinking block / OpenAI `reasoning_content`.
    pub thinking: Option<(String, String)>,
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// `None`: Anthropic still sends zeros in `message_start`; OpenAI sends no usage chunk.
    pub usage: Option<Usage>,
    /// Sent verbatim in both dialects when set; otherwise `tool_use`/`end_turn` (Anthropic) and
    /// `tool_calls`/`stop` (OpenAI).
    pub stop_reason: Option<String>,
    pub fault: Option<Fault>,
}

impl Stream {
    fn new(text: Option<String>, tool_calls: Vec<ToolCall>) -> Stream {
        Stream {
            thinking: None,
            text,
            tool_calls,
            usage: Some(Usage::DEFAULT),
            stop_reason: None,
            fault: None,
        }
    }
}

/// One scripted answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    /// A streamed model answer, rendered in the request's dialect.
    Stream {
        stream: Stream,
        headers: Vec<(String, String)>,
    },
    /// A non-streamed reply with this status and body (verbatim; content-type is JSON when the
    /// body starts with `{`, else text/plain, unless a header says otherwise).
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// An API error with a JSON body in the request's dialect (`error.type`, `error.message`).
    ApiError {
        status: u16,
        kind: String,
        message: String,
        headers: Vec<(String, String)>,
    },
    /// Exactly these headers and body (plus `content-length` and `connection: close` if missing).
    /// Use it for hand-made SSE framing or for non-model endpoints such as `GET /v2/providers`.
    Raw {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

impl Reply {
    /// A plain text answer (`end_turn` / `stop`).
    pub(crate) fn text(text: &str) -> Reply {
        Reply::stream(Stream::new(Some(text.to_owned()), Vec::new()))
    }

    /// One tool call, no text.
    pub(crate) fn tool_call(name: &str, input: Value) -> Reply {
        Reply::tool_calls(vec![ToolCall::new(name, input)])
    }

    /// Several tool calls in one step.
    pub(crate) fn tool_calls(calls: Vec<ToolCall>) -> Reply {
        Reply::stream(Stream::new(None, calls))
    }

    /// Some text, then tool calls, in one step.
    pub(crate) fn text_then_tools(text: &str, calls: Vec<ToolCall>) -> Reply {
        Reply::stream(Stream::new(Some(text.to_owned()), calls))
    }

    /// A tool call whose streamed arguments are `arguments` verbatim (e.g. `"{not json"`).
    pub(crate) fn invalid_tool_json(name: &str, arguments: &str) -> Reply {
        Reply::tool_calls(vec![ToolCall::raw(name, arguments)])
    }

    /// HTTP error with a verbatim body.
    pub(crate) fn status(status: u16, body: &str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    /// HTTP error with the dialect's JSON error body, e.g. `api_error(429, "rate_limit_error", "slow down")`.
    pub(crate) fn api_error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::ApiError {
            status,
            kind: kind.to_owned(),
            message: message.to_owned(),
            headers: Vec::new(),
        }
    }

    /// Exact status, headers and body.
    pub(crate) fn raw(status: u16, headers: Vec<(&str, &str)>, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Raw {
            status,
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            body: body.into(),
        }
    }

    /// A hand-written SSE body served as `text/event-stream` with status 200.
    pub(crate) fn raw_sse(body: &str) -> Reply {
        Reply::raw(200, vec![("content-type", "text/event-stream")], body)
    }

    /// Text `partial`, then the connection closes mid-event.
    pub(crate) fn cut_mid_stream(partial: &str) -> Reply {
        Reply::text(partial).fault(Fault::CutMidStream)
    }

    /// A stream with an invalid JSON data line (see [`Fault::Malformed`]).
    pub(crate) fn malformed_sse() -> Reply {
        Reply::text("text after a malformed line").fault(Fault::Malformed)
    }

    /// Headers and one event, then silence for `d`, then close.
    pub(crate) fn stall(d: Duration) -> Reply {
        Reply::text("never sent").fault(Fault::Stall(d))
    }

    /// Text `partial`, then a mid-stream error event such as `overloaded_error`.
    pub(crate) fn error_mid_stream(partial: &str, kind: &str, message: &str) -> Reply {
        Reply::text(partial).fault(Fault::ErrorEvent {
            kind: kind.to_owned(),
            message: message.to_owned(),
        })
    }

    pub(crate) fn stream(stream: Stream) -> Reply {
        Reply::Stream {
            stream,
            headers: Vec::new(),
        }
    }

    /// Adds a response header (any variant).
    pub(crate) fn header(mut self, name: &str, value: &str) -> Reply {
        let h = (name.to_owned(), value.to_owned());
        match &mut self {
            Reply::Stream { headers, .. }
            | Reply::Status { headers, .. }
            | Reply::ApiError { headers, .. }
            | Reply::Raw { headers, .. } => headers.push(h),
        }
        self
    }

    /// Sets the usage of a stream reply.
    pub(crate) fn with_usage(
        self,
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
    ) -> Reply {
        self.map_stream(|s| s.usage = Some(Usage::new(input, output, cache_read, cache_write)))
    }

    /// No usage: OpenAI sends no usage chunk; Anthropic sends zeros.
    pub(crate) fn without_usage(self) -> Reply {
        self.map_stream(|s| s.usage = None)
    }

    /// Adds a thinking block (Anthropic, with signature) / `reasoning_content` (OpenAI) first.
    pub(crate) fn with_thinking(self, thinking: &str, signature: &str) -> Reply {
        self.map_stream(|s| s.thinking = Some((thinking.to_owned(), signature.to_owned())))
    }

    /// Overrides the stop / finish reason, verbatim in both dialects.
    pub(crate) fn stop_reason(self, reason: &str) -> Reply {
        self.map_stream(|s| s.stop_reason = Some(reason.to_owned()))
    }

    pub(crate) fn fault(self, fault: Fault) -> Reply {
        self.map_stream(|s| s.fault = Some(fault))
    }

    fn map_stream(mut self, f: impl FnOnce(&mut Stream)) -> Reply {
        match &mut self {
            Reply::Stream { stream, .. } => f(stream),
            other => panic!("this builder applies only to stream replies, not {other:?}"),
        }
        self
    }
}

/// What the connection thread does to send a reply.
#[derive(Debug)]
pub(crate) struct Plan {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// `true`: the body is a stream of steps with no length (close- or chunk-delimited).
    pub streaming: bool,
    pub steps: Vec<Step>,
    /// `false`: close the socket without ending the body properly (no final chunk).
    pub complete: bool,
}

#[derive(Debug)]
pub(crate) enum Step {
    Write(String),
    /// Binary body bytes (Bedrock's event stream).
    Bytes(Vec<u8>),
    Sleep(Duration),
}

impl Step {
    /// The bytes this step writes (None: a pause).
    pub(crate) fn bytes(&self) -> Option<&[u8]> {
        match self {
            Step::Write(s) => Some(s.as_bytes()),
            Step::Bytes(b) => Some(b),
            Step::Sleep(_) => None,
        }
    }
}

/// Ids the rendering uses, unique per request.
pub(crate) struct Ids {
    pub request: usize,
}

impl Reply {
    /// Renders this reply for a request in `dialect` (`None`: not a model endpoint).
    pub(crate) fn plan(&self, dialect: Option<Dialect>, ids: &Ids) -> Plan {
        let request_id = format!("req_fake_{}", ids.request);
        let mut common = vec![
            ("request-id".to_owned(), request_id.clone()),
            ("x-request-id".to_owned(), request_id.clone()),
        ];
        match self {
            Reply::Stream { stream, headers } => {
                let Some(dialect) = dialect else {
                    return plain(
                        404,
                        headers,
                        "fake server: stream reply on a non-model path",
                    );
                };
                let ct = match dialect {
                    Dialect::Bedrock => "application/vnd.amazon.eventstream",
                    _ => "text/event-stream",
                };
                common.push(("content-type".into(), ct.into()));
                common.push(("cache-control".into(), "no-cache".into()));
                common.extend(headers.iter().cloned());
                let (steps, complete) = match dialect {
                    Dialect::Anthropic | Dialect::AnthropicVertex => anthropic_steps(stream, ids),
                    Dialect::OpenAi => openai_steps(stream, ids),
                    Dialect::Gemini => steps_for(stream, gemini_events(stream), dialect, ids),
                    Dialect::Responses => {
                        steps_for(stream, responses_events(stream, ids), dialect, ids)
                    }
                    Dialect::Bedrock => {
                        super::bedrock::steps(stream, anthropic_events(stream, ids))
                    }
                };
                Plan {
                    status: 200,
                    headers: common,
                    streaming: true,
                    steps,
                    complete,
                }
            }
            Reply::Status {
                status,
                headers,
                body,
            } => {
                common.extend(headers.iter().cloned());
                plain(*status, &common, body)
            }
            Reply::ApiError {
                status,
                kind,
                message,
                headers,
            } => {
                common.extend(headers.iter().cloned());
                let body = match dialect {
                    Some(Dialect::OpenAi | Dialect::Responses) => {
                        json!({"error": {"message": message, "type": kind,
                        "param": null, "code": kind}})
                    }
                    Some(Dialect::Gemini) => json!({"error": {"code": status, "message": message,
                        "status": kind}}),
                    Some(Dialect::Bedrock) => {
                        common.push((
                            "x-amzn-errortype".into(),
                            format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                        ));
                        common.push(("x-amzn-requestid".into(), request_id.clone()));
                        json!({"message": message})
                    }
                    _ => json!({"type": "error", "error": {"type": kind, "message": message},
                        "request_id": request_id}),
                };
                plain(*status, &common, &body.to_string())
            }
            Reply::Raw {
                status,
                headers,
                body,
            } => Plan {
                status: *status,
                headers: headers.clone(),
                streaming: false,
                steps: vec![Step::Bytes(body.clone())],
                complete: true,
            },
        }
    }
}

fn plain(status: u16, headers: &[(String, String)], body: &str) -> Plan {
    let mut headers = headers.to_vec();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        let ct = if body.trim_start().starts_with('{') {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        headers.push(("content-type".into(), ct.into()));
    }
    Plan {
        status,
        headers,
        streaming: false,
        steps: vec![Step::Write(body.to_owned())],
        complete: true,
    }
}

/// Splits `s` into at most `n` non-empty pieces at char boundaries (fewer if `s` is short).
pub(crate) fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = n.clamp(1, chars.len());
    let size = chars.len().div_ceil(n);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// An event list with the index where the "tail" (closing events) starts.
pub(crate) struct Events {
    pub events: Vec<String>,
    /// Index of the last argument delta of the last tool call, if any.
    pub last_args_piece: Option<usize>,
    pub tail: usize,
}

fn sse_event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn sse_data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn tool_id(call: &ToolCall, prefix: &str, ids: &Ids, i: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("{prefix}_fake_{}_{i}", ids.request))
}

pub(crate) fn anthropic_events(s: &Stream, ids: &Ids) -> Events {
    let u = s.usage.unwrap_or(Usage::new(0, 0, 0, 0));
    let mut ev = vec![sse_event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{}", ids.request), "type": "message", "role": "assistant",
            "model": "fake-model", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": u.input, "cache_creation_input_tokens": u.cache_write,
                      "cache_read_input_tokens": u.cache_read, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    let mut block = |ev: &mut Vec<String>, start: Value, deltas: Vec<Value>| {
        ev.push(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for d in deltas {
            ev.push(sse_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": d}),
            ));
        }
        ev.push(sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    };
    if let Some((thinking, signature)) = &s.thinking {
        let mut deltas: Vec<Value> = pieces(thinking, 2)
            .into_iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
        block(&mut ev, json!({"type": "thinking", "thinking": ""}), deltas);
    }
    if let Some(text) = &s.text {
        let deltas = pieces(text, 2)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        block(&mut ev, json!({"type": "text", "text": ""}), deltas);
    }
    let mut last_args_piece = None;
    for (i, call) in s.tool_calls.iter().enumerate() {
        if i == 0 {
            ev.push(sse_event("ping", &json!({"type": "ping"})));
        }
        let id = tool_id(call, "toolu", ids, i);
        let deltas: Vec<Value> = pieces(&call.arguments, 3)
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        let n = deltas.len();
        block(
            &mut ev,
            json!({"type": "tool_use", "id": id, "name": call.name, "input": {}}),
            deltas,
        );
        // ev ends with: …deltas, stop.
        last_args_piece = (n > 1).then(|| ev.len() - 2);
    }
    let tail = if index > 0 { ev.len() - 1 } else { ev.len() };
    let stop = s.stop_reason.clone().unwrap_or_else(|| {
        if s.tool_calls.is_empty() {
            "end_turn".into()
        } else {
            "tool_use".into()
        }
    });
    ev.push(sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": u.output}}),
    ));
    ev.push(sse_event("message_stop", &json!({"type": "message_stop"})));
    Events {
        events: ev,
        last_args_piece,
        tail,
    }
}

fn openai_events(s: &Stream, ids: &Ids) -> Events {
    let id = format!("chatcmpl-fake-{}", ids.request);
    let chunk = |delta: Value, finish: Value| {
        sse_data(
            &json!({"id": id, "object": "chat.completion.chunk", "created": 1_730_000_000,
            "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": null}),
        )
    };
    let mut ev = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some((thinking, _)) = &s.thinking {
        for p in pieces(thinking, 2) {
            ev.push(chunk(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(text) = &s.text {
        for p in pieces(text, 2) {
            ev.push(chunk(json!({"content": p}), Value::Null));
        }
    }
    let mut last_args_piece = None;
    for (i, call) in s.tool_calls.iter().enumerate() {
        let cid = tool_id(call, "call", ids, i);
        ev.push(chunk(
            json!({"tool_calls": [{"index": i, "id": cid, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        let args = pieces(&call.arguments, 3);
        let n = args.len();
        for p in args {
            ev.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
        last_args_piece = (n > 1).then(|| ev.len() - 1);
    }
    let tail = ev.len();
    let finish = s.stop_reason.clone().unwrap_or_else(|| {
        if s.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    });
    ev.push(chunk(json!({}), json!(finish)));
    if let Some(u) = s.usage {
        let prompt = u.input + u.cache_read + u.cache_write;
        let mut details = json!({"cached_tokens": u.cache_read});
        if u.cache_write > 0 {
            details["cache_write_tokens"] = json!(u.cache_write);
        }
        ev.push(sse_data(
            &json!({"id": id, "object": "chat.completion.chunk",
            "created": 1_730_000_000, "model": "fake-model", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": u.output,
                      "total_tokens": prompt + u.output, "prompt_tokens_details": details}}),
        ));
    }
    ev.push("data: [DONE]\n\n".to_owned());
    Events {
        events: ev,
        last_args_piece,
        tail,
    }
}

/// Gemini: one chunk per piece of thinking, text and per function call (the first call carries
/// a thought signature, as Gemini 3 sends them), then the finish reason with the usage.
fn gemini_events(s: &Stream) -> Events {
    let chunk = |parts: Value| {
        sse_data(
            &json!({"candidates": [{"content": {"role": "model", "parts": parts},
            "index": 0}], "modelVersion": "fake-model"}),
        )
    };
    let mut ev = Vec::new();
    if let Some((thinking, signature)) = &s.thinking {
        let ps = pieces(thinking, 2);
        let n = ps.len();
        for (i, p) in ps.into_iter().enumerate() {
            let mut part = json!({"text": p, "thought": true});
            if i + 1 == n {
                part["thoughtSignature"] = json!(signature);
            }
            ev.push(chunk(json!([part])));
        }
    }
    if let Some(text) = &s.text {
        for p in pieces(text, 2) {
            ev.push(chunk(json!([{"text": p}])));
        }
    }
    let mut last_args_piece = None;
    for (i, call) in s.tool_calls.iter().enumerate() {
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
        let mut fc = json!({"name": call.name, "args": args});
        if let Some(id) = &call.id {
            fc["id"] = json!(id);
        }
        let mut part = json!({"functionCall": fc});
        if i == 0 {
            part["thoughtSignature"] = json!(format!("c2lnLWNhbGwt{i}"));
        }
        ev.push(chunk(json!([part])));
        last_args_piece = Some(ev.len() - 1);
    }
    let tail = ev.len();
    let finish = s.stop_reason.clone().unwrap_or_else(|| "STOP".into());
    let mut last = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
        "finishReason": finish, "index": 0}]});
    if let Some(u) = s.usage {
        last["usageMetadata"] = json!({"promptTokenCount": u.input + u.cache_read,
            "cachedContentTokenCount": u.cache_read, "candidatesTokenCount": u.output,
            "totalTokenCount": u.input + u.cache_read + u.output});
    }
    ev.push(sse_data(&last));
    Events {
        events: ev,
        // A call comes whole: cutting one piece of it is cutting the call.
        last_args_piece: last_args_piece.filter(|_| false),
        tail,
    }
}

/// OpenAI Responses: a reasoning item (its summary the thinking, its encrypted content the
/// signature), a message item, function call items, then `response.completed` with the usage
/// (a stop reason makes it `response.incomplete` with that reason).
fn responses_events(s: &Stream, ids: &Ids) -> Events {
    let e = |v: Value| sse_event(v["type"].as_str().unwrap_or("message"), &v);
    let rid = format!("resp_fake_{}", ids.request);
    let mut ev = vec![e(
        json!({"type": "response.created", "response": {"id": rid,
        "object": "response", "status": "in_progress"}}),
    )];
    let mut index = 0;
    if let Some((thinking, signature)) = &s.thinking {
        let id = format!("rs_fake_{}", ids.request);
        ev.push(e(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "reasoning", "id": id, "summary": []}}),
        ));
        ev.push(e(
            json!({"type": "response.reasoning_summary_part.added", "output_index": index,
            "item_id": id, "summary_index": 0}),
        ));
        for p in pieces(thinking, 2) {
            ev.push(e(json!({"type": "response.reasoning_summary_text.delta",
                "output_index": index, "item_id": id, "summary_index": 0, "delta": p})));
        }
        ev.push(e(
            json!({"type": "response.output_item.done", "output_index": index,
            "item": {"type": "reasoning", "id": id, "encrypted_content": signature,
                "summary": [{"type": "summary_text", "text": thinking}]}}),
        ));
        index += 1;
    }
    if let Some(text) = &s.text {
        let id = format!("msg_fake_{}", ids.request);
        ev.push(e(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "message", "id": id, "role": "assistant", "content": []}}),
        ));
        for p in pieces(text, 2) {
            ev.push(e(
                json!({"type": "response.output_text.delta", "output_index": index,
                "item_id": id, "content_index": 0, "delta": p}),
            ));
        }
        ev.push(e(
            json!({"type": "response.output_item.done", "output_index": index,
            "item": {"type": "message", "id": id, "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}}),
        ));
        index += 1;
    }
    let mut last_args_piece = None;
    for (i, call) in s.tool_calls.iter().enumerate() {
        let cid = tool_id(call, "call", ids, i);
        let item = |args: &str| {
            json!({"type": "function_call", "id": format!("fc_{cid}"),
            "call_id": cid, "name": call.name, "arguments": args})
        };
        ev.push(e(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": item("")}),
        ));
        let args = pieces(&call.arguments, 3);
        let n = args.len();
        for p in args {
            ev.push(e(json!({"type": "response.function_call_arguments.delta",
                "output_index": index, "item_id": format!("fc_{cid}"), "delta": p})));
        }
        last_args_piece = (n > 1).then(|| ev.len() - 1);
        ev.push(e(
            json!({"type": "response.output_item.done", "output_index": index,
            "item": item(&call.arguments)}),
        ));
        index += 1;
    }
    let tail = ev.len();
    let usage = s.usage.map(|u| {
        json!({"input_tokens": u.input + u.cache_read,
        "input_tokens_details": {"cached_tokens": u.cache_read}, "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input + u.cache_read + u.output})
    });
    ev.push(match &s.stop_reason {
        None => e(json!({"type": "response.completed", "response": {"id": rid,
            "object": "response", "status": "completed", "usage": usage}})),
        Some(r) => e(
            json!({"type": "response.incomplete", "response": {"id": rid,
            "object": "response", "status": "incomplete", "incomplete_details": {"reason": r},
            "usage": usage}}),
        ),
    });
    Events {
        events: ev,
        // The done event after the last piece repeats the arguments: it is not cut.
        last_args_piece: last_args_piece.filter(|_| false),
        tail,
    }
}

fn steps_for(s: &Stream, e: Events, dialect: Dialect, ids: &Ids) -> (Vec<Step>, bool) {
    let Events {
        mut events,
        last_args_piece,
        tail,
    } = e;
    let write = |v: Vec<String>| v.into_iter().map(Step::Write).collect::<Vec<_>>();
    match &s.fault {
        None => (write(events), true),
        Some(Fault::CutMidStream) => {
            events.truncate(tail);
            if let Some(i) = last_args_piece
                && i + 1 == events.len()
            {
                events.pop();
            }
            events.push(match dialect {
                Dialect::Anthropic | Dialect::AnthropicVertex => "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_de".to_owned(),
                Dialect::Gemini => "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"cu".to_owned(),
                Dialect::Responses => "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"de".to_owned(),
                Dialect::OpenAi => format!("data: {{\"id\":\"chatcmpl-fake-{}\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"cu", ids.request),
                Dialect::Bedrock => unreachable!("Bedrock frames its own events"),
            });
            (write(events), false)
        }
        Some(Fault::Malformed) => {
            events.insert(1, "data: {\"type\": this is not json\n\n".to_owned());
            (write(events), true)
        }
        Some(Fault::NoFinish) => {
            events.truncate(tail);
            if dialect == Dialect::OpenAi {
                events.push("data: [DONE]\n\n".to_owned());
            }
            (write(events), true)
        }
        Some(Fault::Stall(d)) => {
            let mut steps = write(events.into_iter().take(1).collect());
            steps.push(Step::Sleep(*d));
            (steps, false)
        }
        Some(Fault::StallAfterContent(d)) => {
            events.truncate(tail);
            let mut steps = write(events);
            steps.push(Step::Sleep(*d));
            (steps, false)
        }
        Some(Fault::ErrorEvent { kind, message }) => {
            events.truncate(tail);
            match dialect {
                Dialect::Gemini => events.push(sse_data(&json!({"error": {"code": 503,
                    "message": message, "status": kind}}))),
                Dialect::Responses => events.push(sse_event(
                    "error",
                    &json!({"type": "error", "code": kind, "message": message, "param": null}),
                )),
                Dialect::Anthropic | Dialect::AnthropicVertex => events.push(sse_event(
                    "error",
                    &json!({"type": "error", "error": {"type": kind, "message": message}}),
                )),
                Dialect::OpenAi => {
                    events.push(sse_data(&json!({
                        "id": format!("chatcmpl-fake-{}", ids.request),
                        "object": "chat.completion.chunk", "model": "fake-model",
                        "error": {"message": message, "type": kind, "code": kind},
                        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]})));
                    events.push("data: [DONE]\n\n".to_owned());
                }
                Dialect::Bedrock => unreachable!("Bedrock frames its own events"),
            }
            (write(events), true)
        }
    }
}

fn anthropic_steps(s: &Stream, ids: &Ids) -> (Vec<Step>, bool) {
    steps_for(s, anthropic_events(s, ids), Dialect::Anthropic, ids)
}

fn openai_steps(s: &Stream, ids: &Ids) -> (Vec<Step>, bool) {
    steps_for(s, openai_events(s, ids), Dialect::OpenAi, ids)
}
