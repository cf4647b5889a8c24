//! Plan mode (crush(1) PLAN MODE): the model is offered only the read-only tools
//! (`Tool::read_only`), is told to investigate and end with a plan, and a call of any other tool
//! is refused. The plan, the final answer of a plan turn, is kept with the session: its
//! assistant message's finish part carries `PLAN_MARK` in `details`, a field Go Crush reads and
//! keeps; `options.plans_directory` also gets it as a Markdown file.

use super::{Agent, Stop, TurnResult};
use crate::llm::{Part, Role};
use crate::store::StoredMessage;
use crate::tools::{Tool, ToolOutput};
use std::fmt;
use std::path::{Path, PathBuf};

/// What a planning session's system prompt gains.
pub(crate) const PLAN_PROMPT: &str = "\n<plan_mode>\nYou are planning, not changing anything yet. \
Investigate with the read-only tools you have: read the relevant files, search the code, look \
up symbols. Do not try to edit files, run commands or fetch from the network; those tools are \
not available until the user approves a plan. When you understand the task, answer with the \
plan: the steps in order, the files and functions each step touches, how the result will be \
verified, and any open question or risk. Your final message is the plan the user will \
review.\n</plan_mode>\n";

/// The `details` of the finish part of a plan's assistant message.
pub(crate) const PLAN_MARK: &str = "crush:plan";

/// Why a plan could not be written to `options.plans_directory`.
#[derive(Debug)]
pub(crate) enum PlanError {
    Store(String),
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Store(e) => write!(f, "cannot mark the plan in the session: {e}"),
            PlanError::Write { path, cause } => {
                write!(f, "cannot write the plan to {}: {cause}", path.display())
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// The refusal of a call of `tool` while planning.
pub(crate) fn refusal(tool: &dyn Tool) -> ToolOutput {
    ToolOutput::error(format!(
        "Plan mode: {} is not available while planning (only read-only tools are: it may change files, run commands or use the network). Keep investigating with the read-only tools and end with the plan; the user switches to coding once they approve it.",
        tool.name()
    ))
}

/// The plans of a session, oldest first: the text of each assistant message marked as one.
pub(crate) fn plans(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant && is_plan(&m.parts))
        .map(|m| text_of(&m.parts))
        .collect()
}

fn is_plan(parts: &[Part]) -> bool {
    parts
        .iter()
        .any(|p| matches!(p, Part::Finish { details: Some(d), .. } if d == PLAN_MARK))
}

fn text_of(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.trim()),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect();
    texts.join("\n\n")
}

/// The Markdown file of a plan in `dir`: the date and the session's short id.
pub(crate) fn plan_file(dir: &Path, session_id: &str, date: &str) -> PathBuf {
    let short: String = session_id.chars().filter(|c| *c != '-').take(8).collect();
    dir.join(format!("{date}-{short}.md"))
}

impl Agent {
    /// Whether the model is offered `tool` (plan mode: the read-only ones only).
    pub(super) fn offers(&self, tool: &dyn Tool) -> bool {
        !self.policy.plan_mode || tool.read_only()
    }

    /// `options.plans_directory`, resolved against the project root (`~/` is home).
    fn plans_directory(&self) -> Option<PathBuf> {
        let loaded = self.config.as_ref()?;
        let dir = loaded.config.options.plans_directory.as_deref()?;
        Some(crate::paths::resolve(&loaded.project_root, dir))
    }

    /// After a turn in plan mode that ended with an answer: marks its last assistant message
    /// as the plan and writes it to `options.plans_directory` when set. Returns the plan and
    /// the file written. None: no plan (not planning, or the turn did not end with one).
    pub(crate) fn keep_plan(
        &self,
        result: &TurnResult,
    ) -> Result<Option<(String, Option<PathBuf>)>, PlanError> {
        if !self.policy.plan_mode
            || result.stop != Stop::EndTurn
            || result.final_text.trim().is_empty()
        {
            return Ok(None);
        }
        let messages = self
            .session
            .store
            .messages(&self.session.id)
            .map_err(|e| PlanError::Store(e.to_string()))?;
        let Some(last) = messages.iter().rev().find(|m| m.role == Role::Assistant) else {
            return Ok(None);
        };
        let mut parts = last.parts.clone();
        let marked = parts.iter_mut().any(|p| match p {
            Part::Finish { details, .. } => {
                *details = Some(PLAN_MARK.to_string());
                true
            }
            _ => false,
        });
        if !marked {
            parts.push(Part::Finish {
                reason: "end_turn".into(),
                time: crate::time::unix_now(),
                message: None,
                details: Some(PLAN_MARK.to_string()),
            });
        }
        self.session
            .store
            .update_message_parts(&last.id, &parts)
            .map_err(|e| PlanError::Store(e.to_string()))?;
        let plan = text_of(&parts);
        let Some(dir) = self.plans_directory() else {
            return Ok(Some((plan, None)));
        };
        let file = plan_file(&dir, &self.session.id, &crate::time::today());
        let write = std::fs::create_dir_all(&dir).and_then(|()| {
            crate::fsutil::write_atomic_mode(
                file.as_path(),
                format!("# Plan\n\n{plan}\n").as_bytes(),
                0o644,
            )
        });
        write.map_err(|cause| PlanError::Write {
            path: file.clone(),
            cause,
        })?;
        Ok(Some((plan, Some(file))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_file_is_named_by_date_and_short_id() {
        let f = plan_file(Path::new("/plans"), "0b6e3c1a-77f2-4c1e", "2026-12-02");
        assert_eq!(f, Path::new("/plans/2026-12-02-0b6e3c1a.md"));
    }

    #[test]
    fn plans_are_the_marked_answers() {
        let msg = |role: Role, parts: Vec<Part>| StoredMessage {
            id: String::new(),
            session_id: String::new(),
            seq: 0,
            role,
            parts,
            model: None,
            provider: None,
            created_at: 0,
        };
        let finish = |details: Option<&str>| Part::Finish {
            reason: "end_turn".into(),
            time: 0,
            message: None,
            details: details.map(String::from),
        };
        let text = |t: &str| Part::Text { text: t.into() };
        let msgs = [
            msg(Role::Assistant, vec![text("looked"), finish(None)]),
            msg(
                Role::Assistant,
                vec![text("1. do x"), finish(Some(PLAN_MARK))],
            ),
            msg(Role::User, vec![text("go")]),
        ];
        assert_eq!(plans(&msgs), ["1. do x"]);
    }
}
