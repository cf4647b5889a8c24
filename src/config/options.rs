//! The model options one call is sent with (crush(1) CONFIGURATION, model options), chosen as
//! Go Crush chooses them: the selected model's settings over the catalog model's `options`; the
//! provider options merged (catalog model, provider, selected model) and completed with the
//! reasoning settings each provider type takes; `extra_body` over everything.

use super::ResolvedModel;
use crate::llm::{CallOptions, merge_json};
use serde_json::{Map, Value, json};

/// Go Crush's thinking budget for `think` (Anthropic) and Gemini 2 models.
pub(crate) const THINKING_BUDGET: u64 = 2000;

/// One of the catalog model's `options` (Catwalk's `temperature`, `top_p`...).
fn catalog_option(m: &ResolvedModel, key: &str) -> Option<f64> {
    m.model.options.get(key).and_then(Value::as_f64)
}

impl ResolvedModel {
    /// The temperature: the selected model's, else the catalog model's.
    pub(crate) fn temperature(&self) -> Option<f64> {
        self.selected
            .temperature
            .or_else(|| catalog_option(self, "temperature"))
    }

    /// The reasoning effort to ask for, for a model that reasons: the selected one, else the
    /// catalog's default, else the first of the model's levels; one of those levels when the
    /// model lists them (the selected one is sent as is when it lists none).
    pub(crate) fn reasoning_effort(&self) -> Option<String> {
        let m = &self.model;
        let levels = &m.reasoning_levels;
        let ok = |e: &str| !e.is_empty() && (levels.is_empty() || levels.iter().any(|l| l == e));
        if let Some(e) = self.selected.reasoning_effort.as_deref().filter(|e| ok(e)) {
            return Some(e.to_string());
        }
        if !m.can_reason {
            return None;
        }
        if !levels.is_empty() && ok(&m.default_reasoning_effort) {
            return Some(m.default_reasoning_effort.clone());
        }
        levels.first().cloned()
    }

    /// Everything but the output cap and temperature that the call is sent with.
    pub(crate) fn call_options(&self) -> CallOptions {
        let sel = &self.selected;
        let mut po = Value::Object(Map::new());
        if let Some(c) = self.model.options.get("provider_options") {
            merge_json(&mut po, c);
        }
        merge_json(
            &mut po,
            &Value::Object(self.provider.provider_options.clone()),
        );
        merge_json(&mut po, &Value::Object(sel.provider_options.clone()));
        let Value::Object(mut po) = po else {
            return CallOptions::default();
        };
        let mut extra = Map::new();
        self.reasoning_options(&mut po, &mut extra);
        // The provider's own extra_body goes over what was chosen here.
        for (k, v) in &self.provider.extra_body {
            let mut slot = extra.remove(k).unwrap_or(Value::Null);
            merge_json(&mut slot, v);
            extra.insert(k.clone(), slot);
        }
        CallOptions {
            top_p: sel.top_p.or_else(|| catalog_option(self, "top_p")),
            top_k: sel
                .top_k
                .or_else(|| self.model.options.get("top_k").and_then(Value::as_u64)),
            frequency_penalty: sel
                .frequency_penalty
                .or_else(|| catalog_option(self, "frequency_penalty")),
            presence_penalty: sel
                .presence_penalty
                .or_else(|| catalog_option(self, "presence_penalty")),
            provider_options: po,
            extra_body: extra,
        }
    }

    /// Adds the reasoning settings of this provider's type to the provider options `po` (or to
    /// the body, `extra`), unless the options already set them.
    fn reasoning_options(&self, po: &mut Map<String, Value>, extra: &mut Map<String, Value>) {
        let effort = self.reasoning_effort();
        let think = self.selected.think;
        let can_reason = self.model.can_reason;
        let model = self.model.id.to_ascii_lowercase();
        let anthropic = |po: &mut Map<String, Value>| {
            if po.contains_key("effort") || po.contains_key("thinking") {
                return;
            }
            match &effort {
                Some(e) if !self.model.reasoning_levels.is_empty() => {
                    po.insert("effort".into(), json!(e));
                }
                _ if think => {
                    po.insert("thinking".into(), json!({"budget_tokens": THINKING_BUDGET}));
                }
                _ => {}
            }
        };
        let set_effort = |po: &mut Map<String, Value>| {
            if let Some(e) = &effort
                && !po.contains_key("reasoning_effort")
            {
                po.insert("reasoning_effort".into(), json!(e));
            }
        };
        use crate::llm::Reasoning;
        match crate::llm::ApiKind::reasoning(&self.provider.kind_name) {
            Reasoning::Effort => set_effort(po),
            Reasoning::Anthropic => anthropic(po),
            Reasoning::Gateway => {
                if let Some(e) = &effort
                    && !po.contains_key("reasoning")
                {
                    po.insert("reasoning".into(), json!({"enabled": true, "effort": e}));
                }
            }
            Reasoning::Gemini if model.contains("claude") => anthropic(po),
            Reasoning::Gemini => {
                if po.contains_key("thinking_config")
                    || !(can_reason || model.starts_with("gemini"))
                {
                    return;
                }
                let tc = if model.starts_with("gemini-2") {
                    json!({"thinking_budget": THINKING_BUDGET, "include_thoughts": true})
                } else {
                    let mut tc = json!({"include_thoughts": true});
                    if let Some(e) = &effort {
                        tc["thinking_level"] = json!(e);
                    }
                    tc
                };
                po.insert("thinking_config".into(), tc);
            }
            Reasoning::Compat => self.compat_reasoning(po, extra, effort.as_deref(), think),
        }
    }

    /// OpenAI-compatible providers: `reasoning_effort`, and each provider's own thinking switch.
    fn compat_reasoning(
        &self,
        po: &mut Map<String, Value>,
        extra: &mut Map<String, Value>,
        effort: Option<&str>,
        think: bool,
    ) {
        let id = self.provider.id.as_str();
        let model = self.model.id.to_ascii_lowercase();
        let minimax = model.starts_with("minimax");
        let can_reason = self.model.can_reason;
        let on_off = |on: bool| json!({"type": if on { "enabled" } else { "disabled" }});
        if let Some(e) = effort
            && !po.contains_key("reasoning_effort")
        {
            match id {
                "ionet" => {
                    extra.insert("reasoning".into(), json!({"effort": e}));
                }
                "opencode-go" | "opencode-zen" if minimax => {}
                _ => {
                    po.insert("reasoning_effort".into(), json!(e));
                }
            }
        }
        match id {
            "hyper" => {
                extra.insert("thinking".into(), json!(think));
            }
            "ionet" if can_reason && !extra.contains_key("reasoning") => {
                let e = if think { "medium" } else { "none" };
                extra.insert("reasoning".into(), json!({"effort": e}));
            }
            "zai" | "deepseek" => {
                extra.insert("thinking".into(), on_off(think || effort.is_some()));
            }
            // Fireworks fails when both are set.
            "fireworks" if effort.is_none() => {
                extra.insert("thinking".into(), on_off(think));
            }
            "baseten" => {
                let on = think || effort.is_some_and(|e| e != "none");
                extra.insert("chat_template_args".into(), json!({"enable_thinking": on}));
            }
            "opencode-go" | "opencode-zen" if minimax => {
                if can_reason && (think || effort.is_some()) {
                    extra.insert("thinking".into(), json!({"type": "adaptive"}));
                    extra.insert("reasoning_split".into(), json!(true));
                } else {
                    extra.insert("thinking".into(), on_off(false));
                }
            }
            "alibaba-singapore" | "alibaba-us" if can_reason => {
                extra.insert("enable_thinking".into(), json!(think || effort.is_some()));
            }
            _ => {}
        }
        // Z.ai streams tool calls only when asked.
        if id == "zai" {
            extra.insert("tool_stream".into(), json!(true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Provider, SelectedModel};
    use super::*;
    use crate::catalog::Model;

    fn resolved(kind: &str, id: &str, model: Model, sel: SelectedModel) -> ResolvedModel {
        ResolvedModel {
            provider: Provider {
                id: id.into(),
                endpoint: Default::default(),
                models: vec![],
                flat_rate: false,
                system_prompt_prefix: None,
                default_large: None,
                default_small: None,
                kind_name: kind.into(),
                provider_options: Map::new(),
                extra_body: Map::new(),
                discover: false,
                key_var: None,
            },
            model,
            selected: sel,
        }
    }

    fn reasoning(id: &str, levels: &[&str], default: &str) -> Model {
        Model {
            id: id.into(),
            can_reason: true,
            reasoning_levels: levels.iter().map(|s| s.to_string()).collect(),
            default_reasoning_effort: default.into(),
            ..Default::default()
        }
    }

    #[test]
    fn effort_is_the_selected_one_else_the_catalog_default_else_the_first_level() {
        let m = reasoning("gpt-5", &["low", "medium", "high"], "medium");
        let sel = |e: Option<&str>| SelectedModel {
            reasoning_effort: e.map(str::to_string),
            ..Default::default()
        };
        let r = |e| resolved("openai", "openai", m.clone(), sel(e)).reasoning_effort();
        assert_eq!(r(Some("high")).as_deref(), Some("high"));
        assert_eq!(r(Some("bogus")).as_deref(), Some("medium"));
        assert_eq!(r(None).as_deref(), Some("medium"));
        let no_default = reasoning("x", &["low", "high"], "");
        assert_eq!(
            resolved("openai", "o", no_default, sel(None))
                .reasoning_effort()
                .as_deref(),
            Some("low")
        );
        // A model that does not reason gets none, unless the user asked for one.
        let plain = Model {
            id: "m".into(),
            ..Default::default()
        };
        assert_eq!(
            resolved("openai", "o", plain.clone(), sel(None)).reasoning_effort(),
            None
        );
        assert_eq!(
            resolved("openai", "o", plain, sel(Some("high")))
                .reasoning_effort()
                .as_deref(),
            Some("high")
        );
    }

    #[test]
    fn each_type_gets_its_reasoning_settings() {
        let sel = SelectedModel::default();
        let claude = reasoning("claude-opus-5", &["low", "high"], "high");
        let o = resolved("anthropic", "anthropic", claude, sel.clone()).call_options();
        assert_eq!(o.provider_options["effort"], "high");
        let no_levels = Model {
            id: "k3".into(),
            can_reason: true,
            ..Default::default()
        };
        let think = SelectedModel {
            think: true,
            ..Default::default()
        };
        let o = resolved("anthropic", "kimi", no_levels.clone(), think.clone()).call_options();
        assert_eq!(
            o.provider_options["thinking"],
            json!({"budget_tokens": THINKING_BUDGET})
        );
        // Bedrock's Claude models take Anthropic's settings, never an OpenAI field.
        let bedrock_claude = reasoning("us.anthropic.claude-opus-5", &["low", "high"], "high");
        let o = resolved("bedrock", "bedrock", bedrock_claude, sel.clone()).call_options();
        assert_eq!(o.provider_options["effort"], "high");
        assert!(!o.provider_options.contains_key("reasoning_effort"));
        let older = Model {
            id: "us.anthropic.claude-sonnet-4-5-20250929-v1:0".into(),
            can_reason: true,
            ..Default::default()
        };
        let o = resolved("bedrock", "bedrock", older, think.clone()).call_options();
        assert_eq!(
            Value::Object(o.provider_options),
            json!({"thinking": {"budget_tokens": THINKING_BUDGET}})
        );
        let gpt = reasoning("gpt-5", &["low", "medium"], "medium");
        let o = resolved("openai", "openai", gpt.clone(), sel.clone()).call_options();
        assert_eq!(o.provider_options["reasoning_effort"], "medium");
        let o = resolved("openrouter", "openrouter", gpt.clone(), sel.clone()).call_options();
        assert_eq!(
            o.provider_options["reasoning"],
            json!({"enabled": true, "effort": "medium"})
        );
        let g3 = reasoning("gemini-3-pro", &["low", "high"], "high");
        let o = resolved("google", "gemini", g3, sel.clone()).call_options();
        assert_eq!(
            o.provider_options["thinking_config"],
            json!({"thinking_level": "high", "include_thoughts": true})
        );
        let g2 = reasoning("gemini-2.5-pro", &[], "");
        let o = resolved("google-vertex", "vertexai", g2, sel.clone()).call_options();
        assert_eq!(
            o.provider_options["thinking_config"]["thinking_budget"],
            THINKING_BUDGET
        );
        let o = resolved("openai-compat", "zai", no_levels, think).call_options();
        assert_eq!(o.extra_body["thinking"], json!({"type": "enabled"}));
        assert_eq!(o.extra_body["tool_stream"], true);
        // What the user set wins over what is chosen.
        let mut r = resolved("openai", "openai", gpt, sel);
        r.selected.provider_options =
            serde_json::from_value(json!({"reasoning_effort": "low"})).unwrap();
        r.provider.extra_body = serde_json::from_value(json!({"seed": 7})).unwrap();
        let o = r.call_options();
        assert_eq!(o.provider_options["reasoning_effort"], "low");
        assert_eq!(o.extra_body["seed"], 7);
    }

    #[test]
    fn options_merge_catalog_then_provider_then_model() {
        let mut m = Model {
            id: "m".into(),
            ..Default::default()
        };
        m.options = json!({"temperature": 0.3, "top_p": 0.9,
            "provider_options": {"a": 1, "nested": {"x": 1, "y": 1}}});
        let mut r = resolved(
            "openai-compat",
            "local",
            m,
            SelectedModel {
                top_p: Some(0.5),
                top_k: Some(40),
                provider_options: serde_json::from_value(json!({"nested": {"y": 3}})).unwrap(),
                ..Default::default()
            },
        );
        r.provider.provider_options =
            serde_json::from_value(json!({"b": 2, "nested": {"y": 2}})).unwrap();
        assert_eq!(r.temperature(), Some(0.3));
        let o = r.call_options();
        assert_eq!((o.top_p, o.top_k), (Some(0.5), Some(40)));
        assert_eq!(
            Value::Object(o.provider_options),
            json!({"a": 1, "b": 2, "nested": {"x": 1, "y": 3}})
        );
    }
}
