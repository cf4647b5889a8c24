//! `crush config show [--origin] [--json]`, `crush dirs` and `crush trust [--revoke]`.

use crate::config::pos::{self, dotted};
use crate::config::{ConfigError, Loaded, Origin, layers, state};
use crate::paths;
use serde_json::{Map, Value, json};

/// Keys whose literal values are secrets: shown only when they are a `$VAR`/`$(...)` template.
const SECRET_KEYS: &[&str] = &["api_key", "oauth_client_secret", "oauth_token", "oauth"];
/// Header and environment maps whose values may be secrets.
const SECRET_MAPS: &[&str] = &["extra_headers", "headers", "env"];
/// Keys whose values are URLs: shown with their user, password and query values hidden.
const URL_KEYS: &[&str] = &["base_url", "url", "api_endpoint"];

fn mask(v: &mut Value, key: Option<&str>, in_map: bool) {
    match v {
        Value::Object(m) => {
            let map_here = key.is_some_and(|k| SECRET_MAPS.contains(&k));
            for (k, x) in m.iter_mut() {
                mask(x, Some(k), map_here);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask(x, key, in_map)),
        Value::String(s) if !in_map && key.is_some_and(|k| URL_KEYS.contains(&k)) => {
            *s = crate::net::redact_url(s)
        }
        Value::String(s)
            if (in_map || key.is_some_and(|k| SECRET_KEYS.contains(&k)))
                && !s.contains('$')
                && !s.is_empty() =>
        {
            *s = "********".into()
        }
        _ => {}
    }
}

fn leaves(v: &Value, ptr: String, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, pos::child(&ptr, k), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{ptr}/{i}"), out);
            }
        }
        _ => out.push((ptr, v.clone())),
    }
}

fn origin_json(o: &Origin) -> Value {
    let mut m = Map::new();
    m.insert("layer".into(), json!(o.kind.number()));
    m.insert("layer_name".into(), json!(o.kind.label()));
    if let Some(f) = &o.file {
        m.insert("file".into(), json!(f.to_string_lossy()));
    }
    if let Some(l) = o.line {
        m.insert("line".into(), json!(l));
    }
    if let Some(d) = &o.detail {
        m.insert("detail".into(), json!(d));
    }
    Value::Object(m)
}

/// `crush config check`: every warning of the load (unknown keys, keys Go Crush reads and crush
/// ignores, crushrc lines that did nothing) and of the hooks it defines (crush.json's and
/// Claude Code's settings files', checked where hooks are read; Claude Code events crush does
/// not have), one a line, and the exit
/// status: 1 when there is any (crush(1) CONFIGURATION).
pub(crate) fn config_check(loaded: &Loaded) -> (String, crate::exit::ExitCode) {
    let mut problems = loaded.warnings.clone();
    match crate::hooks::HookConfig::from_loaded(loaded) {
        Ok((cfg, warnings)) => {
            problems.extend(warnings);
            // A Claude Code hook of an event crush has no moment for never runs (crush(1)
            // HOOKS, Not as in Claude Code): an ignored setting like any other.
            problems.extend(
                cfg.unsupported
                    .iter()
                    .map(|u| format!("{u}: a Claude Code hook event crush does not have; not run")),
            );
        }
        Err(p) => problems.extend(p.warnings.into_iter().chain(p.errors)),
    }
    if problems.is_empty() {
        return (
            "configuration: no problems found\n".into(),
            crate::exit::ExitCode::Success,
        );
    }
    let mut out = String::new();
    for w in &problems {
        out.push_str(&crate::visible::text(w));
        out.push('\n');
    }
    out.push_str(&format!(
        "configuration: {} problem{}\n",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    ));
    (out, crate::exit::ExitCode::Failure)
}

/// The text of `crush config show`.
pub(crate) fn config_show(loaded: &Loaded, origin: bool, as_json: bool) -> String {
    let mut merged = loaded.merged.clone();
    mask(&mut merged, None, false);
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    match (origin, as_json) {
        (false, false) | (false, true) => format!("{}\n", pretty(&merged)),
        (true, true) => {
            let mut list = Vec::new();
            leaves(&merged, String::new(), &mut list);
            let origins: Map<String, Value> = list
                .iter()
                .filter_map(|(p, _)| loaded.origins.get(p).map(|o| (p.clone(), origin_json(o))))
                .collect();
            let layers: Vec<Value> = loaded
                .layers
                .iter()
                .map(|l| {
                    json!({"layer": l.kind.number(), "layer_name": l.kind.label(),
                           "file": l.path.as_ref().map(|p| p.to_string_lossy())})
                })
                .collect();
            format!(
                "{}\n",
                pretty(
                    &json!({"config": merged, "origins": origins, "layers": layers,
                    "sandbox": crate::config::sandbox::configured(loaded),
                    "claude_permissions": loaded.claude_rules.rules.iter().map(|r| json!({
                        "effect": r.effect.key(), "rule": r.text, "file": r.file.to_string_lossy()
                    })).collect::<Vec<_>>()})
                )
            )
        }
        (true, false) => {
            let mut out = String::from("# layers, lowest priority first:\n");
            for l in &loaded.layers {
                out.push_str(&format!(
                    "#  {:>2} {}{}\n",
                    l.kind.number(),
                    l.kind.label(),
                    l.path
                        .as_ref()
                        .map(|p| format!(" {}", p.display()))
                        .unwrap_or_default()
                ));
            }
            if let Some(n) = loaded.trust.notice() {
                out.push_str(&format!("# {n}\n"));
            }
            out.push_str(&format!(
                "# sandbox: {}\n",
                crate::config::sandbox::configured(loaded)
            ));
            let mut list = Vec::new();
            leaves(&merged, String::new(), &mut list);
            for (p, v) in list {
                let o = loaded
                    .origins
                    .get(&p)
                    .map(|o| o.to_string())
                    .unwrap_or_else(|| "?".into());
                out.push_str(&format!("{} = {v}\t# {o}\n", dotted(&p)));
            }
            for r in &loaded.claude_rules.rules {
                out.push_str(&format!(
                    "claude permissions.{} = \"{}\"\t# {}\n",
                    r.effect.key(),
                    r.text,
                    r.file.display()
                ));
            }
            out
        }
    }
}

/// The text of `crush dirs`: one `label<TAB>path` line each.
pub(crate) fn dirs(loaded: &Loaded) -> String {
    let mut out = format!(
        "config\t{}\ndata\t{}\nproject\t{}\nproject data\t{}\nglobal state\t{}\nworkspace state\t{}\nprovider catalog\t{}\n",
        paths::global_config_dir().display(),
        paths::global_data_dir().display(),
        loaded.project_root.display(),
        loaded.data_dir.display(),
        state::global_path().display(),
        state::workspace_path(&loaded.data_dir).display(),
        crate::catalog::store::cache_path(&paths::global_data_dir()).display(),
    );
    for l in &loaded.layers {
        if let Some(p) = &l.path {
            out.push_str(&format!("layer {}\t{}\n", l.kind.number(), p.display()));
        }
    }
    // Project files found but not used because the project is not trusted.
    for item in loaded
        .trust
        .items
        .iter()
        .filter(|_| !loaded.trust.allowed())
    {
        if let Some(p) = item.text.strip_prefix("crushrc ") {
            out.push_str(&format!("untrusted\t{p}\n"));
        }
    }
    out
}

/// `crush trust [--revoke]` for the project of `cwd`.
pub(crate) fn trust(cwd: &std::path::Path, revoke: bool) -> Result<String, ConfigError> {
    let io = |e: std::io::Error| {
        ConfigError::File(format!(
            "{}: cannot update: {e}",
            state::global_path().display()
        ))
    };
    let review = layers::review_project(cwd)?;
    let root = review.project_root.display().to_string();
    if revoke {
        return Ok(if state::revoke_trust(&review.project_root).map_err(io)? {
            format!(
                "Trust revoked for {root}: its crushrc files, hooks, MCP and LSP servers, $(...) values and settings that need trust will not be used.\n"
            )
        } else {
            format!("{root} was not trusted.\n")
        });
    }
    state::record_trust(&review.project_root, &review.hash).map_err(io)?;
    if !review.needs_trust() {
        // Still recorded: language servers found on PATH start only in a trusted project.
        return Ok(format!(
            "Trusted {root}: it has no crushrc, hooks, MCP or LSP servers, $(...) values or settings \
             that need trust; language servers found on PATH may start in it. Undo with 'crush \
             trust --revoke'.\n"
        ));
    }
    let mut out = format!("Trusted {root}. These will run or apply from now on:\n");
    for it in &review.items {
        out.push_str(&format!("  {it}\n"));
    }
    out.push_str("If any of them changes, crush asks again. Undo with 'crush trust --revoke'.\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_unless_templates() {
        let mut v = json!({"providers": {"p": {"api_key": "sk-live", "extra_headers": {"A": "tok", "B": "$T"}}},
            "mcp": {"m": {"env": {"K": "v"}, "command": "x"}}, "env": {"AWS_PROFILE": "dev"}});
        mask(&mut v, None, false);
        assert_eq!(v["providers"]["p"]["api_key"], json!("********"));
        assert_eq!(v["providers"]["p"]["extra_headers"]["B"], json!("$T"));
        assert_eq!(v["providers"]["p"]["extra_headers"]["A"], json!("********"));
        assert_eq!(v["mcp"]["m"]["command"], json!("x"));
        assert_eq!(v["mcp"]["m"]["env"]["K"], json!("********"));
        let mut v = json!({"providers": {"p": {"base_url": "https://u:pw@h/v1?key=k"}}});
        mask(&mut v, None, false);
        assert_eq!(
            v["providers"]["p"]["base_url"],
            json!("https://****@h/v1?key=****")
        );
    }
}
