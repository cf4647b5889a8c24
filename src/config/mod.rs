//! Configuration: layers of JSON merged into one `Config`, then resolved into providers and
//! models the agent can use.
//!
//! Layers are kept as a list (`Layer`), and every leaf of the merged value remembers the layer
//! and file:line that set it (`Loaded.origins`), so `config show --origin` and error messages can
//! name it. The ten layers, trust, crushrc, state and session-only changes live in the
//! submodules; `load` is the entry point.

pub mod claude;
pub mod claude_rules;
pub mod commands;
pub mod crushrc;
pub mod discover;
pub mod dotenv;
mod error;
pub mod expand;
pub mod json;
pub mod layers;
pub mod local;
pub mod lsp;
pub mod mcp;
pub mod options;
pub mod pos;
pub mod sandbox;
pub mod schema_keys;
pub mod session;
pub mod state;
pub mod trust;

pub(crate) use crate::sha256;
pub use error::{ConfigError, SpecError};

pub use crate::catalog::Model;
use crate::llm::{ApiKind, Endpoint};
use crate::paths;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

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
pub struct ProviderConfig {
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
pub struct Options {
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
pub struct SandboxOptions {
    /// off, read-only or workspace-write (default off).
    pub mode: Option<String>,
    /// The network is reachable inside the sandbox (default false).
    pub network: Option<bool>,
    /// Extra writable directories (absolute, existing; the user's own configuration only).
    pub writable_roots: Vec<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub struct Permissions {
    pub allowed_tools: Vec<String>,
}

/// Where a layer came from, lowest priority first (crush(1) CONFIGURATION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LayerKind {
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
    pub fn number(self) -> u8 {
        match self {
            LayerKind::Defaults | LayerKind::System => 1,
            k => k as u8,
        }
    }
    /// A short name for users ("project .crushrc").
    pub fn label(self) -> &'static str {
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

/// The loaded configuration with its layers and locations.
#[derive(Debug, Default, Clone)]
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
    /// The check before each run of the project's hooks, servers and crushrc files that their
    /// files are as trusted (crush(1) SECURITY).
    pub guard: crate::guard::Guard,
    /// The variables of the working directory's `.env` that the environment does not set, once
    /// the project is trusted: set before `env_vars`.
    pub dotenv_vars: Vec<(String, String)>,
    /// The top-level `env` map, expanded, in key order: set before providers are configured.
    pub env_vars: Vec<(String, String)>,
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
pub fn load_with(opts: &layers::LoadOptions) -> Result<Loaded, ConfigError> {
    layers::load(opts)
}

/// A provider ready to call, with its models.
#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub endpoint: Endpoint,
    pub models: Vec<Model>,
    pub flat_rate: bool,
    pub system_prompt_prefix: Option<String>,
    /// The catalog's default large and small model ids (catalog providers only).
    pub default_large: Option<String>,
    pub default_small: Option<String>,
    /// The provider's type as configured (`anthropic`, `openrouter`, `google-vertex`...): the
    /// model options depend on it.
    pub kind_name: String,
    /// `provider_options` and `extra_body` of the configuration.
    pub provider_options: serde_json::Map<String, Value>,
    pub extra_body: serde_json::Map<String, Value>,
    /// Its models are to be listed by the server (`discover_models`), when first needed.
    pub discover: bool,
    /// The variable its key comes from, for messages (`OPENAI_API_KEY`).
    pub key_var: Option<String>,
}

impl Provider {
    /// The catalog's default large or small model, else the first model.
    pub fn default_model(&self, small: bool) -> Option<&Model> {
        let want = if small {
            &self.default_small
        } else {
            &self.default_large
        };
        want.as_deref()
            .and_then(|id| self.models.iter().find(|m| m.id == id))
            .or(self.models.first())
    }
}

/// The model a turn uses.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub provider: Provider,
    pub model: Model,
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
    /// `catalog` (Catwalk's prices), `config` (the user's), `flat_rate` or `unpriced`.
    pub fn price_source(&self) -> &'static str {
        if self.provider.flat_rate {
            "flat_rate"
        } else if self.model.cost_per_1m_in.is_some() && self.model.cost_per_1m_out.is_some() {
            self.model.price_source.unwrap_or("config")
        } else {
            "unpriced"
        }
    }
    /// Whether a call's cost is known in dollars (neither unpriced nor flat-rate).
    pub fn is_priced(&self) -> bool {
        !matches!(self.price_source(), "unpriced" | "flat_rate")
    }
    pub fn max_tokens(&self) -> Option<u32> {
        self.selected
            .max_tokens
            .or(Some(self.model.default_max_tokens).filter(|&n| n > 0))
    }
}

impl ResolvedModel {
    /// `e` with what it means for this model: a refused key names the provider and where the
    /// key came from; a model the provider does not know names the model sent and the closest
    /// ids the provider lists.
    pub fn explain(&self, e: crate::llm::LlmError) -> crate::llm::LlmError {
        let crate::llm::LlmError::Http {
            status,
            mut message,
            request_id,
        } = e
        else {
            return e;
        };
        let p = &self.provider;
        match status {
            401 | 403 => {
                let what = if p.endpoint.kind == ApiKind::Vertex {
                    "access token"
                } else {
                    "key"
                };
                let from = match &p.key_var {
                    Some(v) if p.endpoint.api_key.is_some() => format!(" (from {v})"),
                    _ if p.endpoint.api_key.is_some() => {
                        format!(" (providers.{}.api_key)", p.id)
                    }
                    _ => " (none was sent)".to_string(),
                };
                let verb = if status == 401 {
                    "refused"
                } else {
                    "not allowed this"
                };
                message = format!("provider '{}' {verb} the {what}{from}: {message}", p.id);
            }
            // Bedrock refuses an unknown model id with 400 as well, in its own words.
            404 | 400 if status == 404 || message.starts_with(crate::llm::bedrock::NO_MODEL) => {
                let close = close_matches(&self.model.id, p.models.iter().map(|m| m.id.as_str()));
                let hint = if close.is_empty() {
                    format!("'crush models {}' lists its models", p.id)
                } else {
                    format!("close matches: {}", close.join(", "))
                };
                message = if status == 404 {
                    format!(
                        "{message} (model '{}' sent to provider '{}'; {hint})",
                        self.model.id, p.id
                    )
                } else {
                    format!("{message} ({hint})")
                };
            }
            _ => {}
        }
        crate::llm::LlmError::Http {
            status,
            message,
            request_id,
        }
    }
}

/// Up to three of `ids` closest to `want` (case aside): those containing it or contained in it,
/// then those a few edits away.
fn close_matches<'a>(want: &str, ids: impl Iterator<Item = &'a str>) -> Vec<String> {
    let w = want.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = ids
        .filter(|id| !id.eq_ignore_ascii_case(want))
        .filter_map(|id| {
            let l = id.to_ascii_lowercase();
            let d = if l.contains(&w) || w.contains(&l) {
                0
            } else {
                edit_distance(&w, &l)
            };
            (d <= (w.len() / 3).max(2)).then_some((d, id))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, id)| id.to_string())
        .collect()
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn api_kind(kind: &str) -> Option<ApiKind> {
    Some(match kind {
        "anthropic" => ApiKind::Anthropic,
        "openai" => ApiKind::OpenAi,
        "bedrock" => ApiKind::Bedrock,
        "openai-compat" | "openrouter" | "vercel" | "ollama" | "llamacpp" | "lmstudio" | "vllm"
        | "litellm" | "omlx" | "hyper" => ApiKind::OpenAiCompat,
        "google" => ApiKind::Gemini,
        "google-vertex" => ApiKind::Vertex,
        "azure" => ApiKind::Azure,
        _ => return None,
    })
}

fn default_base_url(kind: ApiKind, id: &str) -> Option<&'static str> {
    match (kind, id) {
        (ApiKind::Anthropic, _) => Some("https://api.anthropic.com"),
        (ApiKind::OpenAi, _) => Some("https://api.openai.com/v1"),
        (ApiKind::Gemini, _) => Some(crate::llm::gemini::DEFAULT_BASE_URL),
        (_, "openrouter") => Some("https://openrouter.ai/api/v1"),
        (_, "vercel") => Some("https://ai-gateway.vercel.sh/v1"),
        _ => None,
    }
}

/// The variable holding the key of a provider of `kind` that the catalog does not describe.
fn default_key_var(kind: ApiKind) -> &'static str {
    match kind {
        ApiKind::Anthropic => "$ANTHROPIC_API_KEY",
        ApiKind::OpenAi => "$OPENAI_API_KEY",
        ApiKind::Gemini => "$GEMINI_API_KEY",
        ApiKind::Azure => "$AZURE_OPENAI_API_KEY",
        ApiKind::OpenAiCompat | ApiKind::Vertex | ApiKind::Bedrock => "",
    }
}

/// The first of `vars` that is set and not empty, with its name.
fn first_var(vars: &[&'static str]) -> Option<(&'static str, String)> {
    vars.iter().find_map(|v| {
        std::env::var(v)
            .ok()
            .filter(|x| !x.trim().is_empty())
            .map(|x| (*v, x.trim().to_string()))
    })
}

/// Vertex AI's base URL for a project and location (`global` has no regional host).
pub fn vertex_base_url(project: &str, location: &str) -> String {
    let host = if location == "global" {
        "aiplatform.googleapis.com".to_string()
    } else {
        format!("{location}-aiplatform.googleapis.com")
    };
    format!("https://{host}/v1/projects/{project}/locations/{location}")
}

/// Whether two base URLs name the same endpoint (trailing slashes and case of the scheme and
/// host aside).
fn same_url(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        let u = u.trim().trim_end_matches('/');
        match u.split_once("://") {
            Some((scheme, rest)) => {
                let (host, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
                format!(
                    "{}://{}{path}",
                    scheme.to_ascii_lowercase(),
                    host.to_ascii_lowercase()
                )
            }
            None => u.to_string(),
        }
    };
    !a.trim().is_empty() && norm(a) == norm(b)
}

/// A provider the configuration defines that cannot be used, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unusable {
    pub id: String,
    /// One line; names the file:line and the field when the configuration is at fault.
    pub reason: String,
    /// A fault of the configuration (a value that cannot expand, an unknown type, no base_url):
    /// warned about once per run. A missing key is not: it is said when the provider is needed.
    pub warn: bool,
}

/// The providers of a configuration: those that can be called, and those the user defined that
/// cannot be (crush(1) CONFIGURATION).
#[derive(Debug, Clone, Default)]
pub struct ProviderTable {
    pub ready: Vec<Provider>,
    pub unusable: Vec<Unusable>,
    /// Catalog providers you did not configure and what each needs (`no API key: set X`).
    pub needs: Vec<(String, String)>,
}

impl ProviderTable {
    /// Why provider `id` cannot be used, if the configuration defines it and it cannot.
    pub fn why_unusable(&self, id: &str) -> Option<&str> {
        self.unusable
            .iter()
            .find(|u| u.id == id)
            .map(|u| u.reason.as_str())
    }
}

/// Expands the user's value of a provider field (named by its path below the provider).
type Expand<'a> = dyn Fn(&[&str], &str) -> Result<String, Skip> + 'a;

/// Why `build_provider` made no provider.
enum Skip {
    /// A catalog provider the user did not configure and that lacks what it needs (its key):
    /// not an error, `crush models` lists what it needs (said here).
    NotConfigured(String),
    /// (reason, warn): see [`Unusable`].
    Unusable(String, bool),
}

/// Prints each warning once per process: provider tables are built more than once a run.
/// `msg` on stderr once per run, as a note.
fn warn_once_note(msg: &str) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.insert(msg.to_string()) {
        crate::ewriteln!("crush: {msg}");
    }
}

fn warn_once(msg: &str) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.insert(msg.to_string()) {
        crate::ewriteln!("crush: warning: {msg}");
    }
}

impl Loaded {
    /// The providers of this configuration against its catalog; faults of the configuration
    /// (a provider skipped for a value that cannot expand, an unknown type) are warned about
    /// on stderr, once per run.
    pub fn providers(&self) -> ProviderTable {
        let mut table = self.providers_with(&self.catalog.get().providers);
        for u in table.unusable.iter().filter(|u| u.warn) {
            warn_once(&format!("provider '{}' skipped: {}", u.id, u.reason));
        }
        // No provider at all: a local server found on this machine, with options.auto_local.
        if table.ready.is_empty()
            && table.unusable.is_empty()
            && self.config.options.auto_local
            && let Some(found) = local::found()
        {
            let u = ProviderConfig {
                kind: Some("openai-compat".into()),
                base_url: Some(found.base_url.clone()),
                ..Default::default()
            };
            if let Ok(p) = self.build_provider(local::PROVIDER_ID, &u, None, true) {
                warn_once_note(&format!(
                    "using the local model server at {} ({}) as provider '{}' (options.auto_local)",
                    found.base_url,
                    found.kind,
                    local::PROVIDER_ID
                ));
                table.ready.push(p);
            }
        }
        table
    }

    /// The providers that can be called — catalog providers whose key resolves (in catalog
    /// order, merged with the user's settings for the same id), then the user's own providers
    /// (by id) — and those the user defined that cannot be, with the reason.
    pub fn providers_with(&self, catalog: &[crate::catalog::Provider]) -> ProviderTable {
        let catalog = self.catalog_in_use(catalog);
        let mut table = ProviderTable::default();
        let no_user = ProviderConfig::default();
        let mut add = |id: &str, built: Result<Provider, Skip>| match built {
            Ok(p) => table.ready.push(p),
            Err(Skip::NotConfigured(why)) => table.needs.push((id.to_string(), why)),
            Err(Skip::Unusable(reason, warn)) => table.unusable.push(Unusable {
                id: id.to_string(),
                reason,
                warn,
            }),
        };
        for c in catalog {
            let id = c.id.as_str();
            match self.config.providers.get(id) {
                Some(u) if u.disable => {}
                Some(u) => add(id, self.build_provider(id, u, Some(c), true)),
                None => add(id, self.build_provider(id, &no_user, Some(c), false)),
            }
        }
        for (id, p) in &self.config.providers {
            if p.disable || catalog.iter().any(|c| c.id.as_str() == id) {
                continue;
            }
            add(id, self.build_provider(id, p, None, true));
        }
        table
    }

    /// The catalog's providers, or none when `options.disable_default_providers`
    /// (`CRUSH_DISABLE_DEFAULT_PROVIDERS`) hides them: then only the user's providers exist.
    pub fn catalog_in_use<'a>(
        &self,
        catalog: &'a [crate::catalog::Provider],
    ) -> &'a [crate::catalog::Provider] {
        if self.config.options.disable_default_providers {
            &[]
        } else {
            catalog
        }
    }

    /// One provider from the user's settings `u` over the catalog entry `cat`. `configured`:
    /// the user defined it (else it is a catalog entry only, and a missing key is no fault).
    fn build_provider(
        &self,
        id: &str,
        u: &ProviderConfig,
        cat: Option<&crate::catalog::Provider>,
        configured: bool,
    ) -> Result<Provider, Skip> {
        // An error names the file:line that set the field, and the field, never the value.
        let at = |field: &[&str]| {
            let mut path = vec!["providers", id];
            path.extend_from_slice(field);
            let ptr: String = path.iter().map(|k| pos::child("", k)).collect();
            // A field that is missing is reported where the provider is defined.
            let mut place = self.origin_of(&path);
            if place == "<built-in>" {
                place = self.origin_of(&["providers", id]);
            }
            format!("{place}: {}", pos::dotted(&ptr))
        };
        let expand_user = |field: &[&str], v: &str| {
            expand::expand_env(v).map_err(|e| Skip::Unusable(format!("{}: {e}", at(field)), true))
        };
        let unusable = |reason: String| {
            if configured {
                Skip::Unusable(reason, false)
            } else {
                Skip::NotConfigured(reason)
            }
        };
        // The catalog comes from the network (or its cache) and no trust decision covers it:
        // its values get variables only, never `$(...)`; a value that cannot expand is empty.
        let expand_cat = |v: &str| expand::expand_env_vars_only(v).unwrap_or_default();
        let kind_name = match (&u.kind, cat) {
            (Some(k), _) => k.clone(),
            (None, Some(c)) => c.kind.as_str().to_string(),
            (None, None) => match id {
                "anthropic" | "openai" => id.to_string(),
                _ => "openai-compat".into(),
            },
        };
        let Some(kind) = api_kind(&kind_name) else {
            let what = format!("unknown type '{kind_name}'");
            let hint = "(use anthropic, bedrock, openai, openai-compat, openrouter, google, google-vertex or azure)";
            return Err(match &u.kind {
                // The user wrote the type: a fault of the configuration.
                Some(_) => Skip::Unusable(format!("{}: {what} {hint}", at(&["type"])), true),
                // A catalog type newer than this build: not callable.
                None => unusable(what),
            });
        };
        let mut base_url = match &u.base_url {
            Some(b) => expand_user(&["base_url"], b)?,
            None => String::new(),
        };
        if kind == ApiKind::Bedrock {
            return self.bedrock_provider(id, u, cat, base_url, configured, &expand_user);
        }
        // Vertex AI's URL is made from the project and location.
        let mut vertex_home = String::new();
        if kind == ApiKind::Vertex {
            let setting = |field: &'static str, vars: &[&'static str]| -> Result<String, Skip> {
                let v = match u.project.as_ref().filter(|_| field == "project") {
                    Some(p) => Some(p),
                    None => u.location.as_ref().filter(|_| field == "location"),
                };
                match v {
                    Some(v) => expand_user(&[field], v),
                    None => Ok(first_var(vars).map(|(_, v)| v).unwrap_or_default()),
                }
            };
            let project = setting(
                "project",
                &[
                    "VERTEXAI_PROJECT",
                    "GOOGLE_CLOUD_PROJECT",
                    "CLOUDSDK_CORE_PROJECT",
                ],
            )?;
            let location = setting("location", &["VERTEXAI_LOCATION", "GOOGLE_CLOUD_LOCATION"])?;
            if project.is_empty() || location.is_empty() {
                let what = if project.is_empty() {
                    "project: set VERTEXAI_PROJECT (or GOOGLE_CLOUD_PROJECT)"
                } else {
                    "location: set VERTEXAI_LOCATION (or GOOGLE_CLOUD_LOCATION)"
                };
                let field = if project.is_empty() {
                    "project"
                } else {
                    "location"
                };
                return Err(unusable(format!(
                    "no Google Cloud {what} or providers.{id}.{field}"
                )));
            }
            vertex_home = vertex_base_url(&project, &location);
        }
        // A provider one signs in to is called where its sign-in says (crush(1) LOGIN).
        let login_home = crate::login::home(id);
        if base_url.is_empty()
            && let Some(h) = &login_home
        {
            base_url = h.clone();
        }
        if base_url.is_empty()
            && let Some(c) = cat
        {
            base_url = expand_cat(&c.api_endpoint);
        }
        if base_url.is_empty() && !vertex_home.is_empty() {
            base_url = vertex_home.clone();
        }
        if base_url.is_empty() {
            match default_base_url(kind, id) {
                Some(d) => base_url = d.to_string(),
                None if kind == ApiKind::Azure => {
                    let var = cat
                        .map(|c| c.api_endpoint.trim_start_matches('$').to_string())
                        .filter(|v| !v.is_empty() && !v.contains('/'))
                        .unwrap_or_else(|| "AZURE_OPENAI_API_ENDPOINT".into());
                    return Err(unusable(format!(
                        "no endpoint: set {var} (https://RESOURCE.openai.azure.com) or providers.{id}.base_url"
                    )));
                }
                None if cat.is_some() => return Err(unusable("no base_url".into())),
                None => {
                    return Err(Skip::Unusable(
                        format!(
                            "{}: needed, e.g. http://127.0.0.1:11434/v1",
                            at(&["base_url"])
                        ),
                        true,
                    ));
                }
            }
        }
        // A key taken from the environment goes only to the endpoint it belongs to: the catalog
        // provider's own URL, or the official API of an anthropic or openai provider. A provider
        // sent elsewhere (`base_url`) gets only a key its own definition names (crush(1)
        // SECURITY): published configs point such providers at local or LAN servers.
        let mut home = cat.map(|c| expand_cat(&c.api_endpoint)).unwrap_or_default();
        if home.is_empty() {
            home = default_base_url(kind, id).unwrap_or_default().to_string();
        }
        if home.is_empty() {
            home = vertex_home;
        }
        if let Some(h) = &login_home {
            home = h.clone();
        }
        let at_home = same_url(&base_url, &home);
        let env_key = match cat {
            Some(c) => c.api_key.clone(),
            None => default_key_var(kind).to_string(),
        };
        let api_key = match &u.api_key {
            Some(k) => expand_user(&["api_key"], k)?,
            None if !at_home => String::new(),
            None => expand_cat(&env_key),
        };
        let api_key = Some(api_key).filter(|k| !k.is_empty());
        let var = env_key.trim_start_matches('$').trim_matches(['{', '}']);
        let key_var = Some(var.to_string()).filter(|v| {
            u.api_key.is_none()
                && !v.is_empty()
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        // Without a key only a server of the user's own choosing (ollama, llama.cpp, vLLM, LM
        // Studio, a proxy) can work; a catalog provider or cloud API at its own URL cannot.
        // Vertex AI takes the environment's access token instead.
        // Signed in: the token goes only to the provider's own API.
        let login = match api_key {
            None if at_home => crate::login::Credential::find(id, u.oauth.as_ref())
                .map_err(|e| unusable(e.to_string()))?
                .map(std::sync::Arc::new),
            _ => None,
        };
        if api_key.is_none()
            && login.is_none()
            && at_home
            && kind != ApiKind::Vertex
            && (cat.is_some() || kind != ApiKind::OpenAiCompat)
        {
            return Err(unusable(if login_home.is_some() {
                format!("not signed in: run 'crush login {id}' (or set providers.{id}.api_key)")
            } else if var.is_empty() {
                format!("no API key: set providers.{id}.api_key")
            } else {
                format!("no API key: set {var} or providers.{id}.api_key")
            }));
        }
        if kind == ApiKind::Azure {
            let version = match &u.api_version {
                Some(v) => expand_user(&["api_version"], v)?,
                None => first_var(&["AZURE_OPENAI_API_VERSION"])
                    .map(|(_, v)| v)
                    .unwrap_or_default(),
            };
            // The resource's v1 API takes no dated version (only `preview` or `latest`), as
            // Go Crush sends none there; a deployment URL needs one.
            let v1 = crate::llm::endpoints::azure_base(&base_url).contains("/openai/v1");
            let skip = version.is_empty()
                || base_url.contains("api-version=")
                || v1 && version.starts_with(|c: char| c.is_ascii_digit());
            if !skip {
                let sep = if base_url.contains('?') { '&' } else { '?' };
                base_url = format!("{base_url}{sep}api-version={version}");
            }
        }
        // The catalog's default headers, overlaid by the user's (names compare case-insensitively).
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(c) = cat {
            for (k, v) in &c.default_headers {
                // A catalog header built from the environment is a key too: only for home.
                if at_home || !v.contains('$') {
                    headers.push((k.clone(), expand_cat(v)));
                }
            }
        }
        for (k, v) in &u.extra_headers {
            let v = expand_user(&["extra_headers", k], v)?;
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k.clone(), v));
        }
        headers.retain(|(_, v)| !v.is_empty());
        let models = match cat {
            Some(c) => crate::catalog::merge_models(&u.models, &c.models),
            None => u.models.clone(),
        };
        let default_id = |s: &String| Some(s.clone()).filter(|s| !s.is_empty());
        // OpenAI's Responses API: an openai or azure provider, wherever its base URL points (a
        // gateway in front of OpenAI included), for the models that have it, as Go Crush
        // does; an openai-compat server only when asked (`uses_responses`).
        let responses = u.use_responses_api;
        // A provider one signs in to lists the models it grants (crush(1) LOGIN).
        let discover = cat.is_none()
            && matches!(kind, ApiKind::OpenAi | ApiKind::OpenAiCompat)
            && u.discover_models.unwrap_or(models.is_empty())
            || login.is_some() && u.discover_models != Some(false);
        Ok(Provider {
            id: id.to_string(),
            endpoint: Endpoint {
                kind,
                base_url,
                api_key,
                headers,
                responses,
                ambient_auth: at_home,
                aws: None,
                login,
            },
            models,
            flat_rate: u.flat_rate,
            system_prompt_prefix: u.system_prompt_prefix.clone(),
            default_large: cat.and_then(|c| default_id(&c.default_large_model_id)),
            default_small: cat.and_then(|c| default_id(&c.default_small_model_id)),
            kind_name,
            provider_options: u.provider_options.clone(),
            extra_body: u.extra_body.clone(),
            discover,
            key_var,
        })
    }

    /// A Bedrock provider (crush(1) CONFIGURATION, Amazon Bedrock). Its URL is the provider's
    /// `base_url`, else the one AWS's endpoint variables name, else Bedrock's own in the region
    /// chosen at call time. The credentials of the environment and the AWS profile (and
    /// `AWS_BEARER_TOKEN_BEDROCK`) go only to an AWS URL or the one AWS's variables name; elsewhere
    /// only the provider's own `api_key` is sent (as a Bedrock API key).
    fn bedrock_provider(
        &self,
        id: &str,
        u: &ProviderConfig,
        cat: Option<&crate::catalog::Provider>,
        base_url: String,
        configured: bool,
        expand_user: &Expand,
    ) -> Result<Provider, Skip> {
        let from_aws_vars = base_url.is_empty();
        let base_url = if from_aws_vars {
            crate::aws::credentials::endpoint_override("BEDROCK_RUNTIME").unwrap_or_default()
        } else {
            base_url
        };
        let credentials_allowed = from_aws_vars || crate::aws::is_aws_url(&base_url);
        let api_key = match &u.api_key {
            Some(k) => expand_user(&["api_key"], k)?,
            None if credentials_allowed => std::env::var("AWS_BEARER_TOKEN_BEDROCK")
                .unwrap_or_default()
                .trim()
                .to_string(),
            None => String::new(),
        };
        let api_key = Some(api_key).filter(|k| !k.is_empty());
        if api_key.is_none() && credentials_allowed && !crate::aws::credentials::configured() {
            let why = "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                       AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK (or sign in with `aws sso login`; on an EC2 \
                       instance with a role, set AWS_REGION)"
                .to_string();
            return Err(if configured {
                Skip::Unusable(why, false)
            } else {
                Skip::NotConfigured(why)
            });
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in &u.extra_headers {
            let v = expand_user(&["extra_headers", k], v)?;
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k.clone(), v));
        }
        headers.retain(|(_, v)| !v.is_empty());
        let default_id = |s: &String| Some(s.clone()).filter(|s| !s.is_empty());
        let default_region = if id == "bedrock-europe" {
            "eu-west-1"
        } else {
            "us-east-1"
        };
        Ok(Provider {
            id: id.to_string(),
            endpoint: Endpoint {
                kind: ApiKind::Bedrock,
                base_url,
                api_key,
                headers,
                aws: Some(crate::aws::Settings {
                    default_region: default_region.to_string(),
                    credentials_allowed,
                    auth_refresh: u.aws_auth_refresh.clone().filter(|c| !c.trim().is_empty()),
                    cwd: self.cwd.clone(),
                    refresh_timeout: std::time::Duration::from_secs(300),
                    limits: crate::aws::Limits::default(),
                }),
                login: None,
                responses: None,
                ambient_auth: credentials_allowed,
            },
            models: match cat {
                Some(c) => crate::catalog::merge_models(&u.models, &c.models),
                None => u.models.clone(),
            },
            flat_rate: u.flat_rate,
            system_prompt_prefix: u.system_prompt_prefix.clone(),
            default_large: cat.and_then(|c| default_id(&c.default_large_model_id)),
            default_small: cat.and_then(|c| default_id(&c.default_small_model_id)),
            kind_name: "bedrock".to_string(),
            provider_options: u.provider_options.clone(),
            extra_body: u.extra_body.clone(),
            discover: false,
            key_var: None,
        })
    }

    /// Whether the value at `ptr` (a JSON pointer) comes from the user: built-in defaults, the
    /// global state, the user's global files, flags, the environment or the user's own session
    /// commands — not a project's files, the workspace state in the project's data directory or
    /// the model's session commands (crush(1) SECURITY).
    pub fn set_by_user(&self, ptr: &str) -> bool {
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
    /// else the catalog default of the first configured provider. A model is `PROVIDER/MODEL` or
    /// a model id offered by exactly one configured provider.
    pub fn resolve_model(
        &self,
        flag: Option<&str>,
        small: bool,
    ) -> Result<ResolvedModel, ConfigError> {
        self.resolve_model_in(
            &self.providers(),
            &self.catalog.get().providers,
            flag,
            small,
        )
    }

    /// [`resolve_model`](Self::resolve_model) against a given catalog.
    pub fn resolve_model_with(
        &self,
        catalog: &[crate::catalog::Provider],
        flag: Option<&str>,
        small: bool,
    ) -> Result<ResolvedModel, ConfigError> {
        self.resolve_model_in(&self.providers_with(catalog), catalog, flag, small)
    }

    fn resolve_model_in(
        &self,
        table: &ProviderTable,
        catalog: &[crate::catalog::Provider],
        flag: Option<&str>,
        small: bool,
    ) -> Result<ResolvedModel, ConfigError> {
        let catalog = self.catalog_in_use(catalog);
        let providers = &table.ready;
        let which = if small { "small" } else { "large" };
        // A catalog provider named but not configured: say what it needs.
        let chosen = if small {
            &self.config.models.small
        } else {
            &self.config.models.large
        };
        let named = match flag {
            Some(f) => f.split_once('/').map(|(p, _)| p.to_string()),
            None => chosen.as_ref().map(|s| s.provider.clone()),
        };
        if let Some(p) = named
            && !providers.iter().any(|x| x.id == p)
            && let Some((_, why)) = table.needs.iter().find(|(id, _)| *id == p)
        {
            return Err(ConfigError::Model(format!(
                "{which} model: provider '{p}' is not configured: {why}"
            )));
        }
        if providers.is_empty() {
            let file = paths::global_config_dir().join("crush.json");
            let unusable: Vec<String> = table
                .unusable
                .iter()
                .map(|u| format!("{}: {}", u.id, u.reason))
                .collect();
            let unusable = if unusable.is_empty() {
                String::new()
            } else {
                format!(" (defined but not usable: {})", unusable.join("; "))
            };
            return Err(ConfigError::NoProvider(
                if self.config.options.disable_default_providers {
                    format!(
                        "no provider configured{unusable}: the catalog's providers are disabled (options.disable_default_providers or CRUSH_DISABLE_DEFAULT_PROVIDERS), so add a provider to {} (see 'man crush', CONFIGURATION)",
                        file.display()
                    )
                } else {
                    let local = match local::found() {
                        Some(f) if table.unusable.is_empty() => format!("\n{}", f.hint()),
                        _ => String::new(),
                    };
                    format!(
                        "no provider configured{unusable}: set the API key of a catalog provider (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY; 'crush models' lists them all), or add a provider to {} (see 'man crush', CONFIGURATION){local}",
                        file.display()
                    )
                },
            ));
        }
        let offers = |p: &Provider, m: &str| p.models.iter().any(|x| x.id.eq_ignore_ascii_case(m));
        let configured = |p: &str| providers.iter().any(|x| x.id == p);
        let known = |p: &str| {
            configured(p)
                || catalog.iter().any(|c| c.id.as_str() == p)
                || self.config.providers.contains_key(p)
        };
        let (provider_id, model_id, selected) = match flag {
            Some(f) => {
                let (p, m) = match f.split_once('/') {
                    Some((p, m)) if configured(p) => (Some(p.to_string()), m.to_string()),
                    // `known/model` names that provider unless the whole string is a model id
                    // (OpenRouter-style ids contain a slash).
                    Some((p, m)) if known(p) && !providers.iter().any(|x| offers(x, f)) => {
                        (Some(p.to_string()), m.to_string())
                    }
                    _ => (None, f.to_string()),
                };
                (p, m, SelectedModel::default())
            }
            None => {
                let chosen = if small {
                    self.config.models.small.clone()
                } else {
                    self.config.models.large.clone()
                };
                match (chosen, &self.config.models.large) {
                    (Some(sel), _) => (
                        Some(sel.provider.clone()).filter(|p| !p.is_empty()),
                        sel.model.clone(),
                        sel,
                    ),
                    // No small model: the large model's provider's default small model, else
                    // the large model itself.
                    (None, Some(large)) if small => {
                        let p = providers.iter().find(|p| p.id == large.provider);
                        let dflt = p.and_then(|p| {
                            let id = p.default_small.as_deref()?;
                            p.models.iter().find(|m| m.id == id)
                        });
                        match dflt {
                            Some(m) => (
                                Some(large.provider.clone()),
                                m.id.clone(),
                                SelectedModel::default(),
                            ),
                            None => (
                                Some(large.provider.clone()).filter(|p| !p.is_empty()),
                                large.model.clone(),
                                large.clone(),
                            ),
                        }
                    }
                    _ => {
                        // A provider without models listed asks its server (when first needed).
                        let (p, m) = providers
                            .iter()
                            .find_map(|p| {
                                let first = |p: &Provider| {
                                    p.default_model(small).map(|m| (p.id.clone(), m.id.clone()))
                                };
                                first(p).or_else(|| {
                                    (p.discover && p.models.is_empty())
                                        .then(|| first(&p.discovered()))
                                        .flatten()
                                })
                            })
                            .ok_or_else(|| {
                                // Say why the servers asked for their models gave none.
                                let why: String = providers
                                    .iter()
                                    .filter_map(|p| {
                                        let w = p.discovery_failure()?;
                                        Some(format!(
                                            "; provider '{}' listed no models ({w})",
                                            p.id
                                        ))
                                    })
                                    .collect();
                                ConfigError::Model(format!(
                                    "no model selected: set models.large in crush.json or pass -m PROVIDER/MODEL{why}"
                                ))
                            })?;
                        (Some(p), m, SelectedModel::default())
                    }
                }
            }
        };
        let pick = |p: &Provider| -> ResolvedModel {
            let find = |p: &Provider| {
                p.models
                    .iter()
                    .find(|m| m.id.eq_ignore_ascii_case(&model_id))
                    .cloned()
            };
            // A model named but not listed with a window: its server (or the subscription, crush(1)
            // LOGIN) may say what it is.
            let model = match find(p) {
                Some(m) if m.context_window > 0 || !p.discover => Some(m),
                listed => find(&p.discovered()).or(listed),
            }
            .unwrap_or_else(|| Model {
                id: model_id.clone(),
                ..Default::default()
            });
            ResolvedModel {
                provider: p.clone(),
                model,
                selected: selected.clone(),
            }
        };
        let configured_list = || {
            providers
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match provider_id {
            Some(pid) => {
                let p = providers.iter().find(|p| p.id == pid).ok_or_else(|| {
                    if let Some(why) = table.why_unusable(&pid) {
                        return ConfigError::Model(format!(
                            "{which} model '{pid}/{model_id}': provider '{pid}' cannot be used: {why}"
                        ));
                    }
                    let hint = catalog
                        .iter()
                        .find(|c| c.id.as_str() == pid)
                        .and_then(|c| c.api_key.strip_prefix('$'))
                        .map(|var| format!("set {} to use it", var.trim_matches(['{', '}'])))
                        .unwrap_or_else(|| "configure it in crush.json".into());
                    ConfigError::Model(format!(
                        "{which} model '{pid}/{model_id}': provider '{pid}' is not configured or has no API key; {hint} (configured: {})",
                        configured_list()
                    ))
                })?;
                Ok(pick(p))
            }
            None => {
                let matches: Vec<&Provider> =
                    providers.iter().filter(|p| offers(p, &model_id)).collect();
                // Else the servers that list their models may know it.
                let listed: Vec<Provider> = if matches.is_empty() {
                    providers
                        .iter()
                        .filter(|p| p.discover)
                        .map(Provider::discovered)
                        .filter(|p| offers(p, &model_id))
                        .collect()
                } else {
                    Vec::new()
                };
                let matches = if listed.is_empty() {
                    matches
                } else {
                    listed.iter().collect()
                };
                match matches.as_slice() {
                    [p] => Ok(pick(p)),
                    [] => {
                        let elsewhere: Vec<String> = catalog
                            .iter()
                            .filter(|c| !configured(c.id.as_str()))
                            .filter(|c| {
                                c.models
                                    .iter()
                                    .any(|m| m.id.eq_ignore_ascii_case(&model_id))
                            })
                            .map(|c| c.id.to_string())
                            .collect();
                        let hint = if elsewhere.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "; providers that are not configured offer it: {}",
                                elsewhere.join(", ")
                            )
                        };
                        Err(ConfigError::Model(format!(
                            "{which} model '{model_id}' is not offered by a configured provider{hint}; use PROVIDER/MODEL (configured: {}; 'crush models' lists the models)",
                            configured_list()
                        )))
                    }
                    many => Err(ConfigError::Model(format!(
                        "{which} model '{model_id}' is ambiguous, offered by several providers: {}; use PROVIDER/MODEL",
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
        assert_eq!(r.price_source(), "unpriced");
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
    fn urls_compare_by_endpoint() {
        assert!(same_url(
            "https://API.openai.com/v1/",
            "https://api.openai.com/v1"
        ));
        assert!(!same_url(
            "https://api.openai.com/v1",
            "http://127.0.0.1:8080/v1"
        ));
        assert!(!same_url(
            "https://api.openai.com/V1",
            "https://api.openai.com/v1"
        ));
        assert!(!same_url("", ""));
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
        assert_eq!(p.models[1].price_source, Some("catalog"));

        // Defaults: the first configured provider's catalog defaults.
        let large = l.resolve_model_with(&cat, None, false).unwrap();
        assert_eq!(
            (large.provider.id.as_str(), large.model.id.as_str()),
            ("cat", "big")
        );
        assert_eq!(large.price_source(), "catalog");
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
        assert_eq!(small.price_source(), "unpriced");
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
