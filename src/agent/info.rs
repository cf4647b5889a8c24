//! `crush_info`: crush's own state for the model (version, configuration files, models,
//! providers, MCP and LSP servers, hooks, permissions, disabled tools, options), in Go Crush's
//! `[section]` / `key = value` layout. The loop runs it: it reads the agent's configuration.

use super::Agent;
use crate::tools::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::fmt::Write as _;

pub(super) const TOOL_NAME: &str = "crush_info";

pub(super) struct CrushInfo;

impl Tool for CrushInfo {
    fn name(&self) -> &'static str {
        TOOL_NAME
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Read
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run_mode(&self) -> crate::tools::RunMode {
        crate::tools::RunMode::Loop(crate::tools::LoopTool::Info)
    }

    fn description(&self) -> String {
        "Get crush's current runtime state: version, configuration files in use, active model \
         and provider, LSP/MCP server status, hooks, permissions mode, disabled tools and key \
         options. No parameters needed. Use it when diagnosing why something isn't working \
         (missing diagnostics, provider errors, MCP disconnections); check [lsp] and [mcp] for \
         service health. Pair it with crush_logs."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }

    fn permission(
        &self,
        _input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        Ok(None)
    }

    fn run(&self, _input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        Err("crush_info is not available here".into())
    }
}

impl Agent {
    /// The report `crush_info` returns.
    pub(super) fn crush_info(&self) -> ToolOutput {
        let mut b = String::new();
        let _ = write!(b, "[crush]\nversion = {}\n", env!("CARGO_PKG_VERSION"));
        let _ = writeln!(b, "session = {}", self.session.id);
        let _ = writeln!(b, "working_dir = {}", self.workspace.cwd.display());
        let _ = write!(
            b,
            "project_root = {}\n\n",
            self.workspace.project_root.display()
        );
        self.info_config_files(&mut b);
        self.info_models(&mut b);
        self.info_servers(&mut b);
        self.info_skills(&mut b);
        self.info_hooks_and_permissions(&mut b);
        let _ = write!(
            b,
            "[logs]\nfile = {}\n",
            crate::log::file().map_or("(none)".to_string(), |p| p.display().to_string())
        );
        ToolOutput {
            content: b,
            ..Default::default()
        }
    }

    /// `[config_files]`, the data directory and whether the project is trusted.
    fn info_config_files(&self, b: &mut String) {
        let Some(cfg) = &self.config else {
            return;
        };
        b.push_str("[config_files]\n");
        for l in &cfg.layers {
            if let Some(p) = &l.path {
                let _ = writeln!(b, "{}", p.display());
            }
        }
        let _ = write!(b, "\ndata_dir = {}\n", cfg.data_dir.display());
        let _ = write!(
            b,
            "trusted = {}\n\n",
            if cfg.trust.notice().is_none() {
                "yes"
            } else {
                "no"
            }
        );
    }

    /// `[model]` and `[providers]`.
    fn info_models(&self, b: &mut String) {
        b.push_str("[model]\n");
        let _ = writeln!(
            b,
            "large = {} ({})",
            self.model.model.id, self.model.provider.id
        );
        if let Some(s) = self
            .config
            .as_ref()
            .and_then(|c| c.resolve_model(None, true).ok())
        {
            let _ = writeln!(b, "small = {} ({})", s.model.id, s.provider.id);
        }
        let _ = writeln!(
            b,
            "supports_images = {}",
            self.model.model.supports_attachments
        );
        b.push('\n');
        if let Some(cfg) = &self.config {
            let table = cfg.providers();
            if !table.ready.is_empty() || !table.unusable.is_empty() {
                b.push_str("[providers]\n");
                for p in &table.ready {
                    let _ = writeln!(b, "{} = enabled ({} models)", p.id, p.models.len());
                }
                for u in &table.unusable {
                    let _ = writeln!(b, "{} = unusable ({})", u.id, u.reason);
                }
                b.push('\n');
            }
        }
    }

    /// `[lsp]` and `[mcp]`: each server's state.
    fn info_servers(&self, b: &mut String) {
        if let Some(lsp) = &self.toolkit.lsp {
            let statuses = lsp.manager().statuses();
            if !statuses.is_empty() {
                b.push_str("[lsp]\n");
                for s in statuses {
                    let mut line = format!("{} = {} ({})", s.name, s.state, s.command);
                    if let Some(e) = &s.error {
                        line.push_str(&format!(", error: {e}"));
                    }
                    let _ = writeln!(b, "{line}");
                }
                b.push('\n');
            }
        }
        if let Some(m) = &self.toolkit.mcp {
            let statuses = m.manager().statuses();
            if !statuses.is_empty() {
                b.push_str("[mcp]\n");
                for s in statuses {
                    let mut line = format!(
                        "{} = {} ({}, {} tools)",
                        s.name,
                        s.state,
                        s.transport,
                        s.tools.len()
                    );
                    if let Some(e) = &s.error {
                        line.push_str(&format!(", error: {e}"));
                    }
                    let _ = writeln!(b, "{line}");
                }
                b.push('\n');
            }
        }
    }

    /// `[skills]`: each skill's origin and state, an active one `loaded` once its SKILL.md was
    /// read in this session (as Go Crush lists them).
    fn info_skills(&self, b: &mut String) {
        if self.toolkit.skills_info.is_empty() {
            return;
        }
        // Each entry's state as listed: an active skill is loaded once its SKILL.md was read.
        let states: Vec<&str> = self
            .toolkit
            .skills_info
            .iter()
            .map(|e| match e.state {
                "active" => {
                    let read = e.file.as_deref().is_some_and(|f| {
                        matches!(
                            self.session.store.last_read(&self.session.id, f),
                            Ok(Some(_))
                        )
                    });
                    if read { "loaded" } else { "unloaded" }
                }
                other => other,
            })
            .collect();
        let loaded = states.iter().filter(|s| **s == "loaded").count();
        let active = loaded + states.iter().filter(|s| **s == "unloaded").count();
        let _ = writeln!(b, "[skills]\nloaded_this_session = {loaded}/{active}");
        for (e, state) in self.toolkit.skills_info.iter().zip(states) {
            let _ = writeln!(b, "{} = {}, {state}", e.name, e.origin);
        }
        b.push('\n');
    }

    /// `[hooks]`, `[permissions]`, `[disabled_tools]` and `[options]`.
    fn info_hooks_and_permissions(&self, b: &mut String) {
        if !self.policy.hooks.is_empty() {
            b.push_str("[hooks]\n");
            for h in &self.policy.hooks.hooks {
                let matcher = if h.matcher.is_empty() {
                    String::new()
                } else {
                    format!(" (matcher: {})", h.matcher)
                };
                let _ = writeln!(b, "{}{matcher} = {}", h.event, h.command);
            }
            b.push('\n');
        }
        b.push_str("[permissions]\n");
        let _ = writeln!(b, "mode = {}", self.policy.permissions.mode());
        let _ = writeln!(
            b,
            "sandbox = {}",
            crate::config::sandbox::describe(self.workspace.sandbox.as_deref())
        );
        if self.policy.permissions.auto.is_some() {
            b.push_str("approval = auto\n");
        }
        if !self.policy.permissions.allowed_tools.is_empty() {
            let _ = writeln!(
                b,
                "allowed_tools = {}",
                self.policy.permissions.allowed_tools.join(", ")
            );
        }
        b.push('\n');
        if let Some(cfg) = &self.config {
            let o = &cfg.config.options;
            if !o.disabled_tools.is_empty() {
                let _ = write!(b, "[disabled_tools]\n{}\n\n", o.disabled_tools.join(", "));
            }
            b.push_str("[options]\n");
            let _ = writeln!(b, "auto_summarize = {}", !o.disable_auto_summarize);
            let _ = writeln!(b, "debug = {}", o.debug);
            let _ = writeln!(b, "max_steps = {}", self.policy.max_steps);
            b.push('\n');
        }
    }
}
