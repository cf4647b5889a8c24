//! The REPL's custom commands, user-invocable skills and MCP prompts (crush(1) SKILLS AND
//! COMMANDS): their names for the input parser, `/help`'s list, and running one — its
//! arguments bound, the missing named ones asked for one by one, its prompt sent.

use super::{Got, Repl};
use crate::app;
use crate::skills::catalog::{Catalog, Name, Tier};

impl Repl {
    /// The MCP servers' prompts (none without servers).
    fn mcp_prompts(&self) -> Vec<crate::mcp::Prompt> {
        self.agent
            .toolkit
            .mcp
            .as_ref()
            .map(|m| m.manager().prompts())
            .unwrap_or_default()
    }

    /// The names a slash may name besides the built-in commands.
    pub(super) fn command_names(&self) -> Vec<Name> {
        Catalog::new(&self.ctx.commands, &self.ctx.skills, self.mcp_prompts()).names()
    }

    /// The custom commands, skills and MCP prompts, for `/help` (which waits as the first
    /// request does for MCP servers still starting).
    pub(super) fn custom_help(&self) -> String {
        if let Some(m) = &self.agent.toolkit.mcp {
            m.manager().wait_ready(Some(app::mcp_wait()));
        }
        let cat = Catalog::new(&self.ctx.commands, &self.ctx.skills, self.mcp_prompts());
        let mut s = String::new();
        for (tiers, head) in [
            (
                &[Tier::ProjectCommand, Tier::UserCommand, Tier::Skill][..],
                "\nCustom commands and skills (NAME=VALUE for named arguments; the bare name works when unique):\n",
            ),
            (
                &[Tier::McpPrompt][..],
                "\nPrompts of the MCP servers (ARG=VALUE, or values in order):\n",
            ),
        ] {
            let entries: Vec<_> = cat
                .entries
                .iter()
                .filter(|e| tiers.contains(&e.tier))
                .collect();
            if entries.is_empty() {
                continue;
            }
            s.push_str(head);
            for e in entries {
                crate::text::wrap::row(
                    &mut s,
                    &e.usage(),
                    e.description(),
                    super::commands::HELP_AT,
                    crate::text::DEFAULT_COLUMNS,
                );
            }
        }
        let rejected = self.ctx.commands.rejected.len();
        if rejected > 0 {
            s.push_str(&format!(
                "({rejected} command file(s) could not be read: 'crush skills list' says why)\n"
            ));
        }
        s
    }

    /// Asks for the value of the named argument `name`; None when the input ended or the user
    /// pressed Ctrl-C.
    fn ask_value(&mut self, name: &str) -> Option<String> {
        match self.lines.answer(&mut self.term, &format!("{name}:")) {
            Got::Line(l) => {
                if !self.interactive {
                    // Keep a piped transcript readable: the answer after its question.
                    self.term.note(l.trim());
                }
                Some(l.trim().to_string())
            }
            Got::Eof => None,
            Got::Interrupt => {
                self.term.newline_on_terminal();
                None
            }
        }
    }

    /// `/NAME ARGS` for a custom command, a skill or an MCP prompt (`name`: its full name):
    /// `NAME=value` words bind named arguments, the missing ones of a command are asked for,
    /// and the prompt it makes is sent.
    pub(super) fn custom(&mut self, name: &str, args: &str) {
        let (commands, skills) = (self.ctx.commands.clone(), self.ctx.skills.clone());
        let manager = self.agent.toolkit.mcp.as_ref().map(|m| m.manager().clone());
        // A prompt's server, named by the user, is waited for as a call to it would be.
        if let (Some(m), Some((server, _))) = (
            &manager,
            name.strip_prefix("mcp:").and_then(|r| r.split_once(':')),
        ) {
            m.wait_server(server);
        }
        let cat = Catalog::new(&commands, &skills, self.mcp_prompts());
        let Some(entry) = cat.get(name) else {
            let msg = match name.strip_prefix("mcp:").and_then(|r| r.split_once(':')) {
                Some((server, prompt)) => format!(
                    "no prompt '{prompt}' on MCP server '{server}' (/help lists the MCP prompts)"
                ),
                None => format!("unknown command /{name} (/help lists the commands)"),
            };
            return self.term.error(&msg);
        };
        // A forked skill's agent and model, checked before anything runs.
        let spec = match entry.fork() {
            Some(f) => match self.agent.fork_spec(f) {
                Ok(spec) => Some(spec),
                Err(e) => return self.term.error(&format!("/{name}: {e}")),
            },
            None => None,
        };
        let mut bound = match entry.bind(args) {
            Ok(b) => b,
            Err(e) => return self.term.error(&e.to_string()),
        };
        let missing = entry.missing(&bound);
        if !missing.is_empty() && !entry.asks() {
            return self
                .term
                .error(&format!("/{name} needs {}", missing.join(", ")));
        }
        for n in missing {
            match self.ask_value(&n) {
                Some(v) => bound.values.push((n, v)),
                None => return self.term.note(&format!("/{name} canceled")),
            }
        }
        let text = match entry.shell_segments(&bound) {
            // A Claude Code command's `!`cmd`` run first, as the bash tool runs a command
            // (asked for where the permission rules say so); a refused one sends nothing.
            Some(segments) => {
                if let Err(e) = self.ensure_session() {
                    return self.term.error(&format!("cannot create a session: {e}"));
                }
                let mut sink = super::sink::ReplSink::new(
                    &mut self.term,
                    &mut self.lines,
                    &mut self.titles,
                    self.interactive,
                    None,
                );
                let agent = &mut self.agent;
                let made = crate::skills::catalog::join_segments(&segments, &mut |cmd| {
                    agent.run_command_shell(cmd, &mut sink)
                });
                match made {
                    Ok(t) => t,
                    Err(e) => {
                        return self
                            .term
                            .error(&format!("/{name} was not sent to the model: {e}"));
                    }
                }
            }
            None => match entry.render(&bound, manager.as_ref()) {
                Ok(t) => t,
                Err(e) => return self.term.error(&e.to_string()),
            },
        };
        if text.trim().is_empty() {
            return self
                .term
                .error(&format!("/{name} is empty: nothing to send"));
        }
        match &spec {
            Some(spec) => {
                let line = format!("/{name} {}", args.trim());
                self.send(&text, Some((line.trim_end(), spec)));
            }
            None => self.prompt(&text),
        }
    }
}
