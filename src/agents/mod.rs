//! Custom sub-agents defined as files (crush(1) AGENTS): Markdown with YAML frontmatter in
//! `<project>/.crush/agents/`, `<project>/.claude/agents/`, `~/.config/crush/agents/` and
//! `~/.claude/agents/`. The frontmatter is Claude Code's (`name`, `description`, `tools`,
//! `model`); the body is the agent's system prompt. Discovery is bounded like skills': each
//! folder is read flat, at most [`MAX_FILES`] files of at most [`MAX_FILE_BYTES`] each, and
//! a file that cannot be used is listed with the reason, never an error of the start.

use crate::skills::frontmatter::{self, Value};
use crate::skills::walk::read_text;
use std::path::{Path, PathBuf};

/// Files read per folder; the rest are listed as rejected.
pub const MAX_FILES: usize = 200;
/// The largest agent file read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Where an agent file was found, in the order folders are searched (the first wins a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Project,
    ClaudeProject,
    User,
    ClaudeUser,
}

impl Origin {
    pub fn label(self) -> &'static str {
        match self {
            Origin::Project => "project",
            Origin::ClaudeProject => "project (Claude Code)",
            Origin::User => "user",
            Origin::ClaudeUser => "user (Claude Code)",
        }
    }
    fn is_project(self) -> bool {
        matches!(self, Origin::Project | Origin::ClaudeProject)
    }
}

/// The model an agent runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// The parent's model (`inherit`, or no `model`).
    Inherit,
    /// The catalog's current model of a family (`sonnet`, `opus`, `haiku`) for the provider.
    Family(String),
    /// `provider/model`.
    Exact { provider: String, model: String },
}

/// One usable agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    /// None: the default sub-agent's tools.
    pub tools: Option<Vec<String>>,
    pub model: ModelChoice,
    /// The system prompt.
    pub body: String,
    pub path: PathBuf,
    pub origin: Origin,
}

/// Why an agent file is not used.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    Unreadable(String),
    Frontmatter(String),
    MissingField(&'static str),
    BadName(String),
    UnknownModel(String),
    /// Another file of the same name was found first.
    Shadowed(PathBuf),
    /// An untrusted project's agent asks for more than the default sub-agent has.
    Widens(String),
    TooMany,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Unreadable(e) => write!(f, "cannot be read: {e}"),
            Reason::Frontmatter(e) => write!(f, "broken frontmatter: {e}"),
            Reason::MissingField(k) => write!(f, "the frontmatter has no {k}"),
            Reason::BadName(n) => write!(
                f,
                "name {n:?} is not lowercase letters, digits and hyphens (at most 64)"
            ),
            Reason::UnknownModel(m) => write!(
                f,
                "model {m:?} is not inherit, sonnet, opus, haiku or PROVIDER/MODEL"
            ),
            Reason::Shadowed(by) => write!(f, "shadowed by {}", by.display()),
            Reason::Widens(what) => write!(
                f,
                "the project is not trusted and the agent widens what a sub-agent may do: {what}"
            ),
            Reason::TooMany => write!(f, "more than {MAX_FILES} files in the folder"),
        }
    }
}

/// A file that is not used, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub path: PathBuf,
    pub origin: Origin,
    pub name: Option<String>,
    pub reason: Reason,
}

/// What discovery found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Agents {
    pub agents: Vec<AgentDef>,
    pub rejected: Vec<Rejected>,
}

/// The four folders, in search order.
pub fn folders(project_root: &Path, config_dir: &Path, home: &Path) -> Vec<(PathBuf, Origin)> {
    vec![
        (project_root.join(".crush/agents"), Origin::Project),
        (project_root.join(".claude/agents"), Origin::ClaudeProject),
        (config_dir.join("agents"), Origin::User),
        (home.join(".claude/agents"), Origin::ClaudeUser),
    ]
}

/// Reads the agent files of `folders`; `default_tools` are the default sub-agent's, the most
/// an untrusted project's agent may name (crush(1) AGENTS).
pub fn discover(
    folders: &[(PathBuf, Origin)],
    project_trusted: bool,
    default_tools: &[&str],
) -> Agents {
    let mut out = Agents::default();
    for (dir, origin) in folders {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.sort();
        for (i, path) in files.into_iter().enumerate() {
            let reject = |name: Option<String>, reason: Reason| Rejected {
                path: path.clone(),
                origin: *origin,
                name,
                reason,
            };
            if i >= MAX_FILES {
                out.rejected.push(reject(None, Reason::TooMany));
                continue;
            }
            let def = match read_one(&path, *origin) {
                Ok(d) => d,
                Err((name, reason)) => {
                    out.rejected.push(reject(name, reason));
                    continue;
                }
            };
            if let Some(first) = out.agents.iter().find(|a| a.name == def.name) {
                let by = first.path.clone();
                out.rejected
                    .push(reject(Some(def.name), Reason::Shadowed(by)));
                continue;
            }
            if origin.is_project()
                && !project_trusted
                && let Some(what) = widening(&def, default_tools)
            {
                out.rejected
                    .push(reject(Some(def.name), Reason::Widens(what)));
                continue;
            }
            out.agents.push(def);
        }
    }
    out
}

/// What an agent asks beyond the default sub-agent: tools it lacks, or a model of its own.
fn widening(def: &AgentDef, default_tools: &[&str]) -> Option<String> {
    if let Some(tools) = &def.tools {
        let extra: Vec<&str> = tools
            .iter()
            .map(String::as_str)
            .filter(|t| !default_tools.contains(t))
            .collect();
        if !extra.is_empty() {
            return Some(format!("tools {}", extra.join(", ")));
        }
    }
    if let ModelChoice::Exact { provider, model } = &def.model {
        return Some(format!("model {provider}/{model}"));
    }
    None
}

fn scalar<'a>(doc: &'a frontmatter::Document, key: &str) -> Option<&'a str> {
    match &doc.get(key)?.value {
        Value::Scalar(Some(s)) => Some(s.as_str()),
        _ => None,
    }
}

fn read_one(path: &Path, origin: Origin) -> Result<AgentDef, (Option<String>, Reason)> {
    let text =
        read_text(path, MAX_FILE_BYTES).map_err(|e| (None, Reason::Unreadable(e.message)))?;
    let doc = frontmatter::parse(&text).map_err(|e| (None, Reason::Frontmatter(e)))?;
    if doc.fields.is_none() {
        return Err((
            None,
            Reason::Frontmatter("no frontmatter (a first line ---)".into()),
        ));
    }
    let name = scalar(&doc, "name")
        .ok_or((None, Reason::MissingField("name")))?
        .to_string();
    let named = |r: Reason| (Some(name.clone()), r);
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(named(Reason::BadName(name.clone())));
    }
    let description = scalar(&doc, "description")
        .ok_or_else(|| named(Reason::MissingField("description")))?
        .to_string();
    let tools = match doc.get("tools").map(|f| &f.value) {
        None | Some(Value::Scalar(None)) => None,
        Some(Value::Scalar(Some(s))) => Some(
            s.split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect(),
        ),
        Some(Value::List(l)) => Some(l.clone()),
        Some(_) => {
            return Err(named(Reason::Frontmatter(
                "tools is not a comma-separated list".into(),
            )));
        }
    };
    let model = match scalar(&doc, "model") {
        None | Some("inherit") => ModelChoice::Inherit,
        Some(f @ ("sonnet" | "opus" | "haiku")) => ModelChoice::Family(f.to_string()),
        Some(m) => match m.split_once('/') {
            Some((p, id)) if !p.is_empty() && !id.is_empty() => ModelChoice::Exact {
                provider: p.to_string(),
                model: id.to_string(),
            },
            _ => return Err(named(Reason::UnknownModel(m.to_string()))),
        },
    };
    Ok(AgentDef {
        name,
        description,
        tools,
        model,
        body: doc.body.trim().to_string(),
        path: path.to_path_buf(),
        origin,
    })
}

#[cfg(test)]
mod tests;
