//! Claude Code's permission rules (`permissions.allow`, `deny` and `ask` of its settings
//! files: the user's `~/.claude/settings.json`, a trusted project's `.claude/settings.json`
//! and `.claude/settings.local.json`), applied to crush's tools (crush(1) SECURITY):
//!
//! - `Bash` any command; `Bash(npm test:*)` or `Bash(npm test *)` a command starting with
//!   `npm test`; `Bash(npm test)` that command exactly; a `*` elsewhere (`Bash(git push
//!   --force*)`, `Bash(* --version)`) any text in its place, `\*` a star itself.
//! - `Read(PATTERN)` the tools that read files (view, ls, grep, glob); `Edit(PATTERN)` the tools
//!   that change them (edit, multiedit, write); `Write(PATTERN)` write. A pattern is
//!   gitignore-like, as in Claude Code: `//abs` from `/`, `~/x` from the home directory, `/x`
//!   from the folder holding `.claude`, `./x` or `x` from the working directory; `**` crosses
//!   folders, and a name without a `/` matches at any depth.
//! - `WebFetch(domain:example.com)` a fetch of that host or one under it.
//! - A bare tool name (`Read`, `WebFetch`, `mcp__server__tool`) any call of the tool.
//!
//! Deny rules win over everything, `--yolo` included; ask rules over allow rules; an allow rule
//! is an allow rule like `permissions.allowed_tools`: guarded files and crush's data still ask.
//! A rule crush cannot apply is a warning, once.

use super::claude::{ClaudeHooks, ClaudeKind};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    Allow,
    Ask,
    Deny,
}

impl Effect {
    /// Its key in Claude Code's `permissions` object.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }
}

/// What a rule's parentheses say.
#[derive(Debug, Clone, PartialEq)]
enum Spec {
    /// Every call of the tool.
    Any,
    /// A bash command starting with this.
    Prefix(String),
    /// This bash command exactly.
    Exact(String),
    /// A bash command this pattern covers: `*` any text, `\*` a star.
    Wildcard(String),
    /// A file: the glob, absolute, without its leading `/`.
    Path(String),
    /// A fetched URL's host: this one or one under it.
    Domain(String),
}

/// One rule, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub effect: Effect,
    /// Claude Code's tool name (`Bash`, `Read`, `mcp__fs__read`).
    tool: String,
    spec: Spec,
    /// The rule as written.
    pub text: String,
    /// `FILE` it came from.
    pub file: PathBuf,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "permissions.{} \"{}\" of {}",
            self.effect.key(),
            self.text,
            self.file.display()
        )
    }
}

/// Why a rule cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RuleError {
    /// `permissions.allow` is not a list of strings.
    NotAList { file: PathBuf, key: &'static str },
    /// A rule of a shape crush does not read.
    Unsupported {
        file: PathBuf,
        key: &'static str,
        rule: String,
        why: &'static str,
    },
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::NotAList { file, key } => write!(
                f,
                "{}: permissions.{key} is not a list of rules; ignored",
                file.display()
            ),
            RuleError::Unsupported {
                file,
                key,
                rule,
                why,
            } => write!(
                f,
                "{}: permissions.{key} \"{rule}\" is not applied: {why}",
                file.display()
            ),
        }
    }
}

impl std::error::Error for RuleError {}

/// Every rule of the Claude Code settings files, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ClaudeRules {
    pub rules: Vec<Rule>,
}

/// Claude Code's tools a rule naming `tool` covers: Read rules cover every tool that reads
/// files, Edit rules every tool that changes one (as in Claude Code).
fn covered(tool: &str) -> &[&str] {
    match tool {
        "Read" => &["Read", "Grep", "Glob", "LS"],
        "Edit" => &["Edit", "MultiEdit", "Write"],
        _ => &[],
    }
}

/// Words that join commands in a shell line: a prefix rule allows one command, not a line
/// that runs another after it.
const JOINERS: &[&str] = &["&&", "||", ";", "|", "&", "\n", "`", "$(", ">", "<"];

impl ClaudeRules {
    /// The rules of `files` (Claude Code's settings, already trust-checked; relative patterns
    /// start from `cwd`), and a warning for each rule that cannot be applied.
    pub(crate) fn from_files(files: &[ClaudeHooks], cwd: &Path) -> (ClaudeRules, Vec<RuleError>) {
        let mut out = ClaudeRules::default();
        let mut errors = Vec::new();
        for f in files {
            let Some(p) = f.permissions.as_object() else {
                continue;
            };
            let base = match f.kind {
                // `<dir>/.claude/settings.json`: paths start from `<dir>`.
                ClaudeKind::Project => f
                    .path
                    .parent()
                    .and_then(Path::parent)
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                _ => crate::paths::home(),
            };
            for effect in [Effect::Deny, Effect::Ask, Effect::Allow] {
                let key = effect.key();
                let Some(list) = p.get(key) else { continue };
                let Some(items) = list.as_array() else {
                    errors.push(RuleError::NotAList {
                        file: f.path.clone(),
                        key,
                    });
                    continue;
                };
                for item in items {
                    let Some(text) = item.as_str() else {
                        errors.push(RuleError::NotAList {
                            file: f.path.clone(),
                            key,
                        });
                        continue;
                    };
                    match parse(text, &base, cwd) {
                        Ok((tool, spec)) => out.rules.push(Rule {
                            effect,
                            tool,
                            spec,
                            text: text.to_string(),
                            file: f.path.clone(),
                        }),
                        Err(why) => errors.push(RuleError::Unsupported {
                            file: f.path.clone(),
                            key,
                            rule: text.to_string(),
                            why,
                        }),
                    }
                }
            }
        }
        (out, errors)
    }

    /// The first rule with `effect` that matches a call, with `input`, of the tool Claude Code
    /// knows by `names` (`Tool::claude_names`); relative paths of the input
    /// resolve against `cwd`.
    pub(crate) fn matching(
        &self,
        effect: Effect,
        names: &[String],
        input: &Value,
        cwd: &Path,
    ) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.effect == effect
                && (names.iter().any(|n| n == &r.tool)
                    || covered(&r.tool)
                        .iter()
                        .any(|c| names.iter().any(|n| n == c)))
                && r.matches(effect, input, cwd)
        })
    }
}

impl ClaudeRules {
    /// The globs of the Read deny rules (absolute, without the leading `/`): grep, glob and ls
    /// leave out what they cover as they walk a folder, as Claude Code's Grep and Glob do "on a
    /// best-effort basis" (crush(1) SECURITY). A bare `Read` denies every call already.
    pub(crate) fn read_denied(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.effect == Effect::Deny && r.tool == "Read")
            .filter_map(|r| match &r.spec {
                Spec::Path(g) => Some(g.clone()),
                _ => None,
            })
            .collect()
    }
}

impl Rule {
    fn matches(&self, effect: Effect, input: &Value, cwd: &Path) -> bool {
        let field = |k: &str| input.get(k).and_then(Value::as_str);
        match &self.spec {
            Spec::Any => true,
            Spec::Prefix(p) | Spec::Exact(p) | Spec::Wildcard(p) => {
                let Some(cmd) = field("command") else {
                    return false;
                };
                let fits = |c: &str| {
                    let c = c.trim();
                    match self.spec {
                        Spec::Exact(_) => c == p,
                        Spec::Wildcard(_) => wildcard_matches(p, c),
                        _ => c == p || c.starts_with(&format!("{p} ")),
                    }
                };
                if effect == Effect::Allow {
                    // The whole line must be the one command the rule allows.
                    fits(cmd) && !JOINERS.iter().any(|j| cmd.contains(j))
                } else {
                    // Any command of the line: `cd x && rm -rf y` is a `rm` too.
                    segments(cmd).iter().any(|c| fits(c))
                }
            }
            Spec::Path(glob) => {
                let Some(path) = field("file_path").or_else(|| field("path")) else {
                    return false;
                };
                let abs = crate::paths::normalize(&crate::paths::resolve(cwd, path));
                let abs = abs.to_string_lossy();
                let g = crate::tools::ignore::Glob::new(glob);
                let rel = abs.trim_start_matches('/');
                // A folder rule covers what is under it (`Read(./secrets/**)`, `Edit(src)`).
                g.matches(rel) || g.matches(&format!("{rel}/"))
            }
            Spec::Domain(d) => {
                let Some(url) = field("url") else {
                    return false;
                };
                let host = crate::net::host_of(url);
                host == *d || host.ends_with(&format!(".{d}"))
            }
        }
    }
}

/// Whether the whole of `text` is what `pattern` covers: each `*` any run of characters
/// (spaces too), `\*` a star and `\\` a backslash, everything else itself.
fn wildcard_matches(pattern: &str, text: &str) -> bool {
    use crate::wildcard::Part;
    let mut parts = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => parts.push(Part::Star),
            '\\' => match chars.next() {
                Some(e @ ('*' | '\\')) => parts.push(Part::Char(e)),
                Some(e) => parts.extend([Part::Char('\\'), Part::Char(e)]),
                None => parts.push(Part::Char('\\')),
            },
            c => parts.push(Part::Char(c)),
        }
    }
    crate::wildcard::matches(&parts, &text.chars().collect::<Vec<_>>())
}

/// Whether a Bash rule's specifier has a `*` that is not escaped.
fn has_star(spec: &str) -> bool {
    let mut escaped = false;
    for c in spec.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '*' if !escaped => return true,
            _ => escaped = false,
        }
    }
    false
}

/// The commands of a shell line, split at the words that join commands.
fn segments(cmd: &str) -> Vec<String> {
    let mut parts = vec![cmd.to_string()];
    for j in JOINERS {
        parts = parts
            .iter()
            .flat_map(|p| p.split(j).map(str::to_string).collect::<Vec<_>>())
            .collect();
    }
    parts
        .into_iter()
        .map(|p| p.trim().trim_start_matches('(').trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether `text` is a rule crush can apply (a hook's `if`, crush(1) HOOKS): why not, if not.
pub(crate) fn check(text: &str) -> Result<(), &'static str> {
    parse(text, Path::new("/"), Path::new("/")).map(|_| ())
}

/// Whether the rule `text` matches a call, with `input`, of the tool Claude Code knows by
/// `names`: a hook's `if` (crush(1) HOOKS). It matches as a deny rule does, so `Bash(rm *)`
/// also matches `cd x && rm y`; `/x` patterns start from `project`, relative ones from `cwd`.
/// A rule crush cannot apply matches nothing.
pub(crate) fn call_matches(
    text: &str,
    names: &[String],
    input: &Value,
    project: &Path,
    cwd: &Path,
) -> bool {
    let Ok((tool, spec)) = parse(text, project, cwd) else {
        return false;
    };
    let rules = ClaudeRules {
        rules: vec![Rule {
            effect: Effect::Deny,
            tool,
            spec,
            text: text.to_string(),
            file: PathBuf::new(),
        }],
    };
    rules.matching(Effect::Deny, names, input, cwd).is_some()
}

/// `TOOL` or `TOOL(SPEC)` into Claude Code's tool name and what the rule matches.
fn parse(text: &str, base: &Path, cwd: &Path) -> Result<(String, Spec), &'static str> {
    let text = text.trim();
    let (tool, inner) = match text.split_once('(') {
        None => return Ok((text.to_string(), Spec::Any)),
        Some((t, rest)) => match rest.strip_suffix(')') {
            Some(inner) => (t.trim(), inner.trim()),
            None => return Err("a rule is TOOL or TOOL(SPECIFIER)"),
        },
    };
    if tool.is_empty() {
        return Err("a rule is TOOL or TOOL(SPECIFIER)");
    }
    // `*` and `**` cover every call (published settings allow `Grep(**)`, `Glob(**)`).
    if inner.chars().all(|c| c == '*') {
        return Ok((tool.to_string(), Spec::Any));
    }
    let spec = match tool {
        // As in Claude Code: `:*` or ` *` at the end is a command and its arguments (`ls *`
        // covers `ls`, not `lsof`); another `*` is any text in its place.
        "Bash" => match inner
            .strip_suffix(":*")
            .or_else(|| inner.strip_suffix(" *"))
        {
            Some(p) if !has_star(p) => Spec::Prefix(p.trim().to_string()),
            _ if has_star(inner) => Spec::Wildcard(inner.to_string()),
            _ => Spec::Exact(inner.replace("\\*", "*")),
        },
        "Read" | "Edit" | "Write" => Spec::Path(glob(inner, base, cwd)),
        "WebFetch" => match inner.strip_prefix("domain:") {
            Some(d) if !d.trim().is_empty() => Spec::Domain(d.trim().to_ascii_lowercase()),
            _ => return Err("WebFetch rules name a host: WebFetch(domain:example.com)"),
        },
        _ => return Err("crush reads specifiers of Bash, Read, Edit, Write and WebFetch rules"),
    };
    Ok((tool.to_string(), spec))
}

/// A Read/Edit pattern as an absolute glob without its leading `/`: `//x` from `/`, `~/x` from
/// the home directory, `/x` from `base` (the settings file's project), `x` and `./x` from `cwd`;
/// a bare name matches at any depth below (gitignore).
fn glob(pattern: &str, base: &Path, cwd: &Path) -> String {
    let abs = if let Some(p) = pattern.strip_prefix("//") {
        PathBuf::from("/").join(p)
    } else if let Some(p) = pattern.strip_prefix("~/") {
        crate::paths::home().join(p)
    } else if let Some(p) = pattern.strip_prefix('/') {
        base.join(p)
    } else if !pattern.trim_start_matches("./").contains('/') {
        cwd.join("**").join(pattern.trim_start_matches("./"))
    } else {
        cwd.join(pattern.trim_start_matches("./"))
    };
    crate::paths::normalize(&abs)
        .to_string_lossy()
        .trim_start_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(perms: Value) -> ClaudeHooks {
        ClaudeHooks {
            kind: ClaudeKind::Project,
            path: PathBuf::from("/p/.claude/settings.json"),
            hooks: Value::Null,
            permissions: perms,
            plugin_root: None,
            disable_all: false,
        }
    }

    /// Claude Code's name for the crush tool `name`.
    fn claude(name: &str) -> Vec<String> {
        let n = match name {
            "bash" => "Bash",
            "view" => "Read",
            "grep" => "Grep",
            "glob" => "Glob",
            "ls" => "LS",
            "edit" => "Edit",
            "write" => "Write",
            "multiedit" => "MultiEdit",
            "fetch" => "WebFetch",
            other => other,
        };
        vec![n.to_string()]
    }

    fn effect(r: &ClaudeRules, name: &str, input: Value) -> Option<Effect> {
        [Effect::Deny, Effect::Ask, Effect::Allow]
            .into_iter()
            .find(|e| {
                r.matching(*e, &claude(name), &input, Path::new("/p"))
                    .is_some()
            })
    }

    fn rules(perms: Value) -> (ClaudeRules, Vec<RuleError>) {
        ClaudeRules::from_files(&[file(perms)], Path::new("/p"))
    }

    #[test]
    fn published_rule_shapes_map_to_crushs_tools() {
        let (r, errors) = rules(json!({
            "allow": ["Bash(npm test:*)", "Bash(git status)", "Edit(src/**)", "WebFetch(domain:docs.rs)",
                      "Read(~/notes/**)"],
            "deny": ["Read(./.env)", "Bash(rm:*)", "Edit(*.lock)"],
            "ask": ["Bash(git push:*)"],
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let bash = |c: &str| effect(&r, "bash", json!({ "command": c }));
        assert_eq!(bash("npm test"), Some(Effect::Allow));
        assert_eq!(bash("npm test -- --watch"), Some(Effect::Allow));
        assert_eq!(bash("npm testing"), None);
        assert_eq!(bash("npm test && curl x | sh"), None);
        assert_eq!(bash("git status"), Some(Effect::Allow));
        assert_eq!(bash("git status --short"), None);
        assert_eq!(bash("rm -rf build"), Some(Effect::Deny));
        assert_eq!(bash("cd src && rm -rf x"), Some(Effect::Deny));
        assert_eq!(bash("git push origin main"), Some(Effect::Ask));
        for t in ["view", "grep", "glob", "ls"] {
            assert_eq!(
                effect(&r, t, json!({"file_path": "/p/.env", "path": "/p/.env"})),
                Some(Effect::Deny),
                "{t}"
            );
        }
        assert_eq!(
            effect(&r, "view", json!({"file_path": ".env"})),
            Some(Effect::Deny)
        );
        assert_eq!(
            effect(&r, "view", json!({"file_path": "/p/src/a.rs"})),
            None
        );
        for t in ["edit", "write", "multiedit"] {
            assert_eq!(
                effect(&r, t, json!({"file_path": "src/deep/a.rs"})),
                Some(Effect::Allow),
                "{t}"
            );
            assert_eq!(
                effect(&r, t, json!({"file_path": "sub/Cargo.lock"})),
                Some(Effect::Deny),
                "{t}"
            );
        }
        assert_eq!(
            effect(&r, "edit", json!({"file_path": "/p/README.md"})),
            None
        );
        let home = crate::paths::home().join("notes/a.md");
        assert_eq!(
            effect(&r, "view", json!({ "file_path": home })),
            Some(Effect::Allow)
        );
        // What grep, glob and ls leave out as they walk: the Read deny rules' globs.
        assert_eq!(r.read_denied(), ["p/**/.env"]);
        let fetch = |u: &str| effect(&r, "fetch", json!({ "url": u }));
        assert_eq!(fetch("https://docs.rs/serde"), Some(Effect::Allow));
        assert_eq!(fetch("https://api.docs.rs/x"), Some(Effect::Allow));
        assert_eq!(fetch("https://evildocs.rs/x"), None);
    }

    #[test]
    fn rules_crush_cannot_apply_are_named() {
        let (r, errors) = rules(json!({
            "allow": ["WebFetch(https://x.y/*)", "Skill(x:*)", "Bash", "Glob(**)"],
            "deny": "Bash",
        }));
        let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all[0].contains("permissions.deny is not a list"), "{all:?}");
        assert!(all[1].contains("\"WebFetch(https://x.y/*)\" is not applied"));
        assert!(all[2].contains("\"Skill(x:*)\" is not applied"));
        assert_eq!(
            effect(&r, "bash", json!({"command": "anything"})),
            Some(Effect::Allow)
        );
        // `**` is every call, as `*` is.
        assert_eq!(
            effect(&r, "glob", json!({"pattern": "**/*.rs"})),
            Some(Effect::Allow)
        );
    }

    /// Published deny lists guard against force pushes and skipped git hooks with a `*` that
    /// is not a trailing ` *`: glued to the last word, leading, or in the middle.
    #[test]
    fn bash_rules_with_a_star_anywhere_cover_what_claude_code_covers() {
        let (r, errors) = rules(json!({
            "deny": ["Bash(git push --force*)", "Bash(*--no-verify*)", "Bash(git push * --force*)",
                     "Bash(echo \\*)"],
            "ask": ["Bash(* --version)"],
            "allow": ["Bash(npm --prefix * test)", "Bash(ls*)"],
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let bash = |c: &str| effect(&r, "bash", json!({ "command": c }));
        assert_eq!(bash("git push --force"), Some(Effect::Deny));
        assert_eq!(
            bash("git push --force-with-lease origin"),
            Some(Effect::Deny)
        );
        assert_eq!(bash("git push origin main --force"), Some(Effect::Deny));
        assert_eq!(bash("git push origin main"), None);
        assert_eq!(
            bash("cd app && git commit -m x --no-verify"),
            Some(Effect::Deny)
        );
        assert_eq!(bash("git commit -m x"), None);
        // `\*` is a star itself, not any text.
        assert_eq!(bash("echo *"), Some(Effect::Deny));
        assert_eq!(bash("echo hi"), None);
        assert_eq!(bash("node --version"), Some(Effect::Ask));
        assert_eq!(bash("npm --prefix web test"), Some(Effect::Allow));
        assert_eq!(bash("npm --prefix web run build"), None);
        // A star glued to a word takes what follows it too; an allow rule still covers one
        // command alone on its line.
        assert_eq!(bash("lsof -i"), Some(Effect::Allow));
        assert_eq!(bash("ls -la && rm -rf x"), None);
    }
}
