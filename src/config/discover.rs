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

/// A listing: the model ids with the context window the server gave (0: none), or why there
/// are none.
type Listing = Result<Vec<(String, u64)>, String>;

/// Listings so far, by base URL.
static LISTED: Mutex<Option<HashMap<String, Listing>>> = Mutex::new(None);

impl Provider {
    /// This provider with the models its server lists after the configured ones (those first),
    /// if it discovers its models; unchanged otherwise, or when the server cannot say (the
    /// reason is logged).
    pub fn discovered(&self) -> Provider {
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
                for (id, window) in ids {
                    if !p.models.iter().any(|m| m.id == id) {
                        p.models.push(Model {
                            name: Some(id.clone()),
                            id,
                            context_window: window,
                            ..Default::default()
                        });
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
        Err(e) => {
            let why = e.to_string();
            crate::log::warn(&format!(
                "provider '{}': cannot list its models: {why}",
                p.id
            ));
            remember(&p.endpoint.base_url, Err(why));
            return;
        }
    };
    remember(
        &p.endpoint.base_url,
        Ok(listed
            .iter()
            .map(|m| (m.id.clone(), m.context_window))
            .collect()),
    );
    for m in listed {
        match p.models.iter_mut().find(|x| x.id == m.id) {
            Some(known) if known.context_window == 0 => known.context_window = m.context_window,
            Some(_) => {}
            None => p.models.push(Model {
                name: Some(m.name),
                id: m.id,
                context_window: m.context_window,
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
    let listed = l.hyper_provider().map_err(|e| e.to_string()).and_then(|v| {
        serde_json::from_value::<crate::catalog::Provider>(v)
            .map_err(|e| format!("not a provider entry: {e}"))
    });
    match listed {
        Ok(h) => {
            remember(
                &p.endpoint.base_url,
                Ok(h.models
                    .iter()
                    .map(|m| (m.id.clone(), m.context_window))
                    .collect()),
            );
            p.models = crate::catalog::merge_models(&p.models, &h.models);
        }
        Err(why) => {
            crate::log::warn(&format!(
                "provider '{}': cannot list its models: {why}",
                p.id
            ));
            remember(&p.endpoint.base_url, Err(why));
        }
    }
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
    pub fn discovery_failure(&self) -> Option<String> {
        if !self.discover {
            return None;
        }
        let cache = LISTED.lock().unwrap_or_else(|e| e.into_inner());
        match cache.as_ref()?.get(&self.endpoint.base_url)? {
            Err(why) => Some(why.clone()),
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
/// with no context window (vLLM gives `max_model_len` in the list), LM Studio's
/// `/api/v0/models` and llama.cpp's `/props` (crush(1) CONFIGURATION).
fn list(p: &Provider) -> Listing {
    let base = &p.endpoint.base_url;
    let url = crate::net::join_path(base, "/models");
    let head = base.split('?').next().unwrap_or(base).trim_end_matches('/');
    let root = head.strip_suffix("/v1").unwrap_or(head);
    let first = get(p, &url).and_then(|v| {
        ids(&v, "data", "id").ok_or_else(|| format!("{}: not a model list", redact(&url)))
    });
    let mut listed = match first {
        Ok(l) => l,
        Err(why) => {
            let tags = format!("{root}/api/tags");
            match get(p, &tags).map(|v| ids(&v, "models", "name")) {
                Ok(Some(ids)) => ids,
                _ => return Err(why),
            }
        }
    };
    if listed.iter().any(|(_, w)| *w == 0) {
        windows_from_server(p, root, &mut listed);
    }
    Ok(listed)
}

/// Fills the missing windows from LM Studio's per-model list (the loaded context, else the
/// model's maximum) or llama.cpp's one model (`default_generation_settings.n_ctx`).
fn windows_from_server(p: &Provider, root: &str, listed: &mut [(String, u64)]) {
    if let Ok(v) = get(p, &format!("{root}/api/v0/models")) {
        for m in v["data"].as_array().into_iter().flatten() {
            let w = m["loaded_context_length"]
                .as_u64()
                .or(m["max_context_length"].as_u64())
                .unwrap_or(0);
            if let Some(entry) = listed
                .iter_mut()
                .find(|(id, win)| *win == 0 && m["id"].as_str() == Some(id))
            {
                entry.1 = w;
            }
        }
    }
    if !listed.iter().any(|(_, w)| *w == 0) {
        return;
    }
    if let Ok(v) = get(p, &format!("{root}/props"))
        && let Some(n) = v["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or(v["n_ctx"].as_u64())
    {
        for entry in listed.iter_mut().filter(|(_, w)| *w == 0) {
            entry.1 = n;
        }
    }
}

fn redact(url: &str) -> String {
    crate::net::redact_url(url)
}

/// `v[list][*][key]` with the item's `max_model_len` (vLLM; 0 when absent), if `v[list]` is
/// an array.
fn ids(v: &Value, list: &str, key: &str) -> Option<Vec<(String, u64)>> {
    let items = v.get(list)?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|m| {
                let id = m.get(key).and_then(Value::as_str)?;
                let window = m["max_model_len"].as_u64().unwrap_or(0);
                Some((id.to_string(), window))
            })
            .filter(|(id, _)| !id.is_empty())
            .collect(),
    )
}

fn get(p: &Provider, url: &str) -> Result<Value, String> {
    let agent = crate::net::agent(
        url,
        crate::net::Timeouts {
            connect: Some(TIMEOUT),
            global: Some(TIMEOUT),
            ..Default::default()
        },
    );
    let mut rb = agent.get(url);
    if let Some(k) = p.endpoint.api_key.as_deref().filter(|k| !k.is_empty()) {
        rb = rb.header("authorization", format!("Bearer {k}"));
    }
    for (k, v) in &p.endpoint.headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    let resp = rb.call().map_err(|e| format!("{}: {e}", redact(url)))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(format!("{}: HTTP {status}", redact(url)));
    }
    let mut body = resp.into_body();
    let text = body
        .with_config()
        .limit(8 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("{}: {e}", redact(url)))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", redact(url)))
}
