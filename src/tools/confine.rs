//! Where the file tools may read and write (crush(1) PERMISSIONS): the one check every path a
//! tool reads or writes goes through, whichever agent calls it.
//!
//! - A confined agent (the `agentic_fetch` sub-agent) has a directory of its own: a path
//!   outside it is refused before anything is asked or opened, whatever the permissions.
//! - Every other path is placed in a [`Zone`]: inside the project, outside it, a file crush or
//!   git runs or reads as configuration (guarded), or crush's own data. The permission rules
//!   decide from the zone (`agent::permissions`).
//!
//! Paths are resolved before they are placed: `~` expanded, `.` and `..` removed, the longest
//! existing ancestor canonicalised (symbolic links followed), so neither `..` nor a link inside
//! the project leads out unnoticed.

use super::ToolError;
use super::ignore::Glob;
use crate::paths::canonicalize_lenient;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// Where a resolved path lies, lowest concern first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Zone {
    /// Inside the project.
    #[default]
    Project,
    /// Outside the project.
    Outside,
    /// A file crush or git will run or read as configuration (hook scripts, crush.json and
    /// crushrc files, `.claude/` settings and agents, `.mcp.json`, `.env`, `.git/hooks`,
    /// `.git/config`, crush's global configuration): writing it always asks, whatever
    /// `allowed_tools` says.
    Guarded,
    /// crush's own data (the project's and the global data directory: the database, state,
    /// logs): writing it asks even with `--yolo`.
    CrushData,
}

impl Zone {
    /// How the question names it (empty for the project).
    pub(crate) fn note(self) -> &'static str {
        match self {
            Zone::Project => "",
            Zone::Outside => " (outside the project)",
            Zone::Guarded => " (a file crush or git runs or reads as configuration)",
            Zone::CrushData => " (crush's own data)",
        }
    }
}

/// A session's bounds: the confined agent's directory, and what is guarded beyond the
/// project's fixed names. Built once per agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// The only directory (canonical) a confined agent may read and write in.
    pub jail: Option<PathBuf>,
    /// crush's data directories (canonical).
    pub data_dirs: Vec<PathBuf>,
    /// Directories (canonical) whose every file is guarded: crush's global configuration.
    pub guarded_dirs: Vec<PathBuf>,
    /// Single files (canonical) that are guarded: the scripts hooks and servers run.
    pub guarded_files: Vec<PathBuf>,
    /// What Read deny rules cover (Claude Code's `permissions.deny`, crush(1) SECURITY): absolute
    /// globs without their leading `/`, which the tools that walk folders leave out (`ReadDeny`).
    pub read_denied: Vec<String>,
}

/// Names that are guarded wherever they are in the project.
const GUARDED_NAMES: &[&str] = &[
    "crush.json",
    ".crush.json",
    "crushrc",
    ".crushrc",
    ".mcp.json",
    ".env",
    ".envrc",
];

/// The files of Claude Code's user directory that configure or instruct it.
const CLAUDE_GUARDED: &[&str] = &["agents", "commands", "skills", "hooks"];

impl Bounds {
    /// The bounds of a main agent: crush's data directories (`project_data`, the global one)
    /// and global configuration, Claude Code's user settings, and the files `commands` (hook,
    /// MCP and LSP command lines) name, as found from `cwd`.
    pub(crate) fn for_session(project_data: &Path, cwd: &Path, commands: &[&str]) -> Bounds {
        let real = |p: &Path| canonicalize_lenient(p);
        let claude = real(&crate::paths::claude_config_dir());
        let mut guarded_dirs = vec![real(&crate::paths::global_config_dir())];
        guarded_dirs.extend(CLAUDE_GUARDED.iter().map(|d| claude.join(d)));
        let mut guarded_files: Vec<PathBuf> = ["settings.json", "settings.local.json"]
            .iter()
            .map(|f| claude.join(f))
            .collect();
        let root = crate::paths::project_root(cwd);
        for c in commands {
            for f in files_named_by(c, cwd, &root) {
                if !guarded_files.contains(&f) {
                    guarded_files.push(f);
                }
            }
        }
        Bounds {
            jail: None,
            data_dirs: vec![real(project_data), real(&crate::paths::global_data_dir())],
            guarded_dirs,
            guarded_files,
            read_denied: Vec::new(),
        }
    }

    /// These bounds with `globs` (absolute, without the leading `/`) denied to the walks, each
    /// also with its folders before the first wildcard resolved (`canonicalize_lenient`): the
    /// walks see resolved paths.
    pub(crate) fn deny_reads(mut self, globs: Vec<String>) -> Bounds {
        for g in globs {
            let fixed: Vec<&str> = g
                .split('/')
                .take_while(|c| !c.contains(['*', '?', '[', '\\']))
                .collect();
            let rest = &g[fixed
                .iter()
                .map(|c| c.len() + 1)
                .sum::<usize>()
                .min(g.len())..];
            let real = canonicalize_lenient(&Path::new("/").join(fixed.join("/")));
            let real = real.to_string_lossy();
            let mut resolved = real.trim_start_matches('/').to_string();
            if !rest.is_empty() {
                resolved = format!("{resolved}/{rest}");
            }
            if resolved != g && !self.read_denied.contains(&resolved) {
                self.read_denied.push(resolved);
            }
            if !self.read_denied.contains(&g) {
                self.read_denied.push(g);
            }
        }
        self
    }

    /// The Read deny rules, ready for one walk.
    pub(crate) fn read_deny(&self) -> ReadDeny {
        ReadDeny {
            globs: self.read_denied.iter().map(|g| Glob::new(g)).collect(),
            left_out: 0,
        }
    }

    /// Bounds that confine an agent to `dir`.
    pub(crate) fn jailed(dir: &Path) -> Bounds {
        Bounds {
            jail: Some(canonicalize_lenient(dir)),
            ..Bounds::default()
        }
    }

    /// `path` (absolute) resolved and checked against the jail: the path to use, or the
    /// refusal the model gets. Every file tool's path goes through here.
    pub(crate) fn admit(&self, path: &Path) -> Result<PathBuf, ToolError> {
        let real = canonicalize_lenient(path);
        match &self.jail {
            Some(j) if !real.starts_with(j) => Err(ToolError::RespondToModel(format!(
                "{} is outside this agent's directory {}: it may read and write only there",
                path.display(),
                j.display()
            ))),
            _ => Ok(real),
        }
    }

    /// Where the resolved `path` lies, for a project rooted at `project_root`.
    pub(crate) fn zone(&self, project_root: &Path, path: &Path) -> Zone {
        if self.data_dirs.iter().any(|d| path.starts_with(d)) {
            return Zone::CrushData;
        }
        let root = canonicalize_lenient(project_root);
        if self.guarded_dirs.iter().any(|d| path.starts_with(d))
            || self.guarded_files.iter().any(|f| f == path)
        {
            return Zone::Guarded;
        }
        match path.strip_prefix(&root) {
            Ok(rel) if guarded_in_project(rel) => Zone::Guarded,
            Ok(_) => Zone::Project,
            Err(_) => Zone::Outside,
        }
    }
}

/// What Read deny rules cover, for the tools that walk folders (grep, glob, ls): a file or folder
/// they cover is left out of the walk and counted, and the result says how many were
/// (crush(1) SECURITY). A call whose own path a rule covers is denied before it runs.
#[derive(Debug, Default)]
pub(crate) struct ReadDeny {
    globs: Vec<Glob>,
    /// Files and folders left out so far.
    pub left_out: usize,
}

impl ReadDeny {
    /// Whether a rule covers `path` (absolute), a folder when `is_dir`; not its ancestors (a
    /// walk does not enter a folder left out).
    fn covers(&self, path: &Path, is_dir: bool) -> bool {
        if self.globs.is_empty() {
            return false;
        }
        let s = path.to_string_lossy();
        let rel = s.trim_start_matches('/');
        let dir = format!("{rel}/");
        self.globs
            .iter()
            .any(|g| g.matches(rel) || (is_dir && g.matches(&dir)))
    }

    /// Whether to leave `path` out of a walk (counted when so).
    pub(crate) fn skip(&mut self, path: &Path, is_dir: bool) -> bool {
        let covered = self.covers(path, is_dir);
        self.left_out += usize::from(covered);
        covered
    }

    /// Whether to leave out `path`, a file found below the walk's `root` by another program
    /// (ripgrep): it, or a folder between it and `root`, is covered (counted once).
    pub(crate) fn skip_found(&mut self, root: &Path, path: &Path) -> bool {
        if self.globs.is_empty() {
            return false;
        }
        let covered = self.covers(path, false)
            || path
                .ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(root) && *a != root)
                .any(|a| self.covers(a, true));
        self.left_out += usize::from(covered);
        covered
    }

    /// Whether a rule covers `root`, or a folder above it: then the walk finds nothing.
    pub(crate) fn covers_root(&self, root: &Path) -> bool {
        root.ancestors().any(|a| self.covers(a, true))
    }

    /// Refuses `tool`'s walk of `root` (`verb`: what it does there) when a rule covers it.
    pub(crate) fn refuse_root(&self, root: &Path, tool: &str, verb: &str) -> Result<(), ToolError> {
        if self.covers_root(root) {
            return Err(format!(
                "{} is covered by a Read deny rule; {tool} does not {verb} it",
                root.display()
            )
            .into());
        }
        Ok(())
    }

    /// The line a result ends with when something was left out.
    pub(crate) fn note(&self) -> Option<String> {
        match self.left_out {
            0 => None,
            1 => Some("(1 file or folder was left out: a Read deny rule covers it.)".into()),
            n => Some(format!(
                "({n} files or folders were left out: a Read deny rule covers them.)"
            )),
        }
    }
}

/// Whether `rel` (relative to the project root) names a file crush, Claude Code or git runs
/// or reads as configuration.
fn guarded_in_project(rel: &Path) -> bool {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let name = |i: usize| parts.get(i).and_then(|p| p.to_str()).unwrap_or("");
    if parts
        .last()
        .and_then(|p| p.to_str())
        .is_some_and(|n| GUARDED_NAMES.contains(&n))
    {
        return true;
    }
    (0..parts.len()).any(|i| match name(i) {
        ".crush" => true,
        ".git" => matches!(name(i + 1), "hooks" | "config" | "config.worktree" | "info"),
        ".claude" => {
            let next = name(i + 1);
            CLAUDE_GUARDED.contains(&next)
                || (next.starts_with("settings") && next.ends_with(".json"))
        }
        _ => false,
    })
}

/// The existing files a command line names (resolved, canonical; `root` is the project's): each word, or the part of
/// `--opt=FILE` after `=`, split at blanks, quotes and shell operators (so the words of a
/// quoted script count too), looked up from `cwd`, with `$CLAUDE_PROJECT_DIR` and `~` expanded.
pub(crate) fn files_named_by(command: &str, cwd: &Path, root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for token in command.split(|c: char| c.is_whitespace() || ";&|()<>'\"".contains(c)) {
        let token = token.rsplit_once('=').map_or(token, |(_, v)| v);
        let token = token
            .strip_prefix("$CLAUDE_PROJECT_DIR")
            .or_else(|| token.strip_prefix("${CLAUDE_PROJECT_DIR}"))
            .map(|rest| format!("{}{rest}", root.display()))
            .unwrap_or_else(|| token.to_string());
        if token.is_empty() || token.contains(['$', '`', '*', '?']) {
            continue;
        }
        let p = crate::paths::resolve(cwd, &token);
        if p.is_file() {
            let real = canonicalize_lenient(&p);
            if !out.contains(&real) {
                out.push(real);
            }
        }
    }
    out
}

/// Whether the way to `path` (absolute, as a change was recorded) is still the same: no
/// directory on it became a symbolic link, so writing there writes `path` and nothing else.
pub(crate) fn same_route(path: &Path) -> bool {
    canonicalize_lenient(path) == crate::paths::normalize(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_files_crush_and_git_run_are_guarded() {
        let b = Bounds::default();
        let root = canonicalize_lenient(Path::new("/tmp"));
        for (rel, want) in [
            ("src/main.rs", Zone::Project),
            ("crush.json", Zone::Guarded),
            ("sub/.crush.json", Zone::Guarded),
            ("crushrc", Zone::Guarded),
            (".env", Zone::Guarded),
            (".mcp.json", Zone::Guarded),
            (".crush/state.json", Zone::Guarded),
            (".claude/settings.json", Zone::Guarded),
            (".claude/settings.local.json", Zone::Guarded),
            (".claude/agents/a.md", Zone::Guarded),
            (".claude/commands/c.md", Zone::Guarded),
            (".claude/skills/s/SKILL.md", Zone::Guarded),
            (".claude/notes.md", Zone::Project),
            (".git/hooks/pre-commit", Zone::Guarded),
            (".git/config", Zone::Guarded),
            (".git/HEAD", Zone::Project),
            ("docs/env.md", Zone::Project),
        ] {
            assert_eq!(b.zone(&root, &root.join(rel)), want, "{rel}");
        }
        assert_eq!(b.zone(&root, Path::new("/etc/passwd")), Zone::Outside);
    }

    #[test]
    fn data_directories_and_named_scripts_are_placed_first() {
        let t = tempfile::tempdir().unwrap();
        let root = canonicalize_lenient(t.path());
        std::fs::create_dir_all(root.join("hooks")).unwrap();
        std::fs::write(root.join("hooks/check.sh"), "exit 0").unwrap();
        let mut b = Bounds::for_session(&root.join(".crush"), &root, &["bash ./hooks/check.sh"]);
        b.data_dirs.push(root.join("data"));
        assert_eq!(b.zone(&root, &root.join("hooks/check.sh")), Zone::Guarded);
        assert_eq!(b.zone(&root, &root.join("hooks/other.sh")), Zone::Project);
        assert_eq!(
            b.zone(&root, &root.join(".crush/crush.db")),
            Zone::CrushData
        );
        assert_eq!(b.zone(&root, &root.join("data/x")), Zone::CrushData);
        assert_eq!(
            files_named_by("$CLAUDE_PROJECT_DIR/hooks/check.sh --x", &root, &root),
            vec![root.join("hooks/check.sh")]
        );
        assert_eq!(
            files_named_by("sh -c 'cd x && ./hooks/check.sh'", &root, &root),
            vec![root.join("hooks/check.sh")]
        );
    }

    #[test]
    fn a_jail_admits_only_its_own_directory() {
        let t = tempfile::tempdir().unwrap();
        let dir = canonicalize_lenient(t.path()).join("jail");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("out")).unwrap();
        let b = Bounds::jailed(&dir);
        assert_eq!(b.admit(&dir.join("page.md")).unwrap(), dir.join("page.md"));
        for p in [
            dir.join("../x"),
            dir.join("out/passwd"),
            PathBuf::from("/etc/passwd"),
        ] {
            let e = b.admit(&p).unwrap_err().to_string();
            assert!(e.contains("outside this agent's directory"), "{e}");
        }
        assert!(Bounds::default().admit(Path::new("/etc/passwd")).is_ok());
    }

    #[test]
    fn read_deny_rules_leave_files_and_folders_out_of_a_walk() {
        let t = tempfile::tempdir().unwrap();
        let root = canonicalize_lenient(t.path()).join("p");
        std::fs::create_dir(&root).unwrap();
        // A rule written through a link still covers the resolved paths the walks see.
        let link = canonicalize_lenient(t.path()).join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        let rel = |p: &Path| p.to_string_lossy().trim_start_matches('/').to_string();
        let b = Bounds::default().deny_reads(vec![
            format!("{}/**/.env", rel(&link)),
            format!("{}/secrets/**", rel(&root)),
            format!("{}/private", rel(&root)),
        ]);
        let mut d = b.read_deny();
        assert!(d.skip(&root.join(".env"), false));
        assert!(d.skip(&root.join("sub/.env"), false));
        assert!(!d.skip(&root.join("env"), false));
        assert!(d.skip(&root.join("secrets"), true));
        assert!(d.skip(&root.join("private"), true));
        // Found by ripgrep below a covered folder.
        assert!(d.skip_found(&root, &root.join("private/a/b.txt")));
        assert!(!d.skip_found(&root, &root.join("src/a.rs")));
        assert_eq!(d.left_out, 5);
        assert_eq!(
            d.note().unwrap(),
            "(5 files or folders were left out: a Read deny rule covers them.)"
        );
        assert!(d.covers_root(&root.join("private/a")));
        assert!(!d.covers_root(&root));
        // Without rules nothing is left out, and nothing is said.
        let mut none = Bounds::default().read_deny();
        assert!(!none.skip(&root.join(".env"), false));
        assert_eq!(none.note(), None);
    }

    #[test]
    fn a_route_through_a_new_link_is_not_the_same() {
        let t = tempfile::tempdir().unwrap();
        let root = canonicalize_lenient(t.path());
        std::fs::create_dir(root.join("d")).unwrap();
        assert!(same_route(&root.join("d/f.txt")));
        std::fs::remove_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("d")).unwrap();
        assert!(!same_route(&root.join("d/f.txt")));
    }
}
