//! Google Gemini (`generateContent`), on Google's Gemini API and on Vertex AI: request body,
//! headers, and the streaming accumulator.
//!
//! The stream (`?alt=sse`) is a series of `data:` lines, each a whole `GenerateContentResponse`
//! with the new parts of the first candidate; it ends at the end of the body, after a chunk with
//! a `finishReason`. Function calls come whole; thinking comes as `thought: true` text parts;
//! thought signatures ride on parts and must be sent back on the same parts (they are kept in
//! a reasoning part, `thought_signature`, as Go Crush keeps them).

use super::budget::{BLOCK_COST, Budget};
use super::dialect::{self, Accumulator as _};
use super::retry::{Failure, error_from_json, kind_retryable};
use super::sse::SseEvent;
use super::{
    ChatRequest, FinishReason, LlmError, Part, Response, Role, StreamEvent, Usage, UsageError,
    anthropic,
};
use serde_json::{Map, Value, json};

pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// Where a reasoning part keeps the thought signature that goes with the part after it (Go
/// Crush's field name).
pub(crate) const SIGNATURE_KEY: &str = "thought_signature";

/// Gemini's documented stand-in for a signature a function call of the history lacks (a call
/// made by another model, or one whose signature was lost): Gemini 3 refuses the history
/// without one.
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// The provider options this dialect reads itself (Go Crush's names); the others go into the
/// body as they are.
const OWN_OPTIONS: &[&str] = &["thinking_config", "safety_settings", "cached_content"];

/// `models/gemini-x` and `gemini-x` name the same model.
fn model_name(model: &str) -> &str {
    model.strip_prefix("models/").unwrap_or(model)
}

/// `{base}/v1beta/models/{model}:streamGenerateContent?alt=sse` for Google's Gemini API (a base
/// that already ends in an API version keeps it).
pub(crate) fn url(base: &str, model: &str) -> String {
    let base = dialect::base_or(base, DEFAULT_BASE_URL);
    let head = dialect::head(base);
    let version = if head.ends_with("/v1beta") || head.ends_with("/v1") {
        ""
    } else {
        "/v1beta"
    };
    stream_url(base, &format!("{version}/models/{}", model_name(model)))
}

/// `{base}/publishers/google/models/{model}:streamGenerateContent?alt=sse` for Vertex AI, whose
/// base URL names the project and location.
pub(crate) fn vertex_url(base: &str, model: &str) -> String {
    stream_url(
        base,
        &format!("/publishers/google/models/{}", model_name(model)),
    )
}

fn stream_url(base: &str, model_path: &str) -> String {
    let url = crate::net::join_path(base, &format!("{model_path}:streamGenerateContent"));
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}alt=sse")
}

/// The Gemini API's key header (besides content-type/accept, which the client sets).
pub(crate) fn headers(api_key: Option<&str>) -> Vec<(String, String)> {
    match api_key.map(str::trim).filter(|k| !k.is_empty()) {
        Some(k) => vec![("x-goog-api-key".to_string(), k.to_string())],
        None => Vec::new(),
    }
}

/// A JSON Schema as Gemini's function declarations take it: the OpenAPI subset Gemini knows.
/// Keys it rejects (`$schema`, `additionalProperties`, `$ref`...) are dropped, a type list such
/// as `["string","null"]` becomes the type and `nullable`, `const` an `enum`, `oneOf` an
/// `anyOf`, enum values text, and `required` names only properties that exist.
pub(crate) fn gemini_schema(v: &Value) -> Value {
    let Some(obj) = v.as_object() else {
        return json!({"type": "string"});
    };
    let mut out = Map::new();
    match obj.get("type") {
        Some(Value::String(t)) => {
            out.insert("type".into(), json!(t));
        }
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            if let Some(t) = names.iter().find(|t| **t != "null") {
                out.insert("type".into(), json!(t));
            }
            if names.contains(&"null") {
                out.insert("nullable".into(), json!(true));
            }
        }
        _ => {}
    }
    for key in [
        "description",
        "title",
        "nullable",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "pattern",
        "propertyOrdering",
    ] {
        if let Some(x) = obj.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    if let Some(f) = obj.get("format").and_then(Value::as_str) {
        // Gemini knows these formats only; others are refused.
        if matches!(
            f,
            "enum" | "date-time" | "int32" | "int64" | "float" | "double"
        ) {
            out.insert("format".into(), json!(f));
        }
    }
    let as_text = |x: &Value| match x {
        Value::String(s) => json!(s),
        other => json!(other.to_string()),
    };
    if let Some(Value::Array(e)) = obj.get("enum") {
        out.insert(
            "enum".into(),
            Value::Array(e.iter().filter(|x| !x.is_null()).map(as_text).collect()),
        );
    } else if let Some(c) = obj.get("const") {
        out.insert("enum".into(), json!([as_text(c)]));
    }
    if out.contains_key("enum") {
        out.insert("type".into(), json!("string"));
    }
    if let Some(items) = obj.get("items") {
        out.insert("items".into(), gemini_schema(items));
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, p)| (k.clone(), gemini_schema(p)))
            .collect();
        if let Some(Value::Array(req)) = obj.get("required") {
            let req: Vec<Value> = req
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| props.contains_key(r)))
                .cloned()
                .collect();
            if !req.is_empty() {
                out.insert("required".into(), Value::Array(req));
            }
        }
        if !props.is_empty() {
            out.insert("properties".into(), Value::Object(props));
        }
    }
    if let Some(Value::Array(alts)) = obj.get("anyOf").or_else(|| obj.get("oneOf")) {
        out.insert(
            "anyOf".into(),
            Value::Array(alts.iter().map(gemini_schema).collect()),
        );
    }
    Value::Object(out)
}

/// The generation config of `req`: output cap, sampling, and thinking (`thinking_config` of the
/// provider options, Go Crush's snake_case names or Gemini's own).
fn generation_config(req: &ChatRequest) -> Value {
    let o = &req.options;
    let mut g = Map::new();
    if let Some(n) = req.max_tokens {
        g.insert("maxOutputTokens".into(), json!(n));
    }
    let names = ["temperature", "topP", "frequencyPenalty", "presencePenalty"];
    for (key, v) in req.sampling(&names) {
        g.insert(key.into(), json!(v));
    }
    if let Some(k) = o.top_k {
        g.insert("topK".into(), json!(k));
    }
    if let Some(Value::Object(tc)) = o.get("thinking_config") {
        let mut t = Map::new();
        for (k, v) in tc {
            let key = match k.as_str() {
                "thinking_budget" => "thinkingBudget",
                "include_thoughts" => "includeThoughts",
                "thinking_level" => "thinkingLevel",
                other => other,
            };
            // An empty level means "the model's default".
            if v.is_null() || v.as_str() == Some("") {
                continue;
            }
            let v = match (key, v) {
                // The API's minimum.
                ("thinkingBudget", Value::Number(n)) => {
                    json!(
                        n.as_i64()
                            .map_or(128, |n| if n >= 0 { n.max(128) } else { n })
                    )
                }
                (_, v) => v.clone(),
            };
            t.insert(key.into(), v);
        }
        if !t.is_empty() {
            g.insert("thinkingConfig".into(), Value::Object(t));
        }
    }
    Value::Object(g)
}

/// An image as an inline data part.
fn inline_image(mime: &str, data: &str) -> Value {
    json!({"inlineData": {"mimeType": mime, "data": data}})
}

/// The parts a user or tool message becomes.
fn user_parts(m: &super::Message, vertex: bool) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for p in &m.parts {
        match p {
            Part::Text { text } if !text.trim().is_empty() => parts.push(json!({"text": text})),
            Part::ShellCommand {
                command, output, ..
            } => parts.push(json!({"text": format!("!{command}\n{output}")})),
            Part::Binary {
                mime_type, data, ..
            } if mime_type.starts_with("image/") => parts.push(inline_image(mime_type, data)),
            // Gemini takes images inline: an image by URL is named.
            Part::ImageUrl { url, .. } => parts.push(json!({
                "text": format!("[Image {url}: not sent, this model takes attached images only]")
            })),
            Part::ToolResult {
                tool_call_id,
                name,
                content,
                ..
            } => {
                let content = crate::llm::types::tool_output(content);
                let mut fr = json!({"name": name, "response": {"result": content}});
                // Vertex refuses ids here.
                if !vertex {
                    fr["id"] = json!(tool_call_id);
                }
                parts.push(json!({ "functionResponse": fr }));
                if let Some((mime, data)) = super::result_image(p) {
                    images.push(json!({
                        "text": format!("The image returned by tool call {tool_call_id}:")
                    }));
                    images.push(inline_image(mime, data));
                }
            }
            _ => {}
        }
    }
    // Function responses first, as Gemini expects them to open the turn.
    parts.extend(images);
    parts
}

/// The parts an assistant message becomes: text and function calls, each carrying the thought
/// signature of the reasoning part before it. A message's first function call without one gets
/// Gemini's stand-in.
fn model_parts(m: &super::Message, vertex: bool) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut signature: Option<String> = None;
    let mut signed_call = false;
    for p in &m.parts {
        match p {
            Part::Reasoning { extra, .. } => {
                signature = extra
                    .get(SIGNATURE_KEY)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty() && super::base64_decode(s).is_some())
                    .map(str::to_string);
            }
            Part::Text { text } if !text.trim().is_empty() => {
                let mut part = json!({"text": text});
                if let Some(s) = signature.take() {
                    part["thoughtSignature"] = json!(s);
                }
                parts.push(part);
            }
            Part::ToolCall {
                id, name, input, ..
            } => {
                let mut fc = json!({"name": name, "args": anthropic::parse_input(input)});
                if !vertex {
                    fc["id"] = json!(id);
                }
                let mut part = json!({ "functionCall": fc });
                match signature.take() {
                    Some(s) => part["thoughtSignature"] = json!(s),
                    None if !signed_call => part["thoughtSignature"] = json!(SKIP_SIGNATURE),
                    None => {}
                }
                signed_call = true;
                parts.push(part);
            }
            _ => {}
        }
    }
    parts
}

/// The `generateContent` request body for `req`; `vertex`: for Vertex AI (no function ids).
pub(crate) fn build_request(req: &ChatRequest, vertex: bool) -> Value {
    let mut system: Vec<String> = Vec::new();
    if !req.system.trim().is_empty() {
        system.push(req.system.clone());
    }
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in &super::history::pair_tool_results(&req.messages) {
        let (role, parts) = match m.role {
            Role::System => {
                let t = m.text();
                if !t.trim().is_empty() {
                    system.push(t);
                }
                continue;
            }
            Role::User | Role::Tool => ("user", user_parts(m, vertex)),
            Role::Assistant => ("model", model_parts(m, vertex)),
        };
        if parts.is_empty() {
            continue;
        }
        // One content per turn: results and the user's next words together.
        match contents.last_mut() {
            Some((r, prev)) if *r == role => prev.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    let contents: Vec<Value> = contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    let mut body = json!({ "contents": contents });
    if !system.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": system.join("\n\n")}]});
    }
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name, "description": t.description});
                let params = gemini_schema(&t.parameters);
                // An object without properties is no parameters at all.
                if params.get("properties").is_some() {
                    d["parameters"] = params;
                }
                d
            })
            .collect();
        body["tools"] = json!([{ "functionDeclarations": decls }]);
    }
    let g = generation_config(req);
    if g.as_object().is_some_and(|g| !g.is_empty()) {
        body["generationConfig"] = g;
    }
    let o = &req.options;
    if let Some(s) = o.get("safety_settings") {
        body["safetySettings"] = s.clone();
    }
    if let Some(c) = o.get("cached_content") {
        body["cachedContent"] = c.clone();
    }
    o.merge_rest_into(&mut body, OWN_OPTIONS);
    body
}

#[derive(Debug)]
enum Block {
    /// Text, or thoughts (`thought: true` parts).
    Words {
        thought: bool,
        text: String,
        signature: String,
    },
    Call {
        id: String,
        name: String,
        args: String,
        signature: String,
    },
}

/// Builds a `Response` from the stream's chunks. Pure: feed events, then `finish`.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    blocks: Vec<Block>,
    finish: Option<String>,
    usage: Option<Usage>,
    usage_rejected: Option<String>,
    /// Why the prompt itself was blocked (`promptFeedback.blockReason`).
    blocked: Option<String>,
    budget: Budget,
}

/// Reads Gemini's `usageMetadata` into ledger terms: `promptTokenCount` includes the cached
/// tokens; the output is `candidatesTokenCount` plus `thoughtsTokenCount` (thinking is billed as
/// output although the candidates count leaves it out). `Ok(None)`: no counts in it.
pub(crate) fn parse_usage(u: &Value) -> Result<Option<Usage>, UsageError> {
    let keys = [
        "promptTokenCount",
        "candidatesTokenCount",
        "thoughtsTokenCount",
        "toolUsePromptTokenCount",
        "cachedContentTokenCount",
    ];
    let Some([prompt, candidates, thoughts, tool_prompt, cached]) =
        crate::llm::types::token_fields(u, keys)?
    else {
        return Ok(None);
    };
    let cached = cached.unwrap_or(0);
    if prompt.is_none() && candidates.is_none() && thoughts.is_none() {
        return Ok(None);
    }
    let prompt = prompt.unwrap_or(0);
    let input = crate::llm::types::fresh_tokens(prompt, &[cached], || {
        (
            format!("promptTokenCount {prompt}"),
            format!("cachedContentTokenCount {cached}"),
        )
    })?;
    Ok(Some(Usage {
        input: input + tool_prompt.unwrap_or(0),
        output: candidates.unwrap_or(0) + thoughts.unwrap_or(0),
        cache_read: cached,
        cache_write: 0,
    }))
}

/// A finish reason that means a filter stopped the reply.
fn filtered(reason: &str) -> bool {
    matches!(
        reason,
        "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "LANGUAGE"
    )
}

impl Accumulator {
    fn feed_chunk(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), Failure> {
        if v.get("error").is_some_and(|e| !e.is_null()) {
            let eb = error_from_json(v).unwrap_or_default();
            let status = v["error"]["status"].as_str().map(str::to_string);
            return Err(Failure {
                error: LlmError::Protocol(format!("server error: {}", eb.message)),
                retryable: kind_retryable(status.as_deref(), eb.code.as_deref()),
                retry_after: None,
            });
        }
        if let Some(u) = v.get("usageMetadata") {
            // Each chunk repeats the counts so far: the last one wins.
            crate::llm::types::record_usage(
                parse_usage(u),
                &mut self.usage,
                &mut self.usage_rejected,
            );
        }
        if let Some(r) = v
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            self.blocked = Some(r.to_string());
        }
        let Some(cand) = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        let parts = cand
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for p in parts.into_iter().flatten() {
            self.part(p, out)?;
        }
        if let Some(f) = cand.get("finishReason").and_then(Value::as_str)
            && !f.is_empty()
            && f != "FINISH_REASON_UNSPECIFIED"
        {
            self.finish = Some(f.to_string());
        }
        Ok(())
    }

    fn part(&mut self, p: &Value, out: &mut Vec<StreamEvent>) -> Result<(), Failure> {
        let signature = p
            .get("thoughtSignature")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.budget.take(signature.len())?;
        if let Some(fc) = p.get("functionCall") {
            let name = fc.get("name").and_then(Value::as_str).unwrap_or("");
            let id = fc
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map_or_else(super::openai::synth_call_id, str::to_string);
            let args = match fc.get("args") {
                Some(a @ Value::Object(_)) => a.to_string(),
                _ => "{}".to_string(),
            };
            self.budget
                .take(BLOCK_COST + name.len() + id.len() + args.len())?;
            out.push(StreamEvent::ToolCallStart {
                name: name.to_string(),
            });
            self.blocks.push(Block::Call {
                id,
                name: name.to_string(),
                args,
                signature: signature.to_string(),
            });
            return Ok(());
        }
        let text = p.get("text").and_then(Value::as_str).unwrap_or("");
        let thought = p.get("thought").and_then(Value::as_bool).unwrap_or(false);
        self.budget.take(text.len())?;
        if text.is_empty() {
            // A signature on its own belongs to what came just before it.
            if !signature.is_empty() {
                match self.blocks.last_mut() {
                    Some(Block::Words { signature: s, .. } | Block::Call { signature: s, .. })
                        if s.is_empty() =>
                    {
                        *s = signature.to_string()
                    }
                    _ => self.blocks.push(Block::Words {
                        thought: true,
                        text: String::new(),
                        signature: signature.to_string(),
                    }),
                }
            }
            return Ok(());
        }
        out.push(if thought {
            StreamEvent::ReasoningDelta(text.to_string())
        } else {
            StreamEvent::TextDelta(text.to_string())
        });
        match self.blocks.last_mut() {
            Some(Block::Words {
                thought: th,
                text: t,
                signature: s,
            }) if *th == thought && (s.is_empty() || signature.is_empty()) => {
                t.push_str(text);
                if s.is_empty() {
                    s.push_str(signature);
                }
            }
            _ => {
                self.budget.take(BLOCK_COST)?;
                self.blocks.push(Block::Words {
                    thought,
                    text: text.to_string(),
                    signature: signature.to_string(),
                });
            }
        }
        Ok(())
    }
}

impl dialect::Accumulator for Accumulator {
    /// Takes one event; progress for the display goes to `out`. The stream has no final event:
    /// this always returns false, and `finish` tells a complete stream from a cut one.
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure> {
        let data = ev.data.trim();
        if !data.starts_with('{') && !data.starts_with('[') {
            return Ok(false);
        }
        let v = dialect::event_json(data, "a stream chunk")?;
        // Vertex wraps some errors in an array.
        let v = match v {
            Value::Array(mut a) if !a.is_empty() => a.swap_remove(0),
            v => v,
        };
        self.feed_chunk(&v, out)?;
        Ok(false)
    }

    /// The response of a complete stream. A stream without a finish reason was cut
    /// (`Truncated`, retried); a prompt or a reply the provider's filters blocked before anything
    /// was written is an error saying so (not retried).
    fn finish(self) -> Result<Response, Failure> {
        if let Some(r) = &self.blocked {
            return Err(Failure::fatal(LlmError::Blocked(format!(
                "the prompt was blocked ({r})"
            ))));
        }
        let Some(reason) = self.finish.clone() else {
            return Err(Failure::retry(LlmError::truncated("a finishReason")));
        };
        let resp = self.into_response();
        let wrote = resp
            .parts
            .iter()
            .any(|p| matches!(p, Part::Text { .. } | Part::ToolCall { .. }));
        if !wrote && filtered(&reason) {
            return Err(Failure::fatal(LlmError::Blocked(format!(
                "the reply was blocked (finishReason {reason})"
            ))));
        }
        if !wrote && reason == "MALFORMED_FUNCTION_CALL" {
            return Err(Failure::retry(LlmError::Protocol(
                "the model wrote a malformed function call (finishReason MALFORMED_FUNCTION_CALL)"
                    .into(),
            )));
        }
        Ok(resp)
    }

    /// The response, whatever state the stream is in. A signature of a text or a call goes on
    /// a reasoning part just before it (the thought before it, if there is one).
    fn into_response(self) -> Response {
        let mut parts: Vec<Part> = Vec::new();
        let signed = |thinking: String, signature: String, tool: Option<&str>| {
            let mut extra = Map::new();
            if !signature.is_empty() {
                extra.insert(SIGNATURE_KEY.into(), Value::String(signature));
            }
            if let Some(id) = tool {
                extra.insert("tool_id".into(), json!(id));
            }
            Part::Reasoning {
                thinking,
                signature: String::new(),
                extra,
            }
        };
        // Puts `signature` on the reasoning part just added, or on a new one.
        let attach = |parts: &mut Vec<Part>, signature: String, tool: Option<&str>| {
            if signature.is_empty() {
                return;
            }
            match parts.last_mut() {
                Some(Part::Reasoning { extra, .. }) if !extra.contains_key(SIGNATURE_KEY) => {
                    extra.insert(SIGNATURE_KEY.into(), Value::String(signature));
                    if let Some(id) = tool {
                        extra.insert("tool_id".into(), json!(id));
                    }
                }
                _ => parts.push(signed(String::new(), signature, tool)),
            }
        };
        let mut calls = false;
        for b in self.blocks {
            match b {
                Block::Words {
                    thought: true,
                    text,
                    signature,
                } => parts.push(signed(text, signature, None)),
                Block::Words {
                    text, signature, ..
                } => {
                    attach(&mut parts, signature, None);
                    parts.push(Part::Text { text });
                }
                Block::Call {
                    id,
                    name,
                    args,
                    signature,
                } => {
                    calls = true;
                    attach(&mut parts, signature, Some(&id));
                    parts.push(Part::ToolCall {
                        id,
                        name,
                        input: args,
                        provider_executed: false,
                        finished: true,
                    });
                }
            }
        }
        let finish = match self.finish.as_deref() {
            _ if calls => FinishReason::ToolUse,
            Some("STOP") | None => FinishReason::EndTurn,
            Some("MAX_TOKENS") => FinishReason::MaxTokens,
            Some(r) if filtered(r) => FinishReason::ContentFilter,
            Some(r) => FinishReason::Other(r.to_string()),
        };
        Response::settled(parts, self.usage, self.usage_rejected, finish)
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
}

/// A non-streaming reply (a whole `GenerateContentResponse`), for a server that ignored `alt=sse`.
pub(crate) fn response_from_json(v: &Value) -> Option<Response> {
    v.get("candidates")?.as_array()?;
    let mut acc = Accumulator::default();
    acc.feed_chunk(v, &mut Vec::new()).ok()?;
    acc.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};

    fn run(stream: &str) -> (Result<Response, Failure>, Vec<StreamEvent>) {
        crate::llm::dialect::testing::run_with(Accumulator::default(), stream)
    }

    fn chunk(v: Value) -> String {
        format!("data: {v}\r\n\r\n")
    }

    fn parts(ps: Value, finish: Option<&str>) -> String {
        let mut c =
            json!({"candidates": [{"content": {"role": "model", "parts": ps}, "index": 0}]});
        if let Some(f) = finish {
            c["candidates"][0]["finishReason"] = json!(f);
            c["usageMetadata"] = json!({"promptTokenCount": 1200, "cachedContentTokenCount": 1000,
                "candidatesTokenCount": 30, "thoughtsTokenCount": 70, "totalTokenCount": 1300});
        }
        chunk(c)
    }

    #[test]
    fn thoughts_text_calls_and_signatures() {
        let s = parts(json!([{"text": "Let me ", "thought": true}]), None)
            + &parts(
                json!([{"text": "look.", "thought": true, "thoughtSignature": "c2lnMQ=="}]),
                None,
            )
            + &parts(json!([{"text": "Reading "}]), None)
            + &parts(json!([{"text": "it."}]), None)
            + &parts(
                json!([{"functionCall": {"name": "view", "args": {"file_path": "a.rs"}},
                        "thoughtSignature": "c2lnMg=="},
                       {"functionCall": {"name": "ls", "args": {}}}]),
                Some("STOP"),
            );
        let (r, out) = run(&s);
        let r = r.unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert!(matches!(&out[0], StreamEvent::ReasoningDelta(t) if t == "Let me "));
        assert!(matches!(&out[2], StreamEvent::TextDelta(t) if t == "Reading "));
        let Part::Reasoning {
            thinking, extra, ..
        } = &r.parts[0]
        else {
            panic!("{:?}", r.parts)
        };
        assert_eq!(thinking, "Let me look.");
        assert_eq!(extra[SIGNATURE_KEY], "c2lnMQ==");
        assert_eq!(
            r.parts[1],
            Part::Text {
                text: "Reading it.".into()
            }
        );
        // The call's signature rides on a reasoning part right before it.
        let Part::Reasoning { extra, .. } = &r.parts[2] else {
            panic!("{:?}", r.parts)
        };
        assert_eq!(extra[SIGNATURE_KEY], "c2lnMg==");
        let Part::ToolCall {
            id, name, input, ..
        } = &r.parts[3]
        else {
            panic!("{:?}", r.parts)
        };
        assert_eq!(
            (name.as_str(), input.as_str()),
            ("view", r#"{"file_path":"a.rs"}"#)
        );
        assert!(id.starts_with("call_"));
        assert!(
            matches!(&r.parts[4], Part::ToolCall { name, input, .. } if name == "ls" && input == "{}")
        );
        // Thinking is billed as output; the cached tokens are read from the cache.
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 200,
                output: 100,
                cache_read: 1000,
                cache_write: 0
            })
        );

        // Sent back: each signature on the part it came with; ids to Gemini, not to Vertex.
        let req = ChatRequest {
            model: "gemini-3-pro".into(),
            messages: vec![
                Message::user("go"),
                Message {
                    role: Role::Assistant,
                    parts: r.parts.clone(),
                },
            ],
            ..Default::default()
        };
        let b = build_request(&req, false);
        let model = &b["contents"][1];
        assert_eq!(model["role"], "model");
        assert_eq!(
            model["parts"][0],
            json!({"text": "Reading it.", "thoughtSignature": "c2lnMQ=="})
        );
        assert_eq!(model["parts"][1]["thoughtSignature"], "c2lnMg==");
        assert_eq!(
            model["parts"][1]["functionCall"]["args"],
            json!({"file_path": "a.rs"})
        );
        assert!(model["parts"][1]["functionCall"]["id"].is_string());
        assert!(model["parts"][2].get("thoughtSignature").is_none());
        // The calls were answered (interrupted): one user turn of function responses.
        let answers = &b["contents"][2];
        assert_eq!(answers["role"], "user");
        assert_eq!(answers["parts"][0]["functionResponse"]["name"], "view");
        let b = build_request(&req, true);
        assert!(
            b["contents"][1]["parts"][1]["functionCall"]
                .get("id")
                .is_none()
        );
        assert!(
            b["contents"][2]["parts"][0]["functionResponse"]
                .get("id")
                .is_none()
        );
    }

    #[test]
    fn a_call_without_signature_gets_the_stand_in() {
        let req = ChatRequest {
            model: "gemini-3-pro".into(),
            messages: vec![
                Message::user("go"),
                Message {
                    role: Role::Assistant,
                    parts: vec![
                        // Not base64: a signature stored by another program, not sent.
                        Part::Reasoning {
                            thinking: String::new(),
                            signature: String::new(),
                            extra: serde_json::from_value(json!({SIGNATURE_KEY: "\u{fffd}x"}))
                                .unwrap(),
                        },
                        Part::ToolCall {
                            id: "toolu_1".into(),
                            name: "ls".into(),
                            input: "{}".into(),
                            provider_executed: false,
                            finished: true,
                        },
                    ],
                },
            ],
            ..Default::default()
        };
        let b = build_request(&req, false);
        assert_eq!(
            b["contents"][1]["parts"][0]["thoughtSignature"],
            SKIP_SIGNATURE
        );
    }

    #[test]
    fn request_shape_and_options() {
        let mut req = ChatRequest {
            model: "models/gemini-2.5-pro".into(),
            system: "You are crush".into(),
            messages: vec![Message::user("hi")],
            tools: vec![ToolSpec {
                name: "view".into(),
                description: "Read".into(),
                parameters: json!({"$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object", "additionalProperties": false,
                    "properties": {"path": {"type": "string", "format": "uri"},
                        "limit": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                        "mode": {"const": "fast"},
                        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", 1]}}},
                    "required": ["path", "gone"]}),
            }],
            max_tokens: Some(1000),
            temperature: Some(0.3),
            ..Default::default()
        };
        req.options.top_k = Some(20);
        req.options.provider_options = serde_json::from_value(json!({
            "thinking_config": {"thinking_budget": 50, "include_thoughts": true},
            "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
            "labels": {"team": "x"}}))
        .unwrap();
        let b = build_request(&req, false);
        assert_eq!(
            b["systemInstruction"],
            json!({"parts": [{"text": "You are crush"}]})
        );
        assert_eq!(
            b["contents"],
            json!([{"role": "user", "parts": [{"text": "hi"}]}])
        );
        let g = &b["generationConfig"];
        assert_eq!(g["maxOutputTokens"], 1000);
        assert_eq!(g["temperature"], 0.3);
        assert_eq!(g["topK"], 20);
        assert_eq!(
            g["thinkingConfig"],
            json!({"thinkingBudget": 128, "includeThoughts": true})
        );
        assert_eq!(b["safetySettings"][0]["threshold"], "BLOCK_NONE");
        assert_eq!(b["labels"]["team"], "x");
        let p = &b["tools"][0]["functionDeclarations"][0]["parameters"];
        assert_eq!(
            *p,
            json!({"type": "object", "required": ["path"], "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "nullable": true},
                "mode": {"type": "string", "enum": ["fast"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "1"]}}}})
        );
        assert_eq!(
            url("", "models/gemini-2.5-pro"),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url("http://127.0.0.1:9/v1beta?x=1", "g"),
            "http://127.0.0.1:9/v1beta/models/g:streamGenerateContent?x=1&alt=sse"
        );
        assert_eq!(headers(Some("k")), [("x-goog-api-key".into(), "k".into())]);
    }

    #[test]
    fn safety_blocks_truncation_and_errors() {
        // Blocked before anything was written: one clear error, not retried.
        let s = chunk(json!({"candidates": [{"finishReason": "SAFETY", "index": 0,
            "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]}]}));
        let f = run(&s).0.unwrap_err();
        assert!(!f.retryable);
        assert!(
            f.error.to_string().contains("finishReason SAFETY"),
            "{}",
            f.error
        );
        let s = chunk(json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}));
        let f = run(&s).0.unwrap_err();
        assert!(
            f.error
                .to_string()
                .contains("prompt was blocked (PROHIBITED_CONTENT)")
        );
        // Blocked after some text: the text is kept, the finish says why.
        let s = parts(json!([{"text": "Sure"}]), None)
            + &chunk(json!({"candidates": [{"finishReason": "RECITATION"}]}));
        assert_eq!(run(&s).0.unwrap().finish, FinishReason::ContentFilter);
        // Cut before the finish reason: retried.
        let f = run(&parts(json!([{"text": "Hel"}]), None)).0.unwrap_err();
        assert_eq!(f.error, LlmError::truncated("a finishReason"));
        assert!(f.retryable);
        // An error chunk.
        let s = parts(json!([{"text": "Hel"}]), None)
            + &chunk(
                json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
            );
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable && f.error.to_string().contains("overloaded"));
        let s = chunk(
            json!([{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}]),
        );
        assert!(!run(&s).0.unwrap_err().retryable);
        assert_eq!(
            run(&parts(json!([{"text": "x"}]), Some("MAX_TOKENS")))
                .0
                .unwrap()
                .finish,
            FinishReason::MaxTokens
        );
    }

    #[test]
    fn attached_images_go_inline_and_image_urls_are_named() {
        let req = ChatRequest {
            model: "gemini-3-pro".into(),
            messages: vec![crate::llm::types::fixtures::attached_image()],
            ..Default::default()
        };
        let b = build_request(&req, false);
        let parts = &b["contents"][0]["parts"];
        assert_eq!(parts[0]["text"], "what is this?");
        assert_eq!(parts[1]["inlineData"]["data"], "iVBORw0K");
        assert!(
            parts[2]["text"]
                .as_str()
                .unwrap()
                .contains("https://e.x/a.png")
        );
    }
}
