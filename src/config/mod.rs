//! Configuration: layers of JSON merged into one `Config`, then resolved into providers and
//! models the agent can use.
//!
//! Layers are kept as a list (`Layer`), and every leaf of the merged value remembers the layer
//! and file:line that set it (`Loaded.origins`), so `config show --origin` and error messages can
//! name it. The ten layers, trust, crushrc, state and session-only changes live in the
//! submodules; `load` is the entry point.

pub mod commands;
pub mod crushrc;
pub mod expand;
pub mod json;
pub mod layers;
pub mod pos;
pub mod session;
pub mod sha256;
pub mod show;
pub mod state;
pub mod trust;

use crate::llm::{ApiKind, Endpoint};
use crate::paths;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct Config {
    pub models: Models,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub options: Options,
    pub permissions: Permissions,
    pub env: BTreeMap<String, String>,
    /// Kept raw until their modules land.
    pub hooks: Value,
    pub mcp: Value,
    pub lsp: Value,
    pub tools: Value,
    #[serde(rename = "$schema")]
    pub schema: Option<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct Models {
    pub large: Option<SelectedModel>,
    pub small: Option<SelectedModel>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq)]
#[serde(default)]
pub struct SelectedModel {
    pub model: String,
    pub provider: String,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub reasoning_effort: Option<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct ProviderConfig {
    pub id: Option<String>,
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub disable: bool,
    pub extra_headers: BTreeMap<String, String>,
    pub system_prompt_prefix: Option<String>,
    pub flat_rate: bool,
    pub models: Vec<ModelConfig>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq)]
#[serde(default)]
pub struct ModelConfig {
    pub id: String,
    pub name: Option<String>,
    pub cost_per_1m_in: Option<f64>,
    pub cost_per_1m_out: Option<f64>,
    /// Catwalk: the cache-write price.
    pub cost_per_1m_in_cached: Option<f64>,
    /// Catwalk: the cache-read price.
    pub cost_per_1m_out_cached: Option<f64>,
    pub context_window: u64,
    pub default_max_tokens: u32,
    pub can_reason: bool,
    pub supports_attachments: bool,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct Options {
    pub context_paths: Vec<String>,
    pub global_context_paths: Vec<String>,
    pub data_directory: Option<String>,
    pub debug: bool,
    pub disabled_tools: Vec<String>,
    pub progress: Option<bool>,
    pub disable_provider_auto_update: bool,
    pub disable_auto_summarize: bool,
    pub disable_default_providers: bool,
    pub disable_metrics: bool,
    pub debug_lsp: bool,
    pub auto_lsp: Option<bool>,
    pub initialize_as: Option<String>,
    pub notifications: Option<String>,
    pub skills_paths: Vec<String>,
    pub disabled_skills: Vec<String>,
    /// Model calls per turn (ours; default 100).
    pub max_steps: Option<u64>,
    /// Seconds of silence before a model stream is abandoned (ours; default 120).
    pub request_idle_timeout: Option<u64>,
    /// Kept raw: Crush's TUI settings and commit attribution.
    pub tui: Value,
    pub attribution: Value,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct Permissions {
    pub allowed_tools: Vec<String>,
}

/// Where a layer came from, lowest priority first (SPEC §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LayerKind {
    #[default]
    Defaults,
    GlobalState,
    WorkspaceState,
    GlobalJson,
    GlobalCrushrc,
    ProjectJson,
    ProjectCrushrc,
    ProjectDotJson,
    ProjectDotCrushrc,
    Runtime,
}

impl LayerKind {
    /// The layer's number in SPEC §3.1 (1..=10).
    pub fn number(self) -> u8 {
        self as u8 + 1
    }
    /// A short name for users ("project .crushrc").
    pub fn label(self) -> &'static str {
        match self {
            LayerKind::Defaults => "built-in default",
            LayerKind::GlobalState => "global state",
            LayerKind::WorkspaceState => "workspace state",
            LayerKind::GlobalJson => "global crush.json",
            LayerKind::GlobalCrushrc => "global crushrc",
            LayerKind::ProjectJson => "project crush.json",
            LayerKind::ProjectCrushrc => "project crushrc",
            LayerKind::ProjectDotJson => "project .crush.json",
            LayerKind::ProjectDotCrushrc => "project .crushrc",
            LayerKind::Runtime => "runtime",
        }
    }
    /// Layers whose files belong to the project (and so need trust to run code).
    pub fn is_project(self) -> bool {
        matches!(
            self,
            LayerKind::ProjectJson
                | LayerKind::ProjectCrushrc
                | LayerKind::ProjectDotJson
                | LayerKind::ProjectDotCrushrc
        )
    }
}

/// One layer: for a JSON file its contents; for a crushrc what its commands add on their own
/// (removals such as `hook remove` only show in the merged configuration); for the runtime layer
/// the flags, `CRUSH_*` overrides and session-only commands.
#[derive(Debug, Clone)]
pub struct Layer {
    pub kind: LayerKind,
    pub path: Option<PathBuf>,
    pub value: Value,
}

/// Where one value of the effective configuration was set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Origin {
    pub kind: LayerKind,
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    /// For the runtime layer: which flag, variable or session command.
    pub detail: Option<String>,
}

impl Origin {
    /// `file:line`, `file`, or what set it (`environment CRUSH_X`, `built-in default`).
    pub fn place(&self) -> String {
        match (&self.file, self.line, &self.detail) {
            (Some(f), Some(l), _) => format!("{}:{l}", f.display()),
            (Some(f), None, _) => f.display().to_string(),
            (None, _, Some(d)) => d.clone(),
            (None, _, None) => self.kind.label().to_string(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = self.place();
        if place == self.kind.label() {
            write!(f, "{place} (layer {})", self.kind.number())
        } else {
            write!(
                f,
                "{} (layer {}) {place}",
                self.kind.label(),
                self.kind.number()
            )
        }
    }
}

/// JSON pointer (`/options/debug`) → where it was set. Only leaves (scalars, empty objects and
/// arrays) have entries.
pub type Origins = BTreeMap<String, Origin>;

#[derive(Debug)]
pub enum ConfigError {
    /// Bad file: the message starts with file:line:column.
    File(String),
    /// No usable provider or model; says what to do.
    NoProvider(String),
    Model(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::File(m) | ConfigError::NoProvider(m) | ConfigError::Model(m) => {
                f.write_str(m)
            }
        }
    }
}

/// The loaded configuration with its layers and locations.
#[derive(Debug, Default)]
pub struct Loaded {
    pub config: Config,
    pub layers: Vec<Layer>,
    /// Non-fatal problems (unknown keys), one line each, naming the file.
    pub warnings: Vec<String>,
    pub cwd: PathBuf,
    pub project_root: PathBuf,
    pub data_dir: PathBuf,
    /// The effective configuration as JSON (what `config` was deserialized from).
    pub merged: Value,
    /// Where each leaf of `merged` was set.
    pub origins: Origins,
    /// What the project would run and whether it may (`trust.notice()` says what was skipped).
    pub trust: trust::Review,
    /// The top-level `env` map, expanded, in key order: set before providers are configured.
    pub env_vars: Vec<(String, String)>,
    /// What crushrc scripts printed, one entry per script that printed something.
    pub script_output: Vec<String>,
}

/// Loads every layer for a session started in `cwd`; `runtime` is the command-line layer.
/// The project is trusted for this call when `CRUSH_TRUST_PROJECT` says so (see `load_with`).
pub fn load(
    cwd: &Path,
    data_dir_flag: Option<&Path>,
    runtime: Value,
) -> Result<Loaded, ConfigError> {
    load_with(&layers::LoadOptions {
        cwd: cwd.to_path_buf(),
        data_dir: data_dir_flag.map(Path::to_path_buf),
        runtime,
        trust: false,
    })
}

/// Loads every layer (SPEC §3.1); see `layers.rs`.
pub fn load_with(opts: &layers::LoadOptions) -> Result<Loaded, ConfigError> {
    layers::load(opts)
}

/// A provider ready to call, with its models.
#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub endpoint: Endpoint,
    pub models: Vec<ModelConfig>,
    pub flat_rate: bool,
    pub system_prompt_prefix: Option<String>,
}

/// The model a turn uses.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub provider: Provider,
    pub model: ModelConfig,
    pub selected: SelectedModel,
}

impl ResolvedModel {
    /// USD for one call, or None when the model has no price (unpriced, never $0).
    pub fn cost(&self, u: &crate::llm::Usage) -> Option<f64> {
        if self.provider.flat_rate {
            return None;
        }
        let m = &self.model;
        let (pin, pout) = (m.cost_per_1m_in?, m.cost_per_1m_out?);
        let write = m.cost_per_1m_in_cached.unwrap_or(pin);
        let read = m.cost_per_1m_out_cached.unwrap_or(pin);
        Some(
            (pin * u.input as f64
                + pout * u.output as f64
                + write * u.cache_write as f64
                + read * u.cache_read as f64)
                / 1_000_000.0,
        )
    }
    pub fn price_source(&self) -> &'static str {
        if self.provider.flat_rate {
            "flat_rate"
        } else if self.model.cost_per_1m_in.is_some() && self.model.cost_per_1m_out.is_some() {
            "config"
        } else {
            "unpriced"
        }
    }
    pub fn max_tokens(&self) -> Option<u32> {
        self.selected
            .max_tokens
            .or(Some(self.model.default_max_tokens).filter(|&n| n > 0))
    }
}

fn api_kind(kind: &str) -> Option<ApiKind> {
    Some(match kind {
        "anthropic" => ApiKind::Anthropic,
        "openai" => ApiKind::OpenAi,
        "openai-compat" | "openrouter" | "ollama" | "llamacpp" | "lmstudio" | "vllm"
        | "litellm" | "omlx" | "hyper" => ApiKind::OpenAiCompat,
        _ => return None,
    })
}

fn default_base_url(kind: ApiKind, id: &str) -> Option<&'static str> {
    match (kind, id) {
        (ApiKind::Anthropic, _) => Some("https://api.anthropic.com"),
        (ApiKind::OpenAi, _) => Some("https://api.openai.com/v1"),
        (_, "openrouter") => Some("https://openrouter.ai/api/v1"),
        _ => None,
    }
}

impl Loaded {
    /// The providers that can be called: configured ones whose settings resolve, plus `anthropic`
    /// and `openai` when their API key is in the environment.
    pub fn providers(&self) -> Result<Vec<Provider>, ConfigError> {
        let mut out = Vec::new();
        let mut ids: Vec<&String> = self.config.providers.keys().collect();
        for implied in ["anthropic", "openai"] {
            let var = format!("{}_API_KEY", implied.to_uppercase());
            if !self.config.providers.contains_key(implied)
                && std::env::var(&var).is_ok_and(|v| !v.is_empty())
            {
                out.push(Provider {
                    id: implied.to_string(),
                    endpoint: Endpoint {
                        provider_id: implied.to_string(),
                        kind: api_kind(implied).unwrap_or(ApiKind::OpenAiCompat),
                        base_url: default_base_url(
                            api_kind(implied).unwrap_or(ApiKind::OpenAi),
                            implied,
                        )
                        .unwrap_or_default()
                        .to_string(),
                        api_key: std::env::var(&var).ok(),
                        headers: vec![],
                    },
                    models: vec![],
                    flat_rate: false,
                    system_prompt_prefix: None,
                });
            }
        }
        ids.sort();
        for id in ids {
            let p = &self.config.providers[id];
            if p.disable {
                continue;
            }
            let where_ = self.origin_of(&["providers", id]);
            let kind_name = p.kind.clone().unwrap_or_else(|| match id.as_str() {
                "anthropic" => "anthropic".into(),
                "openai" => "openai".into(),
                _ => "openai-compat".into(),
            });
            let kind = api_kind(&kind_name).ok_or_else(|| {
                ConfigError::File(format!(
                    "{where_}: provider '{id}' has unknown type '{kind_name}' (use anthropic, openai or openai-compat)"
                ))
            })?;
            let base_url = match &p.base_url {
                Some(u) => expand::expand_env(u).map_err(|e| {
                    ConfigError::File(format!("{where_}: providers.{id}.base_url: {e}"))
                })?,
                None => String::new(),
            };
            let base_url = if base_url.is_empty() {
                default_base_url(kind, id)
                    .ok_or_else(|| {
                        ConfigError::File(format!(
                            "{where_}: provider '{id}' needs a base_url (e.g. http://127.0.0.1:11434/v1)"
                        ))
                    })?
                    .to_string()
            } else {
                base_url
            };
            let api_key = match &p.api_key {
                Some(k) => Some(expand::expand_env(k).map_err(|e| {
                    ConfigError::File(format!("{where_}: providers.{id}.api_key: {e}"))
                })?),
                None => match kind {
                    ApiKind::Anthropic => std::env::var("ANTHROPIC_API_KEY").ok(),
                    ApiKind::OpenAi => std::env::var("OPENAI_API_KEY").ok(),
                    ApiKind::OpenAiCompat => None,
                },
            }
            .filter(|k| !k.is_empty());
            // Cloud APIs cannot work without a key: skip the provider, like Crush.
            if api_key.is_none() && kind != ApiKind::OpenAiCompat {
                continue;
            }
            let mut headers = Vec::new();
            for (k, v) in &p.extra_headers {
                let v = expand::expand_env(v).map_err(|e| {
                    ConfigError::File(format!("{where_}: providers.{id}.extra_headers.{k}: {e}"))
                })?;
                if !v.is_empty() {
                    headers.push((k.clone(), v));
                }
            }
            out.push(Provider {
                id: id.clone(),
                endpoint: Endpoint {
                    provider_id: id.clone(),
                    kind,
                    base_url,
                    api_key,
                    headers,
                },
                models: p.models.clone(),
                flat_rate: p.flat_rate,
                system_prompt_prefix: p.system_prompt_prefix.clone(),
            });
        }
        Ok(out)
    }

    /// The file (file:line when known) that last set a key path, for error messages
    /// ("<built-in>" if none).
    pub fn origin_of(&self, path: &[&str]) -> String {
        let prefix: String = path.iter().map(|k| pos::child("", k)).collect();
        let latest = self
            .origins
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| k.len() == prefix.len() || k[prefix.len()..].starts_with('/'))
            .map(|(_, o)| o)
            .max_by_key(|o| o.kind);
        if let Some(o) = latest {
            return o.place();
        }
        for l in self.layers.iter().rev() {
            let mut v = &l.value;
            let mut found = true;
            for k in path {
                match v.get(k) {
                    Some(next) => v = next,
                    None => {
                        found = false;
                        break;
                    }
                }
            }
            if found {
                return match &l.path {
                    Some(p) => p.display().to_string(),
                    None => "the command line".into(),
                };
            }
        }
        "<built-in>".into()
    }

    /// Resolves the large (`small == false`) or small model: the flag, else `models.large/small`,
    /// else the first model of the first provider.
    pub fn resolve_model(
        &self,
        flag: Option<&str>,
        small: bool,
    ) -> Result<ResolvedModel, ConfigError> {
        let providers = self.providers()?;
        if providers.is_empty() {
            return Err(ConfigError::NoProvider(format!(
                "no provider configured: add one to {} (see 'man crush', CONFIGURATION), or set ANTHROPIC_API_KEY or OPENAI_API_KEY",
                paths::global_config_dir().join("crush.json").display()
            )));
        }
        let configured = if small {
            self.config
                .models
                .small
                .clone()
                .or_else(|| self.config.models.large.clone())
        } else {
            self.config.models.large.clone()
        };
        let (provider_id, model_id, selected) = match (flag, configured) {
            (Some(f), _) => {
                let (p, m) = match f.split_once('/') {
                    Some((p, m)) if providers.iter().any(|x| x.id == p) => {
                        (Some(p.to_string()), m.to_string())
                    }
                    _ => (None, f.to_string()),
                };
                (p, m, SelectedModel::default())
            }
            (None, Some(sel)) => (
                Some(sel.provider.clone()).filter(|p| !p.is_empty()),
                sel.model.clone(),
                sel,
            ),
            (None, None) => {
                let p = providers.iter().find(|p| !p.models.is_empty()).ok_or_else(|| {
                    ConfigError::Model(
                        "no model selected: set models.large in crush.json or pass -m PROVIDER/MODEL"
                            .into(),
                    )
                })?;
                (
                    Some(p.id.clone()),
                    p.models[0].id.clone(),
                    SelectedModel::default(),
                )
            }
        };
        let which = if small { "small" } else { "large" };
        let pick = |p: &Provider| -> ResolvedModel {
            let model = p
                .models
                .iter()
                .find(|m| m.id.eq_ignore_ascii_case(&model_id))
                .cloned()
                .unwrap_or_else(|| ModelConfig {
                    id: model_id.clone(),
                    ..Default::default()
                });
            ResolvedModel {
                provider: p.clone(),
                model,
                selected: selected.clone(),
            }
        };
        match provider_id {
            Some(pid) => {
                let p = providers.iter().find(|p| p.id == pid).ok_or_else(|| {
                    ConfigError::Model(format!(
                        "{which} model '{pid}/{model_id}': provider '{pid}' is not configured or has no API key (configured: {})",
                        providers.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(", ")
                    ))
                })?;
                Ok(pick(p))
            }
            None => {
                let matches: Vec<&Provider> = providers
                    .iter()
                    .filter(|p| {
                        p.models
                            .iter()
                            .any(|m| m.id.eq_ignore_ascii_case(&model_id))
                    })
                    .collect();
                match matches.as_slice() {
                    [p] => Ok(pick(p)),
                    [] => Err(ConfigError::Model(format!(
                        "{which} model '{model_id}' not found; use PROVIDER/MODEL (providers: {})",
                        providers
                            .iter()
                            .map(|p| p.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))),
                    many => Err(ConfigError::Model(format!(
                        "{which} model '{model_id}' is offered by several providers: {}; use PROVIDER/MODEL",
                        many.iter()
                            .map(|p| format!("{}/{model_id}", p.id))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loaded(config: Value) -> Loaded {
        let config_v: Config = serde_json::from_value(config.clone()).unwrap();
        Loaded {
            config: config_v,
            layers: vec![Layer {
                kind: LayerKind::GlobalJson,
                path: Some("/g/crush.json".into()),
                value: config,
            }],
            warnings: vec![],
            cwd: "/p".into(),
            project_root: "/p".into(),
            data_dir: "/p/.crush".into(),
            ..Default::default()
        }
    }

    fn two_providers() -> Value {
        json!({"providers": {
            "a": {"type": "openai-compat", "base_url": "http://h/v1", "models": [{"id": "m1", "cost_per_1m_in": 1.0, "cost_per_1m_out": 2.0}, {"id": "shared"}]},
            "b": {"type": "openai-compat", "base_url": "http://h2/v1", "models": [{"id": "m2"}, {"id": "shared"}]}
        }})
    }

    #[test]
    fn model_resolution() {
        let l = loaded(two_providers());
        assert_eq!(l.resolve_model(Some("m2"), false).unwrap().provider.id, "b");
        assert_eq!(
            l.resolve_model(Some("b/shared"), false)
                .unwrap()
                .provider
                .id,
            "b"
        );
        let e = l
            .resolve_model(Some("shared"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a/shared") && e.contains("b/shared"), "{e}");
        assert!(l.resolve_model(Some("zzz"), false).is_err());
        // Default: first provider with models.
        assert_eq!(l.resolve_model(None, false).unwrap().model.id, "m1");
        // Unlisted model under an explicit provider is allowed (unpriced).
        let r = l.resolve_model(Some("a/new-model"), false).unwrap();
        assert_eq!(r.price_source(), "unpriced");
        assert_eq!(r.cost(&Default::default()), None);
    }

    #[test]
    fn cost_uses_catwalk_cache_semantics() {
        let l = loaded(
            json!({"providers": {"a": {"base_url": "http://h", "models": [{"id": "m",
            "cost_per_1m_in": 3.0, "cost_per_1m_out": 15.0, "cost_per_1m_in_cached": 3.75, "cost_per_1m_out_cached": 0.3}]}}}),
        );
        let r = l.resolve_model(None, false).unwrap();
        let u = crate::llm::Usage {
            input: 1_000_000,
            output: 1_000_000,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
        };
        let c = r.cost(&u).unwrap();
        assert!((c - (3.0 + 15.0 + 3.75 + 0.3)).abs() < 1e-9, "{c}");
    }

    #[test]
    fn env_expansion_and_missing_base_url() {
        // SAFETY: tests in this module do not read this variable concurrently elsewhere.
        unsafe { std::env::set_var("CRUSH_TEST_EXPAND_KEY", "k123") };
        let l = loaded(
            json!({"providers": {"x": {"base_url": "http://h/v1", "api_key": "${CRUSH_TEST_EXPAND_KEY}"}}}),
        );
        let p = l.providers().unwrap();
        assert_eq!(p[0].endpoint.api_key.as_deref(), Some("k123"));
        let l = loaded(json!({"providers": {"x": {"type": "openai-compat"}}}));
        let e = l.providers().unwrap_err().to_string();
        assert!(
            e.starts_with("/g/crush.json:") && e.contains("base_url"),
            "{e}"
        );
    }
}
