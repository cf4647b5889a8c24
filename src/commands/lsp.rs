//! `crush lsp list` (crush(1) LANGUAGE SERVERS): every language server a session in this
//! project would have — configured, disabled, or found on PATH — is started as a session would
//! start it (in the project root; a detected server only when the root holds one of its
//! markers), reported with its state, and stopped.

use crate::app::{self, AppError, Global};
use crate::config::lsp::{self as setup, Auto};
use crate::lsp::{Manager, Status};
use serde_json::{Value, json};

fn status_json(s: &Status) -> Value {
    json!({
        "name": s.name,
        "command": s.command,
        "detected": s.detected,
        "filetypes": s.filetypes,
        "state": s.state,
        "error": s.error,
        "root": s.root.as_ref().map(|r| r.display().to_string()),
        "server": s.server,
    })
}

fn auto_name(a: Auto) -> &'static str {
    match a {
        Auto::On => "on",
        Auto::Off => "off",
        Auto::Untrusted => "untrusted",
    }
}

/// The text of `crush lsp list`.
pub(crate) fn list_text(statuses: &[Status], disabled: &[String], auto: Auto) -> String {
    let mut out = String::new();
    if statuses.is_empty() && disabled.is_empty() {
        out.push_str("No language servers configured or found on PATH for this project.\n");
    }
    for s in statuses {
        out.push_str(&format!("{} ({}", s.name, s.command));
        if s.detected {
            out.push_str(", found on PATH");
        }
        out.push_str(&format!("): {}", s.state));
        if let Some(who) = &s.server {
            out.push_str(&format!(", {who}"));
        }
        if let Some(r) = &s.root {
            out.push_str(&format!(", root {}", r.display()));
        }
        out.push('\n');
        if s.state == "idle" {
            out.push_str(
                "  starts when a file of its type under one of its root markers is touched\n",
            );
        }
        if !s.filetypes.is_empty() {
            out.push_str(&format!("  file types: {}\n", s.filetypes.join(", ")));
        }
        if let Some(e) = &s.error {
            out.push_str(&format!("  error: {e}\n"));
        }
    }
    for d in disabled {
        out.push_str(&format!("{d}: disabled\n"));
    }
    match auto {
        Auto::Untrusted => out.push_str(
            "Language servers found on PATH are not started: the project is not trusted \
             ('crush trust', or --trust once).\n",
        ),
        Auto::Off => out
            .push_str("Language servers found on PATH are not used (options.auto_lsp is false).\n"),
        Auto::On => {}
    }
    out
}

/// `crush lsp list [--json]`: starts every server that can start without a file, waits for
/// each (bounded by its timeout), reports them and stops them.
pub(crate) fn list(global: &Global, as_json: bool) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let s = setup::servers(&loaded);
    for w in &s.warnings {
        crate::ewriteln!("crush: warning: {}", crate::visible::text(w));
    }
    let manager = Manager::new(&loaded.project_root, s.specs, setup::timing(), false);
    manager.start_all();
    let statuses = manager.statuses();
    manager.shutdown();
    if as_json {
        let mut servers: Vec<Value> = statuses.iter().map(status_json).collect();
        servers.extend(
            s.disabled
                .iter()
                .map(|d| json!({"name": d, "state": "disabled"})),
        );
        let v = json!({"auto_lsp": auto_name(s.auto), "servers": servers});
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".into())
        ));
    }
    Ok(list_text(&statuses, &s.disabled, s.auto))
}
