//! `crush models [QUERY] [--all] [--json]`: every model of the configured providers, then the
//! providers the configuration defines that cannot be used (and why); with `--all` also those of
//! the catalog providers that are not configured (and what they need); filtered by a
//! case-insensitive QUERY. Piped, one `PROVIDER/MODEL` per usable model (Go Crush's format); on
//! a terminal, a table with context windows, prices and status.

use crate::catalog::{Catalog, Model, Provider as CatalogProvider};

use crate::config::{ConfigError, Loaded, ProviderTable};
use crate::text::width::{pad, str_width, truncate};
use serde_json::{Value, json};
use std::fmt::Write;

/// One line of the listing.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub provider: String,
    /// The model; for a provider without any, a placeholder (`no_models`).
    pub model: Model,
    /// The provider lists no model: the row stands for the provider itself.
    pub no_models: bool,
    pub configured: bool,
    /// The configuration defines the provider (usable or not, not disabled): shown without
    /// `--all`.
    pub defined: bool,
    /// For a provider that is not configured: what it needs (`set $ANTHROPIC_API_KEY`, ...).
    pub status: String,
    /// `large` / `small` when this is the model a run would use.
    pub role: Vec<&'static str>,
}

impl Row {
    pub(crate) fn full_id(&self) -> String {
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
            "price_source": if priced { m.price_source.as_ref().map_or("config", |s| s.as_str()) } else { "unpriced" },
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
    (configured, defined): (bool, bool),
    status: &str,
    role: &dyn Fn(&str) -> Vec<&'static str>,
) -> Vec<Row> {
    if models.is_empty() {
        return vec![Row {
            provider: id.to_string(),
            model: Model::default(),
            no_models: true,
            configured,
            defined,
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
            defined,
            status: status.to_string(),
            role: role(&m.id),
        })
        .collect()
}

/// The rows: configured providers first (in the order models are resolved), then the providers
/// the configuration defines that cannot be used, then the rest of the catalog.
pub(crate) fn rows(
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
        out.extend(provider_rows(
            &p.id,
            &p.models,
            (true, true),
            &status,
            &role,
        ));
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
        out.extend(provider_rows(&u.id, &models, (false, true), &status, &none));
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
        let defined = !disabled && loaded.config.providers.contains_key(id);
        out.extend(provider_rows(
            id,
            &c.models,
            (false, defined),
            &status,
            &none,
        ));
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

/// How `crush models` shows its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A JSON array of every row.
    Json,
    /// Aligned columns with prices and status (a terminal).
    Table,
    /// One `PROVIDER/MODEL` per usable model (a pipe).
    Ids,
}

/// The rows `crush models` shows: the user's own providers (usable or not) unless `all`, and
/// those matching `query`.
fn shown<'r>(rows: &'r [Row], query: Option<&str>, all: bool) -> Vec<&'r Row> {
    rows.iter()
        .filter(|r| all || r.configured || r.defined)
        .filter(|r| query.is_none_or(|q| r.matches(q)))
        .collect()
}

/// The text of `crush models` in `shape`.
pub(crate) fn render(rows: &[Row], query: Option<&str>, all: bool, shape: Shape) -> String {
    let rows = shown(rows, query, all);
    match shape {
        Shape::Json => {
            let v: Vec<Value> = rows.iter().map(|r| r.json()).collect();
            format!("{}\n", Value::Array(v))
        }
        Shape::Ids => rows
            .iter()
            .filter(|r| !r.no_models && (all || r.configured))
            .map(|r| format!("{}\n", r.full_id()))
            .collect(),
        Shape::Table => table(&rows),
    }
}

fn table(rows: &[&Row]) -> String {
    let id_w = rows
        .iter()
        .map(|r| str_width(&r.full_id()))
        .max()
        .unwrap_or(0)
        .clamp(14, 60);
    let name_w = rows
        .iter()
        .map(|r| str_width(r.model.name.as_deref().unwrap_or("")))
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
        let name = truncate(m.name.as_deref().unwrap_or(""), name_w);
        let _ = writeln!(
            out,
            "{}  {}  {:>7}  {:<8}  {:>8}  {:>8}  {status}",
            pad(&r.full_id(), id_w),
            pad(name, name_w),
            tokens(m.context_window),
            if r.no_models { "-" } else { m.window_from() },
            price(m.cost_per_1m_in),
            price(m.cost_per_1m_out),
        );
    }
    out
}

/// `crush models [QUERY] [--all] [--json]`; what it says on stderr when nothing is shown.
pub(crate) fn models(
    loaded: &Loaded,
    query: Option<&str>,
    all: bool,
    shape: Shape,
) -> Result<(String, Option<String>), ConfigError> {
    let rows = rows(loaded, loaded.catalog.get(), &loaded.providers())?;
    let text = render(&rows, query, all, shape);
    let empty = shown(&rows, query, all).is_empty();
    let hint = (empty && !all).then(|| {
        match query {
            Some(q) => format!("no configured model matches '{q}'; crush models --all {q} searches the whole catalog"),
            None => "no provider is configured; crush models --all lists the catalog and what each provider needs".to_string(),
        }
    });
    Ok((text, hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(provider: &str, id: &str, configured: bool, status: &str) -> Row {
        Row {
            provider: provider.into(),
            model: Model {
                id: id.into(),
                cost_per_1m_in: Some(3.0),
                cost_per_1m_out: Some(15.0),
                ..Model::default()
            },
            no_models: false,
            configured,
            defined: configured || status.starts_with("unusable"),
            status: status.into(),
            role: Vec::new(),
        }
    }

    #[test]
    fn configured_models_by_default_ids_piped_table_on_a_terminal() {
        let rows = [
            row("mine", "m1", true, "configured"),
            row("gem", "g1", false, "unusable: no key"),
            row("anthropic", "claude", false, "set ANTHROPIC_API_KEY"),
        ];
        assert_eq!(render(&rows, None, false, Shape::Ids), "mine/m1\n");
        assert_eq!(
            render(&rows, None, true, Shape::Ids),
            "mine/m1\ngem/g1\nanthropic/claude\n"
        );
        let t = render(&rows, None, false, Shape::Table);
        assert!(t.starts_with("PROVIDER/MODEL"), "{t}");
        assert!(t.contains("15.00") && t.contains("unusable: no key"), "{t}");
        assert!(!t.contains("anthropic"), "{t}");
        assert!(render(&rows, None, true, Shape::Table).contains("set ANTHROPIC_API_KEY"));
        assert_eq!(render(&rows, Some("m1"), true, Shape::Ids), "mine/m1\n");
    }

    #[test]
    fn the_table_lines_up_wide_names_by_cells() {
        let mut wide = row("mine", "通义", true, "configured");
        wide.model.name = Some("通义千问".into());
        let mut plain = row("mine", "m1", true, "configured");
        plain.model.name = Some("Plain".into());
        let t = render(&[wide, plain], None, false, Shape::Table);
        let at: Vec<usize> = t
            .lines()
            .skip(1)
            .map(|l| str_width(&l[..l.find("3.00").unwrap()]))
            .collect();
        assert_eq!(at.len(), 2, "{t}");
        assert_eq!(at[0], at[1], "{t}");
    }

    #[test]
    fn token_counts_read_well() {
        assert_eq!(tokens(200_000), "200K");
        assert_eq!(tokens(1_000_000), "1.0M");
        assert_eq!(tokens(1_050_000), "1050K");
        assert_eq!(tokens(0), "-");
    }
}
