//! Agent Skills and custom commands (crush(1) SKILLS AND COMMANDS).
//!
//! A skill is a folder holding a `SKILL.md`: a frontmatter (`name`, `description`, ...) and
//! instructions. Skills are found in the project's and the user's skills folders, the folders
//! of `options.skills_paths`, and among the built-in ones compiled in; the system prompt lists
//! them, and the model reads a skill's `SKILL.md` (and the files of its folder) with the view
//! tool, without a permission question. A name found twice is the first one's: project
//! folders come first, then `options.skills_paths`, then the user's folders, then the built-in
//! skills. `commands.rs` loads custom commands.

pub(crate) mod catalog;
pub(crate) mod commands;
mod error;
pub(crate) mod fork;
pub(crate) mod frontmatter;
pub(crate) mod walk;

use crate::config::Loaded;
pub(crate) use error::SkillError;
use frontmatter::{Document, Value};
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};

/// The file that makes a folder a skill.
pub(crate) const SKILL_FILE: &str = "SKILL.md";
/// The Agent Skills standard's limits, in characters.
pub(crate) const MAX_NAME: usize = 64;
pub(crate) const MAX_DESCRIPTION: usize = 1024;
pub(crate) const MAX_COMPATIBILITY: usize = 500;
/// A larger `SKILL.md` is rejected: it is what the view tool reads at most.
pub(crate) const MAX_SKILL_BYTES: u64 = crate::tools::view::MAX_FILE_BYTES;
/// How deep below a skills folder skills are looked for, and how many folders one discovery
/// reads at most.
const MAX_DEPTH: usize = 4;
const MAX_DIRS: usize = 2000;
/// Where built-in skills are, for the model (the view tool reads them from the binary).
pub(crate) const BUILTIN_PREFIX: &str = crate::tools::view::BUILTIN_SKILLS;

/// The built-in skills: (folder name, SKILL.md).
const BUILTIN: &[(&str, &str)] = &[
    (
        "crush-config",
        include_str!("builtin/crush-config/SKILL.md"),
    ),
    ("crush-hooks", include_str!("builtin/crush-hooks/SKILL.md")),
];

/// Where a skill comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Source {
    Project,
    User,
    Builtin,
}

impl Source {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Source::Project => "project",
            Source::User => "user",
            Source::Builtin => "builtin",
        }
    }
}

/// A valid skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skill {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: Vec<(String, String)>,
    /// The standard's `allowed-tools`: listed, never granted (crush(1) SKILLS AND COMMANDS).
    pub allowed_tools: Vec<String>,
    /// `user-invocable: true`: a slash command.
    pub user_invocable: bool,
    /// `disable-model-invocation: true`: left out of the system prompt.
    pub disable_model_invocation: bool,
    /// `context: fork` (with `agent` and `model`): invoked as a command, it runs in a sub-agent.
    pub fork: Option<fork::Fork>,
    /// What of its frontmatter cannot be used as written (`context`, `agent`, `model`).
    pub warnings: Vec<String>,
    /// How a skill of Claude Code's folders was loaded other than as written (its name taken
    /// from its folder, a key in a shape Claude Code ignores): listed by `crush skills list`,
    /// not repeated at every start.
    pub notes: Vec<String>,
    /// The body of `SKILL.md`, trimmed.
    pub instructions: String,
    /// `SKILL.md` as found (or `crush://skills/NAME/SKILL.md`): what the model is given.
    pub location: String,
    /// The skill's folder, canonical (None for a built-in skill).
    pub dir: Option<PathBuf>,
    pub source: Source,
}

/// What became of one `SKILL.md` (or folder) discovery met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Active,
    /// Listed in `options.disabled_skills`.
    Disabled,
    /// Another skill of the same name was found first (its location).
    Shadowed(String),
    /// Not a valid skill (why).
    Rejected(String),
    /// A folder of `options.skills_paths` that does not exist: nothing to load, nothing wrong.
    Missing,
}

/// One thing discovery found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub name: Option<String>,
    /// `SKILL.md`, or the folder or link a problem is about.
    pub path: String,
    pub source: Source,
    pub state: State,
    pub skill: Option<Skill>,
}

/// The skills of a session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Skills {
    /// Everything found, in discovery order.
    pub found: Vec<Found>,
    /// Name clashes between two skills of the user's or the project's (one line each).
    pub warnings: Vec<String>,
}

/// The validation errors of a skill's fields, per the Agent Skills standard; empty when valid.
/// `folder`: the name of the skill's folder, which the name must equal.
pub(crate) fn validate(s: &Skill, folder: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let n = s.name.chars().count();
    if s.name.is_empty() {
        errs.push("name is required".to_string());
    } else {
        if n > MAX_NAME {
            errs.push(format!("name is {n} characters (the limit is {MAX_NAME})"));
        }
        // The standard asks for lowercase; Go Crush also takes capitals (and a folder that
        // differs only in case), so a Go Crush user's skills keep working.
        if !valid_name(&s.name) {
            errs.push(format!(
                "name `{}` must be letters, digits and single hyphens, not starting or ending with one",
                s.name
            ));
        }
        if s.name.to_lowercase() != folder.to_lowercase() {
            errs.push(format!(
                "name `{}` must be the name of its folder `{folder}`",
                s.name
            ));
        }
    }
    let d = s.description.chars().count();
    if s.description.trim().is_empty() {
        errs.push("description is required".to_string());
    } else if d > MAX_DESCRIPTION {
        errs.push(format!(
            "description is {d} characters (the limit is {MAX_DESCRIPTION})"
        ));
    }
    if let Some(c) = &s.compatibility {
        let c = c.chars().count();
        if c > MAX_COMPATIBILITY {
            errs.push(format!(
                "compatibility is {c} characters (the limit is {MAX_COMPATIBILITY})"
            ));
        }
    }
    errs
}

fn scalar(doc: &Document, key: &str) -> Result<Option<String>, SkillError> {
    match doc.get(key).map(|f| &f.value) {
        None | Some(Value::Scalar(None)) => Ok(None),
        Some(Value::Scalar(Some(s))) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(SkillError::Invalid(format!("{key} must be a single value"))),
    }
}

fn boolean(doc: &Document, key: &str) -> Result<bool, SkillError> {
    match scalar(doc, key)?.as_deref().map(str::to_ascii_lowercase) {
        None => Ok(false),
        Some(v) if matches!(v.as_str(), "true" | "yes" | "on") => Ok(true),
        Some(v) if matches!(v.as_str(), "false" | "no" | "off") => Ok(false),
        Some(v) => Err(SkillError::Invalid(format!(
            "{key} must be true or false, not `{v}`"
        ))),
    }
}

/// The description of a `SKILL.md` without frontmatter, as Claude Code takes it: its first
/// paragraph (lines up to a blank one), else its first heading; headings' `#`s dropped.
fn first_paragraph(body: &str) -> String {
    let mut heading = None;
    let mut para: Vec<&str> = Vec::new();
    for line in body.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            if !para.is_empty() {
                break;
            }
            if heading.is_none() && line.starts_with('#') {
                heading = Some(line.trim_start_matches('#').trim());
            }
            continue;
        }
        para.push(line);
    }
    let text = if para.is_empty() {
        heading.unwrap_or("").to_string()
    } else {
        para.join(" ")
    };
    text.chars().take(MAX_DESCRIPTION).collect()
}

/// A skill from the text of its `SKILL.md` (not yet validated); `folder` names a skill whose
/// file has no frontmatter (Claude Code loads such a file: its name is its folder's, its
/// description its first paragraph). Err: why it is not one.
pub(crate) fn parse_skill(
    text: &str,
    location: String,
    source: Source,
    folder: &str,
) -> Result<Skill, SkillError> {
    let doc = frontmatter::parse(text)?;
    if doc.fields.is_none() {
        return Ok(Skill {
            name: folder.to_string(),
            description: first_paragraph(&doc.body),
            license: None,
            compatibility: None,
            metadata: Vec::new(),
            allowed_tools: Vec::new(),
            user_invocable: in_claude_code_folder(&location),
            disable_model_invocation: false,
            fork: None,
            warnings: Vec::new(),
            notes: Vec::new(),
            instructions: doc.body.trim().to_string(),
            location,
            dir: None,
            source,
        });
    }
    // In Claude Code's folders a skill loads as Claude Code loads it: keys it does not read
    // in a shape the standard refuses are dropped with a note, and the skill is named
    // after its folder (crush(1) SKILLS AND COMMANDS).
    let claude = in_claude_code_folder(&location);
    let mut lenient = Vec::new();
    let compatibility = match scalar(&doc, "compatibility") {
        Err(_) if claude => {
            lenient.push("compatibility is not text: ignored, as Claude Code does".to_string());
            None
        }
        r => r?,
    };
    let metadata = match doc.get("metadata").map(|f| &f.value) {
        None | Some(Value::Scalar(None)) => Vec::new(),
        Some(Value::Map(m)) => m.clone(),
        Some(_) if claude => {
            lenient.push("metadata is not a map of text values: ignored".to_string());
            Vec::new()
        }
        Some(_) => {
            return Err(SkillError::Invalid(
                "metadata must map names to text values".into(),
            ));
        }
    };
    let allowed_tools = match doc.get("allowed-tools").map(|f| &f.value) {
        None | Some(Value::Scalar(None)) => Vec::new(),
        Some(Value::Scalar(Some(s))) => s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        Some(Value::List(l)) => l.clone(),
        Some(_) => {
            return Err(SkillError::Invalid(
                "allowed-tools must be a list of tool names".into(),
            ));
        }
    };
    // Claude Code names a skill without a name field after its folder; in its folders
    // (.claude/skills, ~/.claude/skills) so does crush. Elsewhere the standard's rule holds.
    let name = match scalar(&doc, "name")? {
        Some(n) if claude && !folder.is_empty() && !names_its_folder(&n, folder) => {
            lenient.push(format!(
                "name `{n}` is not its folder's skill name: loaded as `{folder}`, as Claude Code names it"
            ));
            folder.to_string()
        }
        Some(n) => n,
        None if claude => folder.to_string(),
        None => String::new(),
    };
    let (fork, warnings) = fork::parse(&doc);
    let user_invocable = match scalar(&doc, "user-invocable")? {
        // Claude Code offers its skills as commands unless told not to; Go Crush only when told.
        None => claude,
        Some(_) => boolean(&doc, "user-invocable")?,
    };
    Ok(Skill {
        name,
        description: scalar(&doc, "description")?.unwrap_or_default(),
        license: scalar(&doc, "license")?,
        compatibility,
        metadata,
        allowed_tools,
        user_invocable,
        disable_model_invocation: boolean(&doc, "disable-model-invocation")?,
        fork,
        warnings,
        notes: lenient,
        instructions: doc.body.trim().to_string(),
        location,
        dir: None,
        source,
    })
}

/// Letters, digits and single hyphens, not starting or ending with one (`validate`'s rule).
fn valid_name(name: &str) -> bool {
    name.chars().all(|c| c == '-' || c.is_alphanumeric())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Whether `name` passes `validate`'s name rules as the name of `folder`.
fn names_its_folder(name: &str, folder: &str) -> bool {
    valid_name(name) && name.to_lowercase() == folder.to_lowercase()
}

/// Whether the SKILL.md at `location` is under a `.claude/skills` folder (Claude Code's).
fn in_claude_code_folder(location: &str) -> bool {
    let parts: Vec<_> = std::path::Path::new(location).components().collect();
    parts
        .windows(2)
        .any(|w| w[0].as_os_str() == ".claude" && w[1].as_os_str() == "skills")
}

/// A folder to look for skills in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Root {
    pub dir: PathBuf,
    pub source: Source,
    /// Named in `options.skills_paths`: a missing one is listed.
    pub configured: bool,
}

fn home() -> PathBuf {
    crate::paths::home()
}

/// The folders skills are looked for in, first one first (crush(1) SKILLS AND COMMANDS):
/// the project's (`.crush/skills`, `.agents/skills`, `.claude/skills`, `.cursor/skills` in the
/// working directory, then at the project root), `options.skills_paths`, then the user's
/// (`$CRUSH_SKILLS_DIR`, or `~/.config/crush/skills`, `~/.config/agents/skills`,
/// `~/.agents/skills` and `~/.claude/skills`).
pub(crate) fn roots(loaded: &Loaded) -> Vec<Root> {
    const PROJECT: &[&str] = &[
        ".crush/skills",
        ".agents/skills",
        ".claude/skills",
        ".cursor/skills",
    ];
    let mut out: Vec<Root> = Vec::new();
    let mut push = |dir: PathBuf, source: Source, configured: bool| {
        if !out.iter().any(|r| r.dir == dir) {
            out.push(Root {
                dir,
                source,
                configured,
            });
        }
    };
    let mut project_dirs = vec![loaded.cwd.clone()];
    if loaded.project_root != loaded.cwd {
        project_dirs.push(loaded.project_root.clone());
    }
    for d in &project_dirs {
        for sub in PROJECT {
            push(d.join(sub), Source::Project, false);
        }
    }
    let root =
        std::fs::canonicalize(&loaded.project_root).unwrap_or_else(|_| loaded.project_root.clone());
    for p in &loaded.config.options.skills_paths {
        let expanded = if p.contains('$') {
            crate::config::expand::expand_env_vars_only(p, &loaded.env)
                .unwrap_or_else(|_| p.clone())
        } else {
            p.clone()
        };
        let dir = crate::paths::normalize(&crate::paths::resolve(&loaded.cwd, &expanded));
        let canon = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        let source = if canon.starts_with(&root) {
            Source::Project
        } else {
            Source::User
        };
        push(dir, source, true);
    }
    match crate::paths::location_var("CRUSH_SKILLS_DIR") {
        Some(d) => push(d, Source::User, false),
        None => {
            let home = home();
            for d in [
                crate::paths::global_config_dir().join("skills"),
                crate::paths::user_config_home()
                    .join("agents")
                    .join("skills"),
                home.join(".agents").join("skills"),
                crate::paths::claude_config_dir().join("skills"),
            ] {
                push(d, Source::User, false);
            }
        }
    }
    out
}

/// The skill in the folder `dir` (canonical: `canon`), whose `SKILL.md` was read as `text`
/// (Err: why it could not be), parsed and validated.
fn load_one(
    dir: &Path,
    canon: &Path,
    text: Result<String, walk::ReadError>,
    source: Source,
    project_root: &Path,
) -> Found {
    let location = dir.join(SKILL_FILE).display().to_string();
    let rejected = |why: String| Found {
        name: None,
        path: location.clone(),
        source,
        state: State::Rejected(why),
        skill: None,
    };
    if source == Source::Project && !canon.starts_with(project_root) {
        return rejected(format!(
            "its folder is a link to {}, outside the project; list that folder in options.skills_paths of your own crush.json to use it",
            canon.display()
        ));
    }
    let text = match text {
        Ok(t) => t,
        Err(e) => return rejected(e.message),
    };
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut skill = match parse_skill(&text, location.clone(), source, &folder) {
        Ok(s) => s,
        Err(e) => return rejected(e.to_string()),
    };
    let errs = validate(&skill, &folder);
    if !errs.is_empty() {
        let mut f = rejected(errs.join("; "));
        f.name = Some(skill.name).filter(|n| !n.is_empty());
        return f;
    }
    skill.dir = Some(canon.to_path_buf());
    Found {
        name: Some(skill.name.clone()),
        path: location,
        source,
        state: State::Active,
        skill: Some(skill),
    }
}

/// The built-in skills, as discovery finds them.
fn builtin() -> Vec<Found> {
    BUILTIN
        .iter()
        .map(|(folder, text)| {
            let location = format!("{BUILTIN_PREFIX}{folder}/{SKILL_FILE}");
            let parsed =
                parse_skill(text, location.clone(), Source::Builtin, folder).and_then(|s| {
                    let errs = validate(&s, folder);
                    if errs.is_empty() {
                        Ok(s)
                    } else {
                        Err(SkillError::Invalid(errs.join("; ")))
                    }
                });
            match parsed {
                Ok(s) => Found {
                    name: Some(s.name.clone()),
                    path: location,
                    source: Source::Builtin,
                    state: State::Active,
                    skill: Some(s),
                },
                Err(e) => Found {
                    name: None,
                    path: location,
                    source: Source::Builtin,
                    state: State::Rejected(e.to_string()),
                    skill: None,
                },
            }
        })
        .collect()
}

/// Finds every skill under `roots`, then the built-in ones; the first of a name wins, names in
/// `disabled` are disabled.
pub(crate) fn discover_in(roots: &[Root], project_root: &Path, disabled: &[String]) -> Skills {
    let project_root =
        std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    let mut walker = walk::Walker::new(MAX_DEPTH, MAX_DIRS);
    let mut found: Vec<Found> = Vec::new();
    for root in roots {
        match std::fs::metadata(&root.dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                found.push(Found {
                    name: None,
                    path: root.dir.display().to_string(),
                    source: root.source,
                    state: State::Rejected("not a folder".into()),
                    skill: None,
                });
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if root.configured {
                    found.push(Found {
                        name: None,
                        path: root.dir.display().to_string(),
                        source: root.source,
                        state: State::Missing,
                        skill: None,
                    });
                }
                continue;
            }
            Err(e) => {
                found.push(Found {
                    name: None,
                    path: root.dir.display().to_string(),
                    source: root.source,
                    state: State::Rejected(e.to_string()),
                    skill: None,
                });
                continue;
            }
        }
        let before = walker.problems.len();
        // A folder is tried for its SKILL.md before it is listed: a skill's folder is never
        // listed (its sub-folders are its files, not more skills).
        let mut probe = |dir: &Path, canon: &Path| match walk::read_text(
            &dir.join(SKILL_FILE),
            MAX_SKILL_BYTES,
        ) {
            Err(e) if e.kind == std::io::ErrorKind::NotFound => walk::Next::Descend,
            text => {
                found.push(load_one(dir, canon, text, root.source, &project_root));
                walk::Next::Skip
            }
        };
        walker.walk_probing(&root.dir, &mut probe, &mut |_, _, _, _| walk::Next::Descend);
        for (path, why) in walker.problems.drain(before..) {
            found.push(Found {
                name: None,
                path: path.display().to_string(),
                source: root.source,
                state: State::Rejected(why),
                skill: None,
            });
        }
    }
    found.extend(builtin());
    let mut warnings: Vec<String> = found
        .iter()
        .filter_map(|f| Some((f, f.skill.as_ref()?)))
        .flat_map(|(f, s)| s.warnings.iter().map(|w| format!("skill {}: {w}", f.path)))
        .collect();
    let mut winners: Vec<(String, String)> = Vec::new();
    for f in found.iter_mut() {
        let (Some(name), State::Active) = (&f.name, &f.state) else {
            continue;
        };
        if let Some((_, by)) = winners.iter().find(|(n, _)| n == name) {
            if f.source != Source::Builtin {
                warnings.push(format!(
                    "skill {name}: {} is ignored; {by} has the same name and comes first",
                    f.path
                ));
            }
            f.state = State::Shadowed(by.clone());
            continue;
        }
        winners.push((name.clone(), f.path.clone()));
        if disabled.contains(name) {
            f.state = State::Disabled;
        }
    }
    Skills { found, warnings }
}

/// The session's skills under the configuration `loaded`.
pub(crate) fn discover(loaded: &Loaded) -> Skills {
    discover_in(
        &roots(loaded),
        &loaded.project_root,
        &loaded.config.options.disabled_skills,
    )
}

/// `&`, `<`, `>` and quotes escaped, for the XML-like listing in the system prompt.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// One skill as `crush_info` lists it under `[skills]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InfoEntry {
    pub name: String,
    /// `project`, `user` or `builtin`.
    pub origin: &'static str,
    /// `active`, `disabled`, `shadowed` or `rejected`.
    pub state: &'static str,
    /// Its `SKILL.md` (canonical) when active and on disk: read in the session means loaded.
    pub file: Option<PathBuf>,
}

impl Skills {
    /// Every named skill discovery met, by name, for `crush_info`.
    pub(crate) fn info(&self) -> Vec<InfoEntry> {
        let mut v: Vec<InfoEntry> = self
            .found
            .iter()
            .filter_map(|f| {
                let state = match f.state {
                    State::Active => "active",
                    State::Disabled => "disabled",
                    State::Shadowed(_) => "shadowed",
                    State::Rejected(_) => "rejected",
                    State::Missing => "missing",
                };
                Some(InfoEntry {
                    name: f.name.clone()?,
                    origin: f.source.label(),
                    state,
                    file: f
                        .skill
                        .as_ref()
                        .filter(|_| f.state == State::Active)
                        .and_then(|s| s.dir.as_ref())
                        .map(|d| d.join(SKILL_FILE)),
                })
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The active skills, by name.
    pub(crate) fn active(&self) -> Vec<&Skill> {
        let mut out: Vec<&Skill> = self
            .found
            .iter()
            .filter(|f| f.state == State::Active)
            .filter_map(|f| f.skill.as_ref())
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The active skill `name`.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&Skill> {
        self.active().into_iter().find(|s| s.name == name)
    }

    /// The `<available_skills>` listing of the system prompt, by name (stable, so the prompt
    /// caches); empty when no skill is offered to the model.
    pub(crate) fn prompt_listing(&self) -> String {
        let offered: Vec<&Skill> = self
            .active()
            .into_iter()
            .filter(|s| !s.disable_model_invocation)
            .collect();
        if offered.is_empty() {
            return String::new();
        }
        let mut s = String::from("<available_skills>\n");
        for k in offered {
            s.push_str("  <skill>\n");
            s.push_str(&format!("    <name>{}</name>\n", escape(&k.name)));
            s.push_str(&format!(
                "    <description>{}</description>\n",
                escape(&k.description)
            ));
            s.push_str(&format!(
                "    <location>{}</location>\n",
                escape(&k.location)
            ));
            if k.source == Source::Builtin {
                s.push_str("    <type>builtin</type>\n");
            }
            if let Some(f) = &k.fork {
                s.push_str("    <context>fork</context>\n");
                if let Some(a) = f.custom_agent() {
                    s.push_str(&format!("    <agent>{}</agent>\n", escape(a)));
                }
            }
            s.push_str("  </skill>\n");
        }
        s.push_str("</available_skills>");
        s
    }

    /// What the tools may read without asking: the active skills' folders and the built-in
    /// skills' texts.
    pub(crate) fn files(&self) -> crate::tools::SkillFiles {
        let mut files = crate::tools::SkillFiles::default();
        for s in self.active() {
            match &s.dir {
                Some(d) => files.dirs.push(d.clone()),
                None => {
                    if let Some((_, text)) = BUILTIN.iter().find(|(folder, _)| {
                        s.location == format!("{BUILTIN_PREFIX}{folder}/{SKILL_FILE}")
                    }) {
                        files.builtin.push((s.location.clone(), text));
                    }
                }
            }
        }
        files
    }

    /// Warns of each forked skill whose `agent:` names none of the custom agents `known`.
    pub(crate) fn check_agents(&mut self, known: &[&str]) {
        for f in &mut self.found {
            let Some(s) = f.skill.as_mut() else { continue };
            if let Some(w) = s.fork.as_ref().and_then(|k| fork::unknown_agent(k, known)) {
                self.warnings.push(format!("skill {}: {w}", f.path));
                s.warnings.push(w);
            }
        }
    }

    /// `crush skills list`: one block per skill found.
    pub(crate) fn list_text(&self) -> String {
        let mut out = String::new();
        for f in &self.found {
            let name = f.name.as_deref().unwrap_or("-");
            let state = match &f.state {
                State::Active => "active".to_string(),
                State::Disabled => "disabled (options.disabled_skills)".to_string(),
                State::Shadowed(by) => format!("ignored: {by} has the same name"),
                State::Rejected(why) => format!("rejected: {why}"),
                State::Missing => "not found (options.skills_paths): nothing to load".to_string(),
            };
            out.push_str(&format!("{name}  [{}]  {state}\n", f.source.label()));
            out.push_str(&format!("    {}\n", f.path));
            if let Some(s) = &f.skill {
                let mut flags = Vec::new();
                if s.user_invocable {
                    flags.push(format!("/{}:{}", s.source.label(), s.name));
                }
                if s.disable_model_invocation {
                    flags.push("not offered to the model".to_string());
                }
                if !s.allowed_tools.is_empty() {
                    flags.push(format!(
                        "allowed-tools (not granted): {}",
                        s.allowed_tools.join(" ")
                    ));
                }
                if let Some(f) = &s.fork {
                    flags.push(f.describe());
                }
                out.push_str(&format!("    {}\n", s.description));
                if !flags.is_empty() {
                    out.push_str(&format!("    {}\n", flags.join(" · ")));
                }
                for w in &s.warnings {
                    out.push_str(&format!("    warning: {w}\n"));
                }
                for n in &s.notes {
                    out.push_str(&format!("    note: {n}\n"));
                }
            }
        }
        if out.is_empty() {
            out.push_str("No skills found.\n");
        }
        out
    }

    /// `crush skills list --json`: one object per skill found.
    pub(crate) fn list_json(&self) -> Json {
        let items: Vec<Json> = self
            .found
            .iter()
            .map(|f| {
                let (state, reason) = match &f.state {
                    State::Active => ("active", None),
                    State::Disabled => ("disabled", None),
                    State::Shadowed(by) => ("shadowed", Some(format!("{by} has the same name"))),
                    State::Rejected(why) => ("rejected", Some(why.clone())),
                    State::Missing => ("missing", None),
                };
                let mut v = json!({
                    "name": f.name,
                    "path": f.path,
                    "source": f.source.label(),
                    "state": state,
                });
                if let Some(r) = reason {
                    v["reason"] = json!(r);
                }
                if let Some(s) = &f.skill {
                    v["description"] = json!(s.description);
                    v["user_invocable"] = json!(s.user_invocable);
                    v["disable_model_invocation"] = json!(s.disable_model_invocation);
                    v["license"] = json!(s.license);
                    v["compatibility"] = json!(s.compatibility);
                    v["metadata"] = Json::Object(
                        s.metadata
                            .iter()
                            .map(|(k, val)| (k.clone(), json!(val)))
                            .collect(),
                    );
                    v["allowed_tools"] = json!(s.allowed_tools);
                    v["context"] = json!(if s.fork.is_some() { "fork" } else { "inline" });
                    v["agent"] = json!(s.fork.as_ref().and_then(|f| f.agent.clone()));
                    v["model"] = json!(s.fork.as_ref().map(|f| f.model.to_string()));
                    v["warnings"] = json!(s.warnings);
                    v["notes"] = json!(s.notes);
                }
                v
            })
            .collect();
        Json::Array(items)
    }
}

#[cfg(test)]
mod tests;
