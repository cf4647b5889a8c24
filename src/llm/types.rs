//! The data model shared by the providers, the agent loop and the store.
//!
//! `Part` serialises exactly as Go Crush stores message parts (`{"type": T, "data": {...}}`), with
//! Go Crush's part types and field names, so the store persists it unchanged, Go Crush decodes
//! every part this program writes, and this program decodes every part Go Crush writes.

use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
    Tool,
    System,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }
    pub(crate) fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "system" => Role::System,
            _ => return None,
        })
    }
}

/// One part of a message, in Crush's stored shape.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub(crate) enum Part {
    Text {
        text: String,
    },
    Reasoning {
        thinking: String,
        #[serde(default)]
        signature: String,
        /// Go Crush's other reasoning fields (a Gemini thought signature, the tool id OpenRouter
        /// ties it to, OpenAI Responses metadata, start and end times), kept as they were.
        #[serde(flatten)]
        extra: serde_json::Map<String, serde_json::Value>,
    },
    /// An image by URL (Go Crush's `image_url`).
    ImageUrl {
        url: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// An attached file (Go Crush's `binary`, with its Go field names).
    Binary {
        #[serde(rename = "Path", default, deserialize_with = "null_as_empty")]
        path: String,
        #[serde(rename = "MIMEType", default, deserialize_with = "null_as_empty")]
        mime_type: String,
        /// The content, base64 (standard alphabet, padded) as Go encodes bytes.
        #[serde(rename = "Data", default, deserialize_with = "null_as_empty")]
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        /// Raw JSON text of the arguments as the model sent them (always valid JSON once stored;
        /// the agent replaces unparseable input with `{}`).
        input: String,
        #[serde(default)]
        provider_executed: bool,
        #[serde(default)]
        finished: bool,
    },
    ToolResult {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        data: String,
        #[serde(default)]
        mime_type: String,
        /// JSON text: tool-specific metadata (and, later, hook results).
        #[serde(default)]
        metadata: String,
        #[serde(default)]
        is_error: bool,
    },
    Finish {
        /// end_turn | max_tokens | tool_use | canceled | error | content_filter | unknown
        reason: String,
        /// Unix seconds.
        time: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<String>,
    },
    ShellCommand {
        command: String,
        output: String,
        exit_code: i32,
    },
    /// A part type this program does not know (written by a newer Go Crush): shown as such and
    /// never sent to a model. It cannot be serialized, so it is never written.
    #[serde(skip)]
    Unknown {
        kind: String,
        data: serde_json::Value,
    },
}

impl Part {
    /// A reasoning part with no other fields.
    pub(crate) fn reasoning(thinking: String, signature: String) -> Part {
        Part::Reasoning {
            thinking,
            signature,
            extra: serde_json::Map::new(),
        }
    }
}

/// The part types this program decodes.
const PART_TYPES: &[&str] = &[
    "text",
    "reasoning",
    "image_url",
    "binary",
    "tool_call",
    "tool_result",
    "finish",
    "shell_command",
];

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Decodes a stored `parts` array. A part of a type this program does not know becomes
/// `Part::Unknown`; a known type that does not decode is an error.
pub(crate) fn parts_from_json(text: &str) -> Result<Vec<Part>, serde_json::Error> {
    let raw: Vec<serde_json::Value> = serde_json::from_str(text)?;
    raw.into_iter()
        .map(|v| {
            let kind = v.get("type").and_then(|t| t.as_str()).unwrap_or_default();
            if PART_TYPES.contains(&kind) {
                serde_json::from_value(v)
            } else {
                Ok(Part::Unknown {
                    kind: kind.to_string(),
                    data: v.get("data").cloned().unwrap_or_default(),
                })
            }
        })
        .collect()
}

/// Decodes standard base64 (padding optional, whitespace ignored); None if it is not base64.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0;
    let mut padding = false;
    for b in text.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padding {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The short description of an attachment this program shows and sends in its place:
/// `notes.md (text/plain, 17 bytes)`.
pub(crate) fn attachment_label(path: &str, mime_type: &str, data: &str) -> String {
    let name = if path.is_empty() { "unnamed" } else { path };
    let size = base64_decode(data).map_or(data.len() / 4 * 3, |b| b.len());
    let mime = if mime_type.is_empty() {
        "unknown type"
    } else {
        mime_type
    };
    format!("{name} ({mime}, {size} bytes)")
}

/// Whether `p` is an attached image (which a model that takes images is sent as one).
pub(crate) fn is_image_attachment(p: &Part) -> bool {
    matches!(p, Part::Binary { mime_type, .. } if mime_type.starts_with("image/"))
}

/// Attachments as every model is sent them, after the message's other parts: the content of
/// text files in `<file>` blocks introduced as Go Crush introduces them, and a one-line
/// placeholder naming each other file. Images stay as they are (`images_as_text` replaces them
/// for a model that takes none). Parts of unknown types are dropped.
pub(crate) fn attachments_as_text(parts: Vec<Part>) -> Vec<Part> {
    let mut out = Vec::with_capacity(parts.len());
    let mut files = String::new();
    let mut placeholders = Vec::new();
    for p in parts {
        match p {
            p if is_image_attachment(&p) => out.push(p),
            Part::Binary {
                path,
                mime_type,
                data,
            } => match base64_decode(&data).map(String::from_utf8) {
                Some(Ok(text)) if mime_type.starts_with("text/") => {
                    if path.is_empty() {
                        files.push_str("<file>\n");
                    } else {
                        files.push_str(&format!("<file path='{path}'>\n"));
                    }
                    files.push_str(&format!("\n{text}\n</file>\n"));
                }
                _ => placeholders.push(format!(
                    "[Attached file {}: not sent, this model is sent text only]",
                    attachment_label(&path, &mime_type, &data)
                )),
            },
            // An image by URL goes to a model that takes images as it is, like an attached one.
            p @ Part::ImageUrl { .. } => out.push(p),
            Part::Unknown { .. } => {}
            p => out.push(p),
        }
    }
    if !files.is_empty() {
        out.push(Part::Text {
            text: format!(
                "<system_info>The files below have been attached by the user, consider them in \
                 your response</system_info>\n{files}"
            ),
        });
    }
    out.extend(placeholders.into_iter().map(|text| Part::Text { text }));
    out
}

/// The image a tool result carries, as `(mime type, base64 data)`: Go Crush keeps one in the
/// result's `data` and `mime_type`.
pub(crate) fn result_image(p: &Part) -> Option<(&str, &str)> {
    match p {
        Part::ToolResult {
            data, mime_type, ..
        } if !data.is_empty() && mime_type.starts_with("image/") => {
            Some((mime_type.as_str(), data.as_str()))
        }
        _ => None,
    }
}

/// Messages as a model that takes no images is sent them: an attached image (or image URL)
/// replaced by a line naming it, a tool result's image by a line appended to the result's text.
pub(crate) fn images_as_text(messages: Vec<Message>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|mut m| {
            for p in &mut m.parts {
                if let Part::ImageUrl { url, .. } = p {
                    *p = Part::Text {
                        text: format!("[Image {url}: not sent, this model is sent text only]"),
                    };
                    continue;
                }
                if let Part::Binary {
                    path,
                    mime_type,
                    data,
                } = p
                    && mime_type.starts_with("image/")
                {
                    *p = Part::Text {
                        text: format!(
                            "[Attached file {}: not sent, this model is sent text only]",
                            attachment_label(path, mime_type, data)
                        ),
                    };
                    continue;
                }
                if let Some((mime, data)) = result_image(p) {
                    let line = format!(
                        "[{} returned by the tool: not sent, this model is sent text only]",
                        attachment_label("image", mime, data)
                    );
                    if let Part::ToolResult {
                        content,
                        data,
                        mime_type,
                        ..
                    } = p
                    {
                        if !content.trim().is_empty() {
                            content.push('\n');
                        }
                        content.push_str(&line);
                        data.clear();
                        mime_type.clear();
                    }
                }
            }
            m
        })
        .collect()
}

/// A message as sent to a provider (and as stored, minus ids and timestamps).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// The text parts of `parts`, concatenated.
pub(crate) fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

impl Message {
    pub(crate) fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::Text { text: text.into() }],
        }
    }
    /// Concatenated text parts.
    pub(crate) fn text(&self) -> String {
        text_of(&self.parts)
    }
    pub(crate) fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall {
                id, name, input, ..
            } => Some((id.as_str(), name.as_str(), input.as_str())),
            _ => None,
        })
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema object of the parameters.
    pub parameters: serde_json::Value,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// The model options of the configuration (crush(1) CONFIGURATION, model options).
    pub options: CallOptions,
}

/// Sampling and dialect options of one call. Each dialect sends what it has a field for and
/// leaves the rest out.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CallOptions {
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    /// Go Crush's provider options, merged (catalog, provider, model) and completed with the
    /// reasoning settings: `reasoning_effort` (OpenAI), `effort` and `thinking` (Anthropic),
    /// `thinking_config` (Gemini), `reasoning` (OpenRouter)... A dialect translates the keys it
    /// knows into its own fields and puts the others into the body as they are.
    pub provider_options: serde_json::Map<String, serde_json::Value>,
    /// Merged into the request body last, over everything else (the provider's `extra_body`).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

impl CallOptions {
    /// The provider option `key`, unless absent or null.
    pub(crate) fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.provider_options.get(key).filter(|v| !v.is_null())
    }

    /// Merges into `body` the provider options the dialect has no field of its own for (all but
    /// `consumed`; a nested `extra_body` is merged as the body's), then `extra_body`.
    pub(crate) fn merge_rest_into(&self, body: &mut serde_json::Value, consumed: &[&str]) {
        for (k, v) in &self.provider_options {
            if k == "extra_body" {
                merge_json(body, v);
            } else if !consumed.contains(&k.as_str()) && !v.is_null() {
                merge_json(body, &serde_json::json!({ k: v }));
            }
        }
        merge_json(body, &serde_json::Value::Object(self.extra_body.clone()));
    }
}

impl ChatRequest {
    /// The sampling settings given, each under the dialect's name for it: `names` names
    /// temperature, top_p, frequency_penalty and presence_penalty in that order, and a dialect
    /// that takes only the first few names only those.
    pub(crate) fn sampling<'a>(&self, names: &[&'a str]) -> impl Iterator<Item = (&'a str, f64)> {
        let o = &self.options;
        let values = [
            self.temperature,
            o.top_p,
            o.frequency_penalty,
            o.presence_penalty,
        ];
        names
            .iter()
            .zip(values)
            .filter_map(|(name, v)| Some((*name, v?)))
    }
}

/// `over` merged into `base`: objects key by key, recursively; any other value replaces.
pub(crate) fn merge_json(base: &mut serde_json::Value, over: &serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge_json(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Token counts of one model call, in ledger terms: `input` excludes cached tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// The largest token count one model call can plausibly report (no model has a context window
/// near a billion tokens). Larger numbers are rejected as absurd, never recorded.
pub(crate) const MAX_PLAUSIBLE_TOKENS: u64 = 1_000_000_000;

impl Usage {
    /// What the ledger may record: `Ok(None)` when every count is zero (no real call consumes
    /// zero input tokens: the provider reported nothing, so the usage is unknown, never zero),
    /// `Err` with a reason when a count is absurd.
    pub(crate) fn checked(self) -> Result<Option<Usage>, UsageError> {
        let fields = [
            ("input", self.input),
            ("output", self.output),
            ("cache read", self.cache_read),
            ("cache write", self.cache_write),
        ];
        if let Some((name, v)) = fields.iter().find(|(_, v)| *v > MAX_PLAUSIBLE_TOKENS) {
            return Err(UsageError::Implausible { name, value: *v });
        }
        if fields.iter().all(|(_, v)| *v == 0) {
            return Ok(None);
        }
        Ok(Some(self))
    }
}

/// A tool result's text as sent to a model: `(no output)` for a blank one (the APIs refuse or
/// misread an empty result).
pub(crate) fn tool_output(content: &str) -> &str {
    if content.trim().is_empty() {
        "(no output)"
    } else {
        content
    }
}

/// Reads one token count of a provider's usage object: `Ok(None)` when absent or null, `Err`
/// when it is not a non-negative integer (negative, fractional, a string...).
pub(crate) fn token_field(u: &serde_json::Value, key: &str) -> Result<Option<u64>, UsageError> {
    match u.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| UsageError::NotACount {
            key: key.to_string(),
            value: v.to_string(),
        }),
    }
}

/// The tokens of `total` that are none of its `parts` (cached, cache-write...): the fresh input
/// of a provider that counts its cached tokens in the total. A total smaller than its parts is
/// [`UsageError::Contradicts`], with the texts `describe` gives (total, parts).
pub(crate) fn fresh_tokens(
    total: u64,
    parts: &[u64],
    describe: impl FnOnce() -> (String, String),
) -> Result<u64, UsageError> {
    parts
        .iter()
        .try_fold(total, |left, p| left.checked_sub(*p))
        .ok_or_else(|| {
            let (total, parts) = describe();
            UsageError::Contradicts { total, parts }
        })
}

/// The counts `keys` of a usage object, None when `u` is not an object.
pub(crate) fn token_fields<const N: usize>(
    u: &serde_json::Value,
    keys: [&str; N],
) -> Result<Option<[Option<u64>; N]>, UsageError> {
    if !u.is_object() {
        return Ok(None);
    }
    let mut out = [None; N];
    for (slot, key) in out.iter_mut().zip(keys) {
        *slot = token_field(u, key)?;
    }
    Ok(Some(out))
}

/// Why a provider's reported usage is not recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UsageError {
    /// A count is not a non-negative integer (negative, fractional, a string...).
    NotACount { key: String, value: String },
    /// The counts contradict each other: `total` (`prompt_tokens 5`) is less than `parts`.
    Contradicts { total: String, parts: String },
    /// A count no single call can reach (over `MAX_PLAUSIBLE_TOKENS`).
    Implausible { name: &'static str, value: u64 },
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::NotACount { key, value } => {
                write!(f, "{key} is {value}, not a non-negative integer")
            }
            UsageError::Contradicts { total, parts } => write!(f, "{total} is less than {parts}"),
            UsageError::Implausible { name, value } => write!(
                f,
                "{name} tokens {value} is not plausible for one call (limit {MAX_PLAUSIBLE_TOKENS})"
            ),
        }
    }
}

impl std::error::Error for UsageError {}

/// Takes the usage a chunk reported: the last one reported wins, a good one over an earlier bad
/// one too, a bad one over an earlier good one; a chunk without counts changes nothing.
pub(crate) fn record_usage(
    parsed: Result<Option<Usage>, UsageError>,
    usage: &mut Option<Usage>,
    rejected: &mut Option<String>,
) {
    match parsed {
        Ok(None) => {}
        Ok(u) => (*usage, *rejected) = (u, None),
        Err(e) => (*usage, *rejected) = (None, Some(e.to_string())),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FinishReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// The reason as stored in a `finish` part.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            FinishReason::EndTurn => "end_turn",
            FinishReason::ToolUse => "tool_use",
            FinishReason::MaxTokens => "max_tokens",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(_) => "unknown",
        }
    }
}

/// A complete model reply.
#[derive(Clone, Debug)]
pub(crate) struct Response {
    /// Reasoning, text and tool-call parts in the order the model produced them. Tool-call inputs
    /// are the raw concatenated argument text (may be invalid JSON; the agent checks).
    pub parts: Vec<Part>,
    /// None when the provider reported no usage (unknown, never zero), or when what it reported
    /// was rejected (see `usage_rejected`).
    pub usage: Option<Usage>,
    /// Why the reported usage was rejected (negative, non-integer or absurd counts); the call is
    /// then recorded with unknown usage and the reason is logged.
    pub usage_rejected: Option<String>,
    pub finish: FinishReason,
    /// The estimate the agent made when `usage` is None (see [`estimate_usage`]).
    pub estimated: Option<Usage>,
}

impl Response {
    /// A response with the usage as parsed: usage the dialect `rejected` (or that fails the
    /// sanity check) is dropped, and why is kept in `usage_rejected`.
    pub(crate) fn settled(
        parts: Vec<Part>,
        usage: Option<Usage>,
        rejected: Option<String>,
        finish: FinishReason,
    ) -> Response {
        let (usage, usage_rejected) = match (rejected, usage.map(Usage::checked)) {
            (Some(why), _) => (None, Some(why)),
            (None, Some(Err(why))) => (None, Some(why.to_string())),
            (None, Some(Ok(u))) => (u, None),
            (None, None) => (None, None),
        };
        Response {
            parts,
            usage,
            usage_rejected,
            finish,
            estimated: None,
        }
    }
}

/// What the streaming worker sends to the turn loop.
#[derive(Debug)]
pub(crate) enum StreamEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// The model began writing a call of this tool (for progress display).
    ToolCallStart {
        name: String,
    },
    /// The attempt failed and will be retried after `wait`: everything streamed so far for this
    /// call must be discarded.
    Retry {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
    /// Something the user should see while the call goes on (e.g. where to sign in).
    Notice(String),
    /// Final event of a successful call.
    Done(Response),
    /// Final event of a failed call (after retries).
    Error(crate::llm::LlmError),
}

/// Messages the dialects' tests share.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// A user message with text, an attached PNG and an image URL.
    pub(crate) fn attached_image() -> Message {
        Message {
            role: Role::User,
            parts: vec![
                Part::Text {
                    text: "what is this?".into(),
                },
                Part::Binary {
                    path: "shot.png".into(),
                    mime_type: "image/png".into(),
                    data: "iVBORw0K".into(),
                },
                Part::ImageUrl {
                    url: "https://e.x/a.png".into(),
                    detail: "high".into(),
                },
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// One part of each type, as Go Crush's `marshalParts` writes it.
    fn go_parts() -> Value {
        json!([
            {"type": "text", "data": {"text": "hi"}},
            {"type": "reasoning", "data": {"thinking": "t", "signature": "s",
                "thought_signature": "g", "tool_id": "x", "responses_data": {"id": "r"},
                "started_at": 1, "finished_at": 2}},
            {"type": "image_url", "data": {"url": "https://e.x/a.png", "detail": "high"}},
            {"type": "binary", "data": {"Path": "a.txt", "MIMEType": "text/plain",
                "Data": "aGVsbG8="}},
            {"type": "tool_call", "data": {"id": "c", "name": "view", "input": "{}",
                "provider_executed": false, "finished": true}},
            {"type": "tool_result", "data": {"tool_call_id": "c", "name": "view",
                "content": "ok", "data": "", "mime_type": "", "metadata": "", "is_error": false}},
            {"type": "finish", "data": {"reason": "end_turn", "time": 3}},
            {"type": "shell_command", "data": {"command": "ls", "output": "", "exit_code": 0}}
        ])
    }

    #[test]
    fn every_go_part_type_decodes_and_encodes_back_unchanged() {
        let text = go_parts().to_string();
        let parts = parts_from_json(&text).unwrap();
        assert_eq!(parts.len(), 8);
        assert!(!parts.iter().any(|p| matches!(p, Part::Unknown { .. })));
        assert_eq!(
            parts[3],
            Part::Binary {
                path: "a.txt".into(),
                mime_type: "text/plain".into(),
                data: "aGVsbG8=".into()
            }
        );
        assert_eq!(serde_json::to_value(&parts).unwrap(), go_parts());
        // Go writes a nil []byte as null.
        let p = parts_from_json(
            r#"[{"type":"binary","data":{"Path":"","MIMEType":"image/png","Data":null}}]"#,
        )
        .unwrap();
        assert!(matches!(&p[0], Part::Binary { data, .. } if data.is_empty()));
        // What this program writes has Go's field names.
        let ours = serde_json::to_value(Part::reasoning("t".into(), String::new())).unwrap();
        assert_eq!(
            ours,
            json!({"type": "reasoning", "data": {"thinking": "t", "signature": ""}})
        );
    }

    #[test]
    fn an_unknown_part_type_is_kept_apart_and_never_written() {
        let parts = parts_from_json(
            r#"[{"type":"citation","data":{"url":"u"}},{"type":"text","data":{"text":"x"}}]"#,
        )
        .unwrap();
        assert_eq!(
            parts[0],
            Part::Unknown {
                kind: "citation".into(),
                data: json!({"url": "u"})
            }
        );
        assert!(serde_json::to_string(&parts).is_err());
        // A known type that does not fit is an error, as in Go Crush.
        assert!(parts_from_json(r#"[{"type":"text","data":{"text":5}}]"#).is_err());
    }

    #[test]
    fn base64_decodes_go_encoded_bytes() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGk=\n").unwrap(), b"hi");
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("a$b=").is_none());
        assert!(base64_decode("aG=k").is_none());
    }

    #[test]
    fn attachments_reach_a_text_model_as_text() {
        let parts = vec![
            Part::Text {
                text: "read".into(),
            },
            Part::Binary {
                path: "a.txt".into(),
                mime_type: "text/plain".into(),
                data: "aGVsbG8=".into(),
            },
            Part::Binary {
                path: "p.png".into(),
                mime_type: "image/png".into(),
                data: "AAAA".into(),
            },
            Part::ImageUrl {
                url: "https://e.x/c.png".into(),
                detail: String::new(),
            },
            Part::Unknown {
                kind: "x".into(),
                data: Value::Null,
            },
        ];
        let out = attachments_as_text(parts);
        assert!(out.iter().any(is_image_attachment), "images stay: {out:?}");
        assert!(
            out.iter().any(|p| matches!(p, Part::ImageUrl { .. })),
            "image URLs stay: {out:?}"
        );
        let out = images_as_text(vec![Message {
            role: Role::User,
            parts: out,
        }])
        .remove(0)
        .parts;
        let texts: Vec<String> = out
            .iter()
            .map(|p| match p {
                Part::Text { text } => text.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts.len(), 4, "{texts:?}");
        assert_eq!(texts[0], "read");
        assert!(
            texts[3].contains("<file path='a.txt'>\n\nhello\n</file>"),
            "{}",
            texts[3]
        );
        assert!(
            texts[1].contains("p.png (image/png, 3 bytes)"),
            "{}",
            texts[1]
        );
        assert!(texts[2].contains("https://e.x/c.png"), "{}", texts[2]);
    }

    #[test]
    fn sampling_gives_what_is_set_under_the_dialects_names_in_order() {
        let mut req = ChatRequest {
            temperature: Some(0.5),
            ..Default::default()
        };
        req.options.frequency_penalty = Some(0.25);
        req.options.presence_penalty = Some(0.125);
        let all: Vec<_> = req.sampling(&["t", "p", "f", "pp"]).collect();
        assert_eq!(all, [("t", 0.5), ("f", 0.25), ("pp", 0.125)]);
        // A dialect that names only the first two gets only those.
        req.options.top_p = Some(0.9);
        let two: Vec<_> = req.sampling(&["t", "p"]).collect();
        assert_eq!(two, [("t", 0.5), ("p", 0.9)]);
    }

    #[test]
    fn fresh_input_is_the_total_less_its_cached_parts_or_a_contradiction() {
        let none = || (String::new(), String::new());
        assert_eq!(fresh_tokens(100, &[30, 20], none), Ok(50));
        assert_eq!(fresh_tokens(100, &[], none), Ok(100));
        // Each dialect names its own fields in the message.
        let cases = [
            (
                super::super::openai::parse_usage(&json!({"prompt_tokens": 10,
                    "prompt_tokens_details": {"cached_tokens": 6, "cache_write_tokens": 5}})),
                "prompt_tokens 10 is less than its cached (6) and cache-write (5) tokens",
            ),
            (
                super::super::responses::parse_usage(&json!({"input_tokens": 3,
                    "input_tokens_details": {"cached_tokens": 4}})),
                "input_tokens 3 is less than its cached tokens (4)",
            ),
            (
                super::super::gemini::parse_usage(
                    &json!({"promptTokenCount": 2, "cachedContentTokenCount": 7}),
                ),
                "promptTokenCount 2 is less than cachedContentTokenCount 7",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got.unwrap_err().to_string(), want);
        }
    }
}

/// Tokens a request or answer holds, estimated for servers that report no usage
/// (crush(1) USAGE AND COST): a byte count divided by four, plus four tokens
/// of framing per message and eight per tool offered, and 512 per image. English prose and
/// code run at three to five bytes a token, so the estimate is within about a quarter of
/// the true count: good enough for the context meter and the summarize margin, never priced.
/// Bytes of what every call of a session sends whatever its history: the system prompt and the
/// tool definitions.
fn fixed_bytes(req: &ChatRequest) -> usize {
    let tools: usize = req
        .tools
        .iter()
        .map(|t| 32 + t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    req.system.len() + tools
}

/// [`estimate_usage`]'s share of `req` that summarizing cannot shrink (the system prompt and
/// the tools), in tokens by the same four-bytes rule.
pub(crate) fn estimate_fixed(req: &ChatRequest) -> u64 {
    (fixed_bytes(req) / 4) as u64
}

pub(crate) fn estimate_usage(req: &ChatRequest, answer: &[Part]) -> Usage {
    fn part_bytes(p: &Part) -> usize {
        match p {
            Part::Text { text } => text.len(),
            Part::Reasoning { thinking, .. } => thinking.len(),
            Part::ImageUrl { .. } | Part::Binary { .. } => 512 * 4,
            Part::ToolCall { name, input, .. } => name.len() + input.len(),
            Part::ToolResult { name, content, .. } => name.len() + content.len(),
            _ => 0,
        }
    }
    let mut input = fixed_bytes(req);
    for m in &req.messages {
        input += 16 + m.parts.iter().map(part_bytes).sum::<usize>();
    }
    let output: usize = answer.iter().map(part_bytes).sum();
    Usage {
        input: (input / 4) as u64,
        output: (output / 4) as u64,
        ..Usage::default()
    }
}
