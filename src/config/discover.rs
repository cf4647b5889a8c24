//! Model discovery for providers you define without `models` (or with `discover_models: true`):
//! the server lists them (`GET {base_url}/models`, OpenAI's list; ollama's `/api/tags` at the
//! server's root when that fails). Asked only when a model must be chosen from the list or the
//! list is shown (`crush models`), once per process and base URL.

use super::{Model, Provider};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long one listing may take (Go Crush gives discovery 3 s).
const TIMEOUT: Duration = Duration::from_secs(3);

/// The window assumed for a model of a local server that tells none (llama-cpp-python's server
/// has no metadata endpoint): ollama's and llama.cpp's usual default (crush(1) CONFIGURATION).
pub(crate) const FALLBACK_WINDOW: u64 = 4096;

/// One listed model: its id, the context window the server gave (0: none) and where that came
/// from.
#[derive(Clone, Debug, PartialEq)]
struct Listed {
    id: String,
    window: u64,
    source: &'static str,
}

/// Why a server listed no models (kept with the listings, so it is cloned).
#[derive(Clone, Debug)]
pub(crate) enum ListError {
    /// The request failed, or its answer could not be read (the URL is shown redacted).
    Http { url: String, message: String },
    /// The server answered with another status than 200.
    Status { url: String, status: u16 },
    /// The answer is JSON but not a model list (or provider entry).
    NotAList { url: String, message: String },
    /// The sign-in behind the listing failed (crush(1) LOGIN).
    Login(crate::login::LoginError),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Http { url, message } | ListError::NotAList { url, message } => {
                write!(f, "{url}: {message}")
            }
            ListError::Status { url, status } => write!(f, "{url}: HTTP {status}"),
            ListError::Login(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ListError {}

/// A listing, or why there is none.
type Listing = Result<Vec<Listed>, ListError>;

/// Listings so far, by base URL.
static LISTED: Mutex<Option<HashMap<String, Listing>>> = Mutex::new(None);

impl Provider {
    /// This provider with the models its server lists after the configured ones (those first),
    /// if it discovers its models; unchanged otherwise, or when the server cannot say (the
    /// reason is logged). A configured model without a context window takes the server's.
    pub(crate) fn discovered(&self) -> Provider {
        let mut p = self.clone();
        if !self.discover {
            return p;
        }
        match self.endpoint.login.as_deref() {
            Some(l) if l.provider == "copilot" => {
                copilot(&mut p, l);
                return p;
            }
            Some(l) if l.provider == "hyper" => {
                hyper(&mut p, l);
                return p;
            }
            _ => {}
        }
        match listed(self) {
            Ok(ids) => {
                for l in ids {
                    match p.models.iter_mut().find(|m| m.id == l.id) {
                        Some(m) if m.context_window == 0 => {
                            m.context_window = l.window;
                            m.window_source = Some(l.source);
                        }
                        Some(_) => {}
                        None => p.models.push(Model {
                            name: Some(l.id.clone()),
                            id: l.id,
                            context_window: l.window,
                            window_source: Some(l.source),
                            ..Default::default()
                        }),
                    }
                }
            }
            Err(why) => crate::log::warn(&format!(
                "provider '{}': cannot list its models: {why}",
                self.id
            )),
        }
        p
    }
}

/// Adds the models of the Copilot subscription (crush(1) LOGIN) after those the catalog and the
/// configuration know, and fills the windows they leave unknown. Why Copilot could not say is
/// kept for [`Provider::discovery_failure`].
fn copilot(p: &mut Provider, l: &crate::login::Credential) {
    let listed = match l.copilot_models() {
        Ok(m) => m,
        Err(e) => return failed(p, ListError::Login(e)),
    };
    remember_listed(
        &p.endpoint.base_url,
        listed.iter().map(|m| (m.id.clone(), m.context_window)),
    );
    for m in listed {
        match p.models.iter_mut().find(|x| x.id == m.id) {
            Some(known) if known.context_window == 0 => {
                known.context_window = m.context_window;
                known.window_source = Some("server");
            }
            Some(_) => {}
            None => p.models.push(Model {
                name: Some(m.name),
                id: m.id,
                context_window: m.context_window,
                window_source: Some("server"),
                default_max_tokens: u32::try_from(m.max_output).unwrap_or(u32::MAX),
                can_reason: m.reasoning,
                supports_attachments: m.vision,
                ..Default::default()
            }),
        }
    }
}

/// Adds the models Hyper lists (crush(1) LOGIN) after those already known.
fn hyper(p: &mut Provider, l: &crate::login::Credential) {
    let listed = l.hyper_provider().map_err(ListError::Login).and_then(|v| {
        serde_json::from_value::<crate::catalog::Provider>(v).map_err(|e| ListError::NotAList {
            url: "Hyper's provider entry".into(),
            message: e.to_string(),
        })
    });
    match listed {
        Ok(h) => {
            remember_listed(
                &p.endpoint.base_url,
                h.models.iter().map(|m| (m.id.clone(), m.context_window)),
            );
            p.models = crate::catalog::merge_models(&p.models, &h.models);
        }
        Err(why) => failed(p, why),
    }
}

/// Logs why `p`'s models could not be listed and keeps it for [`Provider::discovery_failure`].
fn failed(p: &Provider, why: ListError) {
    crate::log::warn(&format!(
        "provider '{}': cannot list its models: {why}",
        p.id
    ));
    remember(&p.endpoint.base_url, Err(why));
}

/// Keeps what a signed-in provider's own listing said: each model's id and window.
fn remember_listed(base: &str, models: impl Iterator<Item = (String, u64)>) {
    let listed = models
        .map(|(id, window)| Listed {
            id,
            window,
            source: "server",
        })
        .collect();
    remember(base, Ok(listed));
}

fn remember(base: &str, r: Listing) {
    let mut cache = LISTED.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .get_or_insert_with(HashMap::new)
        .insert(base.to_string(), r);
}

impl Provider {
    /// Why this provider's server listed no models, if it was asked and could not say or
    /// listed none.
    pub(crate) fn discovery_failure(&self) -> Option<String> {
        if !self.discover {
            return None;
        }
        let cache = LISTED.lock().unwrap_or_else(|e| e.into_inner());
        match cache.as_ref()?.get(&self.endpoint.base_url)? {
            Err(why) => Some(why.to_string()),
            Ok(ids) if ids.is_empty() => Some("the server lists none".into()),
            Ok(_) => None,
        }
    }
}

fn listed(p: &Provider) -> Listing {
    let base = p.endpoint.base_url.clone();
    let mut cache = LISTED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = cache.get_or_insert_with(HashMap::new).get(&base) {
        return r.clone();
    }
    let r = list(p);
    cache
        .get_or_insert_with(HashMap::new)
        .insert(base, r.clone());
    r
}

/// Asks the server: OpenAI's `/models`, else ollama's `/api/tags`; then, for models listed
/// with no context window (vLLM gives `max_model_len` in the list), ollama's `/api/show`, LM
/// Studio's `/api/v0/models` and llama.cpp's `/props`; a local server that tells none gets
/// [`FALLBACK_WINDOW`] (crush(1) CONFIGURATION).
fn list(p: &Provider) -> Listing {
    let base = &p.endpoint.base_url;
    let url = crate::net::join_path(base, "/models");
    let head = base.split('?').next().unwrap_or(base).trim_end_matches('/');
    let root = head.strip_suffix("/v1").unwrap_or(head);
    let first = get(p, &url).and_then(|v| {
        ids(&v, "data", "id").ok_or_else(|| ListError::NotAList {
            url: redact(&url),
            message: "not a model list".into(),
        })
    });
    let (mut listed, tags) = match first {
        Ok(l) => (l, false),
        Err(why) => {
            let tags = format!("{root}/api/tags");
            match get(p, &tags).map(|v| ids(&v, "models", "name")) {
                Ok(Some(ids)) => (ids, true),
                _ => return Err(why),
            }
        }
    };
    let missing = |l: &[Listed]| l.iter().any(|m| m.window == 0);
    if missing(&listed) && (tags || is_ollama(p, root)) {
        windows_from_ollama(p, root, &mut listed);
    }
    if missing(&listed) {
        windows_from_server(p, root, &mut listed);
    }
    if missing(&listed) && crate::net::is_local_url(base) {
        let ids: Vec<&str> = listed
            .iter()
            .filter(|m| m.window == 0)
            .map(|m| m.id.as_str())
            .collect();
        crate::activity::note(&format!(
            "crush: provider '{}' does not say the context window of {}; assuming {FALLBACK_WINDOW} tokens (set providers.{}.models[].context_window to change it)",
            p.id,
            crate::visible::line(&ids.join(", ")),
            p.id
        ));
        for m in listed.iter_mut().filter(|m| m.window == 0) {
            m.window = FALLBACK_WINDOW;
            m.source = "fallback";
        }
    }
    Ok(listed)
}

/// An ollama server answers `GET /api/version` with its version.
fn is_ollama(p: &Provider, root: &str) -> bool {
    get(p, &format!("{root}/api/version")).is_ok_and(|v| v["version"].is_string())
}

/// Fills the missing windows from ollama's `POST /api/show`: the model's `num_ctx` parameter
/// (what the server runs it with) when set, else its architecture's `context_length`.
fn windows_from_ollama(p: &Provider, root: &str, listed: &mut [Listed]) {
    let url = format!("{root}/api/show");
    for m in listed.iter_mut().filter(|m| m.window == 0) {
        let Ok(v) = post(p, &url, &serde_json::json!({ "model": m.id })) else {
            continue;
        };
        if let Some(n) = ollama_window(&v) {
            m.window = n;
            m.source = "server";
        }
    }
}

/// The window in an `/api/show` answer (see [`windows_from_ollama`]).
fn ollama_window(v: &Value) -> Option<u64> {
    let num_ctx = v["parameters"].as_str().and_then(|params| {
        params.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("num_ctx"))
                .then(|| w.next()?.parse::<u64>().ok())
                .flatten()
        })
    });
    let info = v["model_info"].as_object();
    let arch = info
        .and_then(|i| i.get("general.architecture"))
        .and_then(Value::as_str);
    let by_arch = arch
        .and_then(|a| info?.get(&format!("{a}.context_length")))
        .and_then(Value::as_u64);
    let any = || {
        info?
            .iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    };
    num_ctx.or(by_arch).or_else(any).filter(|&n| n > 0)
}

/// Fills the missing windows from LM Studio's per-model list (the loaded context, else the
/// model's maximum) or llama.cpp's one model (`default_generation_settings.n_ctx`).
fn windows_from_server(p: &Provider, root: &str, listed: &mut [Listed]) {
    if let Ok(v) = get(p, &format!("{root}/api/v0/models")) {
        for m in v["data"].as_array().into_iter().flatten() {
            let w = m["loaded_context_length"]
                .as_u64()
                .or(m["max_context_length"].as_u64())
                .unwrap_or(0);
            if let Some(entry) = listed
                .iter_mut()
                .find(|l| l.window == 0 && m["id"].as_str() == Some(&l.id))
            {
                entry.window = w;
            }
        }
    }
    if !listed.iter().any(|l| l.window == 0) {
        return;
    }
    if let Ok(v) = get(p, &format!("{root}/props"))
        && let Some(n) = v["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or(v["n_ctx"].as_u64())
    {
        for entry in listed.iter_mut().filter(|l| l.window == 0) {
            entry.window = n;
        }
    }
}

fn redact(url: &str) -> String {
    crate::net::redact_url(url)
}

/// `v[list][*][key]` with the item's `max_model_len` (vLLM; 0 when absent), if `v[list]` is
/// an array.
fn ids(v: &Value, list: &str, key: &str) -> Option<Vec<Listed>> {
    let items = v.get(list)?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|m| {
                let id = m.get(key).and_then(Value::as_str)?;
                let window = m["max_model_len"].as_u64().unwrap_or(0);
                Some(Listed {
                    id: id.to_string(),
                    window,
                    source: "server",
                })
            })
            .filter(|l| !l.id.is_empty())
            .collect(),
    )
}

fn get(p: &Provider, url: &str) -> Result<Value, ListError> {
    send(p, url, None)
}

fn post(p: &Provider, url: &str, body: &Value) -> Result<Value, ListError> {
    send(p, url, Some(body))
}

/// A GET, or a POST of `body`, with the provider's key and headers; the answer's JSON.
fn send(p: &Provider, url: &str, body: Option<&Value>) -> Result<Value, ListError> {
    let http = |message: String| ListError::Http {
        url: redact(url),
        message,
    };
    let agent = crate::net::agent(
        url,
        crate::net::Timeouts {
            connect: Some(TIMEOUT),
            global: Some(TIMEOUT),
            ..Default::default()
        },
    );
    let mut headers: Vec<(&str, String)> = Vec::new();
    if let Some(k) = p.endpoint.api_key.as_deref().filter(|k| !k.is_empty()) {
        headers.push(("authorization", format!("Bearer {k}")));
    }
    for (k, v) in &p.endpoint.headers {
        headers.push((k.as_str(), v.clone()));
    }
    let sent = match body {
        None => {
            let mut rb = agent.get(url);
            for (k, v) in &headers {
                rb = rb.header(*k, v.as_str());
            }
            rb.call()
        }
        Some(b) => {
            let mut rb = agent.post(url).header("content-type", "application/json");
            for (k, v) in &headers {
                rb = rb.header(*k, v.as_str());
            }
            rb.send(b.to_string())
        }
    };
    let resp = sent.map_err(|e| http(e.to_string()))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(ListError::Status {
            url: redact(url),
            status,
        });
    }
    let mut body = resp.into_body();
    let text = body
        .with_config()
        .limit(8 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| http(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| http(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ollama_num_ctx_wins_over_the_architecture_window() {
        let show = json!({
            "parameters": "stop \"<|im_end|>\"\nnum_ctx                        8192",
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}
        });
        assert_eq!(ollama_window(&show), Some(8192));
        let plain = json!({"model_info": {"general.architecture": "llama", "llama.context_length": 131072}});
        assert_eq!(ollama_window(&plain), Some(131072));
        let no_arch = json!({"model_info": {"gemma3.context_length": 8192}});
        assert_eq!(ollama_window(&no_arch), Some(8192));
        assert_eq!(
            ollama_window(&json!({"model_info": {"llama.block_count": 32}})),
            None
        );
        assert_eq!(ollama_window(&json!({})), None);
    }
}
