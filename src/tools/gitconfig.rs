//! Whether a repository's own configuration would make a "read-only" git command run a program
//! (crush(1) SECURITY). A clone never carries `.git/config`, but an unpacked archive or a shared
//! directory can, and `git status`, `git diff` and `git log -p` run the programs it names: a
//! file system monitor, an external diff, a textconv or clean filter, a signature verifier, a
//! pager, a hook run when the index is refreshed. Such a repository's git commands lose the
//! read-only shortcut (they ask like any command), and crush's own `git status` for the system
//! prompt is left out. The user's own configuration (`~/.gitconfig`) is theirs and not read.

use std::path::{Path, PathBuf};

/// The first thing in the repository around `dir` that names a program git would run, as
/// "FILE: KEY", or None (no repository, or nothing found).
pub(crate) fn runs_programs(dir: &Path) -> Option<String> {
    let (worktree, git_dir) = find_git_dir(dir)?;
    let common = read(&git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|| git_dir.clone());
    let mut hooks = common.join("hooks");
    let mut files = vec![common.join("config")];
    if common != git_dir {
        files.push(git_dir.join("config"));
    }
    files.push(git_dir.join("config.worktree"));
    for file in &files {
        // A configuration git cannot read as a file (a link to a FIFO blocks git itself) counts
        // as one that runs programs: crush's own git never starts on it.
        let text = match crate::fsutil::read_config(file) {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => continue,
            Err(e) => return Some(crate::fsutil::read_error(file, &e)),
        };
        for (key, value) in entries(&text) {
            if key == "core.hookspath" {
                hooks = worktree.join(&value);
            } else if names_program(&key, &value) {
                return Some(format!("{}: {key}", file.display()));
            }
        }
    }
    // The one hook a read-only command can run: git status and git diff refresh the index.
    let hook = hooks.join("post-index-change");
    hook.exists().then(|| format!("{}: a hook", hook.display()))
}

/// A file of the repository's git directory, never blocking and never past the configuration
/// cap (`fsutil::read_config`); None when it is missing or is not a regular file.
fn read(path: &Path) -> Option<String> {
    let bytes = crate::fsutil::read_config(path).ok()??;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The working tree and git directory around `dir`: the nearest `.git` directory, or a `.git`
/// file's `gitdir:` (worktrees, submodules).
fn find_git_dir(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    for d in dir.ancestors() {
        let dot = d.join(".git");
        if dot.is_dir() {
            return Some((d.to_path_buf(), dot));
        }
        if dot.is_file() {
            let text = read(&dot)?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            return Some((d.to_path_buf(), d.join(target)));
        }
    }
    None
}

/// Whether `key` (lowercase `section.name`, any subsection dropped to `*`) names a program (or
/// more configuration, which may).
fn names_program(key: &str, value: &str) -> bool {
    match key {
        // `true` asks for git's own monitor daemon, `false` for none; anything else is a program.
        "core.fsmonitor" => !matches!(
            value.to_ascii_lowercase().as_str(),
            "" | "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
        ),
        "diff.external" | "diff.*.command" | "diff.*.textconv" | "filter.*.clean"
        | "filter.*.smudge" | "filter.*.process" | "gpg.program" | "gpg.*.program"
        | "core.pager" | "include.path" | "includeif.*.path" => true,
        k => k.starts_with("pager."),
    }
}

/// The entries of a git configuration file, as (lowercase `section.name` with any subsection
/// as `*`, value). Good enough to find keys: quoting inside values is not undone.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                continue;
            };
            let header = &rest[..end];
            section = match header.split_once([' ', '\t', '.']) {
                Some((name, _)) => format!("{}.*", name.trim().to_ascii_lowercase()),
                None => header.trim().to_ascii_lowercase(),
            };
            // `[section] key = value` on one line.
            line = rest[end + 1..].trim();
            if line.is_empty() {
                continue;
            }
        }
        if line.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (line, "true"),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let value = value.trim_matches('"').to_string();
        out.push((format!("{section}.{}", name.to_ascii_lowercase()), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git/hooks")).unwrap();
        std::fs::write(d.path().join(".git/config"), config).unwrap();
        d
    }

    #[test]
    fn a_plain_repository_runs_nothing() {
        let d = repo(
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = false\n\
             [remote \"origin\"]\n\turl = https://example.com/x.git\n\
             [diff \"md\"]\n\tword-regex = .\n[user]\n\tname = A\n",
        );
        std::fs::write(d.path().join(".git/hooks/pre-commit.sample"), "x").unwrap();
        std::fs::write(d.path().join(".git/hooks/pre-commit"), "x").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert_eq!(runs_programs(&d.path().join("sub")), None);
        assert_eq!(runs_programs(Path::new("/")), None);
    }

    #[test]
    fn programs_in_the_repositorys_configuration_are_found() {
        for (config, key) in [
            ("[core]\n\tfsmonitor = ./evil.sh\n", "core.fsmonitor"),
            ("[CORE]\nFSMonitor=\"/tmp/x\"\n", "core.fsmonitor"),
            ("[diff]\n\texternal = evil\n", "diff.external"),
            ("[diff \"pdf\"]\n\ttextconv = evil\n", "diff.*.textconv"),
            ("[filter \"lfs\"]\n\tclean = evil %f\n", "filter.*.clean"),
            ("[filter.x]\n\tprocess = evil\n", "filter.*.process"),
            ("[gpg]\n\tprogram = evil\n", "gpg.program"),
            ("[gpg \"ssh\"]\n\tprogram = evil\n", "gpg.*.program"),
            ("[pager]\n\tlog = evil\n", "pager.log"),
            ("[include]\n\tpath = ../other\n", "include.path"),
            ("[includeIf \"gitdir:/\"]\n\tpath = x\n", "includeif.*.path"),
            ("[core] pager = evil\n", "core.pager"),
        ] {
            let d = repo(config);
            let found = runs_programs(d.path()).unwrap_or_default();
            assert!(
                found.ends_with(&format!(": {key}")),
                "{config:?} -> {found:?}"
            );
        }
    }

    #[test]
    fn the_index_hook_is_found_where_hooks_live() {
        let d = repo("[core]\n\tbare = false\n");
        std::fs::write(d.path().join(".git/hooks/post-index-change"), "x").unwrap();
        assert!(runs_programs(d.path()).is_some_and(|r| r.ends_with("a hook")));
        let d = repo("[core]\n\thooksPath = .husky\n");
        assert_eq!(runs_programs(d.path()), None);
        std::fs::create_dir(d.path().join(".husky")).unwrap();
        std::fs::write(d.path().join(".husky/post-index-change"), "x").unwrap();
        assert!(runs_programs(d.path()).is_some_and(|r| r.ends_with("a hook")));
    }

    #[test]
    fn a_worktree_reads_its_common_directory() {
        let main = repo("[diff]\n\texternal = evil\n");
        let wt = tempfile::tempdir().unwrap();
        let gd = main.path().join(".git/worktrees/wt");
        std::fs::create_dir_all(&gd).unwrap();
        std::fs::write(gd.join("commondir"), "../..\n").unwrap();
        std::fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", gd.display()),
        )
        .unwrap();
        assert!(runs_programs(wt.path()).is_some_and(|r| r.ends_with("diff.external")));
    }
}
