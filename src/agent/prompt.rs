//! The system prompt: who the agent is, its environment (cwd, platform, date, git status) and the
//! project's context files, in a deterministic order (stable prompts cache well).

use std::path::{Path, PathBuf};

/// Context files Crush reads by default, in the order they are considered.
pub(crate) const DEFAULT_CONTEXT_PATHS: &[&str] = &[
    ".github/copilot-instructions.md",
    ".cursorrules",
    ".cursor/rules/",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "GEMINI.md",
    "gemini.md",
    "crush.md",
    "crush.local.md",
    "Crush.md",
    "Crush.local.md",
    "CRUSH.md",
    "CRUSH.local.md",
    "AGENTS.md",
    "agents.md",
    "Agents.md",
];

/// Total bytes of context files put into the prompt; the rest is left out with a note.
const CONTEXT_BUDGET: usize = 200 * 1024;

/// crush's default system prompt: how to work, verify, use git, handle refusals and answer
/// (crush(1) CONFIGURATION, System prompt). About 1 000 tokens by the four-bytes-a-token estimate.
pub(crate) const INTRO: &str = include_str!("default_prompt.md");

/// One entry of the context paths: a file or directory, and whether what it names must lie
/// inside the project (entries a project's files or the model set, and the default names, which
/// are project files; crush(1) SECURITY). The user's own entries may point anywhere.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextEntry {
    pub path: String,
    pub confined: bool,
}

impl ContextEntry {
    pub(crate) fn project(path: &str) -> ContextEntry {
        ContextEntry {
            path: path.to_string(),
            confined: true,
        }
    }
    pub(crate) fn user(path: &str) -> ContextEntry {
        ContextEntry {
            path: path.to_string(),
            confined: false,
        }
    }
}

/// Files from `entries` (relative to `cwd`, `~/` expanded), directories walked recursively in
/// name order, deduplicated by path in first-seen order, missing ones skipped. A file of a
/// confined entry whose real path (symbolic links followed) is outside `project_root` is left
/// out and logged.
pub(crate) fn context_files(
    cwd: &Path,
    project_root: &Path,
    entries: &[ContextEntry],
) -> Vec<PathBuf> {
    let root = project_root
        .canonicalize()
        .unwrap_or_else(|_| project_root.to_path_buf());
    let mut out: Vec<PathBuf> = Vec::new();
    for e in entries {
        let p = crate::paths::resolve(cwd, &e.path);
        collect(&p, e.confined.then_some(root.as_path()), &mut out);
    }
    out
}

fn collect(p: &Path, inside: Option<&Path>, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut children: Vec<PathBuf> = match std::fs::read_dir(p) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(_) => return,
        };
        children.sort();
        for c in children {
            collect(&c, inside, out);
        }
    } else if p.is_file() {
        if let Some(root) = inside
            && !p.canonicalize().is_ok_and(|real| real.starts_with(root))
        {
            crate::log::warn(&format!(
                "context file {} left out: it is outside the project, and only your own configuration may name such files",
                p.display()
            ));
            return;
        }
        // Case-insensitive file systems would list CLAUDE.md and claude.md twice.
        let key = p.to_string_lossy().to_lowercase();
        if !out
            .iter()
            .any(|o| o.to_string_lossy().to_lowercase() == key)
        {
            out.push(p.to_path_buf());
        }
    }
}

fn git_status(cwd: &Path, env: &crate::env::Overlay) -> Option<String> {
    // The directory's own `.git/config` may name programs (an unpacked archive can hold one):
    // crush's own status runs none of them. It is left out when the configuration names any
    // (a clean filter runs on status); the monitor is turned off and the index left as it is
    // (no hook runs on its refresh) in any case.
    if crate::tools::gitconfig::runs_programs(cwd).is_some() {
        return None;
    }
    let argv = [
        "git",
        "--no-optional-locks",
        "-c",
        "core.fsmonitor=false",
        "status",
        "--short",
        "--branch",
    ]
    .map(String::from)
    .to_vec();
    let mut spec = crate::proc::Spec::exec(argv, cwd);
    spec.env = env.vars();
    // A status that takes longer than this is left out rather than holding up the turn.
    spec.timeout = Some(std::time::Duration::from_secs(10));
    // Fixed arguments, no program of the repository's own (checked above): no job server.
    spec.direct = true;
    let out = crate::proc::run(&spec).ok()?;
    if !out.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = text.lines().take(21).collect();
    if lines.len() == 21 {
        lines[20] = "...";
    }
    Some(lines.join("\n"))
}

pub(crate) struct PromptInputs<'a> {
    pub cwd: &'a Path,
    pub project_root: &'a Path,
    /// Project context entries (defaults first, then the configured ones).
    pub context_paths: &'a [ContextEntry],
    /// Global context entries (`~/.config/crush/CRUSH.md`...).
    pub global_context_paths: &'a [ContextEntry],
    pub model: &'a str,
    pub prefix: Option<&'a str>,
    /// The prompt that replaces [`INTRO`] (`options.system_prompt` or its file).
    pub base: Option<&'a str>,
    /// Whether the environment, commit instructions and context files follow the prompt
    /// (`options.system_prompt_environment`).
    pub environment: bool,
    /// How commits the agent makes are attributed (`options.attribution`).
    pub attribution: Attribution,
    /// The session's variables, which crush's own git status gets as every child does.
    pub env: &'a crate::env::Overlay,
}

/// `options.attribution` as Go Crush reads it: `trailer_style` none, co-authored-by or
/// assisted-by (the default; the deprecated `co_authored_by: true/false` means co-authored-by
/// or none), and `generated_with` (default true).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attribution {
    pub trailer: Option<&'static str>,
    pub generated_with: bool,
}

impl Attribution {
    pub(crate) fn from_config(v: &serde_json::Value) -> Attribution {
        let style = v
            .get("trailer_style")
            .and_then(|s| s.as_str())
            .unwrap_or("");
        let style = match (style, v.get("co_authored_by").and_then(|b| b.as_bool())) {
            ("", Some(true)) => "co-authored-by",
            ("", Some(false)) => "none",
            ("", None) => "assisted-by",
            (s, _) => s,
        };
        Attribution {
            trailer: match style {
                "co-authored-by" => Some("co-authored-by"),
                "assisted-by" => Some("assisted-by"),
                _ => None,
            },
            generated_with: v
                .get("generated_with")
                .and_then(|b| b.as_bool())
                .unwrap_or(true),
        }
    }

    /// The commit instructions for the system prompt (as Go Crush gives them in its bash tool
    /// description), or "" when nothing is to be added.
    fn instructions(&self, model: &str) -> String {
        let mut lines = Vec::new();
        if self.generated_with {
            lines.push("💘 Generated with Crush".to_string());
        }
        match self.trailer {
            Some("assisted-by") => lines.push(format!("Assisted-by: Crush:{model}")),
            Some(_) => lines.push("Co-Authored-By: Crush <crush@charm.land>".to_string()),
            None => {}
        }
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\n<git_commits>\nCommit only when the user asks. When you create a git commit, end its message with these lines, each after a blank line, exactly as written:\n\n{}\n</git_commits>\n",
            lines.join("\n\n")
        )
    }
}

pub(crate) fn system_prompt(inp: &PromptInputs) -> String {
    let mut s = String::new();
    if let Some(p) = inp.prefix.filter(|p| !p.is_empty()) {
        s.push_str(p);
        s.push_str("\n\n");
    }
    s.push_str(inp.base.unwrap_or(INTRO));
    if !inp.environment {
        return s;
    }
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str("\n<env>\n");
    s.push_str(&format!("Working directory: {}\n", inp.cwd.display()));
    s.push_str(&format!("Project root: {}\n", inp.project_root.display()));
    let is_git = inp.project_root.join(".git").exists();
    s.push_str(&format!(
        "Is a git repository: {}\n",
        if is_git { "yes" } else { "no" }
    ));
    s.push_str(&format!(
        "Platform: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    s.push_str(&format!("Today's date: {}\n", crate::time::today()));
    s.push_str(&format!("Model: {}\n", inp.model));
    s.push_str("</env>\n");
    s.push_str(&inp.attribution.instructions(inp.model));
    if is_git && let Some(st) = git_status(inp.cwd, inp.env) {
        s.push_str("\n<git_status>\n");
        s.push_str(&st);
        s.push_str("\n</git_status>\n");
    }
    let mut files = context_files(inp.cwd, inp.project_root, inp.global_context_paths);
    for f in context_files(inp.cwd, inp.project_root, inp.context_paths) {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    let mut used = 0usize;
    let mut blocks = String::new();
    for f in files {
        // Never more than the budget is read: a file larger than it is left out whole.
        let text = match crate::fsutil::read_regular(
            &f,
            crate::fsutil::Links::Follow,
            CONTEXT_BUDGET as u64,
        ) {
            Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => None,
            Err(_) => continue,
        };
        let Some(text) = text.filter(|t| used + t.len() <= CONTEXT_BUDGET) else {
            blocks.push_str(&format!(
                "<file path=\"{}\">(left out: the context files exceed {} KiB; view it if needed)</file>\n",
                f.display(),
                CONTEXT_BUDGET / 1024
            ));
            continue;
        };
        used += text.len();
        blocks.push_str(&format!(
            "<file path=\"{}\">\n{}\n</file>\n",
            f.display(),
            text.trim_end()
        ));
    }
    if !blocks.is_empty() {
        s.push_str("\n<project_context>\nThe user's instructions for this project:\n");
        s.push_str(&blocks);
        s.push_str("</project_context>\n");
    }
    s
}

/// The context entries of `options.<key>`, each confined to the project unless the user's own
/// configuration set it (crush(1) SECURITY).
fn configured_entries(
    loaded: &crate::config::Loaded,
    key: &str,
    list: &[String],
) -> Vec<ContextEntry> {
    list.iter()
        .enumerate()
        .map(|(i, p)| ContextEntry {
            path: p.clone(),
            confined: !loaded.set_by_user(&format!("/options/{key}/{i}")),
        })
        .collect()
}

/// The largest `options.system_prompt_file` read.
const PROMPT_FILE_LIMIT: u64 = 256 * 1024;

/// Why the configured replacement of the system prompt cannot be used.
#[derive(Debug)]
pub(crate) enum PromptError {
    /// Both `options.system_prompt` and `options.system_prompt_file` are set.
    Both { text_at: String, file_at: String },
    /// The file cannot be read.
    Read {
        path: PathBuf,
        at: String,
        source: std::io::Error,
    },
    /// The file is larger than [`PROMPT_FILE_LIMIT`].
    TooLarge { path: PathBuf, at: String },
    /// The file is not UTF-8 text.
    NotText { path: PathBuf, at: String },
}

impl std::fmt::Display for PromptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptError::Both { text_at, file_at } => write!(
                f,
                "options.system_prompt ({text_at}) and options.system_prompt_file ({file_at}) are both set: keep one"
            ),
            PromptError::Read { path, at, source } => write!(
                f,
                "options.system_prompt_file ({at}): cannot read {}: {source}",
                path.display()
            ),
            PromptError::TooLarge { path, at } => write!(
                f,
                "options.system_prompt_file ({at}): {} is larger than {} KiB",
                path.display(),
                PROMPT_FILE_LIMIT / 1024
            ),
            PromptError::NotText { path, at } => write!(
                f,
                "options.system_prompt_file ({at}): {} is not UTF-8 text",
                path.display()
            ),
        }
    }
}

impl std::error::Error for PromptError {}

/// The prompt that replaces crush's default one: `options.system_prompt`, or the text of
/// `options.system_prompt_file` (`~/` expanded, relative to the file that names it, or to the
/// working directory when a flag or command set it); None when neither is set (crush(1) CONFIGURATION, System prompt).
pub(crate) fn replacement(loaded: &crate::config::Loaded) -> Result<Option<String>, PromptError> {
    let opts = &loaded.config.options;
    match (&opts.system_prompt, &opts.system_prompt_file) {
        (Some(_), Some(_)) => Err(PromptError::Both {
            text_at: loaded.origin_of(&["options", "system_prompt"]),
            file_at: loaded.origin_of(&["options", "system_prompt_file"]),
        }),
        (Some(text), None) => Ok(Some(text.clone())),
        (None, Some(file)) => {
            let at = loaded.origin_of(&["options", "system_prompt_file"]);
            let base = loaded
                .origins
                .get("/options/system_prompt_file")
                .and_then(|o| o.file.as_deref())
                .and_then(Path::parent)
                .unwrap_or(&loaded.cwd);
            let path = crate::paths::resolve(base, file);
            read_prompt_file(&path).map(Some).map_err(|e| match e {
                FileProblem::Io(source) => PromptError::Read { path, at, source },
                FileProblem::TooLarge => PromptError::TooLarge { path, at },
                FileProblem::NotText => PromptError::NotText { path, at },
            })
        }
        (None, None) => Ok(None),
    }
}

enum FileProblem {
    Io(std::io::Error),
    TooLarge,
    NotText,
}

fn read_prompt_file(path: &Path) -> Result<String, FileProblem> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(FileProblem::Io)?;
    let mut bytes = Vec::new();
    f.take(PROMPT_FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(FileProblem::Io)?;
    if bytes.len() as u64 > PROMPT_FILE_LIMIT {
        return Err(FileProblem::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| FileProblem::NotText)
}

/// Whether the environment, context files and skills follow the prompt
/// (`options.system_prompt_environment`, default true).
pub(crate) fn with_environment(loaded: &crate::config::Loaded) -> bool {
    loaded
        .config
        .options
        .system_prompt_environment
        .unwrap_or(true)
}

/// The system prompt for `model` under the configuration `loaded` (its replacement prompt,
/// context paths, the provider's prefix). A replacement that cannot be read was refused when
/// the configuration was loaded; if it became unreadable since, the default is used.
pub(crate) fn for_config(
    loaded: &crate::config::Loaded,
    model: &crate::config::ResolvedModel,
) -> String {
    let base = replacement(loaded).unwrap_or_else(|e| {
        crate::log::warn(&format!("{e}: the default system prompt is used"));
        None
    });
    let opts = &loaded.config.options;
    let mut context_paths: Vec<ContextEntry> = DEFAULT_CONTEXT_PATHS
        .iter()
        .map(|s| ContextEntry::project(s))
        .collect();
    context_paths.extend(configured_entries(
        loaded,
        "context_paths",
        &opts.context_paths,
    ));
    let mut global_context: Vec<ContextEntry> = [
        crate::paths::global_config_dir().join("CRUSH.md"),
        crate::paths::user_config_home().join("AGENTS.md"),
    ]
    .iter()
    .map(|p| ContextEntry::user(&p.to_string_lossy()))
    .collect();
    global_context.extend(configured_entries(
        loaded,
        "global_context_paths",
        &opts.global_context_paths,
    ));
    system_prompt(&PromptInputs {
        cwd: &loaded.cwd,
        project_root: &loaded.project_root,
        context_paths: &context_paths,
        global_context_paths: &global_context,
        model: &model.model.id,
        prefix: model.provider.system_prompt_prefix.as_deref(),
        base: base.as_deref(),
        environment: with_environment(loaded),
        attribution: Attribution::from_config(&opts.attribution),
        env: &loaded.env,
    })
}

/// Whether the working directory has a context file the system prompt would include (the
/// default names, and `extra`: the configured `options.context_paths`).
pub(crate) fn has_context_file(cwd: &Path, extra: &[String]) -> bool {
    let entries: Vec<ContextEntry> = DEFAULT_CONTEXT_PATHS
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .map(ContextEntry::user)
        .collect();
    !context_files(cwd, cwd, &entries).is_empty()
}

/// The prompt of `/init` and `crush init`: explore the project and write `file` (a path)
/// for the agents that will work in it.
pub(crate) fn init_prompt(file: &str, notes: &str) -> String {
    let mut p = format!(
        "Explore this project and write {file}: the instructions an AI coding agent needs to \
         work well in this repository. It goes into the system prompt of every later session.\n\
         \n\
         First look at what is there (ls). If the directory is empty or holds only \
         configuration, write nothing and say: \"Nothing to describe yet: add some code, then \
         run /init again.\"\n\
         \n\
         Then find out, reading only what you need:\n\
         - how to build, test, lint and run it: the real commands, from the build files, \
         scripts, Makefiles and CI configuration (how to run a single test, too);\n\
         - how the code is organized and how the parts fit together;\n\
         - conventions a newcomer would get wrong: naming, error handling, testing style, \
         commit rules;\n\
         - gotchas: surprising flags, generated files, steps that must come in order;\n\
         - what existing instruction files say (.cursorrules, .cursor/rules/, \
         .github/copilot-instructions.md, CLAUDE.md, CRUSH.md), when they exist.\n\
         \n\
         Write only what you observed, never a guess. Leave out what an agent learns by reading \
         one file; keep what saves it trial and error. Use short Markdown sections.\n\
         \n\
         If {file} exists, view it first and improve it rather than starting over. Create or \
         update it with the write or edit tool, at exactly {file}; change no other file. End \
         with one line saying what you wrote."
    );
    if !notes.trim().is_empty() {
        p.push_str(&format!("\n\nThe user adds: {}", notes.trim()));
    }
    p
}

/// The skills part of the system prompt: the `<available_skills>` listing (see
/// `skills::Skills::prompt_listing`) and how to use it. Empty without skills.
pub(crate) fn skills_section(listing: &str) -> String {
    if listing.is_empty() {
        return String::new();
    }
    // crush(1) SKILLS AND COMMANDS, Forked skills.
    let fork = if listing.contains("<context>fork</context>") {
        " A skill with <context>fork</context> runs in a sub-agent: once you have read it, do \
         not follow it yourself; call the agent tool with its instructions and the task as the \
         prompt (its <agent>, if it has one, as subagent_type) and work from the answer."
    } else {
        ""
    };
    format!(
        "{listing}\n\n<skills_usage>\n\
         Each skill above is a folder of instructions (and often scripts, references or templates) \
         for one kind of task; its description says when it applies, not how to do it. When a \
         skill matches the task, view its <location> (exactly as given) before doing anything \
         else for that task, read all of it and follow it. Files the skill mentions are in its \
         folder: view them by their path there. Reading a skill's folder needs no permission; \
         running its scripts asks as any command does. Built-in skills have a crush://skills/ \
         location: it is not a URL; pass it to view as it is.{fork}\n\
         </skills_usage>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The topics the default prompt must cover, each with a phrase that shows it does: an edit
    /// that drops a topic fails here.
    const TOPICS: &[(&str, &str)] = &[
        ("understand before acting", "Understand the task first"),
        ("look before changing", "Look before you change anything"),
        ("smallest change", "smallest change that solves the task"),
        ("project conventions", "Follow the project's conventions"),
        ("existing libraries", "libraries it already uses"),
        (
            "nothing unasked",
            "Do not add files, dependencies, comments",
        ),
        ("todos for multi-step work", "todos tool"),
        (
            "verify with the project's checks",
            "tests, linters, type checks",
        ),
        ("say what was not verified", "could not verify"),
        ("LSP diagnostics after edits", "LSP diagnostics"),
        ("no unasked commits", "Never commit, push, amend"),
        (
            "no history rewrite or git config",
            "rewrite history or change the git configuration",
        ),
        ("never skip hooks", "Never skip hooks"),
        ("code references", "path:line"),
        ("context files", "CRUSH.md, AGENTS.md"),
        (
            "when to update context files",
            "suggest adding it to CRUSH.md or AGENTS.md",
        ),
        ("refused tools", "When a tool call is refused"),
        ("hook denials", "a hook"),
        ("failed edits", "When an edit fails"),
        ("skills", "skill matches the task"),
        ("questions without changes", "change nothing unless asked"),
        ("short final answers", "what you changed and where"),
        ("fresh shell per bash call", "fresh shell"),
    ];

    #[test]
    fn the_default_prompt_covers_every_topic_and_stays_short() {
        for (topic, phrase) in TOPICS {
            assert!(
                INTRO.contains(phrase),
                "the prompt lost the topic {topic:?} ({phrase:?})"
            );
        }
        let tokens = INTRO.len() / 4;
        assert!(tokens < 2500, "the default prompt is ~{tokens} tokens");
    }

    #[test]
    fn context_files_in_a_stable_order() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("AGENTS.md"), "agents").unwrap();
        std::fs::write(d.join("CLAUDE.md"), "claude").unwrap();
        std::fs::create_dir_all(d.join("docs/b")).unwrap();
        std::fs::write(d.join("docs/z.md"), "z").unwrap();
        std::fs::write(d.join("docs/b/a.md"), "a").unwrap();
        let mut entries: Vec<ContextEntry> = DEFAULT_CONTEXT_PATHS
            .iter()
            .map(|s| ContextEntry::project(s))
            .collect();
        entries.push(ContextEntry::project("docs/"));
        entries.push(ContextEntry::project("AGENTS.md"));
        let files = context_files(d, d, &entries);
        let names: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(d).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["CLAUDE.md", "AGENTS.md", "docs/b/a.md", "docs/z.md"]
        );
        let inputs = PromptInputs {
            cwd: d,
            project_root: d,
            context_paths: &entries,
            global_context_paths: &[],
            model: "m",
            prefix: None,
            base: None,
            environment: true,
            attribution: Attribution::from_config(&serde_json::json!({})),
            env: &Default::default(),
        };
        let a = system_prompt(&inputs);
        assert!(a.contains("<file path=") && a.contains("claude"));
        assert_eq!(
            a,
            system_prompt(&inputs),
            "the prompt must be deterministic"
        );
    }

    #[test]
    fn project_entries_stay_inside_the_project() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("p");
        let outside = t.path().join("secret.txt");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(&outside, "secret").unwrap();
        std::fs::write(root.join("docs/ok.md"), "ok").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("docs/link.md")).unwrap();
        let o = outside.to_string_lossy();
        let files = context_files(
            &root,
            &root,
            &[
                ContextEntry::project("CLAUDE.md"),
                ContextEntry::project("../secret.txt"),
                ContextEntry::project(&o),
                ContextEntry::project("docs"),
            ],
        );
        assert_eq!(files, vec![root.join("docs/ok.md")]);
        // The user's own entries may point anywhere.
        let files = context_files(&root, &root, &[ContextEntry::user(&o)]);
        assert_eq!(files, vec![outside.clone()]);
    }

    #[test]
    fn attribution_as_go_crush_asks_for_it() {
        use serde_json::json;
        let text = |v: serde_json::Value| Attribution::from_config(&v).instructions("m1");
        let dflt = text(json!(null));
        assert!(
            dflt.contains("💘 Generated with Crush\n\nAssisted-by: Crush:m1\n</git_commits>"),
            "{dflt}"
        );
        let co = text(json!({"trailer_style": "co-authored-by", "generated_with": false}));
        assert!(
            co.contains("\n\nCo-Authored-By: Crush <crush@charm.land>\n"),
            "{co}"
        );
        assert!(!co.contains("Generated with"), "{co}");
        assert_eq!(
            text(json!({"co_authored_by": true})),
            text(json!({"trailer_style": "co-authored-by"}))
        );
        assert_eq!(
            text(json!({"co_authored_by": false, "generated_with": false})),
            ""
        );
        assert_eq!(
            text(json!({"trailer_style": "none", "generated_with": false})),
            ""
        );
    }
}
