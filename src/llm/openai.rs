//! OpenAI Chat Completions (and compatible servers): request body, headers, and the streaming
//! chunk accumulator, tolerant of how compatible servers differ: tool-call ids missing, empty or
//! repeated on every fragment, parallel calls sent whole at one index, usage on any chunk (or
//! Groq's `x_groq.usage`, or none), reasoning as `reasoning_content` or `reasoning`, keep-alive
//! comments and empty `data:` lines, and `finish_reason: "stop"` on a reply with tool calls.

use super::budget::{BLOCK_COST, Budget};
use super::dialect::{self, Accumulator as _};
use super::retry::{Failure, error_from_json, kind_retryable};
use super::sse::SseEvent;
use super::{
    ApiKind, ChatRequest, Endpoint, FinishReason, LlmError, Part, Response, Role, StreamEvent,
    Usage, UsageError,
};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// `{base}/chat/completions` (before the base's query string, if any).
pub(crate) fn url(base: &str) -> String {
    let base = dialect::base_or(base, DEFAULT_BASE_URL);
    crate::net::join_path(base, "/chat/completions")
}

/// Provider headers (besides content-type/accept, which the client sets).
pub(crate) fn headers(ep: &Endpoint) -> Vec<(String, String)> {
    match ep
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
    {
        Some(k) => vec![("authorization".to_string(), format!("Bearer {k}"))],
        None => Vec::new(),
    }
}

/// A tool-call id unique in this process and unlikely to repeat across runs: `call_<n>`.
pub(crate) fn synth_call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if NEXT.load(Ordering::Relaxed) == 0 {
        // Seed once from the clock so ids of a resumed session do not collide with stored ones.
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1)
            .max(1);
        let _ = NEXT.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
    }
    format!("call_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The arguments text to send back: valid JSON, `{}` otherwise.
pub(crate) fn valid_arguments(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(_)) => raw.to_string(),
        _ => "{}".to_string(),
    }
}

/// The Chat Completions request body for `req` (streaming).
pub(crate) fn build_request(req: &ChatRequest, kind: ApiKind) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    if !req.system.trim().is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    // Each call's tool message comes right after the assistant message that made it.
    for m in &super::history::pair_tool_results(&req.messages) {
        match m.role {
            Role::System => {
                let t = m.text();
                if !t.trim().is_empty() {
                    messages.push(json!({"role": "system", "content": t}));
                }
            }
            Role::User | Role::Tool => {
                let mut texts: Vec<String> = Vec::new();
                // Tool messages carry text only: images follow in one user message.
                let mut images: Vec<Value> = Vec::new();
                // Images attached to the prompt.
                let mut attached: Vec<Value> = Vec::new();
                for p in &m.parts {
                    if let (Some((mime, data)), Part::ToolResult { tool_call_id, .. }) =
                        (super::result_image(p), p)
                    {
                        images.push(json!({"type": "text",
                            "text": format!("The image returned by tool call {tool_call_id}:")}));
                        images.push(json!({"type": "image_url",
                            "image_url": {"url": format!("data:{mime};base64,{data}")}}));
                    }
                    match p {
                        Part::ToolResult {
                            tool_call_id,
                            content,
                            ..
                        } => {
                            let content = crate::llm::types::tool_output(content);
                            messages.push(json!({"role": "tool", "tool_call_id": tool_call_id,
                                "content": content}));
                        }
                        Part::Text { text } if !text.trim().is_empty() && m.role == Role::User => {
                            texts.push(text.clone())
                        }
                        Part::ShellCommand {
                            command, output, ..
                        } if m.role == Role::User => texts.push(format!("!{command}\n{output}")),
                        Part::Binary {
                            mime_type, data, ..
                        } if m.role == Role::User && super::is_image_attachment(p) => attached
                            .push(json!({"type": "image_url",
                                "image_url": {"url": format!("data:{mime_type};base64,{data}")}})),
                        Part::ImageUrl { url, detail } if m.role == Role::User => {
                            let mut u = json!({"url": url});
                            if !detail.is_empty() {
                                u["detail"] = json!(detail);
                            }
                            attached.push(json!({"type": "image_url", "image_url": u}));
                        }
                        _ => {}
                    }
                }
                if !images.is_empty() {
                    messages.push(json!({"role": "user", "content": images}));
                }
                if !attached.is_empty() {
                    // The prompt with its images: content parts, text first.
                    let mut content = Vec::new();
                    if !texts.is_empty() {
                        content.push(json!({"type": "text", "text": texts.join("\n")}));
                    }
                    content.extend(attached);
                    messages.push(json!({"role": "user", "content": content}));
                } else if !texts.is_empty() {
                    messages.push(json!({"role": "user", "content": texts.join("\n")}));
                }
            }
            Role::Assistant => {
                let mut text = String::new();
                let mut calls = Vec::new();
                for p in &m.parts {
                    match p {
                        Part::Text { text: t } => text.push_str(t),
                        Part::ToolCall {
                            id, name, input, ..
                        } => calls.push(json!({"id": id, "type": "function",
                            "function": {"name": name, "arguments": valid_arguments(input)}})),
                        _ => {}
                    }
                }
                if text.trim().is_empty() && calls.is_empty() {
                    continue;
                }
                // `content` is always a string: llama.cpp, LM Studio and mlx-lm reject null.
                let mut msg = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }

    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if let Some(n) = req.max_tokens {
        let key = match kind {
            ApiKind::OpenAi => "max_completion_tokens",
            _ => "max_tokens",
        };
        body[key] = json!(n);
    }
    let o = &req.options;
    let names = [
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
    ];
    for (key, v) in req.sampling(&names) {
        body[key] = json!(v);
    }
    // Not an OpenAI parameter, but vLLM, llama.cpp, ollama and most compatible servers take it.
    if let (Some(k), ApiKind::OpenAiCompat) = (o.top_k, kind) {
        body["top_k"] = json!(k);
    }
    if let Some(v) = o.get("text_verbosity") {
        body["verbosity"] = v.clone();
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name,
                    "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    o.merge_rest_into(&mut body, OWN_OPTIONS);
    body
}

/// The provider options this dialect reads itself (Go Crush's names); the others go into the
/// body as they are (`reasoning_effort`, `parallel_tool_calls`, OpenRouter's `reasoning`...).
const OWN_OPTIONS: &[&str] = &["text_verbosity", "structured_outputs"];

#[derive(Debug)]
struct Call {
    id: String,
    /// The id was made up here (the server sent none yet).
    synthetic: bool,
    name: String,
    args: String,
    announced: bool,
}

#[derive(Debug)]
enum Block {
    Reasoning(String),
    Text(String),
    Call(usize),
}

/// Builds a `Response` from the stream's chunks. Pure: feed events, then `finish`.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    blocks: Vec<Block>,
    calls: Vec<Call>,
    /// tool_calls[].index → position in `calls` of the call currently at that index.
    by_index: HashMap<u64, usize>,
    finish: Option<String>,
    usage: Option<Usage>,
    usage_rejected: Option<String>,
    done: bool,
    /// Bytes held so far (text, reasoning, arguments, ids), against the reply cap.
    budget: Budget,
}

/// Reads an OpenAI usage object into ledger terms (`input` excludes cached tokens). `Ok(None)`:
/// no usage in it; `Err`: a count is not a non-negative integer, or the cached counts exceed
/// the prompt count (the numbers contradict each other).
pub(crate) fn parse_usage(u: &Value) -> Result<Option<Usage>, UsageError> {
    use crate::llm::types::{fresh_tokens, token_field, token_fields};
    let Some([prompt, completion]) = token_fields(u, ["prompt_tokens", "completion_tokens"])?
    else {
        return Ok(None);
    };
    if prompt.is_none() && completion.is_none() {
        return Ok(None);
    }
    let prompt = prompt.unwrap_or(0);
    let (cache_read, cache_write) = match u.get("prompt_tokens_details") {
        Some(d) if d.is_object() => (
            token_field(d, "cached_tokens")?.unwrap_or(0),
            token_field(d, "cache_write_tokens")?.unwrap_or(0),
        ),
        _ => (0, 0),
    };
    let input = fresh_tokens(prompt, &[cache_read, cache_write], || {
        (
            format!("prompt_tokens {prompt}"),
            format!("its cached ({cache_read}) and cache-write ({cache_write}) tokens"),
        )
    })?;
    Ok(Some(Usage {
        input,
        output: completion.unwrap_or(0),
        cache_read,
        cache_write,
    }))
}

fn args_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

impl Accumulator {
    fn feed_chunk(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), Failure> {
        if v.get("error").is_some_and(|e| !e.is_null()) {
            let eb = error_from_json(v).unwrap_or_default();
            return Err(Failure {
                error: LlmError::Protocol(format!("server error: {}", eb.message)),
                retryable: kind_retryable(eb.kind.as_deref(), eb.code.as_deref()),
                retry_after: None,
            });
        }
        let usage = v
            .get("usage")
            .filter(|u| !u.is_null())
            .or_else(|| v.get("x_groq").and_then(|x| x.get("usage")));
        if let Some(u) = usage {
            crate::llm::types::record_usage(
                parse_usage(u),
                &mut self.usage,
                &mut self.usage_rejected,
            );
        }
        let choices = v.get("choices").and_then(Value::as_array);
        let choice = choices.and_then(|cs| {
            cs.iter()
                .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
                .or_else(|| cs.iter().find(|c| c.get("index").is_none()))
        });
        let Some(choice) = choice else {
            return Ok(());
        };
        let delta = choice
            .get("delta")
            .or_else(|| choice.get("message"))
            .unwrap_or(&Value::Null);
        let reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .filter_map(|k| delta.get(*k).and_then(Value::as_str))
            .find(|s| !s.is_empty());
        if let Some(r) = reasoning {
            self.take(
                r.len(),
                !matches!(self.blocks.last(), Some(Block::Reasoning(_))),
            )?;
            match self.blocks.last_mut() {
                Some(Block::Reasoning(b)) => b.push_str(r),
                _ => self.blocks.push(Block::Reasoning(r.to_string())),
            }
            out.push(StreamEvent::ReasoningDelta(r.to_string()));
        }
        for key in ["content", "refusal"] {
            if let Some(t) = delta.get(key).and_then(Value::as_str)
                && !t.is_empty()
            {
                self.take(t.len(), !matches!(self.blocks.last(), Some(Block::Text(_))))?;
                match self.blocks.last_mut() {
                    Some(Block::Text(b)) => b.push_str(t),
                    _ => self.blocks.push(Block::Text(t.to_string())),
                }
                out.push(StreamEvent::TextDelta(t.to_string()));
            }
        }
        if let Some(tcs) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, tc) in tcs.iter().enumerate() {
                self.tool_fragment(tc, pos as u64, out)?;
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            if f == "error" {
                return Err(Failure::retry(LlmError::Protocol(
                    "the server ended the reply with finish_reason \"error\"".into(),
                )));
            }
            self.finish = Some(f.to_string());
        }
        Ok(())
    }

    /// Counts `n` bytes more, plus a block's bookkeeping when `new_block`.
    fn take(&mut self, n: usize, new_block: bool) -> Result<(), Failure> {
        self.budget.take(n + if new_block { BLOCK_COST } else { 0 })
    }

    fn tool_fragment(
        &mut self,
        tc: &Value,
        pos: u64,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Failure> {
        let idx = tc.get("index").and_then(Value::as_u64).unwrap_or(pos);
        let id = tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let f = tc.get("function").unwrap_or(&Value::Null);
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let args = args_text(f.get("arguments"));
        // A fragment naming a tool while the held call is already complete starts a new call.
        let whole_new = |c: &Call| {
            name.is_some()
                && !c.name.is_empty()
                && serde_json::from_str::<Value>(&c.args).is_ok_and(|v| v.is_object())
        };
        let held = self.by_index.get(&idx).copied();
        let target = match (held, id) {
            (Some(p), Some(id)) if self.calls[p].id == id => Some(p),
            (Some(p), Some(id)) if self.calls[p].synthetic && !whole_new(&self.calls[p]) => {
                self.calls[p].id = id.to_string();
                self.calls[p].synthetic = false;
                Some(p)
            }
            (Some(p), None) if !whole_new(&self.calls[p]) => Some(p),
            _ => None,
        };
        let new_call = target.is_none();
        self.take(
            args.len() + id.map_or(0, str::len) + name.map_or(0, str::len),
            new_call,
        )?;
        let p = match target {
            Some(p) => p,
            None => {
                let (id, synthetic) = match id {
                    Some(id) => (id.to_string(), false),
                    None => (synth_call_id(), true),
                };
                self.calls.push(Call {
                    id,
                    synthetic,
                    name: String::new(),
                    args: String::new(),
                    announced: false,
                });
                let p = self.calls.len() - 1;
                self.by_index.insert(idx, p);
                self.blocks.push(Block::Call(p));
                p
            }
        };
        let call = &mut self.calls[p];
        if let Some(n) = name
            && call.name.is_empty()
        {
            call.name = n.to_string();
        }
        call.args.push_str(&args);
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            out.push(StreamEvent::ToolCallStart {
                name: call.name.clone(),
            });
        }
        Ok(())
    }
}

impl dialect::Accumulator for Accumulator {
    /// Takes one event; progress for the display goes to `out`. Returns true at `[DONE]`.
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        // Keep-alives: empty `data:`, `data: :ping`…
        if !data.starts_with('{') {
            return Ok(false);
        }
        let v = dialect::event_json(data, "a stream chunk")?;
        self.feed_chunk(&v, out)?;
        Ok(false)
    }

    fn missing(&self) -> Option<&'static str> {
        self.finish.is_none().then_some("a finish_reason")
    }

    /// The response, whatever state the stream is in.
    fn into_response(self) -> Response {
        let length = self.finish.as_deref() == Some("length");
        let mut calls: Vec<Option<Call>> = self.calls.into_iter().map(Some).collect();
        let mut used = HashSet::new();
        let mut parts = Vec::new();
        for b in self.blocks {
            match b {
                Block::Reasoning(thinking) => parts.push(Part::reasoning(thinking, String::new())),
                Block::Text(text) => parts.push(Part::Text { text }),
                Block::Call(p) => {
                    let Some(c) = calls.get_mut(p).and_then(Option::take) else {
                        continue;
                    };
                    let mut id = c.id;
                    while !used.insert(id.clone()) {
                        id = synth_call_id();
                    }
                    parts.push(Part::ToolCall {
                        id,
                        name: c.name,
                        input: if c.args.trim().is_empty() {
                            "{}".to_string()
                        } else {
                            c.args
                        },
                        provider_executed: false,
                        finished: !length,
                    });
                }
            }
        }
        let has_calls = !used.is_empty();
        let finish = match self.finish.as_deref() {
            Some("length") => FinishReason::MaxTokens,
            Some("content_filter") => FinishReason::ContentFilter,
            _ if has_calls => FinishReason::ToolUse,
            None | Some("stop" | "tool_calls" | "function_call" | "end_turn") => {
                FinishReason::EndTurn
            }
            Some(other) => FinishReason::Other(other.to_string()),
        };
        Response::settled(parts, self.usage, self.usage_rejected, finish)
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
}

/// A non-streaming reply (`chat.completion`), for servers that ignore `stream:true`.
pub(crate) fn response_from_json(v: &Value) -> Option<Response> {
    let choices = v.get("choices")?.as_array()?;
    if choices.iter().all(|c| c.get("message").is_none()) {
        return None;
    }
    let mut acc = Accumulator::default();
    let mut sink = Vec::new();
    acc.feed_chunk(v, &mut sink).ok()?;
    acc.done = true;
    Some(acc.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};

    const HEAD: &str = r#""id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4.1""#;

    /// A typical stream: text, a tool call in fragments, then usage in a `choices: []` chunk.
    fn example() -> String {
        [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{…,"choices":[{"index":0,"delta":{"content":"Reading it."},"finish_reason":null}],"usage":null}"#,
            r#"{…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"view","arguments":""}}]},"finish_reason":null}],"usage":null}"#,
            r#"{…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file_pa"}}]},"finish_reason":null}],"usage":null}"#,
            r#"{…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"src/main.rs\"}"}}]},"finish_reason":null}],"usage":null}"#,
            r#"{…,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#,
            r#"{…,"choices":[],"usage":{"prompt_tokens":2100,"completion_tokens":25,"total_tokens":2125,"prompt_tokens_details":{"cached_tokens":2048}}}"#,
            "[DONE]",
        ]
        .iter()
        .map(|d| format!("data: {}\n\n", d.replace('…', HEAD)))
        .collect()
    }

    fn chunk(choice_delta: Value, finish: Option<&str>) -> String {
        let v = json!({"id":"x","object":"chat.completion.chunk","model":"m",
            "choices":[{"index":0,"delta":choice_delta,"finish_reason":finish}],"usage":null});
        format!("data: {v}\n\n")
    }

    fn tc(index: u64, id: Option<&str>, name: Option<&str>, args: Value) -> Value {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut t = json!({"index": index, "function": f});
        if let Some(id) = id {
            t["id"] = json!(id);
            t["type"] = json!("function");
        }
        json!({"tool_calls": [t]})
    }

    use crate::llm::dialect::testing::run_with;

    fn run(stream: &str) -> (Result<Response, Failure>, Vec<StreamEvent>) {
        run_with(Accumulator::default(), stream)
    }

    fn calls(r: &Response) -> Vec<(String, String, String)> {
        r.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall {
                    id, name, input, ..
                } => Some((id.clone(), name.clone(), input.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn example_stream() {
        let (r, out) = run(&example());
        let r = r.unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert_eq!(
            r.parts[0],
            Part::Text {
                text: "Reading it.".into()
            }
        );
        assert_eq!(
            calls(&r),
            [(
                "call_1".to_string(),
                "view".to_string(),
                r#"{"file_path":"src/main.rs"}"#.to_string()
            )]
        );
        // Usage from the choices:[] chunk; input excludes cached tokens.
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 52,
                output: 25,
                cache_read: 2048,
                cache_write: 0
            })
        );
        assert!(matches!(&out[0], StreamEvent::TextDelta(t) if t == "Reading it."));
        assert!(matches!(&out[1], StreamEvent::ToolCallStart { name } if name == "view"));
    }

    #[test]
    fn text_and_usage_only_chunk() {
        let s = chunk(json!({"role":"assistant","content":null}), None)
            + &chunk(json!({"content":"Hel"}), None)
            + &chunk(json!({"content":"lo"}), None)
            + &chunk(json!({}), Some("stop"))
            + r#"data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4,"cache_write_tokens":3}}}"#
            + "\n\ndata: [DONE]\n\n";
        let r = run(&s).0.unwrap();
        assert_eq!(r.finish, FinishReason::EndTurn);
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "Hello".into()
            }]
        );
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 3,
                output: 2,
                cache_read: 4,
                cache_write: 3
            })
        );
    }

    fn usage_stream(usage: &str) -> String {
        chunk(json!({"content":"ok"}), None)
            + &chunk(json!({}), Some("stop"))
            + &format!("data: {{\"choices\":[],\"usage\":{usage}}}\n\n")
            + "data: [DONE]\n\n"
    }

    #[test]
    fn negative_or_absurd_usage_is_rejected_not_recorded() {
        for (usage, why) in [
            (
                r#"{"prompt_tokens":-5,"completion_tokens":2}"#,
                "prompt_tokens",
            ),
            (
                r#"{"prompt_tokens":10,"completion_tokens":2.5}"#,
                "completion_tokens",
            ),
            (
                r#"{"prompt_tokens":"10","completion_tokens":2}"#,
                "prompt_tokens",
            ),
            (
                r#"{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":11}}"#,
                "cached",
            ),
            (
                r#"{"prompt_tokens":10,"completion_tokens":99000000000}"#,
                "not plausible",
            ),
        ] {
            let r = run(&usage_stream(usage)).0.unwrap();
            assert_eq!(r.usage, None, "{usage}");
            let reason = r.usage_rejected.unwrap_or_default();
            assert!(reason.contains(why), "{usage}: {reason}");
        }
    }

    #[test]
    fn a_later_valid_usage_replaces_an_earlier_bad_one() {
        let bad = r#"data: {"choices":[],"usage":{"prompt_tokens":1.0,"completion_tokens":1}}"#;
        let s =
            format!("{bad}\n\n") + &usage_stream(r#"{"prompt_tokens":10,"completion_tokens":2}"#);
        let r = run(&s).0.unwrap();
        assert_eq!(r.usage_rejected, None);
        assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((10, 2)));
        // The other way round the last (bad) one wins.
        let good = r#"data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}"#;
        let s =
            format!("{good}\n\n") + &usage_stream(r#"{"prompt_tokens":1.0,"completion_tokens":2}"#);
        let r = run(&s).0.unwrap();
        assert_eq!(r.usage, None);
        assert!(
            r.usage_rejected
                .unwrap_or_default()
                .contains("prompt_tokens")
        );
    }

    #[test]
    fn all_zero_usage_is_unknown() {
        let r = run(&usage_stream(
            r#"{"prompt_tokens":0,"completion_tokens":0}"#,
        ))
        .0
        .unwrap();
        assert_eq!((r.usage, r.usage_rejected), (None, None));
    }

    #[test]
    fn tool_arguments_split_inside_escape() {
        // {"command":"echo \"hi\""} in 3 pieces, one cut between `\` and `"`.
        let s = chunk(tc(0, Some("call_9"), Some("bash"), json!("")), None)
            + &chunk(tc(0, None, None, json!("{\"command\":")), None)
            + &chunk(tc(0, None, None, json!("\"echo \\")), None)
            + &chunk(tc(0, None, None, json!("\"hi\\\"\"}")), None)
            + &chunk(json!({}), Some("tool_calls"))
            + "data: [DONE]\n\n";
        let r = run(&s).0.unwrap();
        let c = calls(&r);
        assert_eq!(c.len(), 1);
        let v: Value = serde_json::from_str(&c[0].2).unwrap();
        assert_eq!(v, json!({"command": "echo \"hi\""}));
    }

    #[test]
    fn parallel_interleaved() {
        let s = chunk(tc(0, Some("c0"), Some("a"), json!("{\"x\"")), None)
            + &chunk(tc(1, Some("c1"), Some("b"), json!("{\"y\"")), None)
            + &chunk(tc(0, None, None, json!(":1}")), None)
            + &chunk(tc(1, None, None, json!(":2}")), None)
            + &chunk(json!({}), Some("tool_calls"))
            + "data: [DONE]\n\n";
        let r = run(&s).0.unwrap();
        assert_eq!(
            calls(&r),
            [
                ("c0".into(), "a".into(), "{\"x\":1}".into()),
                ("c1".into(), "b".into(), "{\"y\":2}".into())
            ]
        );
    }

    #[test]
    fn ollama_style_whole_calls_same_index() {
        let s = chunk(
            tc(0, Some("call_a"), Some("ls"), json!({"path": "."})),
            None,
        ) + &chunk(
            tc(0, Some("call_b"), Some("view"), json!("{\"f\":\"x\"}")),
            None,
        ) + &chunk(json!({}), Some("stop"))
            + "data: [DONE]\n\n";
        let r = run(&s).0.unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert_eq!(r.usage, None);
        assert_eq!(
            calls(&r),
            [
                ("call_a".into(), "ls".into(), "{\"path\":\".\"}".into()),
                ("call_b".into(), "view".into(), "{\"f\":\"x\"}".into())
            ]
        );
    }

    #[test]
    fn whole_calls_without_ids_same_index() {
        let s = chunk(tc(0, None, Some("ls"), json!("{}")), None)
            + &chunk(tc(0, None, Some("view"), json!("{}")), None)
            + &chunk(json!({}), Some("stop"));
        let r = run(&s).0.unwrap();
        let c = calls(&r);
        assert_eq!(c.len(), 2);
        assert_ne!(c[0].0, c[1].0);
    }

    #[test]
    fn repeated_id_continues_the_call() {
        // LiteLLM repeats the id on every fragment.
        let s = chunk(tc(0, Some("c"), Some("ls"), json!("{\"a\"")), None)
            + &chunk(tc(0, Some("c"), None, json!(":1}")), None)
            + &chunk(json!({}), Some("tool_calls"));
        assert_eq!(
            calls(&run(&s).0.unwrap()),
            [("c".into(), "ls".into(), "{\"a\":1}".into())]
        );
    }

    #[test]
    fn a_reply_larger_than_the_cap_fails_and_is_not_retried() {
        let piece = "x".repeat(100);
        // Text, reasoning, tool arguments and a flood of argument-less calls: each counts.
        let text: String = (0..50)
            .map(|_| chunk(json!({"content": piece}), None))
            .collect();
        let reasoning: String = (0..50)
            .map(|_| chunk(json!({"reasoning_content": piece}), None))
            .collect();
        let args = chunk(tc(0, Some("c"), Some("ls"), json!("")), None)
            + &(0..50)
                .map(|_| chunk(tc(0, None, None, json!(piece)), None))
                .collect::<String>();
        let calls: String = (0..200)
            .map(|i| chunk(tc(i, None, Some("ls"), json!("")), None))
            .collect();
        for body in [text, reasoning, args, calls] {
            let s = body + &chunk(json!({}), Some("stop")) + "data: [DONE]\n\n";
            assert!(run_with(Accumulator::with_limit(100_000), &s).0.is_ok());
            let f = run_with(Accumulator::with_limit(4_000), &s).0.unwrap_err();
            assert!(!f.retryable);
            assert_eq!(f.error, LlmError::TooLarge { limit: 4000 });
        }
    }

    #[test]
    fn bad_ids_are_made_up_and_unique() {
        let s = chunk(tc(0, Some(""), Some("ls"), json!("{}")), None)
            + &chunk(tc(1, None, Some("view"), json!("{}")), None)
            + &chunk(json!({}), Some("tool_calls"))
            + "data: [DONE]\n\n";
        let (r, _) = run(&s);
        let c = calls(&r.unwrap());
        assert_eq!(c.len(), 2);
        assert!(c[0].0.starts_with("call_") && c[1].0.starts_with("call_"));
        assert_ne!(c[0].0, c[1].0);
    }

    #[test]
    fn duplicate_ids_are_deduplicated() {
        let s = chunk(tc(0, Some("same"), Some("ls"), json!("{}")), None)
            + &chunk(tc(1, Some("same"), Some("view"), json!("{}")), None)
            + &chunk(json!({}), Some("tool_calls"));
        let c = calls(&run(&s).0.unwrap());
        assert_eq!(c[0].0, "same");
        assert_ne!(c[1].0, "same");
    }

    #[test]
    fn reasoning_fields() {
        let s = chunk(json!({"reasoning_content":"think "}), None)
            + &chunk(json!({"reasoning":"more","reasoning_content":null}), None)
            + &chunk(json!({"reasoning":"x","reasoning_content":"x"}), None)
            + &chunk(json!({"content":"answer"}), Some("stop"));
        let (r, out) = run(&s);
        let r = r.unwrap();
        assert_eq!(
            r.parts,
            vec![
                Part::reasoning("think morex".into(), String::new()),
                Part::Text {
                    text: "answer".into()
                }
            ]
        );
        assert!(matches!(&out[0], StreamEvent::ReasoningDelta(t) if t == "think "));
    }

    #[test]
    fn framing_variants_give_the_same_result() {
        let plain = example();
        let mut odd = String::from(": OPENROUTER PROCESSING\r\n\r\n");
        for block in plain.split("\n\n").filter(|b| !b.is_empty()) {
            odd.push_str(": ping\r\n");
            odd.push_str(&block.replacen("data: ", "data:", 1));
            odd.push_str("\r\n\r\ndata:\r\n\r\ndata: :ping\r\n\r\n");
        }
        let a = run(&plain).0.unwrap();
        let b = run(&odd).0.unwrap();
        assert_eq!(a.parts, b.parts);
        assert_eq!(a.usage, b.usage);
        assert_eq!(a.finish, b.finish);
    }

    #[test]
    fn truncation_rules() {
        // No finish_reason and no [DONE]: truncated.
        let s = chunk(json!({"content":"Hel"}), None);
        let f = run(&s).0.unwrap_err();
        assert_eq!(f.error, LlmError::truncated("a finish_reason"));
        assert!(f.retryable);
        // Cut inside a JSON line.
        let s = chunk(json!({"content":"Hel"}), None) + "data: {\"choices\":[{\"ind";
        assert_eq!(
            run(&s).0.unwrap_err().error,
            LlmError::truncated("a finish_reason")
        );
        // A finish_reason without [DONE] is enough.
        let s = chunk(json!({"content":"Hel"}), Some("stop"));
        assert!(run(&s).0.is_ok());
        // [DONE] without a finish_reason is not: the server stopped mid-reply.
        for s in [
            chunk(json!({"content":"Hel"}), None) + "data: [DONE]\n\n",
            "data: [DONE]\n\n".to_string(),
        ] {
            let f = run(&s).0.unwrap_err();
            assert!(f.retryable, "{s}");
            assert_eq!(f.error, LlmError::truncated("a finish_reason"));
        }
    }

    #[test]
    fn errors_in_stream() {
        let s = chunk(json!({"content":"Hel"}), None) + "data: {\"choices\":[{\"ind\n\n";
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable && matches!(f.error, LlmError::Protocol(_)));
        let s = chunk(json!({"content":"Hel"}), None)
            + r#"data: {"id":"x","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}"#
            + "\n\n";
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable);
        assert!(f.error.to_string().contains("Provider returned error"));
        let s = r#"data: {"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#.to_string() + "\n\n";
        assert!(!run(&s).0.unwrap_err().retryable);
        let s = chunk(json!({}), Some("error"));
        assert!(run(&s).0.unwrap_err().retryable);
    }

    #[test]
    fn finish_reasons() {
        let s = chunk(json!({"content":"a"}), Some("length"));
        assert_eq!(run(&s).0.unwrap().finish, FinishReason::MaxTokens);
        let s = chunk(
            tc(0, Some("c"), Some("ls"), json!("{\"a\":")),
            Some("length"),
        );
        let r = run(&s).0.unwrap();
        assert_eq!(r.finish, FinishReason::MaxTokens);
        assert!(matches!(
            &r.parts[0],
            Part::ToolCall {
                finished: false,
                ..
            }
        ));
        let s = chunk(json!({"content":"a"}), Some("content_filter"));
        assert_eq!(run(&s).0.unwrap().finish, FinishReason::ContentFilter);
        let s = chunk(json!({"content":"a"}), Some("weird"));
        assert_eq!(
            run(&s).0.unwrap().finish,
            FinishReason::Other("weird".into())
        );
    }

    #[test]
    fn groq_usage_and_other_choices() {
        let s = r#"data: {"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"},"finish_reason":"stop"}],"x_groq":{"usage":{"prompt_tokens":7,"completion_tokens":1}}}"#.to_string() + "\n\n";
        let r = run(&s).0.unwrap();
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "mine".into()
            }]
        );
        assert_eq!(r.usage.map(|u| u.input), Some(7));
    }

    fn req(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: "gpt-x".into(),
            system: "You are crush".into(),
            messages,
            tools: vec![ToolSpec {
                name: "view".into(),
                description: "Read".into(),
                parameters: json!({"type":"object"}),
            }],
            max_tokens: Some(100),
            temperature: Some(0.5),
            ..Default::default()
        }
    }

    fn result(id: &str, content: &str) -> Part {
        Part::ToolResult {
            tool_call_id: id.into(),
            name: "view".into(),
            content: content.into(),
            data: String::new(),
            mime_type: String::new(),
            metadata: String::new(),
            is_error: false,
        }
    }

    fn call(id: &str, input: &str) -> Part {
        Part::ToolCall {
            id: id.into(),
            name: "view".into(),
            input: input.into(),
            provider_executed: false,
            finished: true,
        }
    }

    #[test]
    fn request_shape() {
        let msgs = vec![
            Message::user("Show main.rs"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::reasoning("t".into(), String::new()),
                    call("call_1", r#"{"file_path":"src/main.rs"}"#),
                    call("call_2", "{bad"),
                ],
            },
            Message {
                role: Role::Tool,
                parts: vec![result("call_1", "fn main() {}"), result("call_2", "")],
            },
            Message {
                role: Role::User,
                parts: vec![Part::ShellCommand {
                    command: "pwd".into(),
                    output: "/x".into(),
                    exit_code: 0,
                }],
            },
        ];
        let body = build_request(&req(msgs.clone()), ApiKind::OpenAiCompat);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("max_completion_tokens").is_none());
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "view");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m[0], json!({"role":"system","content":"You are crush"}));
        assert_eq!(m[1], json!({"role":"user","content":"Show main.rs"}));
        assert_eq!(m[2]["content"], json!(""));
        assert_eq!(m[2]["tool_calls"][0]["type"], "function");
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"file_path":"src/main.rs"}"#
        );
        assert_eq!(m[2]["tool_calls"][1]["function"]["arguments"], "{}");
        assert_eq!(
            m[3],
            json!({"role":"tool","tool_call_id":"call_1","content":"fn main() {}"})
        );
        assert_eq!(m[4]["tool_call_id"], "call_2");
        assert_eq!(m[4]["content"], "(no output)");
        assert_eq!(m[5], json!({"role":"user","content":"!pwd\n/x"}));
        assert_eq!(m.len(), 6);
        let body = build_request(&req(msgs), ApiKind::OpenAi);
        assert_eq!(body["max_completion_tokens"], 100);
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn tool_messages_are_paired() {
        let msgs = vec![
            Message::user("go"),
            Message {
                role: Role::Tool,
                parts: vec![result("orphan", "x")],
            },
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text {
                        text: "Both.".into(),
                    },
                    call("a", "{}"),
                    call("b", "{}"),
                ],
            },
            Message {
                role: Role::Tool,
                parts: vec![result("b", "B"), result("b", "again")],
            },
        ];
        let body = build_request(&req(msgs), ApiKind::OpenAiCompat);
        let m = body["messages"].as_array().unwrap();
        let roles: Vec<_> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
        assert_eq!(m[2]["content"], "Both.");
        assert_eq!(m[3]["tool_call_id"], "a");
        assert_eq!(
            m[3]["content"],
            crate::llm::history::INTERRUPTED_TOOL_RESULT
        );
        assert_eq!(m[4]["tool_call_id"], "b");
        assert_eq!(m[4]["content"], "B");
    }

    #[test]
    fn urls_and_auth() {
        assert_eq!(
            url("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            url("https://api.openai.com/v1/"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(url(""), "https://api.openai.com/v1/chat/completions");
        let mut ep = Endpoint {
            kind: ApiKind::OpenAiCompat,
            base_url: String::new(),
            api_key: None,
            headers: vec![],
            ..Default::default()
        };
        assert!(headers(&ep).is_empty());
        ep.api_key = Some(String::new());
        assert!(headers(&ep).is_empty());
        ep.api_key = Some("sk".into());
        assert_eq!(
            headers(&ep),
            [("authorization".to_string(), "Bearer sk".to_string())]
        );
    }

    #[test]
    fn non_streaming_reply() {
        let v: Value = serde_json::from_str(r#"{"id":"chatcmpl-1","object":"chat.completion","created":1730000000,"model":"gpt-4.1",
 "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
   "tool_calls":[{"id":"call_1","type":"function","function":{"name":"view","arguments":"{\"file_path\":\"src/main.rs\"}"}}]}}],
 "usage":{"prompt_tokens":2100,"completion_tokens":25,"total_tokens":2125,
   "prompt_tokens_details":{"cached_tokens":2048},"completion_tokens_details":{"reasoning_tokens":0}}}"#).unwrap();
        let r = response_from_json(&v).unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert_eq!(calls(&r)[0].0, "call_1");
        assert_eq!(r.usage.unwrap().input, 52);
        assert!(response_from_json(&json!({"error":{"message":"x"}})).is_none());
    }

    #[test]
    fn attached_images_are_image_url_parts_after_the_text() {
        let body = build_request(
            &req(vec![crate::llm::types::fixtures::attached_image()]),
            ApiKind::OpenAi,
        );
        let user = &body["messages"][1];
        assert_eq!(user["role"], "user");
        assert_eq!(
            user["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                {"type": "image_url", "image_url": {"url": "https://e.x/a.png", "detail": "high"}}
            ])
        );
    }
}
