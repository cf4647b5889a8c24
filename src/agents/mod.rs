//! Custom sub-agents defined as files (crush(1) AGENTS): Markdown with YAML frontmatter in
//! `<project>/.crush/agents/`, `<project>/.claude/agents/`, `~/.config/crush/agents/` and
//! `~/.claude/agents/`. The frontmatter is Claude Code's (`name`, `description`, `tools`,
//! `model`) and crush's own `permissions`; the body is the agent's system prompt. Discovery is
//! bounded like skills': each
//! folder is read flat, at most [`MAX_FILES`] files of at most [`MAX_FILE_BYTES`] each, and
//! a file that cannot be used is listed with the reason, never an error of the start.

use crate::skills::frontmatter::{self, Value};
use crate::skills::walk::read_text;
use std::path::{Path, PathBuf};

/// Files read per folder; the rest are listed as rejected.
pub(crate) const MAX_FILES: usize = 200;
/// The largest agent file read.
pub(crate) const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Where an agent file was found, in the order folders are searched (the first wins a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Project,
    ClaudeProject,
    User,
    ClaudeUser,
}

impl Origin {
    pub(crate) fn label(self) -> &'static str {
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

/// The model an agent runs on (its `model:`, read as a skill's).
pub(crate) use crate::skills::fork::ModelChoice;

/// One usable agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentDef {
    pub name: String,
    pub description: String,
    /// None: the default sub-agent's tools.
    pub tools: Option<Vec<String>>,
    pub model: ModelChoice,
    /// `permissions.allowed_tools`: rules of `permissions.allowed_tools`' syntax added to the
    /// parent's for this agent's calls (crush(1) AGENTS).
    pub allowed_tools: Vec<String>,
    /// The system prompt.
    pub body: String,
    pub path: PathBuf,
    pub origin: Origin,
}

/// Why an agent file is not used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reason {
    Unreadable(String),
    Frontmatter(String),
    MissingField(&'static str),
    BadName(String),
    UnknownModel(String),
    /// The model cannot be had from the configured providers.
    Model(ModelProblem),
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
            Reason::Model(p) => write!(f, "{p}"),
            Reason::Shadowed(by) => write!(f, "shadowed by {}", by.display()),
            Reason::Widens(what) => write!(
                f,
                "the project is not trusted and the agent widens what a sub-agent may do: {what}"
            ),
            Reason::TooMany => write!(f, "more than {MAX_FILES} files in the folder"),
        }
    }
}

/// Why an agent's model cannot be had.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModelProblem {
    /// The active provider lists no model of the family.
    NoFamily { family: String, provider: String },
    /// `provider/model` names no model crush can call.
    Unresolved { model: String, why: String },
}

impl std::fmt::Display for ModelProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelProblem::NoFamily { family, provider } => write!(
                f,
                "model {family}: provider {provider} has no {family} model in its catalog"
            ),
            ModelProblem::Unresolved { model, why } => write!(f, "model {model}: {why}"),
        }
    }
}

impl std::error::Error for ModelProblem {}

/// The version numbers of a model id, for "newest": the first run of short numbers among its
/// words (`claude-sonnet-4-5-20250929` → 4, 5; `claude-3-7-sonnet` → 3, 7; `opus4-8` → 4, 8).
fn version_of(id: &str) -> Vec<u32> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut digit = false;
    for c in id.chars() {
        let d = c.is_ascii_digit();
        if !c.is_ascii_alphanumeric() || (!cur.is_empty() && d != digit) {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            if !c.is_ascii_alphanumeric() {
                continue;
            }
        }
        digit = d;
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let mut out = Vec::new();
    for w in &words {
        match w.parse::<u32>() {
            Ok(n) if w.len() <= 2 => out.push(n),
            _ if !out.is_empty() => break,
            _ => {}
        }
    }
    out
}

/// Whether `id` is a model of `family`: the family is one of its words (`claude-opus4-8`).
fn of_family(id: &str, family: &str) -> bool {
    id.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w == family)
}

/// The newest model of `family` (`sonnet`, `opus`, `haiku`) among `models`: the highest
/// version, then the shortest id (a plain model before its `-fast` or `-think` variant).
pub(crate) fn newest_of_family<'m>(
    family: &str,
    models: &'m [crate::config::Model],
) -> Option<&'m crate::config::Model> {
    models
        .iter()
        .filter(|m| of_family(&m.id, family))
        .max_by(|a, b| {
            version_of(&a.id)
                .cmp(&version_of(&b.id))
                .then_with(|| b.id.len().cmp(&a.id.len()))
                .then_with(|| b.id.cmp(&a.id))
        })
}

/// The model an agent whose frontmatter says `choice` runs on, when its parent runs on
/// `active` under `loaded`: None to inherit the parent's (crush(1) AGENTS).
pub(crate) fn resolve_model(
    choice: &ModelChoice,
    active: &crate::config::ResolvedModel,
    loaded: &crate::config::Loaded,
) -> Result<Option<crate::config::ResolvedModel>, ModelProblem> {
    let named = match choice {
        ModelChoice::Inherit => return Ok(None),
        ModelChoice::Family(family) => {
            let m = newest_of_family(family, &active.provider.models).ok_or_else(|| {
                ModelProblem::NoFamily {
                    family: family.clone(),
                    provider: active.provider.id.clone(),
                }
            })?;
            format!("{}/{}", active.provider.id, m.id)
        }
        ModelChoice::Exact { provider, model } => {
            if !loaded.providers().ready.iter().any(|p| &p.id == provider) {
                return Err(ModelProblem::Unresolved {
                    model: choice.to_string(),
                    why: format!("provider {provider} is not configured or has no API key"),
                });
            }
            format!("{provider}/{model}")
        }
    };
    loaded
        .resolve_model(Some(&named), false)
        .map(Some)
        .map_err(|e| ModelProblem::Unresolved {
            model: choice.to_string(),
            why: e.to_string(),
        })
}

/// Moves the agents whose model cannot be had under a parent on `active` to the rejected.
pub(crate) fn check_models(
    found: &mut Agents,
    active: &crate::config::ResolvedModel,
    loaded: &crate::config::Loaded,
) {
    let (ok, bad): (Vec<AgentDef>, Vec<AgentDef>) = std::mem::take(&mut found.agents)
        .into_iter()
        .partition(|a| resolve_model(&a.model, active, loaded).is_ok());
    found.agents = ok;
    for a in bad {
        if let Err(p) = resolve_model(&a.model, active, loaded) {
            found.rejected.push(Rejected {
                path: a.path,
                origin: a.origin,
                name: Some(a.name),
                reason: Reason::Model(p),
            });
        }
    }
}

/// The agent files of the configuration's folders under its trust (crush(1) AGENTS): a
/// project's files may widen only when the user trusted what the project defines, or for
/// this run.
pub(crate) fn for_config(loaded: &crate::config::Loaded, default_tools: &[&str]) -> Agents {
    let t = &loaded.trust;
    let policy = Policy {
        project_trusted: t.trusted_once || (t.trusted && !t.items.is_empty()),
        default_tools,
        project_providers: t
            .items
            .iter()
            .filter_map(|i| i.key.strip_prefix("providers."))
            .map(|p| p.split('.').next().unwrap_or(p).to_string())
            .collect(),
    };
    let folders = folders(
        &loaded.project_root,
        &crate::paths::global_config_dir(),
        &crate::paths::home(),
    );
    discover(&folders, &policy)
}

/// A file that is not used, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejected {
    pub path: PathBuf,
    pub origin: Origin,
    pub name: Option<String>,
    pub reason: Reason,
}

/// What discovery found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Agents {
    pub agents: Vec<AgentDef>,
    pub rejected: Vec<Rejected>,
}

impl Agents {
    /// `crush agents list` and `/agents`: each agent with its origin, tools and model (`models`:
    /// the model an agent's alias stands for, by name), then each file not used and why.
    pub(crate) fn list_text(&self, models: &[(String, String)]) -> String {
        let mut out = String::new();
        for a in &self.agents {
            out.push_str(&format!("{}  [{}]  active\n", a.name, a.origin.label()));
            out.push_str(&format!("    {}\n", a.path.display()));
            out.push_str(&format!("    {}\n", a.description.replace('\n', " ")));
            let tools = match &a.tools {
                Some(t) => t.join(", "),
                None => "the built-in sub-agent's (read-only)".into(),
            };
            out.push_str(&format!("    tools: {tools}\n    model: {}", a.model));
            if let Some((_, m)) = models.iter().find(|(n, _)| *n == a.name) {
                out.push_str(&format!(" ({m})"));
            }
            out.push('\n');
            if !a.allowed_tools.is_empty() {
                out.push_str(&format!(
                    "    allowed without asking: {}\n",
                    a.allowed_tools.join(", ")
                ));
            }
        }
        for r in &self.rejected {
            let state = match &r.reason {
                Reason::Shadowed(_) => "shadowed",
                _ => "rejected",
            };
            let name = r.name.as_deref().unwrap_or("-");
            out.push_str(&format!("{name}  [{}]  {state}\n", r.origin.label()));
            out.push_str(&format!("    {}\n    {}\n", r.path.display(), r.reason));
        }
        if out.is_empty() {
            out.push_str("No agent files found.\n");
        }
        out
    }

    /// `crush agents list --json`: one object per file, used or not.
    pub(crate) fn list_json(&self, models: &[(String, String)]) -> serde_json::Value {
        use serde_json::json;
        let mut items: Vec<serde_json::Value> = self
            .agents
            .iter()
            .map(|a| {
                json!({
                    "name": a.name,
                    "state": "active",
                    "description": a.description,
                    "path": a.path,
                    "origin": a.origin.label(),
                    "tools": a.tools,
                    "model": a.model.to_string(),
                    "resolved_model": models.iter().find(|(n, _)| *n == a.name).map(|(_, m)| m),
                    "allowed_tools": a.allowed_tools,
                })
            })
            .collect();
        items.extend(self.rejected.iter().map(|r| {
            let state = match r.reason {
                Reason::Shadowed(_) => "shadowed",
                _ => "rejected",
            };
            json!({
                "name": r.name,
                "state": state,
                "path": r.path,
                "origin": r.origin.label(),
                "reason": r.reason.to_string(),
            })
        }));
        serde_json::Value::Array(items)
    }
}

/// The four folders, in search order.
pub(crate) fn folders(
    project_root: &Path,
    config_dir: &Path,
    home: &Path,
) -> Vec<(PathBuf, Origin)> {
    let [crush, claude] = crate::config::trust::PROJECT_AGENT_DIRS;
    vec![
        (project_root.join(crush), Origin::Project),
        (project_root.join(claude), Origin::ClaudeProject),
        (config_dir.join("agents"), Origin::User),
        (home.join(".claude/agents"), Origin::ClaudeUser),
    ]
}

/// What a project's agent file may ask for (crush(1) AGENTS).
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy<'a> {
    /// The user trusted what the project defines (or passed --trust): its agents may widen.
    pub project_trusted: bool,
    /// The default sub-agent's tools: the most an untrusted project's agent may name.
    pub default_tools: &'a [&'a str],
    /// The providers the project's own files define: an untrusted project's agent may not
    /// point its model at one.
    pub project_providers: Vec<String>,
}

/// Reads the agent files of `folders` under `policy`.
pub(crate) fn discover(folders: &[(PathBuf, Origin)], policy: &Policy) -> Agents {
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
                && !policy.project_trusted
                && let Some(what) = widening(&def, policy)
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

/// What an agent asks beyond the default sub-agent: tools it lacks, a model of a provider the
/// project defines, or permissions of its own.
fn widening(def: &AgentDef, policy: &Policy) -> Option<String> {
    if let Some(tools) = &def.tools {
        let extra: Vec<&str> = tools
            .iter()
            .map(String::as_str)
            .filter(|t| !policy.default_tools.contains(t))
            .collect();
        if !extra.is_empty() {
            return Some(format!("tools {}", extra.join(", ")));
        }
    }
    if let ModelChoice::Exact { provider, model } = &def.model
        && policy.project_providers.contains(provider)
    {
        return Some(format!(
            "model {provider}/{model} of a provider the project defines"
        ));
    }
    if !def.allowed_tools.is_empty() {
        return Some(format!(
            "permissions.allowed_tools {}",
            def.allowed_tools.join(", ")
        ));
    }
    None
}

/// The rules of a comma list (`a, b`) or a YAML list.
fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
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
    let doc = frontmatter::parse(&text).map_err(|e| (None, Reason::Frontmatter(e.to_string())))?;
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
        Some(Value::Scalar(Some(s))) => Some(comma_list(s)),
        Some(Value::List(l)) => Some(l.clone()),
        Some(_) => {
            return Err(named(Reason::Frontmatter(
                "tools is not a comma-separated list".into(),
            )));
        }
    };
    let model = match scalar(&doc, "model") {
        None => ModelChoice::Inherit,
        Some(m) => crate::skills::fork::parse_model(m)
            .ok_or_else(|| named(Reason::UnknownModel(m.to_string())))?,
    };
    let allowed_tools = match doc.get("permissions").map(|f| &f.value) {
        None | Some(Value::Scalar(None)) => Vec::new(),
        Some(Value::Map(m)) => {
            let mut out = Vec::new();
            for (k, v) in m {
                if k != "allowed_tools" {
                    return Err(named(Reason::Frontmatter(format!(
                        "permissions.{k} is not a key crush knows (allowed_tools)"
                    ))));
                }
                out.extend(comma_list(v));
            }
            out
        }
        Some(_) => {
            return Err(named(Reason::Frontmatter(
                "permissions is not a map with allowed_tools: a comma list".into(),
            )));
        }
    };
    Ok(AgentDef {
        name,
        description,
        tools,
        model,
        allowed_tools,
        body: doc.body.trim().to_string(),
        path: path.to_path_buf(),
        origin,
    })
}

#[cfg(test)]
mod tests;
