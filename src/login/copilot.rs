//! The models a Copilot subscription grants (crush(1) LOGIN): Copilot's own list (`GET
//! {copilot_url}/models`), with each model's context window and the APIs that serve it. Asked
//! only when the list is needed (`crush models`, a model the catalog does not know), once per
//! process; a model is sent to the Responses API when the list says only that API serves it,
//! or, before the list was asked, when its id is a `gpt-5` one (the models Copilot serves that
//! way).

use super::{Credential, LoginError};
use serde_json::Value;

/// One model of the subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Listed {
    pub id: String,
    pub name: String,
    /// Tokens; 0 when Copilot does not say.
    pub context_window: u64,
    pub max_output: u64,
    /// The API paths that serve the model (`/chat/completions`, `/responses`, ...); empty when
    /// Copilot does not say.
    pub endpoints: Vec<String>,
    pub vision: bool,
    pub reasoning: bool,
}

impl Listed {
    /// Whether calls of this model go to the Responses API.
    pub(crate) fn wants_responses(&self) -> bool {
        let has = |p: &str| self.endpoints.iter().any(|e| e == p);
        if self.endpoints.is_empty() {
            return by_id(&self.id);
        }
        has("/responses") && (!has("/chat/completions") || by_id(&self.id))
    }
}

/// The rule before (or without) the list: Copilot serves its `gpt-5` models through the
/// Responses API.
fn by_id(id: &str) -> bool {
    id.starts_with("gpt-5")
}

/// The models of Copilot's answer `v` (`data`, or `models`), leaving out those Copilot keeps
/// out of its model picker and those that are not chat models (embeddings).
pub(crate) fn parse(v: &Value) -> Option<Vec<Listed>> {
    let items = v
        .get("data")
        .or_else(|| v.get("models"))
        .and_then(Value::as_array)?;
    let mut out = Vec::new();
    for m in items {
        let Some(id) = m["id"].as_str().filter(|s| !s.is_empty()) else {
            continue;
        };
        if m["model_picker_enabled"] == Value::Bool(false) {
            continue;
        }
        let caps = &m["capabilities"];
        if caps["type"].as_str().is_some_and(|t| t != "chat") {
            continue;
        }
        let limits = &caps["limits"];
        let supports = &caps["supports"];
        out.push(Listed {
            id: id.to_string(),
            name: m["name"].as_str().unwrap_or(id).to_string(),
            context_window: limits["max_context_window_tokens"]
                .as_u64()
                .or(limits["max_prompt_tokens"].as_u64())
                .unwrap_or(0),
            max_output: limits["max_output_tokens"].as_u64().unwrap_or(0),
            endpoints: m["supported_endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            vision: supports["vision"].as_bool().unwrap_or(false),
            reasoning: supports["thinking"].as_bool().unwrap_or(false)
                || supports["reasoning_effort"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty()),
        });
    }
    Some(out)
}

impl Credential {
    /// The subscription's models, asked of Copilot the first time (with a fresh token once if
    /// the kept one is refused) and kept for the life of the process.
    pub(crate) fn copilot_models(&self) -> Result<Vec<Listed>, LoginError> {
        let mut kept = self.models.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = kept.as_ref() {
            return Ok(l.clone());
        }
        let url = format!("{}/models", self.settings.copilot_url);
        let mut headers = super::copilot_headers();
        headers.retain(|(k, _)| k != "openai-intent");
        headers.push(("openai-intent".into(), "model-access".into()));
        let v = self.get_json(&url, &headers)?;
        let listed = parse(&v).ok_or_else(|| LoginError::BadReply {
            url: url.clone(),
            message: "not a model list".into(),
        })?;
        *kept = Some(listed.clone());
        Ok(listed)
    }

    /// Whether a call of `model` goes to the Responses API (Copilot only): as the list says when
    /// it was asked in this process, else by the model's id.
    pub(crate) fn wants_responses(&self, model: &str) -> bool {
        if self.provider != "copilot" {
            return false;
        }
        let kept = self.models.lock().unwrap_or_else(|e| e.into_inner());
        match kept.as_ref().and_then(|l| l.iter().find(|m| m.id == model)) {
            Some(m) => m.wants_responses(),
            None => by_id(model),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_list_keeps_the_chat_models_of_the_picker_with_their_windows_and_apis() {
        let v = json!({"data": [
            {"id": "gpt-4o", "name": "GPT-4o", "model_picker_enabled": true,
             "supported_endpoints": ["/chat/completions"],
             "capabilities": {"type": "chat", "limits": {"max_context_window_tokens": 128000,
                "max_output_tokens": 16384}, "supports": {"vision": true}}},
            {"id": "gpt-7-codex", "model_picker_enabled": true,
             "supported_endpoints": ["/responses"],
             "capabilities": {"type": "chat", "limits": {"max_prompt_tokens": 272000},
                "supports": {"reasoning_effort": ["low", "high"]}}},
            {"id": "hidden", "model_picker_enabled": false, "capabilities": {"type": "chat"}},
            {"id": "text-embedding-3-small", "capabilities": {"type": "embeddings"}},
            {"id": ""}
        ]});
        let l = parse(&v).unwrap();
        let ids: Vec<&str> = l.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["gpt-4o", "gpt-7-codex"]);
        assert_eq!(l[0].context_window, 128000);
        assert_eq!(l[0].max_output, 16384);
        assert!(l[0].vision && !l[0].reasoning);
        assert_eq!(l[1].context_window, 272000);
        assert!(l[1].reasoning);
        assert!(!l[0].wants_responses());
        assert!(l[1].wants_responses());
        assert!(parse(&json!({"models": []})).unwrap().is_empty());
        assert!(parse(&json!({"error": "x"})).is_none());
    }

    #[test]
    fn gpt_5_models_go_to_responses_unless_the_list_serves_them_only_by_chat() {
        let m = |id: &str, eps: &[&str]| Listed {
            id: id.into(),
            endpoints: eps.iter().map(|s| s.to_string()).collect(),
            ..Listed::default()
        };
        assert!(m("gpt-5.5", &[]).wants_responses());
        assert!(!m("claude-sonnet-4.6", &[]).wants_responses());
        assert!(m("gpt-5-mini", &["/chat/completions", "/responses"]).wants_responses());
        assert!(!m("gpt-5-mini", &["/chat/completions"]).wants_responses());
        assert!(!m("gpt-4.1", &["/chat/completions", "/responses"]).wants_responses());
    }
}
