//! `crush models [QUERY] [--json]`: every model of the configured providers, then the providers
//! the configuration defines that cannot be used (and why), then those of the catalog providers
//! that are not configured (and what they need), filtered by a case-insensitive QUERY.

use crate::catalog::{Catalog, Model, Provider as CatalogProvider};

use crate::config::{ConfigError, Loaded, ProviderTable};
use serde_json::{Value, json};
use std::fmt::Write;

/// One line of the listing.
#[derive(Debug, Clone)]
pub struct Row {
    pub provider: String,
    /// The model; for a provider without any, a placeholder (`no_models`).
    pub model: Model,
    /// The provider lists no model: the row stands for the provider itself.
    pub no_models: bool,
    pub configured: bool,
    /// For a provider that is not configured: what it needs (`set $ANTHROPIC_API_KEY`, ...).
    pub status: String,
    /// `large` / `small` when this is the model a run would use.
    pub role: Vec<&'static str>,
}

impl Row {
    pub fn full_id(&self) -> String {
        if self.no_models {
            format!("{}/-", self.provider)
        } else {
            format!("{}/{}", self.provider, self.model.id)
        }
    }

    fn matches(&self, query: &str) -> bool {
        let q = query.to_lowercase();
        self.full_id().to_lowercase().contains(&q)
            || self
                .model
                .name
                .as_deref()
                .is_some_and(|n| n.to_lowercase().contains(&q))
    }

    fn json(&self) -> Value {
        let m = &self.model;
        let priced = m.cost_per_1m_in.is_some() && m.cost_per_1m_out.is_some();
        json!({
            "provider": self.provider,
            "model": if self.no_models { Value::Null } else { json!(m.id) },
            "name": m.name.as_deref().unwrap_or(&m.id),
            "configured": self.configured,
            "status": self.status,
            "role": self.role,
            "context_window": m.context_window,
            // catalog, server, config, fallback or unknown (crush(1) CONFIGURATION).
            "context_window_source": m.window_from(),
            "default_max_tokens": m.default_max_tokens,
            "can_reason": m.can_reason,
            "supports_attachments": m.supports_attachments,
            "cost_per_1m_in": m.cost_per_1m_in,
            "cost_per_1m_out": m.cost_per_1m_out,
            "cost_per_1m_cache_write": m.cost_per_1m_in_cached,
            "cost_per_1m_cache_read": m.cost_per_1m_out_cached,
            "price_source": if priced { m.price_source.unwrap_or("config") } else { "unpriced" },
        })
    }
}

/// What a catalog provider that is not configured would need, when the provider table does
/// not say (the catalog's providers are hidden).
fn needs(p: &CatalogProvider) -> String {
    if p.kind == crate::catalog::ProviderType::Bedrock {
        return "set AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK"
            .into();
    }
    match p.api_key.strip_prefix('$') {
        Some(var) => format!("set {}", var.trim_matches(['{', '}'])),
        None if p.api_key.is_empty() => "needs an api_key in crush.json".into(),
        None => "needs a base_url".into(),
    }
}

/// A row per model of `models`, or one standing for the provider when it lists none.
fn provider_rows(
    id: &str,
    models: &[Model],
    configured: bool,
    status: &str,
    role: &dyn Fn(&str) -> Vec<&'static str>,
) -> Vec<Row> {
    if models.is_empty() {
        return vec![Row {
            provider: id.to_string(),
            model: Model::default(),
            no_models: true,
            configured,
            status: status.to_string(),
            role: Vec::new(),
        }];
    }
    models
        .iter()
        .map(|m| Row {
            provider: id.to_string(),
            model: m.clone(),
            no_models: false,
            configured,
            status: status.to_string(),
            role: role(&m.id),
        })
        .collect()
}

/// The rows: configured providers first (in the order models are resolved), then the providers
/// the configuration defines that cannot be used, then the rest of the catalog.
pub fn rows(
    loaded: &Loaded,
    catalog: &Catalog,
    table: &ProviderTable,
) -> Result<Vec<Row>, ConfigError> {
    let large = loaded
        .resolve_model_with(&catalog.providers, None, false)
        .ok();
    let small = loaded
        .resolve_model_with(&catalog.providers, None, true)
        .ok();
    let is = |r: &Option<crate::config::ResolvedModel>, p: &str, m: &str| {
        r.as_ref()
            .is_some_and(|r| r.provider.id == p && r.model.id == m)
    };
    let mut out = Vec::new();
    for p in &table.ready {
        let p = &p.discovered();
        // Why a server you asked for its models gave none, short, on stderr.
        if let Some(why) = p.discovery_failure() {
            crate::ewriteln!(
                "crush: provider '{}': cannot list its models: {}",
                p.id,
                crate::visible::text(&why)
            );
        }
        let role = |m: &str| {
            let mut role = Vec::new();
            if is(&large, &p.id, m) {
                role.push("large");
            }
            if is(&small, &p.id, m) {
                role.push("small");
            }
            role
        };
        let status = if p.models.is_empty() {
            format!(
                "configured, no models listed: add providers.{}.models or use -m {}/MODEL",
                p.id, p.id
            )
        } else {
            "configured".to_string()
        };
        out.extend(provider_rows(&p.id, &p.models, true, &status, &role));
    }
    let none = |_: &str| Vec::new();
    for u in &table.unusable {
        let mut models = loaded
            .config
            .providers
            .get(&u.id)
            .map(|p| p.models.clone())
            .unwrap_or_default();
        if let Some(c) = catalog.providers.iter().find(|c| c.id.as_str() == u.id) {
            models = crate::catalog::merge_models(&models, &c.models);
        }
        let status = format!("unusable: {}", u.reason);
        out.extend(provider_rows(&u.id, &models, false, &status, &none));
    }
    for c in loaded.catalog_in_use(&catalog.providers) {
        let id = c.id.as_str();
        if out.iter().any(|r| r.provider == id) {
            continue;
        }
        let disabled = loaded.config.providers.get(id).is_some_and(|u| u.disable);
        let status = if disabled {
            "disabled in crush.json".to_string()
        } else {
            match table.needs.iter().find(|(p, _)| p == id) {
                Some((_, why)) => why.clone(),
                None => needs(c),
            }
        };
        out.extend(provider_rows(id, &c.models, false, &status, &none));
    }
    Ok(out)
}

fn price(v: Option<f64>) -> String {
    match v {
        Some(p) => format!("{p:.2}"),
        None => "-".into(),
    }
}

fn tokens(n: u64) -> String {
    match n {
        0 => "-".into(),
        n if n >= 1_000_000 && n % 100_000 == 0 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{}K", n / 1_000),
        n => n.to_string(),
    }
}

/// The text (aligned columns) or JSON (an array) of `crush models`.
pub fn render(rows: &[Row], query: Option<&str>, as_json: bool) -> String {
    let rows: Vec<&Row> = rows
        .iter()
        .filter(|r| query.is_none_or(|q| r.matches(q)))
        .collect();
    if as_json {
        let v: Vec<Value> = rows.iter().map(|r| r.json()).collect();
        return format!("{}\n", Value::Array(v));
    }
    let id_w = rows
        .iter()
        .map(|r| r.full_id().chars().count())
        .max()
        .unwrap_or(0)
        .clamp(14, 60);
    let name_w = rows
        .iter()
        .map(|r| r.model.name.as_deref().unwrap_or("").chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 36);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<id_w$}  {:<name_w$}  {:>7}  {:<8}  {:>8}  {:>8}  STATUS",
        "PROVIDER/MODEL", "NAME", "CONTEXT", "FROM", "IN $/1M", "OUT $/1M"
    );
    for r in rows {
        let m = &r.model;
        let mut status = r.status.clone();
        if !r.role.is_empty() {
            let _ = write!(status, " (default {})", r.role.join(", "));
        }
        let name: String = m
            .name
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(name_w)
            .collect();
        let _ = writeln!(
            out,
            "{:<id_w$}  {:<name_w$}  {:>7}  {:<8}  {:>8}  {:>8}  {status}",
            r.full_id(),
            name,
            tokens(m.context_window),
            if r.no_models { "-" } else { m.window_from() },
            price(m.cost_per_1m_in),
            price(m.cost_per_1m_out),
        );
    }
    out
}

/// `crush models [QUERY] [--json]`.
pub fn models(loaded: &Loaded, query: Option<&str>, as_json: bool) -> Result<String, ConfigError> {
    let rows = rows(loaded, loaded.catalog.get(), &loaded.providers())?;
    Ok(render(&rows, query, as_json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_read_well() {
        assert_eq!(tokens(200_000), "200K");
        assert_eq!(tokens(1_000_000), "1.0M");
        assert_eq!(tokens(1_050_000), "1050K");
        assert_eq!(tokens(0), "-");
    }
}
