//! Session-only configuration (crush(1) CONFIGURATION, INTERACTIVE SESSION): the crushrc commands
//! applied to the running session's runtime layer, from the REPL's slash commands or from the
//! agent's bash tool. Nothing here writes a file.

use super::commands::{self, CommandError, Outcome};
use super::{ConfigError, Loaded, layers};
use crate::rcshell::Record;

/// Who issued a session-only command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionSource {
    /// Typed by the user (a REPL slash command).
    User,
    /// Run by the agent through its bash tool.
    BashTool,
}

impl Loaded {
    /// The current large/small models, as the shell builtin `model large|small` prints them.
    pub(crate) fn shell_models(&self) -> crate::rcshell::Models {
        crate::rcshell::Models {
            large: commands::current_model(&self.merged, "large").unwrap_or_default(),
            small: commands::current_model(&self.merged, "small").unwrap_or_default(),
        }
    }

    /// Applies one session-only command line, as typed in the REPL (`/model small a/b`,
    /// `option progress false`; a leading `/` is optional), to the runtime layer.
    pub(crate) fn apply_session_line(&mut self, line: &str) -> Result<Outcome, ConfigError> {
        let line = line.trim();
        let line = line.strip_prefix('/').unwrap_or(line);
        let words = commands::split_words(line)?;
        if words.is_empty() {
            return Err(ConfigError::Command(CommandError::Usage(format!(
                "empty command (commands: {})",
                crate::rcshell::NAMES.join(", ")
            ))));
        }
        self.apply_session(&words, SessionSource::User)
    }

    /// Applies one command (`args[0]` is its name) to the runtime layer. On error nothing
    /// changes.
    pub(crate) fn apply_session(
        &mut self,
        args: &[String],
        source: SessionSource,
    ) -> Result<Outcome, ConfigError> {
        let who = match source {
            SessionSource::User => "session",
            SessionSource::BashTool => BASH_TOOL_ORIGIN,
        };
        layers::apply_runtime(self, args, format!("{who}: {}", args.join(" ")))
    }
}

/// How the origin of a change the agent's bash tool made starts (`config show --origin`).
pub(crate) const BASH_TOOL_ORIGIN: &str = "session (bash tool)";

/// One line per record, for the bash tool's result: what changed, what was refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BashReport {
    pub lines: Vec<String>,
    /// Some command was refused because it would widen permissions without a yes.
    pub refused: bool,
}

/// Applies the records the agent's bash tool produced, in order. `permissions allow` needs the
/// user's yes: `confirm` is asked (the REPL asks the user; a non-interactive run answers yes
/// only under `--yolo`).
pub(crate) fn apply_bash_records(
    loaded: &mut Loaded,
    records: &[Record],
    confirm: &mut dyn FnMut(&[String]) -> bool,
) -> BashReport {
    let mut report = BashReport::default();
    for r in records {
        let line = r.args.join(" ");
        if commands::widens_permissions(&r.args) && !confirm(&r.args) {
            report.refused = true;
            report.lines.push(format!(
                "refused: '{line}' changes what the agent may do or what runs, and needs the user's yes (in a non-interactive run: --yolo)"
            ));
            continue;
        }
        match loaded.apply_session(&r.args, SessionSource::BashTool) {
            Ok(o) => report.lines.push(format!("session config: {}", o.summary)),
            Err(e) => report.lines.push(format!("session config error: {e}")),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, LayerKind};
    use serde_json::json;

    fn loaded() -> Loaded {
        let merged = json!({"options": {"progress": true}});
        Loaded {
            config: serde_json::from_value::<Config>(merged.clone()).unwrap(),
            merged,
            ..Default::default()
        }
    }

    #[test]
    fn repl_lines_change_the_runtime_layer_only() {
        let mut l = loaded();
        let o = l.apply_session_line("/option progress false").unwrap();
        assert_eq!(o.summary, "option progress = false");
        assert_eq!(l.config.options.progress, Some(false));
        let origin = &l.origins["/options/progress"];
        assert_eq!(origin.kind, LayerKind::Runtime);
        assert_eq!(
            origin.detail.as_deref(),
            Some("session: option progress false")
        );
        l.apply_session_line("model small anthropic/claude-haiku-4-5")
            .unwrap();
        assert_eq!(
            l.config.models.small.as_ref().map(|m| m.model.as_str()),
            Some("claude-haiku-4-5")
        );
        let out = l.apply_session_line("/option bogus").unwrap();
        assert!(out.warning.unwrap().contains("unknown key 'bogus' ignored"));
        assert!(l.apply_session_line("  ").is_err());
        assert_eq!(l.config.options.progress, Some(false));
    }

    #[test]
    fn bash_tool_cannot_widen_permissions_unseen() {
        let mut l = loaded();
        let recs = vec![
            Record {
                file: None,
                line: None,
                args: vec!["permissions".into(), "allow".into(), "bash".into()],
            },
            Record {
                file: None,
                line: None,
                args: vec!["option".into(), "progress".into(), "false".into()],
            },
        ];
        let r = apply_bash_records(&mut l, &recs, &mut |_| false);
        assert!(r.refused);
        assert!(r.lines[0].starts_with("refused:"), "{:?}", r.lines);
        assert!(l.config.permissions.allowed_tools.is_empty());
        assert_eq!(l.config.options.progress, Some(false));
        let r = apply_bash_records(&mut l, &recs[..1], &mut |_| true);
        assert!(!r.refused);
        assert_eq!(l.config.permissions.allowed_tools, vec!["bash"]);
    }
}
