//! The `lsp` section and `options.auto_lsp` (crush(1) LANGUAGE SERVERS) as the LSP client takes
//! them: each configured server with its values expanded and the defaults of the well-known
//! server it names, and — in a trusted project, unless `auto_lsp` is false — the well-known
//! servers found on PATH. A project's own entries reach this only once it is trusted (the
//! trust review gates the whole section); detected servers need the trust too, because a
//! language server runs the project's code (build scripts, macros, its own TypeScript).

use super::error::expand_field;
use super::json::{home_long, strings};
use super::{Loaded, SpecError, state};
use crate::guard;
use crate::lsp::known::{self, KNOWN};
use crate::lsp::{ServerSpec, Timing};
use serde_json::Value;
use std::time::Duration;

/// Go Crush's default: start-up, each request, and the wait for diagnostics after an edit.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why detected servers are not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Auto {
    /// Detection ran.
    On,
    /// `options.auto_lsp` is false.
    Off,
    /// The project is not trusted (`crush trust`, `--trust`).
    Untrusted,
}

/// The servers of a session.
pub(crate) struct Setup {
    pub specs: Vec<ServerSpec>,
    /// Configured servers turned off with `disabled`.
    pub disabled: Vec<String>,
    pub auto: Auto,
    /// One line per server that cannot be used as configured (left out).
    pub warnings: Vec<String>,
}

fn settings(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// A configured server; None when it is disabled. Err names the problem.
fn spec(env: &crate::env::Overlay, name: &str, v: &Value) -> Result<Option<ServerSpec>, SpecError> {
    let Value::Object(m) = v else {
        return Err(SpecError::NotObject);
    };
    // `disabled: true` (Go Crush's key) or `enabled: false` turn a server off (crush(1) LSP).
    if m.get("disabled").and_then(Value::as_bool).unwrap_or(false)
        || m.get("enabled").and_then(Value::as_bool) == Some(false)
    {
        return Ok(None);
    }
    let x = |field: &str, value: &str| expand_field(env, field, value);
    let command = x(
        "command",
        m.get("command").and_then(Value::as_str).unwrap_or(""),
    )?;
    let command = command.trim();
    let known = known::find(name).or_else(|| known::find(command));
    let command = match (command, known) {
        ("", Some(k)) => k.command.to_string(),
        ("", None) => return Err(SpecError::Invalid("it needs a command".into())),
        (c, _) => home_long(c),
    };
    let args = match m.get("args") {
        Some(a) => strings(Some(a))
            .iter()
            .enumerate()
            .map(|(i, a)| x(&format!("args[{i}]"), a))
            .collect::<Result<Vec<_>, _>>()?,
        None => known
            .filter(|k| k.command == command)
            .map(|k| k.args.iter().map(|a| a.to_string()).collect())
            .unwrap_or_default(),
    };
    let mut env = Vec::new();
    if let Some(Value::Object(e)) = m.get("env") {
        for (k, val) in e {
            env.push((
                k.clone(),
                x(&format!("env.{k}"), val.as_str().unwrap_or(""))?,
            ));
        }
    }
    let or_known = |key: &str, from: fn(&known::Known) -> &'static [&'static str]| match m.get(key)
    {
        Some(v) => strings(Some(v)),
        None => known
            .map(|k| from(k).iter().map(|s| s.to_string()).collect())
            .unwrap_or_default(),
    };
    let timeout = match m.get("timeout").and_then(Value::as_f64) {
        Some(t) if t > 0.0 && t.is_finite() => Duration::from_secs_f64(t.min(86_400.0)),
        _ => DEFAULT_TIMEOUT,
    };
    Ok(Some(ServerSpec {
        name: name.to_string(),
        command,
        args,
        env,
        filetypes: or_known("filetypes", |k| k.filetypes),
        root_markers: or_known("root_markers", |k| k.root_markers),
        init_options: m.get("init_options").cloned().unwrap_or(Value::Null),
        options: match m.get("options") {
            Some(o) => o.clone(),
            None => known.map(|k| settings(k.settings)).unwrap_or(Value::Null),
        },
        timeout,
        detected: false,
        check: Default::default(),
    }))
}

/// Whether this project's code may run in servers nobody configured for it: the user trusted
/// the project (a trust record for exactly its current definitions), or this invocation does.
fn trusted(loaded: &Loaded) -> bool {
    let t = &loaded.trust;
    if t.trusted_once {
        return true;
    }
    let global = state::read(&state::global_path()).unwrap_or_default();
    state::trusted_hash(&global, &t.project_root).as_deref() == Some(t.hash.as_str())
}

/// The session's servers.
pub(crate) fn servers(loaded: &Loaded) -> Setup {
    let mut setup = Setup {
        specs: Vec::new(),
        disabled: Vec::new(),
        auto: Auto::Off,
        warnings: Vec::new(),
    };
    if let Value::Object(all) = &loaded.config.lsp {
        for (name, v) in all {
            match spec(&loaded.env, name, v) {
                Ok(Some(mut s)) => {
                    s.check = guard::Check::new(&loaded.guard, guard::What::Lsp, name);
                    // The session's variables, under the server's own `env`.
                    s.env = [loaded.env.vars(), std::mem::take(&mut s.env)].concat();
                    setup.specs.push(s)
                }
                Ok(None) => setup.disabled.push(name.clone()),
                Err(e) => setup.warnings.push(format!(
                    "LSP server '{name}' ({}): {e}; it is left out",
                    loaded.origin_of(&["lsp", name])
                )),
            }
        }
    }
    if !loaded.config.options.auto_lsp.unwrap_or(true) {
        return setup;
    }
    if !trusted(loaded) {
        setup.auto = Auto::Untrusted;
        return setup;
    }
    setup.auto = Auto::On;
    let mut groups: Vec<&str> = Vec::new();
    for k in KNOWN {
        let taken = setup
            .specs
            .iter()
            .any(|s| s.name == k.name || s.command == k.command)
            || setup.disabled.iter().any(|d| d == k.name || d == k.command);
        if taken || groups.contains(&k.group) || crate::proc::which(k.command).is_none() {
            continue;
        }
        groups.push(k.group);
        setup.specs.push(ServerSpec {
            name: k.name.to_string(),
            command: k.command.to_string(),
            args: k.args.iter().map(|a| a.to_string()).collect(),
            env: loaded.env.vars(),
            filetypes: k.filetypes.iter().map(|s| s.to_string()).collect(),
            root_markers: k.root_markers.iter().map(|s| s.to_string()).collect(),
            init_options: Value::Null,
            options: settings(k.settings),
            timeout: DEFAULT_TIMEOUT,
            detected: true,
            check: guard::Check::project(&loaded.guard),
        });
    }
    setup
}

fn millis(var: &str) -> Option<Duration> {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// The waits after an edit: `CRUSH_LSP_SETTLE_MS` (the quiet period after the last publish,
/// default 300) and `CRUSH_LSP_WAIT_MS` (the wait for a first publish, default 3000).
pub(crate) fn timing() -> Timing {
    let d = Timing::default();
    Timing {
        settle: millis("CRUSH_LSP_SETTLE_MS").unwrap_or(d.settle),
        first: millis("CRUSH_LSP_WAIT_MS").unwrap_or(d.first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configured_servers_get_the_defaults_of_the_one_they_name() {
        let s = spec(&Default::default(), "gopls", &json!({}))
            .unwrap()
            .unwrap();
        assert_eq!(s.command, "gopls");
        assert_eq!(s.filetypes, ["go", "gomod", "gowork", "gotmpl"]);
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        let s = spec(
            &Default::default(),
            "py",
            &json!({"command": "pyright-langserver", "timeout": 0.5, "filetypes": ["py"],
                "env": {"A": "b"}, "init_options": {"x": 1}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.args, ["--stdio"]);
        assert_eq!(s.filetypes, ["py"]);
        assert_eq!(s.env, [("A".to_string(), "b".to_string())]);
        assert_eq!(s.timeout, Duration::from_millis(500));
        assert_eq!(s.init_options, json!({"x": 1}));
        assert!(s.options["python"]["analysis"].is_object());
        assert!(
            spec(&Default::default(), "x", &json!({"disabled": true}))
                .unwrap()
                .is_none()
        );
        assert!(
            spec(&Default::default(), "gopls", &json!({"enabled": false}))
                .unwrap()
                .is_none()
        );
        assert!(
            spec(&Default::default(), "gopls", &json!({"enabled": true}))
                .unwrap()
                .is_some()
        );
        assert!(
            spec(&Default::default(), "mystery", &json!({}))
                .unwrap_err()
                .to_string()
                .contains("needs a command")
        );
        assert!(spec(&Default::default(), "x", &json!([])).is_err());
    }
}
