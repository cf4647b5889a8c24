//! Every directory and file location of crush(1) FILES and ENVIRONMENT.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// crush's location variables (crush(1) ENVIRONMENT): where its own files are. They are read
/// once, when crush first looks for a file, so nothing set later (a `.env`, the `env` map)
/// moves a file crush already read or will write; a `.env` does not set them at all.
pub(crate) const LOCATION_VARS: &[&str] = &[
    "HOME",
    "CRUSH_GLOBAL_CONFIG",
    "CRUSH_GLOBAL_DATA",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "CLAUDE_CONFIG_DIR",
    "CRUSH_SKILLS_DIR",
    "CODEX_HOME",
    "CRUSH_SYSTEM_CONFIG",
];

/// A location variable (one of [`LOCATION_VARS`]) as it was at the first look; None when unset
/// or empty.
pub(crate) fn location_var(var: &str) -> Option<PathBuf> {
    debug_assert!(
        LOCATION_VARS.contains(&var),
        "{var} is not a location variable"
    );
    env_dir(var)
}

fn env_dir(var: &str) -> Option<PathBuf> {
    static SEEN: OnceLock<Vec<(&'static str, Option<OsString>)>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| LOCATION_VARS.iter().map(|v| (*v, env::var_os(v))).collect());
    seen.iter()
        .find(|(name, _)| *name == var)
        .and_then(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$HOME` as it was at the first look, else `/`.
pub(crate) fn home() -> PathBuf {
    env_dir("HOME").unwrap_or_else(|| PathBuf::from("/"))
}

/// The system-wide configuration, read below every other file as Go Crush does:
/// `$CRUSH_SYSTEM_CONFIG` when set, else `/etc/crush/crush.json`.
pub(crate) fn system_config() -> PathBuf {
    env_dir("CRUSH_SYSTEM_CONFIG").unwrap_or_else(|| PathBuf::from("/etc/crush/crush.json"))
}

/// `$CRUSH_GLOBAL_CONFIG`, else `$XDG_CONFIG_HOME/crush`, else `~/.config/crush`.
pub(crate) fn global_config_dir() -> PathBuf {
    env_dir("CRUSH_GLOBAL_CONFIG")
        .or_else(|| env_dir("XDG_CONFIG_HOME").map(|d| d.join("crush")))
        .unwrap_or_else(|| home().join(".config").join("crush"))
}

/// `$CRUSH_GLOBAL_DATA`, else `$XDG_DATA_HOME/crush`, else `~/.local/share/crush`.
pub(crate) fn global_data_dir() -> PathBuf {
    env_dir("CRUSH_GLOBAL_DATA")
        .or_else(|| env_dir("XDG_DATA_HOME").map(|d| d.join("crush")))
        .unwrap_or_else(|| home().join(".local").join("share").join("crush"))
}

/// Claude Code's user directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude` (its `settings.json`
/// holds the user's Claude Code hooks).
pub(crate) fn claude_config_dir() -> PathBuf {
    env_dir("CLAUDE_CONFIG_DIR").unwrap_or_else(|| home().join(".claude"))
}

/// `~/.config` (for the global context files Crush reads, such as `~/.config/AGENTS.md`).
pub(crate) fn user_config_home() -> PathBuf {
    env_dir("XDG_CONFIG_HOME").unwrap_or_else(|| home().join(".config"))
}

/// Removes `.` and resolves `..` lexically.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The nearest enclosing git worktree root (a directory holding `.git`, file or directory), else
/// `cwd` itself.
pub(crate) fn project_root(cwd: &Path) -> PathBuf {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    cwd.to_path_buf()
}

/// Directories from `cwd` up to `root` (inclusive), nearest first. `cwd` must be inside `root`.
pub(crate) fn dirs_up_to(cwd: &Path, root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        out.push(d.to_path_buf());
        if d == root {
            break;
        }
        dir = d.parent();
    }
    out
}

/// Where a user-given path points, relative to `base` when not absolute; `~/` expands to HOME.
pub(crate) fn resolve(base: &Path, p: &str) -> PathBuf {
    if p == "~" {
        return home();
    }
    if let Some(rest) = p.strip_prefix("~/") {
        return home().join(rest);
    }
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Canonicalizes a path that may not exist yet: the longest existing ancestor is canonicalized
/// (resolving symlinks) and the rest is appended. A dangling symlink is followed too, so the
/// result names the file a write would create.
pub(crate) fn canonicalize_lenient(path: &Path) -> PathBuf {
    canonicalize_hops(path, 40)
}

fn canonicalize_hops(path: &Path, hops: usize) -> PathBuf {
    let path = normalize(path);
    if let Ok(p) = fs::canonicalize(&path) {
        return p;
    }
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut cur = path.clone();
    loop {
        match cur.file_name() {
            Some(name) => {
                rest.push(name.to_os_string());
                if !cur.pop() {
                    return path;
                }
            }
            None => return path,
        }
        if let Ok(mut base) = fs::canonicalize(&cur) {
            let mut names = rest.iter().rev();
            if let Some(first) = names.next() {
                if hops > 0
                    && let Ok(target) = fs::read_link(base.join(first))
                {
                    // `join` keeps an absolute target as it is.
                    let mut next = base.join(target);
                    next.extend(names);
                    return canonicalize_hops(&next, hops - 1);
                }
                base.push(first);
            }
            base.extend(names);
            return base;
        }
    }
}

/// What the tools make of a path parameter (and those who see a call before it runs: hooks,
/// `/attach`, `-f`): [`resolve`] of the trimmed text against `base`, canonical
/// ([`canonicalize_lenient`]).
pub(crate) fn resolve_real(base: &Path, raw: &str) -> PathBuf {
    canonicalize_lenient(&resolve(base, raw.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_resolver_for_tools_hooks_and_flags() {
        let t = tempfile::tempdir().unwrap();
        let base = canonicalize_lenient(t.path());
        assert_eq!(resolve_real(&base, "  a/../b.txt \n"), base.join("b.txt"));
        assert_eq!(resolve_real(&base, "~"), canonicalize_lenient(&home()));
        assert_eq!(
            resolve_real(&base, "~/x"),
            canonicalize_lenient(&home().join("x"))
        );
        assert_eq!(
            resolve_real(&base, "/etc/../etc"),
            canonicalize_lenient(Path::new("/etc"))
        );
        assert_eq!(resolve(&base, "~"), home());
    }

    #[test]
    fn project_root_is_the_git_worktree() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("repo");
        let sub = root.join("a").join("b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(project_root(&sub), sub);
        std::fs::create_dir(root.join(".git")).unwrap();
        assert_eq!(project_root(&sub), root);
        assert_eq!(
            dirs_up_to(&sub, &root),
            vec![sub.clone(), root.join("a"), root.clone()]
        );
    }
}
