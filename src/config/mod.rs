//! Configuration: layers of JSON merged into one `Config`, then resolved into providers and
//! models the agent can use.
//!
//! Layers are kept as a list (`Layer`), and every leaf of the merged value remembers the layer
//! and file:line that set it (`Loaded.origins`), so `config show --origin` and error messages can
//! name it. The ten layers, trust, crushrc, state and session-only changes live in the
//! submodules; `load` is the entry point.

pub(crate) mod claude;
pub(crate) mod claude_rules;
pub(crate) mod commands;
pub(crate) mod crushrc;
pub(crate) mod discover;
pub(crate) mod dotenv;
mod error;
pub(crate) mod expand;
pub(crate) mod hook_event;
pub(crate) mod json;
pub(crate) mod layers;
pub(crate) mod local;
pub(crate) mod lsp;
pub(crate) mod mcp;
pub(crate) mod options;
pub(crate) mod pos;
pub(crate) mod providers;
pub(crate) mod sandbox;
pub(crate) mod schema_keys;
pub(crate) mod session;
pub(crate) mod state;
pub(crate) mod trust;

pub(crate) use crate::sha256;
pub(crate) use error::{ConfigError, SpecError};

pub(crate) use crate::catalog::Model;
pub(crate) use providers::{Provider, ProviderTable, ResolvedModel};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct Config {
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
pub(crate) struct Models {
    pub large: Option<SelectedModel>,
    pub small: Option<SelectedModel>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq)]
#[serde(default)]
pub(crate) struct SelectedModel {
    pub model: String,
    pub provider: String,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub reasoning_effort: Option<String>,
    /// Extended thinking for models that reason without levels (Anthropic's, Z.ai's...).
    pub think: bool,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub provider_options: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct ProviderConfig {
    pub id: Option<String>,
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Go Crush's OAuth token (crush(1) LOGIN): used read-only when signed in nowhere else.
    pub oauth: Option<Value>,
    pub disable: bool,
    pub extra_headers: BTreeMap<String, String>,
    pub system_prompt_prefix: Option<String>,
    pub flat_rate: bool,
    pub models: Vec<Model>,
    /// Merged into every request body (Go Crush: OpenAI-compatible providers; here every kind).
    pub extra_body: serde_json::Map<String, Value>,
    /// Options of the provider's API for every model (the model's own go over them).
    pub provider_options: serde_json::Map<String, Value>,
    /// List the models from the server (`GET {base_url}/models`): by default when `models` is
    /// empty; true merges them with `models` (yours first).
    pub discover_models: Option<bool>,
    /// openai, azure and openai-compat: send the models through the Responses API (true), or
    /// never (false); by default OpenAI's own and Azure's endpoints use it for the models that
    /// have it (ours).
    pub use_responses_api: Option<bool>,
    /// google-vertex: the Google Cloud project and location (else VERTEXAI_PROJECT,
    /// VERTEXAI_LOCATION or Google's variables) (ours).
    pub project: Option<String>,
    pub location: Option<String>,
    /// azure: the api-version (else AZURE_OPENAI_API_VERSION) (ours).
    pub api_version: Option<String>,
    /// Bedrock: a shell command run once when AWS refuses the credentials or they expired
    /// (e.g. `aws sso login`), before the call is tried again.
    pub aws_auth_refresh: Option<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct Options {
    pub context_paths: Vec<String>,
    pub global_context_paths: Vec<String>,
    pub data_directory: Option<String>,
    pub debug: bool,
    pub disabled_tools: Vec<String>,
    pub progress: Option<bool>,
    pub disable_provider_auto_update: bool,
    pub disable_auto_summarize: bool,
    /// Where each plan of plan mode is also written as Markdown (crush(1) PLAN MODE).
    pub plans_directory: Option<String>,
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
    /// Times in a row a Stop hook may make the agent go on (ours; default 20).
    pub max_stop_blocks: Option<u64>,
    /// Lines of a tool result previewed under its tool line (ours; default 5).
    pub tool_preview_lines: Option<u64>,
    /// USD one run may spend (ours; crush(1) USAGE AND COST, Budget).
    pub max_cost: Option<f64>,
    /// USD a session may spend across runs and resumes (ours; crush(1) USAGE AND COST, Budget).
    pub max_session_cost: Option<f64>,
    /// Seconds of silence before a model stream is abandoned (ours; default 120).
    pub request_idle_timeout: Option<u64>,
    /// Variables the bash tool gets although their names look secret (ours; names or globs).
    pub shell_env_allow: Vec<String>,
    /// Read the hooks of Claude Code's settings files and plugins (ours; default true).
    pub claude_code_hooks: Option<bool>,
    /// Claude Code plugin folders whose `hooks/hooks.json` runs (ours).
    pub claude_plugins: Vec<String>,
    /// The OS sandbox of the commands the model runs (ours; crush(1) SECURITY, sandbox).
    pub sandbox: SandboxOptions,
    /// `auto`: bash and in-project writes run without a question, sandboxed (ours).
    pub approval: Option<String>,
    /// Replaces crush's default system prompt (ours; crush(1) CONFIGURATION, System prompt).
    pub system_prompt: Option<String>,
    /// A file whose text replaces the default system prompt, relative to the file naming it.
    pub system_prompt_file: Option<String>,
    /// Append the environment, context files and skills to the prompt (ours; default true).
    pub system_prompt_environment: Option<bool>,
    /// When side requests (the session title) go out: `after` the turn, or `concurrent`; by
    /// default after the turn for a local server, else after the turn's first model call
    /// (ours; crush(1) CONFIGURATION, side_requests).
    pub side_requests: Option<String>,
    /// With no provider configured, use a local model server found on this machine (ours).
    pub auto_local: bool,
    /// Kept raw: Crush's TUI settings and commit attribution.
    pub tui: Value,
    pub attribution: Value,
}

/// `options.sandbox`: checked and resolved by `crate::config::sandbox`.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct SandboxOptions {
    /// off, read-only or workspace-write (default off).
    pub mode: Option<String>,
    /// The network is reachable inside the sandbox (default false).
    pub network: Option<bool>,
    /// Extra writable directories (absolute, existing; the user's own configuration only).
    pub writable_roots: Vec<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct Permissions {
    pub allowed_tools: Vec<String>,
}

/// Where a layer came from, lowest priority first (crush(1) CONFIGURATION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) enum LayerKind {
    #[default]
    Defaults,
    /// `/etc/crush/crush.json`: numbered with the defaults, below everything of the user's.
    System,
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
    /// The layer's number in crush(1) CONFIGURATION (1..=10).
    pub(crate) fn number(self) -> u8 {
        match self {
            LayerKind::Defaults | LayerKind::System => 1,
            k => k as u8,
        }
    }
    /// A short name for users ("project .crushrc").
    pub(crate) fn label(self) -> &'static str {
        match self {
            LayerKind::Defaults => "built-in default",
            LayerKind::System => "system crush.json",
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
}

/// One layer: for a JSON file its contents; for a crushrc what its commands add on their own
/// (removals such as `hook remove` only show in the merged configuration); for the runtime layer
/// the flags, `CRUSH_*` overrides and session-only commands.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub kind: LayerKind,
    pub path: Option<PathBuf>,
    pub value: Value,
}

/// Where one value of the effective configuration was set.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Origin {
    pub kind: LayerKind,
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    /// For the runtime layer: which flag, variable or session command.
    pub detail: Option<String>,
}

impl Origin {
    /// `file:line`, `file`, or what set it (`environment CRUSH_X`, `built-in default`).
    pub(crate) fn place(&self) -> String {
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
pub(crate) type Origins = BTreeMap<String, Origin>;

/// The loaded configuration with its layers and locations.
#[derive(Debug, Default, Clone)]
pub(crate) struct Loaded {
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
    /// The check before each run of the project's hooks, servers and crushrc files that their
    /// files are as trusted (crush(1) SECURITY).
    pub guard: crate::guard::Guard,
    /// The variables of the working directory's `.env` that the environment does not set (once
    /// the project is trusted), then the top-level `env` map, expanded in key order: what `$VAR`
    /// lookups for the configuration's values see first and what every child of the session
    /// gets on top of crush's environment. Never put into the process environment (see
    /// `env::Overlay`).
    pub env: crate::env::Overlay,
    /// What crushrc scripts printed, one entry per script that printed something.
    pub script_output: Vec<String>,
    /// The hooks of Claude Code's settings files and plugins (crush(1) HOOKS), lowest priority
    /// first; empty when `options.claude_code_hooks` is false.
    pub claude_hooks: Vec<claude::ClaudeHooks>,
    /// The permission rules of those files (crush(1) SECURITY).
    pub claude_rules: claude_rules::ClaudeRules,
    /// The provider catalog, decoded when first needed.
    pub catalog: crate::catalog::Lazy,
}

/// Loads every layer (crush(1) CONFIGURATION); see `layers.rs`.
pub(crate) fn load_with(opts: &layers::LoadOptions) -> Result<Loaded, ConfigError> {
    layers::load(opts)
}

impl Loaded {
    /// Whether the value at `ptr` (a JSON pointer) comes from the user: built-in defaults, the
    /// global state, the user's global files, flags, the environment or the user's own session
    /// commands — not a project's files, the workspace state in the project's data directory or
    /// the model's session commands (crush(1) SECURITY).
    pub(crate) fn set_by_user(&self, ptr: &str) -> bool {
        let Some(o) = self.origins.get(ptr) else {
            return false;
        };
        match o.kind {
            LayerKind::Defaults
            | LayerKind::System
            | LayerKind::GlobalState
            | LayerKind::GlobalJson
            | LayerKind::GlobalCrushrc => true,
            LayerKind::Runtime => !o
                .detail
                .as_deref()
                .is_some_and(|d| d.starts_with(session::BASH_TOOL_ORIGIN)),
            LayerKind::WorkspaceState
            | LayerKind::ProjectJson
            | LayerKind::ProjectCrushrc
            | LayerKind::ProjectDotJson
            | LayerKind::ProjectDotCrushrc => false,
        }
    }

    /// The file (file:line when known) that last set a key path, for error messages
    /// ("<built-in>" if none).
    pub(crate) fn origin_of(&self, path: &[&str]) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ApiKind;
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
        assert_eq!(
            l.resolve_model_with(&[], Some("m2"), false)
                .unwrap()
                .provider
                .id,
            "b"
        );
        assert_eq!(
            l.resolve_model_with(&[], Some("b/shared"), false)
                .unwrap()
                .provider
                .id,
            "b"
        );
        let e = l
            .resolve_model_with(&[], Some("shared"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a/shared") && e.contains("b/shared"), "{e}");
        assert!(l.resolve_model_with(&[], Some("zzz"), false).is_err());
        // Default: first provider with models.
        assert_eq!(
            l.resolve_model_with(&[], None, false).unwrap().model.id,
            "m1"
        );
        // Unlisted model under an explicit provider is allowed (unpriced).
        let r = l
            .resolve_model_with(&[], Some("a/new-model"), false)
            .unwrap();
        assert_eq!(r.price_source().as_str(), "unpriced");
        assert_eq!(r.cost(&Default::default()), None);
    }

    #[test]
    fn catalog_headers_from_the_environment_stay_home() {
        // SAFETY: tests in this module do not read this variable concurrently elsewhere.
        unsafe { std::env::set_var("CRUSH_TEST_HDR_SECRET", "s3") };
        let cat = crate::catalog::schema::parse(
            br#"[{"id":"c","type":"openai-compat","api_key":"k","api_endpoint":"http://home/v1",
                 "default_headers":{"X-Key":"$CRUSH_TEST_HDR_SECRET","X-Title":"Crush"},
                 "models":[{"id":"m"}]}]"#,
        )
        .unwrap();
        let headers = |user: Value| {
            let mut h = loaded(json!({"providers": {"c": user}}))
                .providers_with(&cat)
                .ready[0]
                .endpoint
                .headers
                .clone();
            h.sort();
            h
        };
        assert_eq!(
            headers(json!({}))[0],
            ("X-Key".to_string(), "s3".to_string())
        );
        assert_eq!(
            headers(json!({"base_url": "http://elsewhere/v1", "api_key": "mine"})),
            [("X-Title".to_string(), "Crush".to_string())]
        );
    }

    #[test]
    fn cost_uses_catwalk_cache_semantics() {
        let l = loaded(
            json!({"providers": {"a": {"base_url": "http://h", "models": [{"id": "m",
            "cost_per_1m_in": 3.0, "cost_per_1m_out": 15.0, "cost_per_1m_in_cached": 3.75, "cost_per_1m_out_cached": 0.3}]}}}),
        );
        let r = l.resolve_model_with(&[], None, false).unwrap();
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
        let p = l.providers_with(&[]).ready;
        assert_eq!(p[0].endpoint.api_key.as_deref(), Some("k123"));
        // A bad value: the provider cannot be used, and the reason names the file and field,
        // never the value.
        let l = loaded(
            json!({"providers": {"x": {"base_url": "http://h/v1", "api_key": "sk-secretkey$"}},
                   "models": {"large": {"provider": "x", "model": "m"}}}),
        );
        let t = l.providers_with(&[]);
        assert!(t.ready.is_empty());
        let u = &t.unusable[0];
        assert!(u.warn);
        assert!(
            u.reason.starts_with("/g/crush.json:") && u.reason.contains("providers.x.api_key"),
            "{}",
            u.reason
        );
        assert!(!u.reason.contains("secretkey"), "{}", u.reason);
        // A command that needs it says why.
        let e = l
            .resolve_model_with(&[], None, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("x: /g/crush.json"), "{e}");
        let l = loaded(
            json!({"providers": {"x": {"base_url": "http://h/v1", "api_key": "sk-secretkey$"},
                                 "y": {"base_url": "http://h/v1", "models": [{"id": "m"}]}}}),
        );
        let e = l
            .resolve_model_with(&[], Some("x/m"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("provider 'x' cannot be used: /g/crush.json"),
            "{e}"
        );
        let l = loaded(json!({"providers": {"x": {"type": "openai-compat"}}}));
        let u = &l.providers_with(&[]).unusable[0];
        assert!(
            u.reason.starts_with("/g/crush.json:") && u.reason.contains("base_url"),
            "{}",
            u.reason
        );
        // Types: unknown; the user's own openai provider without a key at OpenAI's own URL.
        let l = loaded(json!({"providers": {
            "g": {"type": "gemini", "base_url": "http://h"},
            "o": {"type": "openai"},
            "local": {"type": "openai", "base_url": "http://127.0.0.1:1/v1"}
        }}));
        let t = l.providers_with(&[]);
        let why = |id: &str| t.why_unusable(id).unwrap_or("").to_string();
        assert!(why("g").contains("unknown type 'gemini'"), "{}", why("g"));
        assert_eq!(
            why("o"),
            "no API key: set OPENAI_API_KEY or providers.o.api_key"
        );
        assert_eq!(
            t.ready.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["local"]
        );
    }

    #[test]
    fn google_vertex_and_azure_providers() {
        // SAFETY: these variables are read by this test only.
        unsafe {
            std::env::set_var("CRUSH_TEST_GEM_KEY", "g-key");
            std::env::set_var("CRUSH_TEST_AZ_ENDPOINT", "https://res.openai.azure.com");
        }
        let cat = crate::catalog::schema::parse(
            br#"[{"id":"gemini","type":"google","api_key":"$CRUSH_TEST_GEM_KEY","api_endpoint":"$CRUSH_TEST_UNSET_GEM_ENDPOINT","models":[{"id":"gemini-3-pro"}]},
                 {"id":"vertexai","type":"google-vertex","models":[{"id":"gemini-3-pro"}]},
                 {"id":"azure","type":"azure","api_key":"$CRUSH_TEST_UNSET_AZ_KEY","api_endpoint":"$CRUSH_TEST_AZ_ENDPOINT","models":[{"id":"gpt-5"}]}]"#,
        )
        .unwrap();
        // Gemini: the key from the catalog's variable, Google's URL by default.
        let l = loaded(json!({}));
        let t = l.providers_with(&cat);
        let g = t.ready.iter().find(|p| p.id == "gemini").unwrap();
        assert_eq!(g.endpoint.kind, ApiKind::Gemini);
        assert_eq!(g.endpoint.base_url, crate::llm::gemini::DEFAULT_BASE_URL);
        assert_eq!(g.endpoint.api_key.as_deref(), Some("g-key"));
        assert_eq!(g.key_var.as_deref(), Some("CRUSH_TEST_GEM_KEY"));
        // Vertex needs a project and location; Azure its key.
        assert!(
            !t.ready
                .iter()
                .any(|p| p.id == "vertexai" || p.id == "azure")
        );
        let l = loaded(json!({"providers": {
            "vertexai": {"project": "p1", "location": "us-east5"},
            "azure": {"api_key": "az", "api_version": "2024-10-21"},
            "mine": {"type": "google-vertex", "project": "p1", "location": "global",
                     "base_url": "http://127.0.0.1:9/v1/projects/p1/locations/global"}
        }}));
        let t = l.providers_with(&cat);
        let v = t.ready.iter().find(|p| p.id == "vertexai").unwrap();
        assert_eq!(
            v.endpoint.base_url,
            "https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5"
        );
        assert!(v.endpoint.ambient_auth && v.endpoint.api_key.is_none());
        // Sent elsewhere, the environment's token stays home.
        let mine = t.ready.iter().find(|p| p.id == "mine").unwrap();
        assert!(!mine.endpoint.ambient_auth);
        let a = t.ready.iter().find(|p| p.id == "azure").unwrap();
        assert_eq!(a.endpoint.kind, ApiKind::Azure);
        // A dated api-version is for deployment URLs, not the resource's v1 API.
        assert_eq!(a.endpoint.base_url, "https://res.openai.azure.com");
        let l = loaded(json!({"providers": {"azure": {"api_key": "az",
            "base_url": "https://res.openai.azure.com/openai/deployments/d",
            "api_version": "2024-10-21"}}}));
        let t = l.providers_with(&cat);
        let a = t.ready.iter().find(|p| p.id == "azure").unwrap();
        assert_eq!(
            a.endpoint.base_url,
            "https://res.openai.azure.com/openai/deployments/d?api-version=2024-10-21"
        );
        let l = loaded(json!({"providers": {"vertexai": {"location": "global"}}}));
        if std::env::var_os("VERTEXAI_PROJECT").is_none()
            && std::env::var_os("GOOGLE_CLOUD_PROJECT").is_none()
            && std::env::var_os("CLOUDSDK_CORE_PROJECT").is_none()
        {
            let why = l
                .providers_with(&cat)
                .why_unusable("vertexai")
                .unwrap_or("")
                .to_string();
            assert!(why.contains("VERTEXAI_PROJECT"), "{why}");
        }
    }

    #[test]
    fn session_commands_change_the_model_options() {
        let cfg = json!({"providers": {"a": {"type": "openai-compat",
            "base_url": "http://h/v1", "models": [{"id": "m"}]}},
            "models": {"large": {"provider": "a", "model": "m"}}});
        let mut l = loaded(cfg.clone());
        l.merged = cfg;
        let before = l
            .resolve_model_with(&[], None, false)
            .unwrap()
            .call_options();
        assert_eq!(before.top_k, None);
        l.apply_session_line("model large a/m --reasoning-effort high --top-k 7 --think")
            .unwrap();
        let r = l.resolve_model_with(&[], None, false).unwrap();
        assert!(r.selected.think);
        let o = r.call_options();
        assert_eq!(o.top_k, Some(7));
        assert_eq!(o.provider_options["reasoning_effort"], "high");
    }

    fn test_catalog() -> Vec<crate::catalog::Provider> {
        crate::catalog::schema::parse(
            br#"[{"id":"cat","name":"Cat","type":"openai-compat","api_key":"$CRUSH_TEST_UNSET_KEY_XYZ",
                 "api_endpoint":"http://cat/v1","default_large_model_id":"big","default_small_model_id":"little",
                 "default_headers":{"X-Title":"Crush","HTTP-Referer":"https://charm.land"},
                 "models":[{"id":"big","name":"Big","cost_per_1m_in":2,"cost_per_1m_out":8,"cost_per_1m_in_cached":2.5,"cost_per_1m_out_cached":0.2,"context_window":1000},
                           {"id":"little","cost_per_1m_in":0,"cost_per_1m_out":0},
                           {"id":"shared"}]},
                {"id":"cloud","type":"bedrock","api_key":"k","models":[{"id":"x"}]}]"#,
        )
        .unwrap()
    }

    #[test]
    fn catalog_providers_need_their_key_and_merge_with_the_user() {
        let cat = test_catalog();
        // No key: the catalog provider is skipped, and so is an unsupported type.
        let l = loaded(two_providers());
        let ids: Vec<String> = l
            .providers_with(&cat)
            .ready
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
        // A user entry with the catalog id and a key: catalog first, user overrides merged in.
        let l = loaded(json!({"providers": {
            "cat": {"api_key": "k1", "extra_headers": {"x-title": "Mine"}, "models": [{"id": "own"}, {"id": "big", "context_window": 5}]},
            "z": {"base_url": "http://z/v1", "models": [{"id": "zm"}]}
        }}));
        let ps = l.providers_with(&cat).ready;
        assert_eq!(
            ps.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["cat", "z"]
        );
        let p = &ps[0];
        assert_eq!(p.endpoint.base_url, "http://cat/v1");
        assert_eq!(p.endpoint.api_key.as_deref(), Some("k1"));
        let mut h = p.endpoint.headers.clone();
        h.sort();
        assert_eq!(
            h,
            [
                ("HTTP-Referer".to_string(), "https://charm.land".to_string()),
                ("x-title".to_string(), "Mine".to_string())
            ]
        );
        let ids: Vec<&str> = p.models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["own", "big", "little", "shared"]);
        // The user's "big" keeps its context window and takes the catalog's prices.
        assert_eq!(p.models[1].context_window, 5);
        assert_eq!(p.models[1].cost_per_1m_in, Some(2.0));
        assert_eq!(
            p.models[1].price_source,
            Some(crate::store::PriceSource::Catalog)
        );

        // Defaults: the first configured provider's catalog defaults.
        let large = l.resolve_model_with(&cat, None, false).unwrap();
        assert_eq!(
            (large.provider.id.as_str(), large.model.id.as_str()),
            ("cat", "big")
        );
        assert_eq!(large.price_source().as_str(), "catalog");
        let u = crate::llm::Usage {
            input: 1_000_000,
            output: 0,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
        };
        assert!((large.cost(&u).unwrap() - (2.0 + 0.2 + 2.5)).abs() < 1e-9);
        let small = l.resolve_model_with(&cat, None, true).unwrap();
        assert_eq!(small.model.id, "little");
        // Catwalk's 0/0 is "unknown": unpriced, never $0.
        assert_eq!(small.price_source().as_str(), "unpriced");
        assert_eq!(small.cost(&u), None);
        // "shared" only in "cat" among configured providers; "zm" only in "z".
        assert_eq!(
            l.resolve_model_with(&cat, Some("zm"), false)
                .unwrap()
                .provider
                .id,
            "z"
        );
        // A catalog provider that is not configured is named with the variable to set.
        let l2 = loaded(two_providers());
        let e = l2
            .resolve_model_with(&cat, Some("cat/big"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("CRUSH_TEST_UNSET_KEY_XYZ"), "{e}");
        let e = l2
            .resolve_model_with(&cat, Some("big"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not configured offer it: cat"), "{e}");
    }

    #[test]
    fn catalog_values_never_run_commands() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("MARKER");
        let m = marker.display();
        let text = format!(
            r#"[{{"id":"evil","name":"Evil","type":"openai-compat","api_key":"$(touch {m}.key)",
                 "api_endpoint":"http://h/v1","default_headers":{{"X":"$(touch {m}.hdr)"}},
                 "models":[{{"id":"e"}}]}},
                {{"id":"evil2","name":"Evil2","type":"openai-compat","api_key":"k",
                 "api_endpoint":"http://h/$(touch {m}.url)","models":[{{"id":"e2"}}]}}]"#
        );
        let cat = crate::catalog::schema::parse(text.as_bytes()).unwrap();
        // Not configured: the key cannot expand, so "evil" is skipped; "evil2" has no endpoint.
        let ids: Vec<String> = loaded(two_providers())
            .providers_with(&cat)
            .ready
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
        // Configured with the user's own key: the headers still run nothing.
        let l = loaded(json!({"providers": {"evil": {"api_key": "k"}, "evil2": {"api_key": "k"}}}));
        let ps = l.providers_with(&cat).ready;
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].endpoint.api_key.as_deref(), Some("k"));
        assert!(
            ps[0].endpoint.headers.is_empty(),
            "{:?}",
            ps[0].endpoint.headers
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn the_small_model_follows_the_large_models_provider() {
        let cat = test_catalog();
        let l = loaded(json!({
            "providers": {"cat": {"api_key": "k"}, "a": {"base_url": "http://h/v1", "models": [{"id": "m1"}]}},
            "models": {"large": {"provider": "a", "model": "m1"}}
        }));
        assert_eq!(
            l.resolve_model_with(&cat, None, true).unwrap().model.id,
            "m1"
        );
        let l = loaded(json!({
            "providers": {"cat": {"api_key": "k"}},
            "models": {"large": {"provider": "cat", "model": "shared"}}
        }));
        assert_eq!(
            l.resolve_model_with(&cat, None, true).unwrap().model.id,
            "little"
        );
    }
}
