//! Project trust (crush(1) CONFIGURATION). A project's own crushrc files, hooks, MCP and LSP
//! servers and `$(command)` values run code, so they are used only once the project is trusted.
//! Trust is recorded in the global state against the project root and a SHA-256 of exactly those
//! definitions: when any of them changes, the project is untrusted again until the user agrees.
//! Files a crushrc `source`s are not part of the hash (they are only known by running it).

use super::LayerKind;
use super::pos;
use super::sha256;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Top-level keys of a project JSON file that run programs.
const GATED_KEYS: &[&str] = &["hooks", "mcp", "lsp"];

/// Options of a project JSON file that run programs: Claude Code plugin folders, whose hooks
/// run.
const GATED_OPTIONS: &[&str] = &["claude_plugins"];

/// One project file as found on disk.
pub enum Source<'a> {
    Crushrc(&'a str),
    Json(&'a Value),
    /// The `hooks` of a Claude Code settings file (`.claude/settings.json`,
    /// `.claude/settings.local.json`): only its hooks run code.
    ClaudeSettings(&'a Value),
}

/// What a project would run, and whether it may.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Review {
    pub project_root: PathBuf,
    /// One line per thing that would run: crushrc files, hooks, MCP/LSP servers, `$(...)` values.
    pub items: Vec<String>,
    /// SHA-256 over those definitions (empty when there are none).
    pub hash: String,
    /// A trust record with this hash exists (or nothing needs trust).
    pub trusted: bool,
    /// Trusted for this invocation only (`--trust`, `CRUSH_TRUST_PROJECT=1`).
    pub trusted_once: bool,
    /// A record exists but for other definitions: they changed since the user agreed.
    pub changed: bool,
}

impl Review {
    pub fn needs_trust(&self) -> bool {
        !self.items.is_empty()
    }
    /// Whether the gated definitions may run now.
    pub fn allowed(&self) -> bool {
        !self.needs_trust() || self.trusted || self.trusted_once
    }
    /// The one-line notice printed when things were skipped.
    pub fn notice(&self) -> Option<String> {
        if self.allowed() {
            return None;
        }
        let why = if self.changed {
            "has changed since it was trusted"
        } else {
            "is not trusted"
        };
        Some(format!(
            "project {} {why}: skipped {}; review with 'crush trust' (or run once with --trust)",
            self.project_root.display(),
            summarize(&self.items)
        ))
    }
}

fn summarize(items: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for it in items {
        let kind = it.split(' ').next().unwrap_or("item");
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    let rank = |k: &str| match k {
        "crushrc" => 0,
        "hook" => 1,
        "mcp" => 2,
        "lsp" => 3,
        "plugin" => 4,
        "skills" => 5,
        _ => 6,
    };
    counts.sort_by_key(|(k, _)| rank(k));
    counts
        .iter()
        .map(|(k, n)| {
            let noun = match *k {
                "crushrc" => "crushrc file",
                "hook" => "hook",
                "mcp" => "MCP server",
                "lsp" => "LSP server",
                "plugin" => "Claude Code plugin",
                "skills" => "external skills folder",
                _ => "command substitution",
            };
            if *n == 1 {
                format!("1 {noun}")
            } else {
                format!("{n} {noun}s")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn walk_subst(v: &Value, ptr: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) if s.contains("$(") => out.push((ptr.to_string(), s.clone())),
        Value::Object(m) => {
            for (k, x) in m {
                walk_subst(x, &pos::child(ptr, k), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk_subst(x, &format!("{ptr}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn dotted(ptr: &str) -> String {
    ptr.trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether the skills folder `p` of a project file lies outside `project_root`: the model
/// reads a skill's files without asking (crush(1) SKILLS AND COMMANDS), so a project may not
/// point it at the user's files. A `~` or `$` path counts as outside.
fn skills_path_outside(p: &str, project_root: &Path) -> bool {
    if p.starts_with('~') || p.contains('$') {
        return true;
    }
    let path = crate::paths::normalize(&crate::paths::resolve(project_root, p));
    let canon = std::fs::canonicalize(&path).unwrap_or(path);
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    !canon.starts_with(root)
}

/// The entries of a project file's `options.skills_paths` outside the project.
fn outside_skills_paths<'a>(v: &'a Value, project_root: &Path) -> Vec<&'a str> {
    v.pointer("/options/skills_paths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|p| skills_path_outside(p, project_root))
        .collect()
}

/// The gated parts of a project JSON file, as (description, canonical text for the hash).
fn gated_json(v: &Value, file: &Path, project_root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let from = file.display();
    for key in GATED_KEYS {
        let Some(x) = v.get(*key) else { continue };
        match (*key, x) {
            ("hooks", Value::Object(events)) => {
                for (event, list) in events {
                    let hooks: Vec<&Value> = match list {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    for h in hooks {
                        let cmds: Vec<String> = match h.get("hooks") {
                            Some(Value::Array(inner)) => inner
                                .iter()
                                .filter_map(|i| i.get("command").and_then(Value::as_str))
                                .map(str::to_string)
                                .collect(),
                            _ => h
                                .get("command")
                                .and_then(Value::as_str)
                                .map(|c| vec![c.to_string()])
                                .unwrap_or_default(),
                        };
                        out.push((
                            format!("hook {event}: {} (from {from})", cmds.join("; ")),
                            format!("hooks.{event}={h}"),
                        ));
                    }
                }
            }
            ("mcp" | "lsp", Value::Object(servers)) => {
                for (name, s) in servers {
                    let what = s
                        .get("command")
                        .and_then(Value::as_str)
                        .or_else(|| s.get("url").and_then(Value::as_str))
                        .unwrap_or("");
                    let args = s
                        .get("args")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .unwrap_or_default();
                    out.push((
                        format!("{key} {name}: {what} {args} (from {from})").replace("  (", " ("),
                        format!("{key}.{name}={s}"),
                    ));
                }
            }
            (_, other) => out.push((
                format!("{key}: {other} (from {from})"),
                format!("{key}={other}"),
            )),
        }
    }
    for key in GATED_OPTIONS {
        match v.pointer(&format!("/options/{key}")) {
            Some(Value::Array(list)) => {
                for p in list {
                    let p = p.as_str().unwrap_or_default();
                    out.push((
                        format!("plugin {p}: Claude Code plugin hooks (from {from})"),
                        format!("options.{key}={p}"),
                    ));
                }
            }
            Some(other) => out.push((
                format!("options.{key}: {other} (from {from})"),
                format!("options.{key}={other}"),
            )),
            None => {}
        }
    }
    for p in outside_skills_paths(v, project_root) {
        out.push((
            format!("skills {p}: a skills folder outside the project (from {from})"),
            format!("options.skills_paths={p}"),
        ));
    }
    let mut subst = Vec::new();
    for (k, x) in v.as_object().into_iter().flatten() {
        if !GATED_KEYS.contains(&k.as_str()) {
            walk_subst(x, &pos::child("", k), &mut subst);
        }
    }
    for (ptr, s) in subst {
        out.push((
            format!("$(...) in {}: {s} (from {from})", dotted(&ptr)),
            format!("{ptr}={s}"),
        ));
    }
    out
}

/// Removes what needs trust from a project JSON value; returns the pointers removed.
pub fn strip_gated(v: &mut Value, project_root: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let outside: Vec<String> = outside_skills_paths(v, project_root)
        .into_iter()
        .map(str::to_string)
        .collect();
    if let Some(Value::Array(list)) = v.pointer_mut("/options/skills_paths")
        && !outside.is_empty()
    {
        list.retain(|p| !p.as_str().is_some_and(|p| outside.iter().any(|o| o == p)));
        removed.push("/options/skills_paths".to_string());
    }
    if let Value::Object(m) = v {
        for key in GATED_KEYS {
            if m.remove(*key).is_some() {
                removed.push(format!("/{key}"));
            }
        }
        if let Some(Value::Object(o)) = m.get_mut("options") {
            for key in GATED_OPTIONS {
                if o.remove(*key).is_some() {
                    removed.push(format!("/options/{key}"));
                }
            }
        }
    }
    let mut subst = Vec::new();
    walk_subst(v, "", &mut subst);
    for (ptr, _) in subst {
        let (parent, last) = match ptr.rfind('/') {
            Some(i) => (&ptr[..i], &ptr[i + 1..]),
            None => continue,
        };
        let last = last.replace("~1", "/").replace("~0", "~");
        match v.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(&last);
            }
            Some(Value::Array(a)) => {
                // Blank rather than remove, so the other pointers stay valid.
                if let Ok(i) = last.parse::<usize>()
                    && let Some(x) = a.get_mut(i)
                {
                    *x = Value::String(String::new());
                }
            }
            _ => {}
        }
        removed.push(ptr);
    }
    removed
}

/// Reviews the project's files (in layer order) against the trust records in `global_state`.
pub fn review(
    project_root: &Path,
    files: &[(LayerKind, PathBuf, Source)],
    global_state: &Value,
    trusted_once: bool,
) -> Review {
    let mut items = Vec::new();
    let mut hashed = String::new();
    for (kind, path, src) in files {
        let rel = path
            .strip_prefix(project_root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        match src {
            Source::Crushrc(text) => {
                items.push(format!("crushrc {}", path.display()));
                hashed.push_str(&format!("{kind:?}\0{rel}\0{text}\0"));
            }
            Source::Json(v) => {
                for (desc, canon) in gated_json(v, path, project_root) {
                    items.push(desc);
                    hashed.push_str(&format!("{kind:?}\0{rel}\0{canon}\0"));
                }
            }
            Source::ClaudeSettings(hooks) if !hooks.is_null() => {
                let only_hooks = serde_json::json!({ "hooks": hooks });
                for (desc, canon) in gated_json(&only_hooks, path, project_root) {
                    items.push(desc);
                    hashed.push_str(&format!("ClaudeSettings\0{rel}\0{canon}\0"));
                }
            }
            Source::ClaudeSettings(_) => {}
        }
    }
    let hash = if items.is_empty() {
        String::new()
    } else {
        sha256::hex(hashed.as_bytes())
    };
    let recorded = super::state::trusted_hash(global_state, project_root);
    let trusted = items.is_empty() || recorded.as_deref() == Some(hash.as_str());
    Review {
        project_root: project_root.to_path_buf(),
        changed: !trusted && recorded.is_some(),
        items,
        hash,
        trusted,
        trusted_once,
    }
}

/// Whether `CRUSH_TRUST_PROJECT` asks to trust this invocation.
pub fn env_trusts() -> bool {
    std::env::var("CRUSH_TRUST_PROJECT")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_follows_the_definitions() {
        let root = Path::new("/p");
        let v1 =
            json!({"hooks": {"PreToolUse": [{"command": "./a.sh"}]}, "options": {"debug": true}});
        let files = [(
            LayerKind::ProjectJson,
            root.join("crush.json"),
            Source::Json(&v1),
        )];
        let r = review(root, &files, &json!({}), false);
        assert!(r.needs_trust() && !r.allowed());
        assert_eq!(r.items.len(), 1);
        assert!(r.notice().unwrap().contains("1 hook"), "{:?}", r.notice());
        let state = json!({"trust": {"/p": {"hash": r.hash}}});
        assert!(review(root, &files, &state, false).allowed());
        // Non-gated changes keep the trust; gated ones lose it.
        let v2 =
            json!({"hooks": {"PreToolUse": [{"command": "./a.sh"}]}, "options": {"debug": false}});
        let files2 = [(
            LayerKind::ProjectJson,
            root.join("crush.json"),
            Source::Json(&v2),
        )];
        assert!(review(root, &files2, &state, false).allowed());
        let v3 = json!({"hooks": {"PreToolUse": [{"command": "./b.sh"}]}});
        let files3 = [(
            LayerKind::ProjectJson,
            root.join("crush.json"),
            Source::Json(&v3),
        )];
        let r3 = review(root, &files3, &state, false);
        assert!(!r3.allowed() && r3.changed);
        assert!(review(root, &files3, &state, true).allowed());
    }

    #[test]
    fn claude_settings_hooks_and_project_plugins_need_trust() {
        let root = Path::new("/p");
        let hooks = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "g.sh"}]}]});
        let files = [(
            LayerKind::ProjectJson,
            root.join(".claude/settings.json"),
            Source::ClaudeSettings(&hooks),
        )];
        let r = review(root, &files, &json!({}), false);
        assert_eq!(
            r.items,
            vec!["hook PreToolUse: g.sh (from /p/.claude/settings.json)"]
        );
        let other = json!({"PreToolUse": [{"hooks": [{"command": "h.sh"}]}]});
        let changed = [(
            LayerKind::ProjectJson,
            root.join(".claude/settings.json"),
            Source::ClaudeSettings(&other),
        )];
        assert_ne!(review(root, &changed, &json!({}), false).hash, r.hash);
        let mut v = json!({"options": {"claude_plugins": ["./plug"], "debug": true}});
        let r = review(
            root,
            &[(
                LayerKind::ProjectJson,
                root.join("crush.json"),
                Source::Json(&v),
            )],
            &json!({}),
            false,
        );
        assert!(
            r.notice().unwrap().contains("1 Claude Code plugin"),
            "{:?}",
            r.notice()
        );
        assert_eq!(strip_gated(&mut v, root), vec!["/options/claude_plugins"]);
        assert_eq!(v, json!({"options": {"debug": true}}));
    }

    #[test]
    fn skills_paths_outside_the_project_need_trust() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("skills")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        let mut v = json!({"options": {"skills_paths": ["skills", "./a/../skills", "../other", "/etc", "~/s", "$HOME/s", "out"]}});
        let r = review(
            &root,
            &[(
                LayerKind::ProjectJson,
                root.join("crush.json"),
                Source::Json(&v),
            )],
            &json!({}),
            false,
        );
        assert_eq!(r.items.len(), 5, "{:?}", r.items);
        assert!(r.items[0].starts_with("skills ../other: a skills folder outside the project"));
        assert!(r.notice().unwrap().contains("5 external skills folders"));
        assert_eq!(strip_gated(&mut v, &root), vec!["/options/skills_paths"]);
        assert_eq!(
            v,
            json!({"options": {"skills_paths": ["skills", "./a/../skills"]}})
        );
        let mut inside = json!({"options": {"skills_paths": ["skills"]}});
        assert!(strip_gated(&mut inside, &root).is_empty());
    }

    #[test]
    fn strip_removes_hooks_servers_and_substitutions() {
        let mut v = json!({"hooks": {}, "mcp": {"x": {}}, "providers": {"p": {"api_key": "$(pass p)", "base_url": "$URL"}},
            "env": {"A": "$(id)"}, "options": {"context_paths": ["a", "$(b)"]}});
        let removed = strip_gated(&mut v, Path::new("/p"));
        assert_eq!(
            v,
            json!({"providers": {"p": {"base_url": "$URL"}}, "env": {}, "options": {"context_paths": ["a", ""]}})
        );
        assert_eq!(removed.len(), 5, "{removed:?}");
        let files = [(
            LayerKind::ProjectDotCrushrc,
            PathBuf::from("/p/.crushrc"),
            Source::Crushrc("option debug"),
        )];
        let r = review(Path::new("/p"), &files, &json!({}), false);
        assert_eq!(r.items, vec!["crushrc /p/.crushrc"]);
    }
}
