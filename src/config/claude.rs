//! Where Claude Code users keep hooks (crush(1) HOOKS): the `hooks` of Claude Code's settings
//! files — the user's `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR`), the project's
//! `.claude/settings.json` and `.claude/settings.local.json` (project files: used only once the
//! project is trusted, like any project hook) — and of the `hooks/hooks.json` of every Claude
//! Code plugin folder listed in `options.claude_plugins`. Only `hooks` (and `disableAllHooks`)
//! and `permissions` (its allow, ask and deny rules: `agent::claude_rules`) are read; the rest
//! of Claude Code's settings means nothing to crush. `options.claude_code_hooks: false` turns
//! all of it off.

use super::ConfigError;
use super::json;
use crate::paths;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Which Claude Code file a set of hooks came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaudeKind {
    /// `~/.claude/settings.json`
    User,
    /// `<project>/.claude/settings.json` or `settings.local.json`
    Project,
    /// `<plugin>/hooks/hooks.json`
    Plugin,
}

/// One Claude Code file with hooks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClaudeHooks {
    pub kind: ClaudeKind,
    pub path: PathBuf,
    /// Its `hooks` object.
    pub hooks: Value,
    /// Its `permissions` object (Null: none; plugins have none).
    pub permissions: Value,
    /// The plugin folder (`CLAUDE_PLUGIN_ROOT`) of a plugin's hooks.
    pub plugin_root: Option<PathBuf>,
    /// `"disableAllHooks": true` in a settings file.
    pub disable_all: bool,
}

/// Reads a Claude Code JSON file (None: it does not exist).
fn read(path: &Path) -> Result<Option<Value>, ConfigError> {
    match json::read_text(path)? {
        Some(text) => json::parse_object(path, &text).map(Some),
        None => Ok(None),
    }
}

fn settings(kind: ClaudeKind, path: PathBuf) -> Result<Option<ClaudeHooks>, ConfigError> {
    let Some(v) = read(&path)? else {
        return Ok(None);
    };
    let disable_all = v.get("disableAllHooks").and_then(Value::as_bool) == Some(true);
    let hooks = v.get("hooks").cloned().unwrap_or(Value::Null);
    let permissions = v.get("permissions").cloned().unwrap_or(Value::Null);
    if hooks.is_null() && permissions.is_null() && !disable_all {
        return Ok(None);
    }
    Ok(Some(ClaudeHooks {
        kind,
        path,
        hooks,
        permissions,
        plugin_root: None,
        disable_all,
    }))
}

/// The project's Claude Code settings files with hooks or permission rules, from the project root down to `cwd`
/// (`settings.json` before `settings.local.json` in each directory).
pub(crate) fn project_files(
    cwd: &Path,
    project_root: &Path,
) -> Result<Vec<ClaudeHooks>, ConfigError> {
    let mut dirs = paths::dirs_up_to(cwd, project_root);
    dirs.reverse();
    let mut out = Vec::new();
    for d in dirs {
        for name in ["settings.json", "settings.local.json"] {
            out.extend(settings(ClaudeKind::Project, d.join(".claude").join(name))?);
        }
    }
    Ok(out)
}

/// The user's Claude Code settings, if they have hooks or permission rules.
pub(crate) fn user_file() -> Result<Option<ClaudeHooks>, ConfigError> {
    settings(
        ClaudeKind::User,
        paths::claude_config_dir().join("settings.json"),
    )
}

/// A plugin folder's hooks (`hooks/hooks.json`, whose `hooks` object is Claude Code's). A listed
/// folder without one is a warning.
pub(crate) fn plugin(
    root: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<ClaudeHooks>, ConfigError> {
    let path = root.join("hooks").join("hooks.json");
    let Some(v) = read(&path)? else {
        warnings.push(format!(
            "options.claude_plugins: {} has no hooks/hooks.json; nothing to run",
            root.display()
        ));
        return Ok(None);
    };
    Ok(Some(ClaudeHooks {
        kind: ClaudeKind::Plugin,
        path,
        hooks: v.get("hooks").cloned().unwrap_or(Value::Null),
        permissions: Value::Null,
        plugin_root: Some(root.to_path_buf()),
        disable_all: false,
    }))
}

/// Whether Claude Code's files are read, as far as the JSON files say before anything runs:
/// the last `options.claude_code_hooks` of `files` (lowest priority first); on by default.
pub(crate) fn enabled_in<'a>(files: impl Iterator<Item = &'a Value>) -> bool {
    files
        .filter_map(|v| {
            v.pointer("/options/claude_code_hooks")
                .and_then(Value::as_bool)
        })
        .last()
        .unwrap_or(true)
}

/// Everything to read once the configuration is known: the user's settings, the project's
/// (`project`, already trust-checked), the plugins of `options.claude_plugins` (absolute,
/// `~/`, or relative to the project root). A `disableAllHooks` in any settings file turns
/// Claude Code's hooks off, as in Claude Code (its permission rules still apply).
pub(crate) fn collect(
    plugins: &[String],
    project: Vec<ClaudeHooks>,
    project_root: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<ClaudeHooks>, ConfigError> {
    let mut out: Vec<ClaudeHooks> = user_file()?.into_iter().chain(project).collect();
    if let Some(off) = out.iter().find(|c| c.disable_all) {
        warnings.push(format!(
            "{}: disableAllHooks is set: Claude Code's hooks (its settings files and plugins) do not run",
            off.path.display()
        ));
        out.retain(|c| !c.permissions.is_null());
        for c in &mut out {
            c.hooks = Value::Null;
        }
        return Ok(out);
    }
    for p in plugins {
        let root = paths::normalize(&paths::resolve(project_root, p));
        out.extend(plugin(&root, warnings)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_json_file_decides_whether_claude_files_are_read() {
        let on = json!({});
        let off = json!({"options": {"claude_code_hooks": false}});
        let back = json!({"options": {"claude_code_hooks": true}});
        assert!(enabled_in([&on].into_iter()));
        assert!(!enabled_in([&on, &off].into_iter()));
        assert!(enabled_in([&off, &back].into_iter()));
    }

    #[test]
    fn project_settings_are_found_root_first_and_need_hooks() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let sub = root.join("sub");
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::create_dir_all(sub.join(".claude")).unwrap();
        std::fs::write(
            root.join(".claude/settings.json"),
            r#"{"hooks": {"Stop": []}, "model": "x"}"#,
        )
        .unwrap();
        std::fs::write(
            root.join(".claude/settings.local.json"),
            r#"{"model": "y"}"#,
        )
        .unwrap();
        std::fs::write(
            sub.join(".claude/settings.local.json"),
            r#"{"hooks": {"PreToolUse": []}}"#,
        )
        .unwrap();
        let found = project_files(&sub, root).unwrap();
        let names: Vec<PathBuf> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(
            names,
            vec![
                root.join(".claude/settings.json"),
                sub.join(".claude/settings.local.json")
            ]
        );
        std::fs::write(root.join(".claude/settings.json"), "{oops").unwrap();
        assert!(project_files(&sub, root).is_err());
    }
}
