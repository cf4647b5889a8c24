//! Provider resolution (crush(1) CONFIGURATION, PROVIDERS): the configuration's providers
//! merged with the catalog's into ones ready to call, and the model a turn uses.

use super::{ConfigError, Loaded, Model, ProviderConfig, SelectedModel, expand, local, pos};
use crate::llm::{ApiKind, Endpoint};
use crate::paths;
use serde_json::Value;
use std::collections::BTreeMap;

/// A provider ready to call, with its models.
#[derive(Debug, Clone)]
pub(crate) struct Provider {
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
    pub(crate) fn default_model(&self, small: bool) -> Option<&Model> {
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
pub(crate) struct ResolvedModel {
    pub provider: Provider,
    pub model: Model,
    pub selected: SelectedModel,
}

impl ResolvedModel {
    /// USD for one call, or None when the model has no price (unpriced, never $0).
    pub(crate) fn cost(&self, u: &crate::llm::Usage) -> Option<f64> {
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
    pub(crate) fn price_source(&self) -> crate::store::PriceSource {
        use crate::store::PriceSource;
        if self.provider.flat_rate {
            PriceSource::FlatRate
        } else if self.model.cost_per_1m_in.is_some() && self.model.cost_per_1m_out.is_some() {
            self.model
                .price_source
                .clone()
                .unwrap_or(PriceSource::Config)
        } else {
            PriceSource::Unpriced
        }
    }
    /// Whether a call's cost is known in dollars (neither unpriced nor flat-rate).
    pub(crate) fn is_priced(&self) -> bool {
        self.price_source().is_priced()
    }
    pub(crate) fn max_tokens(&self) -> Option<u32> {
        self.selected
            .max_tokens
            .or(Some(self.model.default_max_tokens).filter(|&n| n > 0))
    }
}

impl ResolvedModel {
    /// `e` with what it means for this model: a refused key names the provider and where the
    /// key came from; a model the provider does not know names the model sent and the closest
    /// ids the provider lists.
    pub(crate) fn explain(&self, e: crate::llm::LlmError) -> crate::llm::LlmError {
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
                let what = p.endpoint.kind.credential();
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

/// The first of `vars` that is set and not empty (in the session's variables `env`, else the
/// process environment), with its name.
fn first_var(env: &crate::env::Overlay, vars: &[&'static str]) -> Option<(&'static str, String)> {
    vars.iter().find_map(|v| {
        env.var(v)
            .filter(|x| !x.trim().is_empty())
            .map(|x| (*v, x.trim().to_string()))
    })
}

/// Vertex AI's base URL for a project and location (`global` has no regional host).
pub(crate) fn vertex_base_url(project: &str, location: &str) -> String {
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
pub(crate) struct Unusable {
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
pub(crate) struct ProviderTable {
    pub ready: Vec<Provider>,
    pub unusable: Vec<Unusable>,
    /// Catalog providers you did not configure and what each needs (`no API key: set X`).
    pub needs: Vec<(String, String)>,
}

impl ProviderTable {
    /// Why provider `id` cannot be used, if the configuration defines it and it cannot.
    pub(crate) fn why_unusable(&self, id: &str) -> Option<&str> {
        self.unusable
            .iter()
            .find(|u| u.id == id)
            .map(|u| u.reason.as_str())
    }
}

/// Why `build_provider` made no provider.
enum Skip {
    /// A catalog provider the user did not configure and that lacks what it needs (its key):
    /// not an error, `crush models` lists what it needs (said here).
    NotConfigured(String),
    /// (reason, warn): see [`Unusable`].
    Unusable(String, bool),
}

/// `crush: {what}{msg}` on stderr, once per process: provider tables are built more than once
/// a run.
fn say_once(what: &str, msg: &str) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.insert(format!("{what}{msg}")) {
        crate::activity::note(&format!("crush: {what}{msg}"));
    }
}

impl Loaded {
    /// The providers of this configuration against its catalog; faults of the configuration
    /// (a provider skipped for a value that cannot expand, an unknown type) are warned about
    /// on stderr, once per run.
    pub(crate) fn providers(&self) -> ProviderTable {
        let mut table = self.providers_with(&self.catalog.get().providers);
        for u in table.unusable.iter().filter(|u| u.warn) {
            say_once(
                "warning: ",
                &format!("provider '{}' skipped: {}", u.id, u.reason),
            );
        }
        // No provider at all: a local server found on this machine, with options.auto_local.
        if table.ready.is_empty()
            && table.unusable.is_empty()
            && self.config.options.auto_local
            && let Some(found) = local::found()
        {
            let u = ProviderConfig {
                kind: Some(ApiKind::OpenAiCompat.type_name().into()),
                base_url: Some(found.base_url.clone()),
                ..Default::default()
            };
            if let Ok(p) = self.build_provider(local::PROVIDER_ID, &u, None, true) {
                say_once(
                    "",
                    &format!(
                        "using the local model server at {} ({}) as provider '{}' (options.auto_local)",
                        found.base_url,
                        found.kind,
                        local::PROVIDER_ID
                    ),
                );
                table.ready.push(p);
            }
        }
        table
    }

    /// The providers that can be called — catalog providers whose key resolves (in catalog
    /// order, merged with the user's settings for the same id), then the user's own providers
    /// (by id) — and those the user defined that cannot be, with the reason.
    pub(crate) fn providers_with(&self, catalog: &[crate::catalog::Provider]) -> ProviderTable {
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
    pub(crate) fn catalog_in_use<'a>(
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
        Draft {
            loaded: self,
            id,
            u,
            cat,
            configured,
        }
        .build()
    }
}

/// What one provider is built from: its id, the user's settings and the catalog's entry.
struct Draft<'a> {
    loaded: &'a Loaded,
    id: &'a str,
    u: &'a ProviderConfig,
    cat: Option<&'a crate::catalog::Provider>,
    /// The user defined it (else it is a catalog entry only, and a missing key is no fault).
    configured: bool,
}

/// Where a provider is called and which URL is its own.
struct Place {
    base_url: String,
    /// The URL a key from the environment belongs to (crush(1) SECURITY).
    home: String,
    /// The URL a provider one signs in to is called at (crush(1) LOGIN).
    login_home: Option<String>,
}

/// The key a provider sends, and the variable it comes from.
struct Key {
    api_key: Option<String>,
    /// The variable the key is read from (`OPENAI_API_KEY`), empty when none.
    var: String,
    /// `var`, when the key comes from it and it is a plain variable name (for messages).
    key_var: Option<String>,
}

impl Draft<'_> {
    /// Where field `field` is set, for an error: file:line and the field, never the value.
    fn at(&self, field: &[&str]) -> String {
        let mut path = vec!["providers", self.id];
        path.extend_from_slice(field);
        let ptr: String = path.iter().map(|k| pos::child("", k)).collect();
        // A field that is missing is reported where the provider is defined.
        let mut place = self.loaded.origin_of(&path);
        if place == "<built-in>" {
            place = self.loaded.origin_of(&["providers", self.id]);
        }
        format!("{place}: {}", pos::dotted(&ptr))
    }

    /// The user's value `v` of `field`, expanded.
    fn expand_user(&self, field: &[&str], v: &str) -> Result<String, Skip> {
        expand::expand_env(v, &self.loaded.env)
            .map_err(|e| Skip::Unusable(format!("{}: {e}", self.at(field)), true))
    }

    /// The catalog comes from the network (or its cache) and no trust decision covers it: its
    /// values get variables only, never `$(...)`; a value that cannot expand is empty.
    fn expand_cat(&self, v: &str) -> String {
        expand::expand_env_vars_only(v, &self.loaded.env).unwrap_or_default()
    }

    /// A provider that lacks what it needs: a fault only when the user defined it.
    fn unusable(&self, reason: String) -> Skip {
        if self.configured {
            Skip::Unusable(reason, false)
        } else {
            Skip::NotConfigured(reason)
        }
    }

    fn build(&self) -> Result<Provider, Skip> {
        let (kind_name, kind) = self.kind()?;
        let base_url = match &self.u.base_url {
            Some(b) => self.expand_user(&["base_url"], b)?,
            None => String::new(),
        };
        if kind == ApiKind::Bedrock {
            return self.bedrock(base_url);
        }
        let place = self.place(kind, base_url)?;
        // A key taken from the environment goes only to the endpoint it belongs to: the catalog
        // provider's own URL, or the official API of an anthropic or openai provider. A provider
        // sent elsewhere (`base_url`) gets only a key its own definition names (crush(1)
        // SECURITY): published configs point such providers at local or LAN servers.
        let at_home = same_url(&place.base_url, &place.home);
        let key = self.key(kind, at_home)?;
        // Signed in: the token goes only to the provider's own API.
        let login = match key.api_key {
            None if at_home => crate::login::Credential::find(self.id, self.u.oauth.as_ref())
                .map_err(|e| self.unusable(e.to_string()))?
                .map(std::sync::Arc::new),
            _ => None,
        };
        // Without a key only a server of the user's own choosing (ollama, llama.cpp, vLLM, LM
        // Studio, a proxy) can work; a catalog provider or cloud API at its own URL cannot.
        // Vertex AI takes the environment's access token instead.
        if key.api_key.is_none()
            && login.is_none()
            && at_home
            && kind != ApiKind::Vertex
            && (self.cat.is_some() || kind != ApiKind::OpenAiCompat)
        {
            let id = self.id;
            return Err(self.unusable(if place.login_home.is_some() {
                format!("not signed in: run 'crush login {id}' (or set providers.{id}.api_key)")
            } else if key.var.is_empty() {
                format!("no API key: set providers.{id}.api_key")
            } else {
                format!("no API key: set {} or providers.{id}.api_key", key.var)
            }));
        }
        let base_url = if kind == ApiKind::Azure {
            self.azure_versioned(place.base_url)?
        } else {
            place.base_url
        };
        // The catalog's default headers, overlaid by the user's.
        let mut catalog_headers = Vec::new();
        if let Some(c) = self.cat {
            for (k, v) in &c.default_headers {
                // A catalog header built from the environment is a key too: only for home.
                if at_home || !v.contains('$') {
                    catalog_headers.push((k.clone(), self.expand_cat(v)));
                }
            }
        }
        let headers = self.headers(catalog_headers)?;
        let models = self.models();
        // A provider one signs in to lists the models it grants (crush(1) LOGIN).
        let discover = self.cat.is_none()
            && matches!(kind, ApiKind::OpenAi | ApiKind::OpenAiCompat)
            && self.u.discover_models.unwrap_or(models.is_empty())
            || login.is_some() && self.u.discover_models != Some(false);
        let endpoint = Endpoint {
            kind,
            base_url,
            api_key: key.api_key,
            headers,
            // OpenAI's Responses API: an openai or azure provider, wherever its base URL points
            // (a gateway in front of OpenAI included), for the models that have it, as Go Crush
            // does; an openai-compat server only when asked (`uses_responses`).
            responses: self.u.use_responses_api,
            ambient_auth: at_home,
            aws: None,
            login,
            env: self.loaded.env.clone(),
        };
        Ok(self.provider(endpoint, models, kind_name, discover, key.key_var))
    }

    /// The provider's type as written (or the catalog's), and the protocol it speaks.
    fn kind(&self) -> Result<(String, ApiKind), Skip> {
        let kind_name = match (&self.u.kind, self.cat) {
            (Some(k), _) => k.clone(),
            (None, Some(c)) => c.kind.as_str().to_string(),
            (None, None) => ApiKind::default_type(self.id).to_string(),
        };
        match ApiKind::from_type(&kind_name) {
            Some(kind) => Ok((kind_name, kind)),
            None => {
                let what = format!("unknown type '{kind_name}'");
                let hint = ApiKind::type_hint();
                Err(match &self.u.kind {
                    // The user wrote the type: a fault of the configuration.
                    Some(_) => {
                        Skip::Unusable(format!("{}: {what} {hint}", self.at(&["type"])), true)
                    }
                    // A catalog type newer than this build: not callable.
                    None => self.unusable(what),
                })
            }
        }
    }

    /// Vertex AI's URL, made from the project and location.
    fn vertex_home(&self) -> Result<String, Skip> {
        let setting = |field: &'static str, vars: &[&'static str]| -> Result<String, Skip> {
            let v = match self.u.project.as_ref().filter(|_| field == "project") {
                Some(p) => Some(p),
                None => self.u.location.as_ref().filter(|_| field == "location"),
            };
            match v {
                Some(v) => self.expand_user(&[field], v),
                None => Ok(first_var(&self.loaded.env, vars)
                    .map(|(_, v)| v)
                    .unwrap_or_default()),
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
            let (what, field) = if project.is_empty() {
                (
                    "project: set VERTEXAI_PROJECT (or GOOGLE_CLOUD_PROJECT)",
                    "project",
                )
            } else {
                (
                    "location: set VERTEXAI_LOCATION (or GOOGLE_CLOUD_LOCATION)",
                    "location",
                )
            };
            return Err(self.unusable(format!(
                "no Google Cloud {what} or providers.{}.{field}",
                self.id
            )));
        }
        Ok(vertex_base_url(&project, &location))
    }

    /// Where the provider is called (the user's `base_url`, else its sign-in's, the catalog's,
    /// Vertex AI's or the kind's own) and which URL is its home.
    fn place(&self, kind: ApiKind, mut base_url: String) -> Result<Place, Skip> {
        let (id, cat) = (self.id, self.cat);
        let vertex_home = if kind == ApiKind::Vertex {
            self.vertex_home()?
        } else {
            String::new()
        };
        let login_home = crate::login::home(id);
        if base_url.is_empty()
            && let Some(h) = &login_home
        {
            base_url = h.clone();
        }
        if base_url.is_empty()
            && let Some(c) = cat
        {
            base_url = self.expand_cat(&c.api_endpoint);
        }
        if base_url.is_empty() && !vertex_home.is_empty() {
            base_url = vertex_home.clone();
        }
        if base_url.is_empty() {
            match kind.default_base_url(id) {
                Some(d) => base_url = d.to_string(),
                None if kind == ApiKind::Azure => {
                    let var = cat
                        .map(|c| c.api_endpoint.trim_start_matches('$').to_string())
                        .filter(|v| !v.is_empty() && !v.contains('/'))
                        .unwrap_or_else(|| "AZURE_OPENAI_API_ENDPOINT".into());
                    return Err(self.unusable(format!(
                        "no endpoint: set {var} (https://RESOURCE.openai.azure.com) or providers.{id}.base_url"
                    )));
                }
                None if cat.is_some() => return Err(self.unusable("no base_url".into())),
                None => {
                    return Err(Skip::Unusable(
                        format!(
                            "{}: needed, e.g. http://127.0.0.1:11434/v1",
                            self.at(&["base_url"])
                        ),
                        true,
                    ));
                }
            }
        }
        let mut home = cat
            .map(|c| self.expand_cat(&c.api_endpoint))
            .unwrap_or_default();
        if home.is_empty() {
            home = kind.default_base_url(id).unwrap_or_default().to_string();
        }
        if home.is_empty() {
            home = vertex_home;
        }
        if let Some(h) = &login_home {
            home = h.clone();
        }
        Ok(Place {
            base_url,
            home,
            login_home,
        })
    }

    /// The user's `api_key`, else (at home only) the variable the catalog or the kind names.
    fn key(&self, kind: ApiKind, at_home: bool) -> Result<Key, Skip> {
        let env_key = match self.cat {
            Some(c) => c.api_key.clone(),
            None => kind.default_key_var().to_string(),
        };
        let api_key = match &self.u.api_key {
            Some(k) => self.expand_user(&["api_key"], k)?,
            None if !at_home => String::new(),
            None => self.expand_cat(&env_key),
        };
        let var = env_key.trim_start_matches('$').trim_matches(['{', '}']);
        let key_var = Some(var.to_string()).filter(|v| {
            self.u.api_key.is_none()
                && !v.is_empty()
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        Ok(Key {
            api_key: Some(api_key).filter(|k| !k.is_empty()),
            var: var.to_string(),
            key_var,
        })
    }

    /// An Azure base URL with the api-version the configuration or the environment names.
    fn azure_versioned(&self, base_url: String) -> Result<String, Skip> {
        let version = match &self.u.api_version {
            Some(v) => self.expand_user(&["api_version"], v)?,
            None => first_var(&self.loaded.env, &["AZURE_OPENAI_API_VERSION"])
                .map(|(_, v)| v)
                .unwrap_or_default(),
        };
        // The resource's v1 API takes no dated version (only `preview` or `latest`), as Go
        // Crush sends none there; a deployment URL needs one.
        let v1 = crate::llm::endpoints::azure_base(&base_url).contains("/openai/v1");
        let skip = version.is_empty()
            || base_url.contains("api-version=")
            || v1 && version.starts_with(|c: char| c.is_ascii_digit());
        if skip {
            return Ok(base_url);
        }
        let sep = if base_url.contains('?') { '&' } else { '?' };
        Ok(format!("{base_url}{sep}api-version={version}"))
    }

    /// `headers` overlaid by the user's `extra_headers` (names compare case-insensitively);
    /// empty values are dropped.
    fn headers(&self, mut headers: Vec<(String, String)>) -> Result<Vec<(String, String)>, Skip> {
        for (k, v) in &self.u.extra_headers {
            let v = self.expand_user(&["extra_headers", k], v)?;
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k.clone(), v));
        }
        headers.retain(|(_, v)| !v.is_empty());
        Ok(headers)
    }

    /// The catalog's models merged with the user's.
    fn models(&self) -> Vec<Model> {
        match self.cat {
            Some(c) => crate::catalog::merge_models(&self.u.models, &c.models),
            None => self.u.models.clone(),
        }
    }

    /// The provider at `endpoint`, with the settings every kind shares.
    fn provider(
        &self,
        endpoint: Endpoint,
        models: Vec<Model>,
        kind_name: String,
        discover: bool,
        key_var: Option<String>,
    ) -> Provider {
        let (u, cat) = (self.u, self.cat);
        let default_id = |s: &String| Some(s.clone()).filter(|s| !s.is_empty());
        Provider {
            id: self.id.to_string(),
            endpoint,
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
        }
    }

    /// A Bedrock provider (crush(1) CONFIGURATION, Amazon Bedrock). Its URL is the provider's
    /// `base_url`, else the one AWS's endpoint variables name, else Bedrock's own in the region
    /// chosen at call time. The credentials of the environment and the AWS profile (and
    /// `AWS_BEARER_TOKEN_BEDROCK`) go only to an AWS URL or the one AWS's variables name; elsewhere
    /// only the provider's own `api_key` is sent (as a Bedrock API key).
    fn bedrock(&self, base_url: String) -> Result<Provider, Skip> {
        let u = self.u;
        let from_aws_vars = base_url.is_empty();
        let base_url = if from_aws_vars {
            crate::aws::credentials::endpoint_override("BEDROCK_RUNTIME", &self.loaded.env)
                .unwrap_or_default()
        } else {
            base_url
        };
        let credentials_allowed = from_aws_vars || crate::aws::is_aws_url(&base_url);
        let api_key = match &u.api_key {
            Some(k) => self.expand_user(&["api_key"], k)?,
            None if credentials_allowed => self
                .loaded
                .env
                .var("AWS_BEARER_TOKEN_BEDROCK")
                .unwrap_or_default()
                .trim()
                .to_string(),
            None => String::new(),
        };
        let api_key = Some(api_key).filter(|k| !k.is_empty());
        if api_key.is_none()
            && credentials_allowed
            && !crate::aws::credentials::configured(&self.loaded.env)
        {
            return Err(self.unusable(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                 AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK (or sign in with `aws sso login`; on an EC2 \
                 instance with a role, set AWS_REGION)"
                    .to_string(),
            ));
        }
        let endpoint = Endpoint {
            kind: ApiKind::Bedrock,
            base_url,
            api_key,
            headers: self.headers(Vec::new())?,
            aws: Some(crate::aws::Settings {
                default_region: crate::llm::bedrock::default_region(self.id).to_string(),
                credentials_allowed,
                auth_refresh: u.aws_auth_refresh.clone().filter(|c| !c.trim().is_empty()),
                cwd: self.loaded.cwd.clone(),
                refresh_timeout: std::time::Duration::from_secs(300),
                limits: crate::aws::Limits::default(),
                env: self.loaded.env.clone(),
            }),
            login: None,
            responses: None,
            ambient_auth: credentials_allowed,
            env: self.loaded.env.clone(),
        };
        let kind_name = ApiKind::Bedrock.type_name().to_string();
        Ok(self.provider(endpoint, self.models(), kind_name, false, None))
    }
}

impl Loaded {
    /// Resolves the large (`small == false`) or small model: the flag, else `models.large/small`,
    /// else the catalog default of the first configured provider. A model is `PROVIDER/MODEL` or
    /// a model id offered by exactly one configured provider.
    pub(crate) fn resolve_model(
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
    pub(crate) fn resolve_model_with(
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
        let which = if small { "small" } else { "large" };
        self.any_provider(table, flag, small)?;
        let providers = &table.ready;
        let (provider_id, model_id, selected) = match flag {
            Some(f) => {
                let (p, m) = split_flag(providers, catalog, &self.config.providers, f);
                (p, m, SelectedModel::default())
            }
            None => self.chosen_model(providers, small)?,
        };
        let want = Want {
            which,
            model_id: &model_id,
            selected: &selected,
        };
        match provider_id {
            Some(pid) => want.at_provider(table, catalog, &pid),
            None => want.anywhere(providers, catalog),
        }
    }

    /// Fails when no provider can be called, or the one named is a catalog provider that is
    /// not configured, saying what it needs.
    fn any_provider(
        &self,
        table: &ProviderTable,
        flag: Option<&str>,
        small: bool,
    ) -> Result<(), ConfigError> {
        let providers = &table.ready;
        let which = if small { "small" } else { "large" };
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
        if !providers.is_empty() {
            return Ok(());
        }
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
        Err(ConfigError::NoProvider(
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
        ))
    }

    /// The model the configuration chooses without a flag: `models.large/small`; for the small
    /// model, else the large model's provider's default small model, else the large model
    /// itself; else the default of the first provider.
    fn chosen_model(
        &self,
        providers: &[Provider],
        small: bool,
    ) -> Result<(Option<String>, String, SelectedModel), ConfigError> {
        let chosen = if small {
            self.config.models.small.clone()
        } else {
            self.config.models.large.clone()
        };
        Ok(match (chosen, &self.config.models.large) {
            (Some(sel), _) => (
                Some(sel.provider.clone()).filter(|p| !p.is_empty()),
                sel.model.clone(),
                sel,
            ),
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
                let (p, m) = first_default(providers, small)?;
                (Some(p), m, SelectedModel::default())
            }
        })
    }
}

/// `-m PROVIDER/MODEL` or `-m MODEL`: the provider it names (if any) and the model id.
fn split_flag(
    providers: &[Provider],
    catalog: &[crate::catalog::Provider],
    defined: &BTreeMap<String, ProviderConfig>,
    f: &str,
) -> (Option<String>, String) {
    let configured = |p: &str| providers.iter().any(|x| x.id == p);
    let known = |p: &str| {
        configured(p) || catalog.iter().any(|c| c.id.as_str() == p) || defined.contains_key(p)
    };
    match f.split_once('/') {
        Some((p, m)) if configured(p) => (Some(p.to_string()), m.to_string()),
        // `known/model` names that provider unless the whole string is a model id
        // (OpenRouter-style ids contain a slash).
        Some((p, m)) if known(p) && !providers.iter().any(|x| offers(x, f)) => {
            (Some(p.to_string()), m.to_string())
        }
        _ => (None, f.to_string()),
    }
}

fn offers(p: &Provider, m: &str) -> bool {
    p.models.iter().any(|x| x.id.eq_ignore_ascii_case(m))
}

/// The first provider's default model; a provider without models listed asks its server (when
/// first needed).
fn first_default(providers: &[Provider], small: bool) -> Result<(String, String), ConfigError> {
    providers
        .iter()
        .find_map(|p| {
            let first = |p: &Provider| p.default_model(small).map(|m| (p.id.clone(), m.id.clone()));
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
                    Some(format!("; provider '{}' listed no models ({w})", p.id))
                })
                .collect();
            ConfigError::Model(format!(
                "no model selected: set models.large in crush.json or pass -m PROVIDER/MODEL{why}"
            ))
        })
}

/// The model asked for, to be found at a provider.
struct Want<'a> {
    /// `large` or `small`, for messages.
    which: &'static str,
    model_id: &'a str,
    selected: &'a SelectedModel,
}

impl Want<'_> {
    /// The model at `p`. A model named but not listed with a window: its server (or the
    /// subscription, crush(1) LOGIN) may say what it is.
    fn pick(&self, p: &Provider) -> ResolvedModel {
        let find = |p: &Provider| {
            p.models
                .iter()
                .find(|m| m.id.eq_ignore_ascii_case(self.model_id))
                .cloned()
        };
        let model = match find(p) {
            Some(m) if m.context_window > 0 || !p.discover => Some(m),
            listed => find(&p.discovered()).or(listed),
        }
        .unwrap_or_else(|| Model {
            id: self.model_id.to_string(),
            ..Default::default()
        });
        ResolvedModel {
            provider: p.clone(),
            model,
            selected: self.selected.clone(),
        }
    }

    /// The model at provider `pid`, which must be ready.
    fn at_provider(
        &self,
        table: &ProviderTable,
        catalog: &[crate::catalog::Provider],
        pid: &str,
    ) -> Result<ResolvedModel, ConfigError> {
        let (which, model_id) = (self.which, self.model_id);
        let p = table.ready.iter().find(|p| p.id == pid).ok_or_else(|| {
            if let Some(why) = table.why_unusable(pid) {
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
                configured_list(&table.ready)
            ))
        })?;
        Ok(self.pick(p))
    }

    /// The model at the one provider that offers it (or whose server lists it).
    fn anywhere(
        &self,
        providers: &[Provider],
        catalog: &[crate::catalog::Provider],
    ) -> Result<ResolvedModel, ConfigError> {
        let (which, model_id) = (self.which, self.model_id);
        let matches: Vec<&Provider> = providers.iter().filter(|p| offers(p, model_id)).collect();
        // Else the servers that list their models may know it.
        let listed: Vec<Provider> = if matches.is_empty() {
            providers
                .iter()
                .filter(|p| p.discover)
                .map(Provider::discovered)
                .filter(|p| offers(p, model_id))
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
            [p] => Ok(self.pick(p)),
            [] => {
                let elsewhere: Vec<String> = catalog
                    .iter()
                    .filter(|c| !providers.iter().any(|x| x.id == c.id.as_str()))
                    .filter(|c| c.models.iter().any(|m| m.id.eq_ignore_ascii_case(model_id)))
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
                    configured_list(providers)
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

/// The ids of the ready providers, for messages.
fn configured_list(providers: &[Provider]) -> String {
    providers
        .iter()
        .map(|p| p.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
