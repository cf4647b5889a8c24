//! The `mcp` section (crush(1) MCP SERVERS) as the MCP client takes it: each server's values
//! expanded (`$VAR`, `$(...)`, as provider values are; a project's reach here only once it is
//! trusted), its timeout and filters, and the OAuth tokens kept in the global state.

use super::error::expand_field;
use super::json::{home_long, strings};
use super::{Loaded, SpecError, state};
use crate::mcp::{ClientConfig, Command, ServerSpec, TokenStore, TransportSpec};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Go Crush's default: start-up and each request.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// OAuth servers get longer by default (a token may need refreshing first).
pub(crate) const DEFAULT_OAUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// The key of the global state that holds MCP OAuth tokens, one per server name.
pub(crate) const STATE_KEY: &str = "mcp_oauth";

/// One server's spec; Err names the problem (the caller names the server).
fn spec(loaded: &Loaded, name: &str, v: &Value) -> Result<ServerSpec, SpecError> {
    let Value::Object(m) = v else {
        return Err(SpecError::NotObject);
    };
    let x = |field: &str, value: &str| expand_field(&loaded.env, field, value);
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let map = |k: &str| -> Result<Vec<(String, String)>, SpecError> {
        let mut out = Vec::new();
        if let Some(Value::Object(h)) = m.get(k) {
            for (hk, hv) in h {
                let val = x(&format!("{k}.{hk}"), hv.as_str().unwrap_or(""))?;
                out.push((hk.clone(), val));
            }
        }
        Ok(out)
    };
    let kind = match s("type") {
        "" if !s("url").is_empty() && s("command").is_empty() => "http",
        "" => "stdio",
        k => k,
    };
    let transport = match kind {
        "stdio" => {
            let command = x("command", s("command"))?;
            if command.trim().is_empty() {
                return Err(SpecError::Invalid("a stdio server needs a command".into()));
            }
            let args = strings(m.get("args"))
                .iter()
                .enumerate()
                .map(|(i, a)| x(&format!("args[{i}]"), a))
                .collect::<Result<Vec<_>, _>>()?;
            TransportSpec::Stdio(Command {
                command: home_long(command.trim()),
                args,
                // The session's variables, under the server's own `env`.
                env: [loaded.env.vars(), map("env")?].concat(),
                cwd: loaded.cwd.clone(),
            })
        }
        "http" | "sse" | "streamable-http" => {
            let url = x("url", s("url"))?;
            if url.trim().is_empty() {
                return Err(SpecError::Invalid(format!("an {kind} server needs a url")));
            }
            // Headers that expand to nothing are dropped, as Go Crush does.
            let headers = map("headers")?
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .collect();
            let url = url.trim().to_string();
            if kind == "sse" {
                TransportSpec::Sse { url, headers }
            } else {
                TransportSpec::Http { url, headers }
            }
        }
        other => {
            return Err(SpecError::Invalid(format!(
                "unknown type '{other}' (stdio, http or sse)"
            )));
        }
    };
    let oauth = m.get("oauth").and_then(Value::as_bool).unwrap_or(false);
    let timeout = match m.get("timeout").and_then(Value::as_f64) {
        Some(t) if t > 0.0 && t.is_finite() => Duration::from_secs_f64(t.min(86_400.0)),
        _ if oauth => DEFAULT_OAUTH_TIMEOUT,
        _ => DEFAULT_TIMEOUT,
    };
    let opt = |k: &str| -> Result<Option<String>, SpecError> {
        match s(k) {
            "" => Ok(None),
            v => x(k, v).map(|v| Some(v.trim().to_string()).filter(|v| !v.is_empty())),
        }
    };
    Ok(ServerSpec {
        name: name.to_string(),
        transport,
        timeout,
        enabled_tools: strings(m.get("enabled_tools")),
        disabled_tools: strings(m.get("disabled_tools")),
        disabled: m.get("disabled").and_then(Value::as_bool).unwrap_or(false),
        oauth,
        oauth_client: ClientConfig {
            client_id: opt("oauth_client_id")?,
            client_secret: opt("oauth_client_secret")?,
            callback_port: m
                .get("oauth_callback_port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0),
        },
        check: crate::guard::Check::new(&loaded.guard, crate::guard::What::Mcp, name),
    })
}

/// The configured servers, by name, and one warning per server that cannot be used as
/// configured (it is left out).
pub(crate) fn servers(loaded: &Loaded) -> (Vec<ServerSpec>, Vec<String>) {
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    let Value::Object(all) = &loaded.config.mcp else {
        return (out, warnings);
    };
    for (name, v) in all {
        match spec(loaded, name, v) {
            Ok(s) => out.push(s),
            Err(e) => warnings.push(format!(
                "MCP server '{name}' ({}): {e}; it is left out",
                loaded.origin_of(&["mcp", name])
            )),
        }
    }
    (out, warnings)
}

/// Claude Code's project `.mcp.json` (`{"mcpServers": {NAME: {...}}}`) as the `mcp` section of a
/// configuration layer: the same fields, `type` guessed from `url` when missing.
pub(crate) fn from_claude(v: &Value) -> Value {
    let mut servers = Map::new();
    if let Some(Value::Object(all)) = v.get("mcpServers") {
        for (name, s) in all {
            servers.insert(name.clone(), s.clone());
        }
    }
    json!({"mcp": servers})
}

/// MCP OAuth tokens in the global state file (written at 0600, like all state).
pub(crate) struct StateTokens;

impl TokenStore for StateTokens {
    fn load(&self, server: &str) -> Option<Value> {
        state::read(&state::global_path())
            .ok()?
            .get(STATE_KEY)?
            .get(server)
            .cloned()
    }

    fn save(&self, server: &str, token: Option<&Value>) {
        let r = state::update(&state::global_path(), |v| {
            if !matches!(v.get(STATE_KEY), Some(Value::Object(_))) {
                v[STATE_KEY] = json!({});
            }
            if let Some(Value::Object(m)) = v.get_mut(STATE_KEY) {
                match token {
                    Some(t) => {
                        m.insert(server.to_string(), t.clone());
                    }
                    None => {
                        m.remove(server);
                    }
                }
            }
        });
        if let Err(e) = r {
            crate::log::warn(&format!(
                "cannot keep the OAuth token of MCP server '{server}' in {}: {e}",
                state::global_path().display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(mcp: Value) -> Loaded {
        let mut l = Loaded::default();
        l.config.mcp = mcp;
        l.cwd = "/work".into();
        l
    }

    #[test]
    fn servers_are_expanded_and_bad_ones_left_out() {
        // SAFETY: a test-only variable nothing else reads.
        unsafe { std::env::set_var("CRUSH_MCP_TEST_TOKEN", "s3cret") };
        let l = loaded(json!({
            "fs": {"command": "npx", "args": ["-y", "$CRUSH_MCP_TEST_TOKEN"], "env": {"K": "v"},
                   "timeout": 0.5, "disabled_tools": ["rm"]},
            "web": {"type": "http", "url": "https://x/mcp",
                    "headers": {"Authorization": "Bearer $CRUSH_MCP_TEST_TOKEN", "Empty": "$CRUSH_MCP_NOPE"}},
            "old": {"type": "sse", "url": "https://y/sse", "oauth": true},
            "guess": {"url": "https://z/mcp"},
            "broken": {"type": "pipe"},
            "nocmd": {"type": "stdio"}
        }));
        let (specs, warnings) = servers(&l);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "guess", "old", "web"]);
        match &specs[0].transport {
            TransportSpec::Stdio(c) => {
                assert_eq!(c.args, ["-y", "s3cret"]);
                assert_eq!(c.env, [("K".to_string(), "v".to_string())]);
                assert_eq!(c.cwd, std::path::PathBuf::from("/work"));
            }
            t => panic!("{t:?}"),
        }
        assert_eq!(specs[0].timeout, Duration::from_millis(500));
        assert_eq!(specs[0].disabled_tools, ["rm"]);
        assert!(matches!(specs[1].transport, TransportSpec::Http { .. }));
        assert!(matches!(specs[2].transport, TransportSpec::Sse { .. }));
        assert_eq!(specs[2].timeout, DEFAULT_OAUTH_TIMEOUT);
        match &specs[3].transport {
            TransportSpec::Http { headers, .. } => assert_eq!(
                headers,
                &[("Authorization".to_string(), "Bearer s3cret".to_string())]
            ),
            t => panic!("{t:?}"),
        }
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("'broken'") && warnings[0].contains("unknown type"));
        assert!(warnings[1].contains("needs a command"));
    }

    #[test]
    fn claude_code_servers_become_the_mcp_section() {
        let v = from_claude(&json!({"mcpServers": {"gh": {"type": "http", "url": "u"}}}));
        assert_eq!(v, json!({"mcp": {"gh": {"type": "http", "url": "u"}}}));
        assert_eq!(from_claude(&json!({})), json!({"mcp": {}}));
    }
}
