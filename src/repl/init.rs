//! `/init` (crush(1) SKILLS AND COMMANDS): the agent explores the project and writes the file
//! `options.initialize_as` names (AGENTS.md by default); an existing one is rewritten only
//! after the user's yes. The first start in a project without any context file says so once.

use super::{Got, Repl};
use crate::app;

impl Repl {
    /// Mentions `/init` on the first start in a project that has files but no context file.
    pub(super) fn suggest_init(&mut self) {
        let loaded = &self.ctx.loaded;
        if !app::needs_init(loaded) {
            return;
        }
        self.term.note(&format!(
            "This project has no {} (or other context file) yet: /init has the agent write one.",
            app::init_file_name(loaded)
        ));
        app::mark_initialized(loaded);
    }

    /// `/init [NOTES]`.
    pub(super) fn init(&mut self, notes: &str) {
        let loaded = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        let target = app::init_target(loaded);
        let shown = target.display().to_string();
        if target.exists() {
            let question = format!("{shown} exists: have the agent rewrite it? [y/N]");
            let yes = match self.lines.answer(&mut self.term, &question) {
                Got::Line(l) => {
                    if !self.interactive {
                        self.term.note(l.trim());
                    }
                    matches!(l.trim().to_ascii_lowercase().as_str(), "y" | "yes")
                }
                Got::Eof => false,
                Got::Interrupt => {
                    self.term.newline_on_terminal();
                    false
                }
            };
            if !yes {
                return self.term.note(&format!("{shown} is left as it is."));
            }
        }
        self.agent.policy.permissions.allow_file(target.clone());
        app::mark_initialized(&self.ctx.loaded);
        self.prompt(&crate::agent::prompt::init_prompt(&shown, notes));
    }
}
