//! `crush mcp list` and `crush mcp login` (crush(1) MCP SERVERS): every configured server is
//! started as a session would start it, and reported with its transport, state, revision, tools
//! and last error; a login authorizes crush with an HTTP server through the browser.

use crate::app::{self, AppError, Global};
use crate::mcp::Status;
use serde_json::{Value, json};
use std::time::Duration;

fn status_json(s: &Status) -> Value {
    json!({
        "name": s.name,
        "transport": s.transport,
        "state": s.state,
        "version": s.version,
        "server": s.server,
        "tools": s.tools,
        "prompts": s.prompts,
        "error": s.error,
    })
}

/// The text of `crush mcp list` (also the REPL's `/mcp`).
pub(crate) fn list_text(statuses: &[Status]) -> String {
    if statuses.is_empty() {
        return "No MCP servers configured (see 'man crush', MCP SERVERS).\n".into();
    }
    let mut out = String::new();
    for s in statuses {
        out.push_str(&format!("{} ({}): {}", s.name, s.transport, s.state));
        if let Some(v) = s.version {
            out.push_str(&format!(", MCP {v}"));
        }
        if let Some(who) = &s.server {
            out.push_str(&format!(", {who}"));
        }
        out.push('\n');
        if let Some(e) = &s.error {
            out.push_str(&format!("  error: {e}\n"));
        }
        if matches!(s.state, "connected" | "stopped") {
            let tools = if s.tools.is_empty() {
                "none".to_string()
            } else {
                s.tools.join(", ")
            };
            out.push_str(&format!("  tools ({}): {tools}\n", s.tools.len()));
            if !s.prompts.is_empty() {
                out.push_str(&format!(
                    "  prompts ({}): {}\n",
                    s.prompts.len(),
                    s.prompts.join(", ")
                ));
            }
        }
    }
    out
}

/// `crush mcp list [--json]`: starts every configured server, waits for each to start or fail
/// (bounded by its timeout), reports them and stops them.
pub(crate) fn list(global: &Global, as_json: bool) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let mcp = app::start_mcp(&loaded);
    let m = mcp.manager();
    m.wait_ready(None);
    let statuses = m.statuses();
    m.shutdown();
    if as_json {
        let v: Vec<Value> = statuses.iter().map(status_json).collect();
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| "[]".into())
        ));
    }
    Ok(list_text(&statuses))
}

/// How long `crush mcp login` waits for the browser (`CRUSH_MCP_LOGIN_TIMEOUT`, seconds;
/// default 300).
pub(crate) fn login_wait() -> Duration {
    let s = std::env::var("CRUSH_MCP_LOGIN_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0 && s.is_finite())
        .unwrap_or(300.0);
    Duration::from_secs_f64(s)
}

/// `crush mcp login NAME`: the OAuth authorization of an HTTP server (its URL is printed and
/// opened in the browser), the token kept in the global state, then the server connected.
pub(crate) fn login(global: &Global, name: &str) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let (specs, _) = crate::config::mcp::servers(&loaded);
    let Some(spec) = specs.into_iter().find(|s| s.name == name) else {
        return Err(AppError::Usage(format!(
            "no MCP server named '{name}' is configured (crush mcp list shows them)"
        )));
    };
    let manager = crate::mcp::Manager::new(
        loaded.project_root.clone(),
        std::sync::Arc::new(crate::config::mcp::StateTokens),
        loaded.env.clone(),
    );
    manager.set_servers(vec![spec]);
    manager.wait_ready(None);
    let cwd = loaded.cwd.clone();
    let open = |url: &str| {
        let shown = crate::visible::line(url);
        match crate::mcp::oauth::browser_host(url) {
            Ok(host) => crate::ewriteln!(
                "crush: opening your browser at {} to authorize MCP server '{name}'; if it does not open, visit:\n{shown}",
                crate::visible::line(&host)
            ),
            Err(e) => crate::ewriteln!("crush: {e}"),
        }
        if let Err(e) = crate::mcp::oauth::open_browser(url, &cwd) {
            crate::log::warn(&e.to_string());
        }
    };
    let r = manager.login(name, &open, login_wait());
    let statuses = manager.statuses();
    manager.shutdown();
    r?;
    let tools = statuses.first().map_or(0, |s| s.tools.len());
    Ok(format!(
        "MCP server '{name}' is authorized ({tools} tool(s)); the token is kept in {}\n",
        crate::config::state::global_path().display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_text() {
        let s = vec![
            Status {
                name: "fs".into(),
                transport: "stdio",
                state: "connected",
                version: Some("2025-06-18"),
                server: Some("files 1.0".into()),
                tools: vec!["read".into(), "write".into()],
                prompts: vec!["review".into()],
                error: None,
            },
            Status {
                name: "web".into(),
                transport: "http",
                state: "failed",
                version: None,
                server: None,
                tools: vec![],
                prompts: vec![],
                error: Some("HTTP 404".into()),
            },
        ];
        assert_eq!(
            list_text(&s),
            "fs (stdio): connected, MCP 2025-06-18, files 1.0\n  tools (2): read, write\n  \
             prompts (1): review\nweb (http): failed\n  error: HTTP 404\n"
        );
        assert!(list_text(&[]).starts_with("No MCP servers"));
        assert_eq!(status_json(&s[1])["error"], "HTTP 404");
    }
}
