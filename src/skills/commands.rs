//! Custom commands (crush(1) SKILLS AND COMMANDS).
//!
//! A custom command is a markdown file in a commands folder — crush's, Claude Code's
//! (`.claude/commands`) or Codex's (`~/.codex/prompts`) — named `project:NAME` or `user:NAME`
//! after its folder and its path (`a/b.md` is `a:b`). Its text is the prompt: `$ARGUMENTS`
//! receives the rest of the line. In a command of crush's, Go Crush's or Codex's folders each
//! `$UPPER_CASE` word is a named argument, given as `NAME=value` or asked for; a command of
//! Claude Code's folders follows Claude Code's rules instead (`$1`, `$2`… positional, other
//! `$WORDS` kept as text, `` !`cmd` `` run first; see `catalog::expand_claude`).

use super::walk::{self, Next};
use super::{SkillError, Source};
use crate::config::Loaded;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};

/// A larger command file is rejected.
pub(crate) const MAX_COMMAND_BYTES: u64 = 256 * 1024;
const MAX_DEPTH: usize = 4;
const MAX_DIRS: usize = 1000;

/// A custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Command {
    /// `project:review`, `user:git:commit`.
    pub name: String,
    pub path: PathBuf,
    pub source: Source,
    /// The frontmatter's `description`, else the first line of the text.
    pub description: String,
    /// The text without its frontmatter.
    pub body: String,
    /// Its named arguments (`$UPPER_CASE`, `$ARGUMENTS` excluded), in order of appearance;
    /// none in Claude Code's dialect.
    pub arguments: Vec<String>,
    /// Whose rules its text follows.
    pub dialect: Dialect,
    /// The frontmatter's `argument-hint` (Claude Code's), shown where the arguments are typed.
    pub argument_hint: Option<String>,
    /// `context: fork` (with `agent` and `model`): it runs in a sub-agent, as a skill does.
    pub fork: Option<super::fork::Fork>,
}

/// Whose rules a command's text follows (crush(1) SKILLS AND COMMANDS, Custom commands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// crush's, Go Crush's and Codex's folders: `$UPPER_CASE` words are named arguments.
    Go,
    /// Claude Code's folders: `$ARGUMENTS`, `$1`…, `` !`cmd` ``; other `$WORDS` are text.
    Claude,
}

/// A command file that was not loaded: where, from which level, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub path: String,
    pub source: Source,
    pub reason: String,
}

/// The custom commands of a session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Commands {
    pub commands: Vec<Command>,
    pub rejected: Vec<Rejected>,
    /// Two files with one name: the second is ignored (one line each).
    pub warnings: Vec<String>,
}

/// The named arguments of `text`: each `$` followed by an upper-case letter and upper-case
/// letters, digits or `_` (Go Crush's pattern), `$ARGUMENTS` excluded, first appearance first.
pub(crate) fn named_arguments(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, _) in placeholders(text) {
        if name != "ARGUMENTS" && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Every `$NAME` of `text` with its byte offset (of the `$`).
pub(super) fn placeholders(text: &str) -> Vec<(&str, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() && b[i + 1].is_ascii_uppercase() {
            let mut j = i + 2;
            while j < b.len()
                && (b[j].is_ascii_uppercase() || b[j].is_ascii_digit() || b[j] == b'_')
            {
                j += 1;
            }
            out.push((&text[i + 1..j], i));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// A folder of command files and the level its commands belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Folder {
    pub dir: PathBuf,
    pub source: Source,
    pub dialect: Dialect,
}

/// The command folders, first one first: the project's (`.crush/commands` in the working
/// directory, the data directory and the project root; `.claude/commands` in the working
/// directory and the project root), then the user's (`~/.config/crush/commands`,
/// `~/.crush/commands`, `~/.claude/commands`, `~/.codex/prompts`).
pub(crate) fn folders(loaded: &Loaded) -> Vec<Folder> {
    let home = super::home();
    let codex = crate::paths::location_var("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
    use Dialect::{Claude, Go};
    let candidates = [
        (loaded.cwd.join(".crush/commands"), Source::Project, Go),
        (loaded.data_dir.join("commands"), Source::Project, Go),
        (
            loaded.project_root.join(".crush/commands"),
            Source::Project,
            Go,
        ),
        (loaded.cwd.join(".claude/commands"), Source::Project, Claude),
        (
            loaded.project_root.join(".claude/commands"),
            Source::Project,
            Claude,
        ),
        (
            crate::paths::global_config_dir().join("commands"),
            Source::User,
            Go,
        ),
        (home.join(".crush/commands"), Source::User, Go),
        (
            crate::paths::claude_config_dir().join("commands"),
            Source::User,
            Claude,
        ),
        (codex.join("prompts"), Source::User, Go),
    ];
    let mut out: Vec<Folder> = Vec::new();
    for (dir, source, dialect) in candidates {
        if !out.iter().any(|f| f.dir == dir) {
            out.push(Folder {
                dir,
                source,
                dialect,
            });
        }
    }
    out
}

/// The command in `path` (`rel`: its folders below the commands folder, `stem`: its name).
fn load_one(
    path: &Path,
    rel: &[String],
    stem: &str,
    source: Source,
    dialect: Dialect,
    warnings: &mut Vec<String>,
) -> Result<Command, SkillError> {
    let text =
        walk::read_text(path, MAX_COMMAND_BYTES).map_err(|e| SkillError::Invalid(e.message))?;
    let doc = super::frontmatter::parse(&text)?;
    let description = match doc.get("description").map(|f| &f.value) {
        Some(super::frontmatter::Value::Scalar(Some(d))) => d.trim().to_string(),
        _ => doc
            .body
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(80)
            .collect(),
    };
    let mut parts: Vec<&str> = rel.iter().map(String::as_str).collect();
    parts.push(stem);
    if let Some(bad) = parts
        .iter()
        .find(|p| p.is_empty() || p.contains(|c: char| c.is_whitespace() || c == ':'))
    {
        return Err(SkillError::Invalid(format!(
            "`{bad}` cannot be part of a command name (no spaces or colons)"
        )));
    }
    let body = doc.body.trim().to_string();
    let argument_hint = match doc.get("argument-hint").map(|f| &f.value) {
        Some(super::frontmatter::Value::Scalar(Some(h))) => Some(h.trim().to_string()),
        // `argument-hint: [file] [focus]` reads as a list: shown as written.
        Some(super::frontmatter::Value::List(l)) => Some(
            l.iter()
                .map(|h| format!("[{h}]"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
    .filter(|h| !h.is_empty());
    let (fork, fork_warnings) = super::fork::parse(&doc);
    warnings.extend(fork_warnings);
    Ok(Command {
        name: format!("{}:{}", source.label(), parts.join(":")),
        path: path.to_path_buf(),
        source,
        description,
        arguments: match dialect {
            Dialect::Go => named_arguments(&body),
            Dialect::Claude => Vec::new(),
        },
        dialect,
        argument_hint,
        fork,
        body,
    })
}

/// Loads the commands of `folders`; the first file of a name wins.
pub(crate) fn load_from(folders: &[Folder]) -> Commands {
    let mut walker = walk::Walker::new(MAX_DEPTH, MAX_DIRS);
    let mut out = Commands::default();
    for f in folders {
        if !f.dir.is_dir() {
            continue;
        }
        let before = walker.problems.len();
        walker.walk(&f.dir, &mut |_, _, rel, entries| {
            for e in entries {
                let Some(stem) = e
                    .name
                    .strip_suffix(".md")
                    .or_else(|| e.name.strip_suffix(".MD"))
                else {
                    continue;
                };
                if e.kind != walk::Kind::File {
                    continue;
                }
                let mut problems = Vec::new();
                let loaded = load_one(&e.path, rel, stem, f.source, f.dialect, &mut problems);
                out.warnings.extend(
                    problems
                        .into_iter()
                        .map(|w| format!("command {}: {w}", e.path.display())),
                );
                match loaded {
                    Ok(c) => match out.commands.iter().find(|o| o.name == c.name) {
                        Some(first) => out.warnings.push(format!(
                            "command /{}: {} is ignored; {} has the same name and comes first",
                            c.name,
                            c.path.display(),
                            first.path.display()
                        )),
                        None => out.commands.push(c),
                    },
                    Err(reason) => out.rejected.push(Rejected {
                        path: e.path.display().to_string(),
                        source: f.source,
                        reason: reason.to_string(),
                    }),
                }
            }
            Next::Descend
        });
        for (path, reason) in walker.problems.drain(before..) {
            out.rejected.push(Rejected {
                path: path.display().to_string(),
                source: f.source,
                reason,
            });
        }
    }
    out
}

/// The session's custom commands.
pub(crate) fn load(loaded: &Loaded) -> Commands {
    load_from(&folders(loaded))
}

impl Commands {
    /// The commands and rejected files, for `crush skills list`.
    pub(crate) fn list_text(&self) -> String {
        let mut out = String::new();
        for c in &self.commands {
            let args: String = match &c.argument_hint {
                Some(h) => format!(" {h}"),
                None => c.arguments.iter().map(|a| format!(" {a}=…")).collect(),
            };
            out.push_str(&format!("/{}{args}\n    {}\n", c.name, c.path.display()));
            if !c.description.is_empty() {
                out.push_str(&format!("    {}\n", c.description));
            }
            if let Some(f) = &c.fork {
                out.push_str(&format!("    {}\n", f.describe()));
            }
        }
        for r in &self.rejected {
            out.push_str(&format!(
                "-  [{}]  rejected: {}\n    {}\n",
                r.source.label(),
                r.reason,
                r.path
            ));
        }
        out
    }

    pub(crate) fn list_json(&self) -> Json {
        let mut items: Vec<Json> = self
            .commands
            .iter()
            .map(|c| {
                json!({"name": c.name, "path": c.path.display().to_string(),
                    "source": c.source.label(), "state": "active",
                    "description": c.description, "arguments": c.arguments,
                    "argument_hint": c.argument_hint,
                    "context": if c.fork.is_some() { "fork" } else { "inline" },
                    "agent": c.fork.as_ref().and_then(|f| f.agent.clone()),
                    "model": c.fork.as_ref().map(|f| f.model.to_string()),
                    "dialect": match c.dialect { Dialect::Go => "crush", Dialect::Claude => "claude" }})
            })
            .collect();
        items.extend(self.rejected.iter().map(|r| {
            json!({"name": null, "path": r.path, "source": r.source.label(),
                "state": "rejected", "reason": r.reason})
        }));
        Json::Array(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_arguments_in_order_of_appearance() {
        let t = "Review $FILE for $FOCUS.\n$ARGUMENTS\n$FILE again, $HOME_DIR, $lower, $9";
        assert_eq!(named_arguments(t), vec!["FILE", "FOCUS", "HOME_DIR"]);
    }

    #[test]
    fn folders_name_commands_and_bad_files_are_listed() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("p");
        let u = t.path().join("u");
        let w = |path: &Path, text: &[u8]| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        w(
            &p.join("review.md"),
            b"---\ndescription: Review a file\n---\nReview $FILE.\n",
        );
        w(
            &p.join("git/commit.md"),
            b"# Commit\nWrite a commit message. $ARGUMENTS\n",
        );
        w(&p.join("notes.txt"), b"not a command");
        w(&p.join("latin.md"), b"caf\xe9\n");
        w(&p.join("bad name.md"), b"x");
        w(&u.join("review.md"), b"User review.\n");
        w(&u.join("deploy.md"), b"Deploy.\n");
        let c = load_from(&[
            Folder {
                dir: p.clone(),
                source: Source::Project,
                dialect: Dialect::Go,
            },
            Folder {
                dir: u.clone(),
                source: Source::User,
                dialect: Dialect::Go,
            },
        ]);
        let names: Vec<(&str, &str, &[String])> = c
            .commands
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.description.as_str(),
                    c.arguments.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("project:review", "Review a file", &["FILE".to_string()][..]),
                ("project:git:commit", "Commit", &[][..]),
                ("user:deploy", "Deploy.", &[][..]),
                ("user:review", "User review.", &[][..]),
            ]
        );
        assert_eq!(c.commands[0].body, "Review $FILE.");
        let rejected: Vec<(String, &str)> = c
            .rejected
            .iter()
            .map(|r| {
                (
                    r.path.rsplit('/').next().unwrap_or("").to_string(),
                    r.reason.as_str(),
                )
            })
            .collect();
        assert_eq!(rejected.len(), 2, "{rejected:?}");
        assert!(
            rejected[0].0 == "bad name.md" && rejected[0].1.contains("no spaces"),
            "{rejected:?}"
        );
        assert!(
            rejected[1].0 == "latin.md" && rejected[1].1.contains("not UTF-8"),
            "{rejected:?}"
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }
}
