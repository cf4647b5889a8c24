//! Catwalk's `/v2/providers` JSON (as in `catwalk-providers.json`), decoded leniently: every number
//! and boolean has a default, unknown keys are ignored, and the provider `type` and `id` are open
//! enums, so a catalog newer than this build still loads.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Declares an open string enum: known values get a variant, anything else is kept in `Other`.
macro_rules! open_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum $name {
            $($variant,)*
            /// A value this build does not know; kept verbatim.
            Other(String),
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(s) => s,
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $($text => $name::$variant,)*
                    _ => $name::Other(s),
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::from(s.to_string())
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                match v {
                    $name::Other(s) => s,
                    other => other.as_str().to_string(),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::Other(String::new())
            }
        }
    };
}

open_enum! {
    /// The wire protocol family of a provider (`type`).
    ProviderType {
        OpenAi = "openai",
        OpenAiCompat = "openai-compat",
        OpenRouter = "openrouter",
        Vercel = "vercel",
        Anthropic = "anthropic",
        Google = "google",
        Azure = "azure",
        Bedrock = "bedrock",
        GoogleVertex = "google-vertex",
    }
}

open_enum! {
    /// A provider's stable id. New ids appear in the catalog without a client release.
    ProviderId {
        Anthropic = "anthropic",
        OpenAi = "openai",
        Gemini = "gemini",
        OpenRouter = "openrouter",
        Azure = "azure",
        Bedrock = "bedrock",
        VertexAi = "vertexai",
        Copilot = "copilot",
    }
}

/// One provider of the catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provider {
    pub name: String,
    pub id: ProviderId,
    /// Usually an environment template such as `$ANTHROPIC_API_KEY`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_key: String,
    /// A base URL, or a template such as `$OPENAI_API_ENDPOINT`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_endpoint: String,
    #[serde(rename = "type")]
    pub kind: ProviderType,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_large_model_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_small_model_id: String,
    #[serde(deserialize_with = "catwalk_models")]
    pub models: Vec<Model>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub default_headers: BTreeMap<String, String>,
}

/// One model: of the catalog, or of a provider the user defines (the configuration uses
/// Catwalk's shape, as Go Crush's does). Prices are USD per million tokens, None when unknown
/// (unpriced, never $0); `*_in_cached` is the cache-write price and `*_out_cached` the
/// cache-read price.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Model {
    pub id: String,
    pub name: Option<String>,
    pub cost_per_1m_in: Option<f64>,
    pub cost_per_1m_out: Option<f64>,
    pub cost_per_1m_in_cached: Option<f64>,
    pub cost_per_1m_out_cached: Option<f64>,
    pub context_window: u64,
    pub default_max_tokens: u32,
    pub can_reason: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasoning_levels: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_reasoning_effort: String,
    pub supports_attachments: bool,
    /// Per-model sampling defaults; free-form, kept for a later use.
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub options: serde_json::Value,
    /// Where the prices came from: `Some("catalog")` for Catwalk's, None for the user's own.
    #[serde(skip)]
    pub price_source: Option<&'static str>,
    /// Where the context window came from: `Some("catalog")`, `Some("server")` (the server's
    /// metadata), `Some("fallback")` (a local server that tells none); None for the user's own.
    #[serde(skip)]
    pub window_source: Option<&'static str>,
}

impl Model {
    /// Where the context window came from, for `crush models`: catalog, server, config,
    /// fallback, or unknown (no window).
    pub fn window_from(&self) -> &'static str {
        match (self.context_window, self.window_source) {
            (0, _) => "unknown",
            (_, Some(s)) => s,
            (_, None) => "config",
        }
    }
}

/// A model as Catwalk writes it: 0 for a price it does not know.
#[derive(Default, Deserialize)]
#[serde(default)]
struct CatwalkModel {
    id: String,
    name: String,
    cost_per_1m_in: f64,
    cost_per_1m_out: f64,
    cost_per_1m_in_cached: f64,
    cost_per_1m_out_cached: f64,
    context_window: u64,
    default_max_tokens: u64,
    can_reason: bool,
    reasoning_levels: Vec<String>,
    default_reasoning_effort: String,
    supports_attachments: bool,
    options: serde_json::Value,
}

impl From<CatwalkModel> for Model {
    /// A model without input and output prices cannot be told apart from a free one: both count
    /// as unpriced, never as $0.
    fn from(m: CatwalkModel) -> Model {
        let priced = m.cost_per_1m_in > 0.0 || m.cost_per_1m_out > 0.0;
        let price = |v: f64| priced.then_some(v);
        Model {
            id: m.id,
            name: Some(m.name).filter(|n| !n.is_empty()),
            cost_per_1m_in: price(m.cost_per_1m_in),
            cost_per_1m_out: price(m.cost_per_1m_out),
            cost_per_1m_in_cached: price(m.cost_per_1m_in_cached),
            cost_per_1m_out_cached: price(m.cost_per_1m_out_cached),
            context_window: m.context_window,
            default_max_tokens: u32::try_from(m.default_max_tokens).unwrap_or(u32::MAX),
            can_reason: m.can_reason,
            reasoning_levels: m.reasoning_levels,
            default_reasoning_effort: m.default_reasoning_effort,
            supports_attachments: m.supports_attachments,
            options: m.options,
            price_source: priced.then_some("catalog"),
            window_source: Some("catalog"),
        }
    }
}

fn catwalk_models<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Model>, D::Error> {
    let wire: Vec<CatwalkModel> = Deserialize::deserialize(d)?;
    Ok(wire.into_iter().map(Model::from).collect())
}

/// Decodes a catalog document: it must be a non-empty JSON array of provider objects, each with
/// an id. The error says what is wrong, with line and column for bad JSON.
pub fn parse(bytes: &[u8]) -> Result<Vec<Provider>, String> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        None => return Err("the document is empty".into()),
        Some(b'[') => {}
        Some(b'{') => {
            return Err(
                "expected a JSON array of providers, found an object (a single provider or an error reply?)"
                    .into(),
            );
        }
        Some(_) => {}
    }
    let providers: Vec<Provider> = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            format!("not a list of Catwalk providers: {e}")
        } else {
            format!("invalid JSON: {e}")
        }
    })?;
    if providers.is_empty() {
        return Err("the list of providers is empty".into());
    }
    if let Some(i) = providers.iter().position(|p| p.id.as_str().is_empty()) {
        return Err(format!("provider #{} has no id", i + 1));
    }
    Ok(providers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_enums_keep_unknown_values() {
        let p: Provider = serde_json::from_str(
            r#"{"id":"new-one","type":"quantum","name":"N","models":[{"id":"m","has_reasoning_efforts":true}]}"#,
        )
        .unwrap();
        assert_eq!(p.id, ProviderId::Other("new-one".into()));
        assert_eq!(p.kind, ProviderType::Other("quantum".into()));
        assert_eq!(p.kind.as_str(), "quantum");
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["type"], "quantum");
        assert_eq!(back["id"], "new-one");
        let a: ProviderType = "openai-compat".into();
        assert_eq!(a, ProviderType::OpenAiCompat);
    }

    #[test]
    fn missing_numbers_and_booleans_default() {
        let ps = parse(br#"[{"id":"x","models":[{"id":"m"}]}]"#).unwrap();
        let m = &ps[0].models[0];
        assert_eq!(
            (m.context_window, m.cost_per_1m_in, m.can_reason),
            (0, None, false)
        );
        assert!(!(m.cost_per_1m_in.is_some() || m.cost_per_1m_out.is_some()));
    }

    #[test]
    fn bad_shapes_are_refused_with_a_reason() {
        assert!(parse(b"[]").unwrap_err().contains("empty"));
        assert!(parse(b"  ").unwrap_err().contains("empty"));
        assert!(parse(br#"{"error":"gone"}"#).unwrap_err().contains("array"));
        assert!(parse(b"[1,2]").unwrap_err().contains("providers"));
        let e = parse(b"[{\"id\":\"x\",").unwrap_err();
        assert!(e.contains("invalid JSON") && e.contains("line"), "{e}");
        assert!(
            parse(br#"[{"name":"no id"}]"#)
                .unwrap_err()
                .contains("no id")
        );
        assert!(parse(br#"[{"id":"x","models":{}}]"#).is_err());
    }

    #[test]
    fn the_embedded_snapshot_decodes() {
        let ps = parse(super::super::EMBEDDED).unwrap();
        assert!(ps.len() >= 10);
        let a = ps.iter().find(|p| p.id == ProviderId::Anthropic).unwrap();
        assert_eq!(a.kind, ProviderType::Anthropic);
        assert!(a.models.iter().any(|m| m.id == a.default_large_model_id));
        assert!(
            a.models
                .iter()
                .all(|m| m.cost_per_1m_in.is_some() || m.cost_per_1m_out.is_some())
        );
    }
}
