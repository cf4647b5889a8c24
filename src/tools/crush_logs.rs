//! The `crush_logs` tool: the last entries of the project's log (the file `crush logs` prints),
//! as `TIME LEVEL message key=value`, with the values of secret-looking keys redacted.

use super::common::opt_u64;
use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::path::Path;

pub(crate) struct CrushLogs;

pub(crate) const DEFAULT_LINES: u64 = 50;
pub(crate) const MAX_LINES: u64 = 100;
/// Longer lines are cut: a log line is never a reason to fill the context.
const MAX_LINE_CHARS: usize = 2000;

/// Keys whose values are never shown (Go Crush's list).
const SENSITIVE: &[&str] = &[
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "token",
    "secret",
    "password",
    "credential",
];

/// One log line for the model: JSON lines rendered as `crush logs` renders them, with the values
/// of sensitive keys redacted.
fn render(line: &str) -> String {
    let line = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(mut m)) => {
            for (k, v) in m.iter_mut() {
                let lower = k.to_ascii_lowercase();
                if SENSITIVE.iter().any(|s| lower.contains(s)) {
                    *v = json!("[REDACTED]");
                }
            }
            crate::log::render(&Value::Object(m).to_string())
        }
        _ => line.to_string(),
    };
    super::common::truncate_line(&line, MAX_LINE_CHARS)
}

fn logs(path: Option<&Path>, lines: usize) -> String {
    let Some(path) = path else {
        return "No log file found".to_string();
    };
    match crate::log::tail(path, lines) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "No log file found".to_string(),
        Err(e) => format!("Error reading log file: {e}"),
        Ok(l) if l.is_empty() => "Log file is empty".to_string(),
        Ok(l) => l.iter().map(|x| render(x)).collect::<Vec<_>>().join("\n"),
    }
}

impl Tool for CrushLogs {
    fn name(&self) -> &'static str {
        "crush_logs"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    fn read_only(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        format!(
            "Read crush's own log (default {DEFAULT_LINES} entries, max {MAX_LINES}): provider \
             errors and retries, tool failures, hook problems, LSP/MCP issues. Entries read \
             TIME LEVEL MESSAGE key=value; look for WARN first."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "lines": {
                    "type": "integer",
                    "description": format!("Number of recent log entries to return (default {DEFAULT_LINES}, max {MAX_LINES})")
                }
            }
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        opt_u64(input, "lines")?;
        Ok(None)
    }

    fn run(&self, input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let n = match opt_u64(input, "lines")? {
            None | Some(0) => DEFAULT_LINES,
            Some(n) => n.min(MAX_LINES),
        };
        Ok(ToolOutput {
            content: logs(crate::log::file().as_deref(), n as usize),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_rendered_and_secrets_redacted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("crush.log");
        let mut text = String::new();
        for i in 0..120 {
            text.push_str(&format!(
                "{{\"time\":\"2025-01-01T00:00:{:02}Z\",\"level\":\"INFO\",\"msg\":\"line {i}\"}}\n",
                i % 60
            ));
        }
        text.push_str(
            "{\"time\":\"t\",\"level\":\"WARN\",\"msg\":\"retry\",\"api_key\":\"sk-1\"}\n",
        );
        text.push_str("not json\n");
        std::fs::write(&p, text).unwrap();
        let out = logs(Some(&p), 3);
        assert_eq!(
            out,
            "2025-01-01T00:00:59Z INFO  line 119\nt WARN  retry api_key=\"[REDACTED]\"\nnot json"
        );
        assert!(!logs(Some(&p), 100).contains("line 20\n"));
        assert_eq!(logs(Some(&d.path().join("none")), 3), "No log file found");
        assert_eq!(logs(None, 3), "No log file found");
        std::fs::write(&p, "").unwrap();
        assert_eq!(logs(Some(&p), 3), "Log file is empty");
    }
}
