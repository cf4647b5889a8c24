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
pub(crate) struct Provider {
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
    /// Decoded on first use ([`Models`]).
    pub models: Models,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub default_headers: BTreeMap<String, String>,
}

/// One model: of the catalog, or of a provider the user defines (the configuration uses
/// Catwalk's shape, as Go Crush's does). Prices are USD per million tokens, None when unknown
/// (unpriced, never $0); `*_in_cached` is the cache-write price and `*_out_cached` the
/// cache-read price.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Model {
    pub id: String,
    pub name: Option<String>,
    pub cost_per_1m_in: Option<f64>,
    pub cost_per_1m_out: Option<f64>,
    pub cost_per_1m_in_cached: Option<f64>,
    pub cost_per_1m_out_cached: Option<f64>,
    pub context_window: u64,
    /// 0 when unset. Go Crush reads an int64, and configurations written for Ollama give -1
    /// ("no limit"): zero or less is read as unset, not refused (crush(1) CONFIGURATION).
    #[serde(deserialize_with = "unset_when_not_positive")]
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
    pub price_source: Option<crate::store::PriceSource>,
    /// Where the context window came from: `Some("catalog")`, `Some("server")` (the server's
    /// metadata), `Some("fallback")` (a local server that tells none); None for the user's own.
    #[serde(skip)]
    pub window_source: Option<&'static str>,
}

/// An integer where zero or less means unset (0); one over `u32::MAX` is `u32::MAX`. Anything
/// but an integer is still a type error.
fn unset_when_not_positive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = i64::deserialize(d)?;
    Ok(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

impl Model {
    /// Where the context window came from, for `crush models`: catalog, server, config,
    /// fallback, or unknown (no window).
    pub(crate) fn window_from(&self) -> &'static str {
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
            price_source: priced.then_some(crate::store::PriceSource::Catalog),
            window_source: Some("catalog"),
        }
    }
}

/// A provider's models, kept as the catalog's JSON text until first used: the catalog holds
/// about 1 500 models and a run uses those of one or two providers, so decoding them all at
/// every start would be most of the start's work (crush(1) PROVIDER CATALOG). Reads through
/// `Deref` decode once; a list that does not decode is empty, with a warning on stderr — a
/// downloaded catalog is checked whole before it is used or saved ([`parse`]), so only a
/// cache altered by hand can get there.
#[derive(Default)]
pub(crate) struct Models {
    /// The JSON array as the catalog sent it; None when built in code.
    raw: Option<Text>,
    decoded: std::sync::OnceLock<Vec<Model>>,
}

/// Where a provider's models are kept as text.
#[derive(Clone)]
enum Text {
    /// A range of the catalog document (the embedded one, or a cache read into memory).
    Doc(Doc, std::ops::Range<usize>),
    /// Decoded the strict way (a document the fast split did not take).
    Own(Box<serde_json::value::RawValue>),
}

/// A catalog document, shared by its providers' models.
#[derive(Clone)]
enum Doc {
    Static(&'static [u8]),
    Shared(std::sync::Arc<[u8]>),
}

impl Doc {
    fn bytes(&self) -> &[u8] {
        match self {
            Doc::Static(b) => b,
            Doc::Shared(b) => b,
        }
    }
}

impl Text {
    fn bytes(&self) -> &[u8] {
        match self {
            Text::Doc(doc, range) => doc.bytes().get(range.clone()).unwrap_or_default(),
            Text::Own(raw) => raw.get().as_bytes(),
        }
    }
}

impl Models {
    fn decode(raw: &Text) -> Result<Vec<Model>, serde_json::Error> {
        let wire: Vec<CatwalkModel> = serde_json::from_slice(raw.bytes())?;
        Ok(wire.into_iter().map(Model::from).collect())
    }

    fn get(&self) -> &Vec<Model> {
        self.decoded.get_or_init(|| match &self.raw {
            None => Vec::new(),
            Some(raw) => Self::decode(raw).unwrap_or_else(|e| {
                crate::ewriteln!(
                    "crush: warning: a provider's models in the catalog are unusable: {e}"
                );
                Vec::new()
            }),
        })
    }

    /// Whether the models decode (a downloaded catalog is checked before it is used).
    fn check(&self) -> Result<(), serde_json::Error> {
        match &self.raw {
            Some(raw) if self.decoded.get().is_none() => {
                let models = Self::decode(raw)?;
                let _ = self.decoded.set(models);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl From<Vec<Model>> for Models {
    fn from(models: Vec<Model>) -> Models {
        Models {
            raw: None,
            decoded: std::sync::OnceLock::from(models),
        }
    }
}

impl std::ops::Deref for Models {
    type Target = Vec<Model>;
    fn deref(&self) -> &Vec<Model> {
        self.get()
    }
}

impl Clone for Models {
    fn clone(&self) -> Models {
        Models {
            raw: self.raw.clone(),
            decoded: self.decoded.clone(),
        }
    }
}

impl fmt::Debug for Models {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.decoded.get(), &self.raw) {
            (Some(m), _) => m.fmt(f),
            (None, _) => f.write_str("[not yet decoded]"),
        }
    }
}

impl PartialEq for Models {
    fn eq(&self, other: &Models) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for Models {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Models {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Models, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(Models {
            raw: Some(Text::Own(raw)),
            decoded: std::sync::OnceLock::new(),
        })
    }
}

/// Decodes a catalog document: it must be a non-empty JSON array of provider objects, each with
/// an id. The error says what is wrong, with line and column for bad JSON. Models are decoded
/// on first use ([`Models`]).
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Provider>, ParseError> {
    parse_indexed(bytes, None)
}

/// [`parse`] with the document's [`super::split`] already known (`index`, from the index kept
/// beside the cache; checked here, and ignored when it does not fit the document).
pub(crate) fn parse_indexed(
    bytes: &[u8],
    index: Option<Vec<super::split::Entry>>,
) -> Result<Vec<Provider>, ParseError> {
    parse_doc(bytes, index, || Doc::Shared(std::sync::Arc::from(bytes)))
}

/// [`parse`] of a document compiled into the binary, with its index compiled in too: its
/// models are read in place and nothing is scanned.
pub(crate) fn parse_static(
    bytes: &'static [u8],
    index: Option<Vec<super::split::Entry>>,
) -> Result<Vec<Provider>, ParseError> {
    parse_doc(bytes, index, || Doc::Static(bytes))
}

/// The fast way when the document splits ([`super::split`]; `index` when known): each
/// provider's head is decoded strictly and its models are kept as a range of the document;
/// else the strict way.
fn parse_doc(
    bytes: &[u8],
    index: Option<Vec<super::split::Entry>>,
    doc: impl FnOnce() -> Doc,
) -> Result<Vec<Provider>, ParseError> {
    let index = index.filter(|entries| super::split::fits(bytes, entries));
    if let Some(entries) = index.or_else(|| super::split::providers(bytes))
        && !entries.is_empty()
    {
        let doc = doc();
        let mut providers = Vec::with_capacity(entries.len());
        for e in entries {
            let object = &bytes[e.object.clone()];
            let decoded = match &e.models {
                // The head alone: the object with its models replaced by an empty list.
                Some(m) => {
                    let (from, to) = (m.start - e.object.start, m.end - e.object.start);
                    let mut head = Vec::with_capacity(object.len() - (to - from) + 2);
                    head.extend_from_slice(&object[..from]);
                    head.extend_from_slice(b"[]");
                    head.extend_from_slice(&object[to..]);
                    serde_json::from_slice::<Provider>(&head)
                }
                None => serde_json::from_slice::<Provider>(object),
            };
            let Ok(mut p) = decoded else {
                return parse_strict(bytes);
            };
            if let Some(m) = e.models {
                p.models = Models {
                    raw: Some(Text::Doc(doc.clone(), m)),
                    decoded: std::sync::OnceLock::new(),
                };
            }
            providers.push(p);
        }
        return check_ids(providers);
    }
    parse_strict(bytes)
}

/// Why a catalog document is refused; each says what is wrong, with line and column for bad
/// JSON.
#[derive(Debug)]
pub(crate) enum ParseError {
    Empty,
    /// An object where the array of providers should be.
    Object,
    /// Valid JSON of another shape.
    NotProviders(serde_json::Error),
    InvalidJson(serde_json::Error),
    NoProviders,
    /// The provider at this 1-based position has no id.
    NoId(usize),
    /// A provider's models do not decode.
    Models {
        provider: String,
        source: serde_json::Error,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => f.write_str("the document is empty"),
            ParseError::Object => f.write_str(
                "expected a JSON array of providers, found an object (a single provider or an error reply?)",
            ),
            ParseError::NotProviders(e) => write!(f, "not a list of Catwalk providers: {e}"),
            ParseError::InvalidJson(e) => write!(f, "invalid JSON: {e}"),
            ParseError::NoProviders => f.write_str("the list of providers is empty"),
            ParseError::NoId(i) => write!(f, "provider #{i} has no id"),
            ParseError::Models { provider, source } => write!(
                f,
                "not a list of Catwalk providers: provider '{provider}': models: {source}"
            ),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParseError::NotProviders(e)
            | ParseError::InvalidJson(e)
            | ParseError::Models { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

/// The whole document through serde: what decides, and words, every error.
fn parse_strict(bytes: &[u8]) -> Result<Vec<Provider>, ParseError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        None => return Err(ParseError::Empty),
        Some(b'{') => return Err(ParseError::Object),
        Some(_) => {}
    }
    let providers: Vec<Provider> = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            ParseError::NotProviders(e)
        } else {
            ParseError::InvalidJson(e)
        }
    })?;
    check_ids(providers)
}

fn check_ids(providers: Vec<Provider>) -> Result<Vec<Provider>, ParseError> {
    if providers.is_empty() {
        return Err(ParseError::NoProviders);
    }
    if let Some(i) = providers.iter().position(|p| p.id.as_str().is_empty()) {
        return Err(ParseError::NoId(i + 1));
    }
    Ok(providers)
}

/// [`parse`], then every provider's models decoded too: for a catalog that is about to be used
/// or saved for the first time (a download, `crush update-providers`), so a bad one is refused
/// whole, as before it is cached.
pub(crate) fn parse_checked(bytes: &[u8]) -> Result<Vec<Provider>, ParseError> {
    let providers = parse(bytes)?;
    for p in &providers {
        p.models.check().map_err(|source| ParseError::Models {
            provider: p.id.to_string(),
            source,
        })?;
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
    fn a_default_max_tokens_of_minus_one_is_unset() {
        // Ollama configurations give -1 for "no limit"; Go Crush reads an int64.
        let m: Model =
            serde_json::from_str(r#"{"id":"qwen3:14b","default_max_tokens":-1}"#).unwrap();
        assert_eq!(m.default_max_tokens, 0);
        let m: Model = serde_json::from_str(r#"{"id":"m","default_max_tokens":8192}"#).unwrap();
        assert_eq!(m.default_max_tokens, 8192);
        let m: Model =
            serde_json::from_str(r#"{"id":"m","default_max_tokens":5000000000}"#).unwrap();
        assert_eq!(m.default_max_tokens, u32::MAX);
        assert!(serde_json::from_str::<Model>(r#"{"id":"m","default_max_tokens":"big"}"#).is_err());
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
        assert!(parse(b"[]").unwrap_err().to_string().contains("empty"));
        assert!(parse(b"  ").unwrap_err().to_string().contains("empty"));
        assert!(
            parse(br#"{"error":"gone"}"#)
                .unwrap_err()
                .to_string()
                .contains("array")
        );
        assert!(
            parse(b"[1,2]")
                .unwrap_err()
                .to_string()
                .contains("providers")
        );
        let e = parse(b"[{\"id\":\"x\",").unwrap_err().to_string();
        assert!(e.contains("invalid JSON") && e.contains("line"), "{e}");
        assert!(
            parse(br#"[{"name":"no id"}]"#)
                .unwrap_err()
                .to_string()
                .contains("no id")
        );
        assert!(parse_checked(br#"[{"id":"x","models":{}}]"#).is_err());
        assert!(parse_checked(br#"[{"id":"x","models":[{"id":7}]}]"#).is_err());
    }

    #[test]
    fn models_are_decoded_on_first_use_and_a_bad_list_is_empty() {
        let ps = parse(
            br#"[{"id":"a","models":[{"id":"m1","context_window":9}]},{"id":"b","models":{}}]"#,
        )
        .unwrap();
        assert!(ps[0].models.decoded.get().is_none(), "decoded before use");
        assert_eq!(ps[0].models[0].context_window, 9);
        assert!(ps[0].models.decoded.get().is_some());
        // Only a hand-altered cache gets here: the list reads as empty, never a panic.
        assert!(ps[1].models.is_empty());
        let copy = ps[0].clone();
        assert_eq!(copy.models.len(), 1);
        assert_eq!(
            serde_json::to_value(&copy).unwrap()["models"][0]["id"],
            "m1"
        );
    }

    #[test]
    fn the_fast_split_decodes_what_the_strict_decoder_does() {
        let fast = parse_static(super::super::EMBEDDED, None).unwrap();
        assert!(matches!(fast[0].models.raw, Some(Text::Doc(..))));
        assert_eq!(fast, parse_strict(super::super::EMBEDDED).unwrap());
        let doc = br#"[{"id":"a","models":[{"id":"m"}],"name":"A"},{"id":"b"}]"#;
        let owned = parse(doc).unwrap();
        assert_eq!(owned, parse_strict(doc).unwrap());
        assert_eq!(
            (owned[0].name.as_str(), owned[0].models[0].id.as_str()),
            ("A", "m")
        );
    }

    #[test]
    fn the_embedded_snapshot_decodes() {
        let ps = parse_checked(super::super::EMBEDDED).unwrap();
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
