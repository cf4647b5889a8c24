//! What Tab completes at the session's prompt: the slash commands and their arguments, and the
//! project's files (the engine is `complete.rs`).

use super::complete::{Candidate, Source};
use super::input::{self, SLASH_COMMANDS};
use crate::commands::sessions::short_id;

/// What Tab completes at the session's prompt: the slash commands and their arguments, and the
/// project's files.
pub(super) struct Completions<'a> {
    pub(super) store: &'a crate::store::Store,
    pub(super) config: &'a crate::config::Loaded,
    pub(super) tools: Vec<&'a str>,
    pub(super) cwd: &'a std::path::Path,
    pub(super) mcp: Option<&'a crate::mcp::Manager>,
    pub(super) commands: &'a crate::skills::commands::Commands,
    pub(super) skills: &'a crate::skills::Skills,
}

impl Source for Completions<'_> {
    fn commands(&self) -> Vec<Candidate> {
        let mut all: Vec<Candidate> = SLASH_COMMANDS
            .iter()
            .map(|c| Candidate::new(c.name, c.about))
            .collect();
        // Custom commands, skills and MCP prompts: by full name, and by bare name where that
        // names the same one.
        let prompts = self.mcp.map(|m| m.prompts()).unwrap_or_default();
        let cat = crate::skills::catalog::Catalog::new(self.commands, self.skills, prompts);
        let names = cat.names();
        for e in &cat.entries {
            all.push(Candidate::new(e.name.clone(), e.description()));
            let bare = input::resolve_with(&e.bare, &names);
            if bare == Ok(input::Target::Custom(e.name.clone())) {
                all.push(Candidate::new(e.bare.clone(), e.description()));
            }
        }
        all
    }

    fn arguments(&self, command: &str, before: &[&str]) -> Vec<Candidate> {
        let words = |w: &[&str]| w.iter().map(|w| Candidate::plain(*w)).collect();
        match (command, before) {
            ("model", []) => {
                let mut c: Vec<Candidate> = words(&["large", "small"]);
                c.extend(self.models());
                c
            }
            ("model", ["large" | "small"]) => self.models(),
            ("resume", []) => self
                .store
                .list_sessions()
                .unwrap_or_default()
                .into_iter()
                .map(|s| Candidate::new(short_id(&s.id), s.title))
                .collect(),
            ("option", []) => words(&crate::config::commands::option_keys()),
            ("option", [key]) => words(&crate::config::commands::option_values(key)),
            ("permissions", []) => words(&["allow", "deny"]),
            ("permissions", [_, ..]) => words(&self.tools),
            ("export", _) => words(&["md", "json"]),
            ("mcp", []) => words(&["add", "rm", "login"]),
            ("mcp", ["rm" | "login"]) => self
                .mcp
                .map(|m| {
                    m.statuses()
                        .into_iter()
                        .map(|s| Candidate::new(s.name, s.state))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn root(&self) -> Option<&std::path::Path> {
        Some(self.cwd)
    }

    fn takes_path(&self, command: &str, before: &[&str]) -> bool {
        matches!((command, before), ("attach" | "versions", []))
    }
}

impl Completions<'_> {
    fn models(&self) -> Vec<Candidate> {
        ready_models(self.config, false)
            .into_iter()
            .map(|(id, name)| Candidate::new(id, name))
            .collect()
    }
}

/// `PROVIDER/MODEL` and the model's name, for every model of a provider ready to use.
/// With `discover`, a provider that lists its models on its server (a local one) is asked
/// (once per process); completion does not wait on a server.
pub(super) fn ready_models(
    config: &crate::config::Loaded,
    discover: bool,
) -> Vec<(String, String)> {
    let catalog = config.catalog.get();
    config
        .providers_with(&catalog.providers)
        .ready
        .iter()
        .map(|p| {
            if discover && p.discover {
                p.discovered()
            } else {
                p.clone()
            }
        })
        .flat_map(|p| {
            let id = p.id.clone();
            p.models
                .into_iter()
                .map(move |m| (format!("{id}/{}", m.id), m.name.clone().unwrap_or_default()))
        })
        .collect()
}
