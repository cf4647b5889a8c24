//! Session-only configuration from the bash tool (crush(1) CONFIGURATION): the records its shell
//! builtins produced travel back in the tool result's metadata; the turn applies them to the
//! session's runtime layer, brings the agent in line (allowed tools, hidden tools, model) and
//! tells the model what happened in the same tool result. `permissions allow` needs the user's
//! yes (`Sink::ask`); a non-interactive run refuses it unless `--yolo`. Nothing is written.

use super::permissions::Permissions;
use super::{AgentEvent, Answer, Sink};
use crate::config::{Loaded, ResolvedModel, session};
use crate::rcshell::METADATA_KEY;
use crate::tools::{PermissionRequest, Tool, ToolOutput};
use serde_json::Value;
use std::path::Path;

/// The parts of the agent a session-only command can change.
pub(super) struct Parts<'a> {
    pub config: &'a mut Option<Loaded>,
    pub permissions: &'a mut Permissions,
    pub tools: &'a mut Vec<Box<dyn Tool>>,
    pub mcp: Option<&'a mut super::McpTools>,
    pub model: &'a mut ResolvedModel,
    pub hooks: &'a mut crate::hooks::HookConfig,
    pub system: &'a mut String,
    pub cwd: &'a Path,
    pub lsp: Option<&'a crate::tools::lsp::Lsp>,
}

/// Why a session-only command was not applied, or not wholly.
#[derive(Debug)]
pub(crate) enum SessionConfigError {
    /// A sub-agent has no configuration of its own.
    NoConfiguration,
    /// The command itself was refused (what the configuration says of it).
    Refused(String),
    /// The new large model cannot be used.
    ModelNotSwitched(crate::config::ConfigError),
    /// The new hooks are invalid (their errors).
    HooksNotChanged(Vec<String>),
    /// MCP servers of the new configuration cannot start (their warnings).
    Mcp(Vec<String>),
}

impl std::fmt::Display for SessionConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionConfigError::NoConfiguration => {
                f.write_str("this session has no configuration to change")
            }
            SessionConfigError::Refused(m) => f.write_str(m),
            SessionConfigError::ModelNotSwitched(e) => write!(f, "the model was not switched: {e}"),
            SessionConfigError::HooksNotChanged(errors) => {
                write!(f, "the hooks were not changed: {}", errors.join("; "))
            }
            SessionConfigError::Mcp(warnings) => f.write_str(&warnings.join("; ")),
        }
    }
}

impl std::error::Error for SessionConfigError {}

/// Brings the running agent in line with its runtime layer after a session-only command: the
/// allowed and hidden tools, the large model (and the system prompt naming it), the hooks.
#[allow(clippy::too_many_arguments)]
fn sync(
    cfg: &Loaded,
    permissions: &mut Permissions,
    tools: &mut Vec<Box<dyn Tool>>,
    mcp: Option<&mut super::McpTools>,
    model: &mut ResolvedModel,
    system: &mut String,
    hooks: &mut crate::hooks::HookConfig,
    large_before: &Option<crate::config::SelectedModel>,
    hooks_changed: bool,
    lsp: Option<&crate::tools::lsp::Lsp>,
) -> Result<bool, SessionConfigError> {
    permissions.allowed_tools = cfg.config.permissions.allowed_tools.clone();
    // A tool denied earlier comes back when it is allowed again.
    *tools = super::subagent::main_agent_tools(&cfg.config.options.disabled_tools, lsp);
    // Added, removed or changed MCP servers start or stop now.
    let mcp_warnings = mcp.map(|m| m.reconfigure(cfg)).unwrap_or_default();
    let mut large_changed = false;
    if &cfg.config.models.large != large_before {
        let m = cfg
            .resolve_model(None, false)
            .map_err(SessionConfigError::ModelNotSwitched)?;
        *system = super::prompt::for_config(cfg, &m);
        *model = m;
        large_changed = true;
    }
    if hooks_changed {
        match crate::hooks::HookConfig::from_loaded(cfg) {
            Ok((h, _)) => *hooks = h,
            Err(p) => return Err(SessionConfigError::HooksNotChanged(p.errors)),
        }
    }
    if !mcp_warnings.is_empty() {
        return Err(SessionConfigError::Mcp(mcp_warnings));
    }
    Ok(large_changed)
}

/// Applies the records in `out.metadata` (if any) and appends the report to `out`.
pub(super) fn apply(this: Parts, out: &mut ToolOutput, sink: &mut dyn Sink) {
    let Some(Value::Array(list)) = out.metadata.get(METADATA_KEY) else {
        return;
    };
    let records: Vec<crate::rcshell::Record> = list
        .iter()
        .filter_map(|a| serde_json::from_value::<Vec<String>>(a.clone()).ok())
        .map(|args| crate::rcshell::Record {
            file: None,
            line: None,
            args,
        })
        .collect();
    if records.is_empty() {
        return;
    }
    let Some(cfg) = this.config.as_mut() else {
        out.content
            .push_str("\n\nsession config: ignored (this session has no configuration)");
        return;
    };
    let yolo = this.permissions.yolo;
    let cwd = this.cwd.to_path_buf();
    let mut refused = Vec::new();
    let large_before = cfg.config.models.large.clone();
    let mut report = session::apply_bash_records(cfg, &records, &mut |args| {
        if yolo {
            return true;
        }
        let req = PermissionRequest {
            // The bash tool's output configures the session: asked as a command is.
            tool: "bash".into(),
            action: "configure",
            kind: crate::tools::ToolKind::Execute,
            runs: crate::tools::RunMode::Command,
            path: cwd.clone(),
            description: args.join(" "),
            diff: None,
            ..Default::default()
        };
        match sink.ask(&req) {
            Some(Answer::Yes | Answer::Always) => true,
            Some(Answer::No) => false,
            None => {
                refused.push(req);
                false
            }
        }
    });
    for req in refused {
        sink.event(AgentEvent::PermissionRefused {
            hint: format!("run with --yolo, or put '{}' in a crushrc", req.description),
            request: req,
        });
    }
    let hooks_changed = records
        .iter()
        .any(|r| r.args.first().map(String::as_str) == Some("hook"));
    if let Err(e) = sync(
        cfg,
        this.permissions,
        this.tools,
        this.mcp,
        this.model,
        this.system,
        this.hooks,
        &large_before,
        hooks_changed,
        this.lsp,
    ) {
        report.lines.push(format!("session config: {e}"));
    }
    out.content.push_str("\n\n");
    out.content.push_str(&report.lines.join("\n"));
    out.metadata["session_config_report"] = Value::from(report.lines);
}

impl super::Agent {
    /// A session-only command typed by the user (a REPL slash command such as
    /// `/permissions allow grep` or `/model small p/m`): applied to the runtime layer, then the
    /// running agent is brought in line. Returns what to show the user. Nothing is written.
    ///
    pub(crate) fn apply_user_command(
        &mut self,
        line: &str,
    ) -> Result<UserCommand, SessionConfigError> {
        let cfg = self
            .config
            .as_mut()
            .ok_or(SessionConfigError::NoConfiguration)?;
        let large_before = cfg.config.models.large.clone();
        let outcome = cfg
            .apply_session_line(line)
            .map_err(|e| SessionConfigError::Refused(e.to_string()))?;
        let hooks_changed = line
            .trim_start_matches('/')
            .trim_start()
            .starts_with("hook");
        let large_changed = sync(
            cfg,
            &mut self.policy.permissions,
            &mut self.toolkit.tools,
            self.toolkit.mcp.as_mut(),
            &mut self.model,
            &mut self.system,
            &mut self.policy.hooks,
            &large_before,
            hooks_changed,
            self.toolkit.lsp.as_ref(),
        )?;
        Ok(UserCommand {
            text: outcome.print.unwrap_or(outcome.summary),
            large_changed,
        })
    }
}

/// What a user's session-only command did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UserCommand {
    pub text: String,
    pub large_changed: bool,
}
