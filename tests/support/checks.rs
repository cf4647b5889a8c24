//! Protocol checks on what the client sends. A real provider would answer most of these with
//! HTTP 400; the fake server records them instead, and fails the test when it is dropped (see
//! `FakeServer::expect_violations` for the tests of these checks).

use super::reply::Dialect;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Every problem found in one request, as human-readable lines.
pub(crate) fn check_request(
    dialect: Dialect,
    headers: &BTreeMap<String, String>,
    body: &Value,
) -> Vec<String> {
    let mut v = Vec::new();
    if !body.is_object() {
        v.push("request body is not a JSON object".to_owned());
        return v;
    }
    match dialect {
        Dialect::Anthropic => check_anthropic(headers, body, &mut v),
        Dialect::OpenAi => check_openai(body, &mut v),
        Dialect::Gemini => check_gemini(body, &mut v),
        Dialect::Responses => check_responses(body, &mut v),
        Dialect::AnthropicVertex => {
            // The model is in the URL and the version in the body; otherwise Anthropic's rules.
            if body.get("model").is_some() {
                v.push("anthropic on vertex: the body must not name the model".into());
            }
            if body["anthropic_version"] != "vertex-2023-10-16" {
                v.push("anthropic on vertex: anthropic_version is not vertex-2023-10-16".into());
            }
            let mut b = body.clone();
            b["model"] = Value::String("vertex".into());
            let mut h = headers.clone();
            h.insert("anthropic-version".into(), "in the body".into());
            check_anthropic(&h, &b, &mut v);
        }
        // Checked with its signature (`bedrock::check`).
        Dialect::Bedrock => {}
    }
    v
}

/// Keys of a JSON Schema that Gemini's function declarations refuse.
const GEMINI_REFUSED_SCHEMA_KEYS: &[&str] = &[
    "$schema",
    "additionalProperties",
    "$ref",
    "$defs",
    "definitions",
    "const",
    "oneOf",
    "allOf",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "patternProperties",
];

fn check_gemini(body: &Value, v: &mut Vec<String>) {
    if let Some(tools) = body["tools"].as_array() {
        for t in tools {
            for (i, d) in t["functionDeclarations"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let name = d["name"].as_str().unwrap_or("");
                if !valid_tool_name(name) {
                    v.push(format!(
                        "gemini: functionDeclarations[{i}] has invalid name {name:?}"
                    ));
                }
                for k in GEMINI_REFUSED_SCHEMA_KEYS {
                    if count_key(&d["parameters"], k) > 0 {
                        v.push(format!(
                            "gemini: {name}: parameters use {k:?}, which Gemini refuses"
                        ));
                    }
                }
                if let Some(t) = d["parameters"].get("type").and_then(Value::as_array) {
                    v.push(format!("gemini: {name}: a type list {t:?}"));
                }
            }
        }
    }
    if body.get("model").is_some() || body.get("messages").is_some() {
        v.push("gemini: the body has OpenAI/Anthropic keys (model, messages)".into());
    }
    let Some(contents) = body["contents"].as_array() else {
        v.push("gemini: contents missing or not an array".into());
        return;
    };
    if contents.is_empty() {
        v.push("gemini: contents is empty".into());
    }
    if contents.first().is_some_and(|c| c["role"] != "user") {
        v.push("gemini: the first content is not the user's".into());
    }
    // Names of the calls of the last model turn, waiting for their responses.
    let mut pending: Vec<String> = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let role = c["role"].as_str().unwrap_or("");
        let at = format!("gemini: contents[{i}] ({role})");
        let Some(parts) = c["parts"].as_array().filter(|p| !p.is_empty()) else {
            v.push(format!("{at}: no parts"));
            continue;
        };
        match role {
            "user" => {
                let answered: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| p["functionResponse"]["name"].as_str())
                    .collect();
                if answered.len() != pending.len()
                    || pending.iter().zip(&answered).any(|(a, b)| a != b)
                {
                    v.push(format!(
                        "{at}: function responses {answered:?} do not answer the calls {pending:?}"
                    ));
                }
                pending.clear();
            }
            "model" => {
                for id in &pending {
                    v.push(format!("{at}: call {id:?} was never answered"));
                }
                pending.clear();
                for p in parts {
                    if let Some(fc) = p.get("functionCall") {
                        if !fc["args"].is_object() {
                            v.push(format!("{at}: functionCall args is not an object"));
                        }
                        pending.push(fc["name"].as_str().unwrap_or("").to_owned());
                    } else if p.get("text").is_none() {
                        v.push(format!("{at}: a part that is neither text nor a call: {p}"));
                    }
                }
            }
            _ => v.push(format!("{at}: role must be user or model")),
        }
    }
    if !pending.is_empty() {
        v.push(format!(
            "gemini: the last model turn's calls {pending:?} have no responses"
        ));
    }
}

fn check_responses(body: &Value, v: &mut Vec<String>) {
    if !body["model"].is_string() {
        v.push("responses: model missing or not a string".into());
    }
    if body["stream"] != true {
        v.push("responses: stream is not true".into());
    }
    if body.get("messages").is_some() {
        v.push("responses: the body has Chat Completions messages".into());
    }
    if let Some(tools) = body["tools"].as_array() {
        for (i, t) in tools.iter().enumerate() {
            let name = t["name"].as_str().unwrap_or("");
            if t["type"] != "function" || !valid_tool_name(name) {
                v.push(format!(
                    "responses: tools[{i}] is not a flat function tool ({name:?})"
                ));
            }
        }
    }
    let Some(input) = body["input"].as_array() else {
        v.push("responses: input missing or not an array".into());
        return;
    };
    let mut calls: BTreeSet<String> = BTreeSet::new();
    for (i, item) in input.iter().enumerate() {
        let at = format!("responses: input[{i}]");
        match item["type"].as_str().unwrap_or("message") {
            "function_call" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if id.is_empty() || !calls.insert(id.to_owned()) {
                    v.push(format!(
                        "{at}: function_call without a call_id, or a repeated one"
                    ));
                }
                if item["arguments"]
                    .as_str()
                    .is_none_or(|a| serde_json::from_str::<Value>(a).is_err())
                {
                    v.push(format!("{at}: arguments are not JSON text"));
                }
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if !calls.contains(id) {
                    v.push(format!(
                        "{at}: output for {id:?}, which no function_call made"
                    ));
                }
                if !item["output"].is_string() {
                    v.push(format!("{at}: output is not a string"));
                }
            }
            "reasoning" => {
                if item["encrypted_content"].as_str().is_none_or(str::is_empty)
                    && body["store"] != true
                {
                    v.push(format!(
                        "{at}: reasoning item without encrypted_content while store is off"
                    ));
                }
                if input.get(i + 1).is_none_or(|n| n["type"] == "reasoning") {
                    v.push(format!(
                        "{at}: reasoning item not followed by what it led to"
                    ));
                }
            }
            "message" => {
                let role = item["role"].as_str().unwrap_or("");
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    v.push(format!("{at}: role {role:?}"));
                }
            }
            other => v.push(format!("{at}: unknown item type {other:?}")),
        }
    }
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn count_key(v: &Value, key: &str) -> usize {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| usize::from(k == key) + count_key(x, key))
            .sum(),
        Value::Array(a) => a.iter().map(|x| count_key(x, key)).sum(),
        _ => 0,
    }
}

fn check_anthropic(headers: &BTreeMap<String, String>, body: &Value, v: &mut Vec<String>) {
    if headers
        .get("anthropic-version")
        .is_none_or(|s| s.is_empty())
    {
        v.push("anthropic: missing anthropic-version header".into());
    }
    if !body["model"].is_string() {
        v.push("anthropic: model missing or not a string".into());
    }
    if !body["max_tokens"].is_u64() {
        v.push("anthropic: max_tokens missing or not a positive integer".into());
    }
    let n_cache = count_key(body, "cache_control");
    if n_cache > 4 {
        v.push(format!(
            "anthropic: {n_cache} cache_control breakpoints (max 4)"
        ));
    }
    match &body["system"] {
        Value::Null | Value::String(_) => {}
        Value::Array(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                if b["type"] != "text" || b["text"].as_str().is_none_or(is_blank) {
                    v.push(format!(
                        "anthropic: system[{i}] is not a non-empty text block"
                    ));
                }
            }
        }
        _ => v.push("anthropic: system is neither a string nor an array".into()),
    }
    if let Some(tools) = body["tools"].as_array() {
        for (i, t) in tools.iter().enumerate() {
            let name = t["name"].as_str().unwrap_or("");
            if t.get("type").is_none() && !valid_tool_name(name) {
                v.push(format!("anthropic: tools[{i}] has invalid name {name:?}"));
            }
            if t.get("type").is_none() && !t["input_schema"].is_object() {
                v.push(format!(
                    "anthropic: tools[{i}] ({name}) has no input_schema object"
                ));
            }
        }
    }
    let Some(messages) = body["messages"].as_array() else {
        v.push("anthropic: messages missing or not an array".into());
        return;
    };
    if messages.is_empty() {
        v.push("anthropic: messages is empty".into());
    }
    if messages.first().is_some_and(|m| m["role"] != "user") {
        v.push("anthropic: first message is not from the user".into());
    }
    // Tool uses of the previous assistant message, waiting for results in this user message.
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let at = format!("anthropic: messages[{i}] ({role})");
        let last = i + 1 == messages.len();
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) => {
                if is_blank(s) && !(last && role == "assistant") {
                    v.push(format!("{at}: empty text content"));
                }
                vec![serde_json::json!({"type": "text", "text": s})]
            }
            Value::Array(a) => {
                if a.is_empty() && !(last && role == "assistant") {
                    v.push(format!("{at}: empty content array"));
                }
                a.clone()
            }
            _ => {
                v.push(format!("{at}: content is neither a string nor an array"));
                Vec::new()
            }
        };
        match role {
            "user" => {
                let mut answered = BTreeSet::new();
                let mut seen_other = false;
                for (j, b) in blocks.iter().enumerate() {
                    match b["type"].as_str().unwrap_or("") {
                        "tool_result" => {
                            let id = b["tool_use_id"].as_str().unwrap_or("");
                            if seen_other {
                                v.push(format!(
                                    "{at}: tool_result {id:?} at block {j} comes after non-result blocks"
                                ));
                            }
                            if !pending.iter().any(|p| p == id) {
                                v.push(format!(
                                    "{at}: tool_result {id:?} answers no tool_use of the previous assistant message"
                                ));
                            } else if !answered.insert(id.to_owned()) {
                                v.push(format!("{at}: tool_use {id:?} answered twice"));
                            }
                            check_tool_result_content(
                                &b["content"],
                                &format!("{at} tool_result {id:?}"),
                                v,
                            );
                        }
                        "tool_use" => v.push(format!("{at}: tool_use block in a user message")),
                        _ => {
                            seen_other = true;
                            check_anthropic_block(b, &format!("{at} block {j}"), v);
                        }
                    }
                }
                for id in &pending {
                    if !answered.contains(id) {
                        v.push(format!("{at}: tool_use {id:?} has no tool_result here"));
                    }
                }
                pending.clear();
            }
            "assistant" => {
                for id in &pending {
                    v.push(format!(
                        "{at}: tool_use {id:?} of the previous assistant message was never answered"
                    ));
                }
                pending.clear();
                for (j, b) in blocks.iter().enumerate() {
                    match b["type"].as_str().unwrap_or("") {
                        "tool_use" => {
                            let id = b["id"].as_str().unwrap_or("");
                            if id.is_empty()
                                || !id
                                    .chars()
                                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                            {
                                v.push(format!("{at}: tool_use id {id:?} is not [A-Za-z0-9_-]+"));
                            }
                            if !b["input"].is_object() {
                                v.push(format!("{at}: tool_use {id:?} input is not an object"));
                            }
                            if pending.iter().any(|p| p == id) {
                                v.push(format!("{at}: duplicate tool_use id {id:?}"));
                            }
                            pending.push(id.to_owned());
                        }
                        "tool_result" => {
                            v.push(format!("{at}: tool_result block in an assistant message"))
                        }
                        _ => {
                            // A final assistant prefill may be blank text; others may not.
                            if !(last && blocks.len() == 1 && b["type"] == "text") {
                                check_anthropic_block(b, &format!("{at} block {j}"), v);
                            }
                        }
                    }
                }
            }
            _ => v.push(format!("{at}: role must be user or assistant")),
        }
    }
    for id in &pending {
        v.push(format!(
            "anthropic: tool_use {id:?} in the last message has no tool_result"
        ));
    }
}

fn check_anthropic_block(b: &Value, at: &str, v: &mut Vec<String>) {
    match b["type"].as_str().unwrap_or("") {
        "text" if b["text"].as_str().is_none_or(is_blank) => {
            v.push(format!("{at}: empty text block"));
        }
        "thinking" if b["signature"].as_str().is_none_or(str::is_empty) => {
            v.push(format!("{at}: thinking block without signature"));
        }
        "" => v.push(format!("{at}: block without type")),
        _ => {}
    }
}

fn check_tool_result_content(c: &Value, at: &str, v: &mut Vec<String>) {
    match c {
        Value::Null | Value::String(_) => {}
        Value::Array(parts) => {
            for (k, p) in parts.iter().enumerate() {
                check_anthropic_block(p, &format!("{at} content[{k}]"), v);
            }
        }
        _ => v.push(format!("{at}: content is neither a string nor an array")),
    }
}

fn check_openai(body: &Value, v: &mut Vec<String>) {
    if !body["model"].is_string() {
        v.push("openai: model missing or not a string".into());
    }
    if body.get("stream_options").is_some() && body["stream"] != true {
        v.push("openai: stream_options without stream:true".into());
    }
    if let Some(tools) = body["tools"].as_array() {
        for (i, t) in tools.iter().enumerate() {
            let name = t["function"]["name"].as_str().unwrap_or("");
            if t["type"] != "function" || !valid_tool_name(name) {
                v.push(format!(
                    "openai: tools[{i}] is not a function tool with a valid name ({name:?})"
                ));
            }
        }
    }
    let Some(messages) = body["messages"].as_array() else {
        v.push("openai: messages missing or not an array".into());
        return;
    };
    if messages.is_empty() {
        v.push("openai: messages is empty".into());
    }
    // Calls of the last assistant message not yet answered by a tool message.
    let mut pending: Vec<String> = Vec::new();
    let mut known: BTreeSet<String> = BTreeSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let at = format!("openai: messages[{i}] ({role})");
        if role != "tool" {
            for id in pending.drain(..) {
                v.push(format!(
                    "{at}: tool call {id:?} has no tool message before this one"
                ));
            }
        }
        match role {
            "system" | "developer" | "user" => {
                if !(m["content"].is_string() || m["content"].is_array()) {
                    v.push(format!("{at}: content is neither a string nor an array"));
                }
            }
            "assistant" => {
                let calls = m["tool_calls"].as_array().filter(|a| !a.is_empty());
                match (&m["content"], calls.is_some()) {
                    (Value::String(_) | Value::Array(_), _) => {}
                    (Value::Null, true) => v.push(format!(
                        "{at}: assistant tool-call message has content null/missing; send \"\""
                    )),
                    (Value::Null, false) => v.push(format!(
                        "{at}: assistant message without content or tool_calls"
                    )),
                    _ => v.push(format!("{at}: content is neither a string nor an array")),
                }
                for (j, c) in calls.into_iter().flatten().enumerate() {
                    let id = c["id"].as_str().unwrap_or("");
                    if id.is_empty() {
                        v.push(format!("{at}: tool_calls[{j}] has no id"));
                    } else if !known.insert(id.to_owned()) {
                        v.push(format!("{at}: tool_calls[{j}] reuses id {id:?}"));
                    }
                    if c["type"] != "function" {
                        v.push(format!("{at}: tool_calls[{j}] lacks \"type\":\"function\""));
                    }
                    if c["function"]["name"].as_str().is_none_or(str::is_empty) {
                        v.push(format!("{at}: tool_calls[{j}] has no function.name"));
                    }
                    match c["function"]["arguments"].as_str() {
                        None => v.push(format!(
                            "{at}: tool_calls[{j}] function.arguments is not a string"
                        )),
                        Some(a) => {
                            if serde_json::from_str::<Value>(a).is_err() {
                                v.push(format!(
                                    "{at}: tool_calls[{j}] function.arguments is not valid JSON: {a:?}"
                                ));
                            }
                        }
                    }
                    pending.push(id.to_owned());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                if let Some(k) = pending.iter().position(|p| p == id) {
                    pending.remove(k);
                } else if known.contains(id) {
                    v.push(format!(
                        "{at}: tool_call_id {id:?} answered twice or out of place"
                    ));
                } else {
                    v.push(format!(
                        "{at}: tool_call_id {id:?} matches no preceding tool call"
                    ));
                }
                if !(m["content"].is_string() || m["content"].is_array()) {
                    v.push(format!("{at}: tool content is not a string"));
                }
            }
            _ => v.push(format!("{at}: unknown role")),
        }
    }
    for id in pending {
        v.push(format!(
            "openai: tool call {id:?} in the last message has no tool message"
        ));
    }
}
