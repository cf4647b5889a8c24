//! `crush __complete WORD...` (hidden; crush(1) FILES, completions): what the bash, zsh and fish
//! completion scripts offer beyond the flag table. WORDS are the command line after `crush`, the
//! last one the word being completed (empty for a new word). The answer is one candidate a line,
//! `VALUE` or `VALUE<TAB>DESCRIPTION`: the project's session ids (and titles) after `-s` and
//! after `sessions show|export|diff|delete|rename`, the configured models after `-m` and
//! `--small-model`, files after `--attach` and `-o`, directories after `-c` and `-D`, commands
//! after `help`, the MCP servers after `mcp login`. Nothing answers "no live values here": the
//! script falls back to its word list. No model is called and no server started; the session
//! database is opened read-only and the provider catalog is never fetched.

use crate::app::{self, Global};
use crate::cli::{COMMANDS, FLAGS};
use std::path::PathBuf;

/// The hidden command's name (first argument).
pub(crate) const ARG: &str = "__complete";

/// The candidates for `words` (the last is the word being completed), one a line.
pub(crate) fn answer(words: &[String]) -> String {
    let (cur, before) = match words.split_last() {
        Some((c, b)) => (c.as_str(), b),
        None => ("", &[][..]),
    };
    let ctx = Line::read(before);
    let list = match ctx.prev.as_deref() {
        Some("-s" | "--session") => sessions(&ctx.global),
        Some("-m" | "--model" | "--small-model") => models(&ctx.global),
        Some("--attach" | "-o" | "--output") => paths(cur, false),
        Some("-c" | "--cwd" | "-D" | "--data-dir") => paths(cur, true),
        _ => match (ctx.command.as_deref(), ctx.positionals.as_slice()) {
            (Some("help"), []) => COMMANDS
                .iter()
                .map(|c| (c.name.to_string(), first_sentence(c.about)))
                .collect(),
            (Some("sessions"), [sub])
                if matches!(
                    sub.as_str(),
                    "show" | "export" | "diff" | "delete" | "rename"
                ) =>
            {
                sessions(&ctx.global)
            }
            (Some("mcp"), [sub]) if sub == "login" => mcp_servers(&ctx.global),
            _ => Vec::new(),
        },
    };
    let mut out = String::new();
    for (value, about) in list.into_iter().filter(|(v, _)| v.starts_with(cur)) {
        let about = about.replace(['\t', '\n', '\r'], " ");
        if about.is_empty() {
            out.push_str(&format!("{value}\n"));
        } else {
            out.push_str(&format!("{value}\t{about}\n"));
        }
    }
    out
}

/// What the words before the one being completed say.
#[derive(Default)]
struct Line {
    global: Global,
    command: Option<String>,
    /// Words after the command that are no flags or flag values.
    positionals: Vec<String>,
    /// The word just before, when it is a flag that takes a value.
    prev: Option<String>,
}

impl Line {
    fn read(words: &[String]) -> Line {
        let mut l = Line::default();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            if let Some(flag) = value_flag(w) {
                match words.get(i + 1) {
                    None => l.prev = Some(w.clone()),
                    Some(v) => match flag {
                        "cwd" => l.global.cwd = Some(PathBuf::from(v)),
                        "data-dir" => l.global.data_dir = Some(PathBuf::from(v)),
                        _ => {}
                    },
                }
                i += 2;
                continue;
            }
            if w == "--trust" {
                l.global.trust = true;
            } else if !w.starts_with('-') {
                if l.command.is_none() && COMMANDS.iter().any(|c| c.name == w) {
                    l.command = Some(w.clone());
                } else if l.command.is_some() {
                    l.positionals.push(w.clone());
                }
            }
            i += 1;
        }
        l
    }
}

/// The long name of `word` when it is a flag that takes a value (`-s`, `--model`).
fn value_flag(word: &str) -> Option<&'static str> {
    let f = if let Some(long) = word.strip_prefix("--") {
        FLAGS.iter().find(|f| f.long == long)
    } else {
        let mut c = word.strip_prefix('-')?.chars();
        let short = c.next().filter(|_| c.next().is_none())?;
        FLAGS.iter().find(|f| f.short == Some(short))
    }?;
    f.value().map(|_| f.long)
}

fn first_sentence(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.split(". ")
        .next()
        .unwrap_or("")
        .trim_end_matches('.')
        .to_string()
}

/// The project's top-level sessions, most recent first: short hash id and title.
fn sessions(global: &Global) -> Vec<(String, String)> {
    let Ok(loaded) = app::load_config(global) else {
        return Vec::new();
    };
    let Ok(Some(store)) = app::open_existing_store(&loaded) else {
        return Vec::new();
    };
    store
        .list_sessions()
        .unwrap_or_default()
        .into_iter()
        .map(|s| (crate::store::hashid::short_id(&s.id), s.title))
        .collect()
}

/// `PROVIDER/MODEL` of every model a configured provider offers, from the cached or embedded
/// catalog (never fetched here).
fn models(global: &Global) -> Vec<(String, String)> {
    let Ok(loaded) = app::load_config(global) else {
        return Vec::new();
    };
    let (catalog, _) = crate::catalog::load(&crate::catalog::Settings::from_env(true));
    let table = loaded.providers_with(&catalog.providers);
    table
        .ready
        .iter()
        .flat_map(|p| {
            p.models.iter().map(|m| {
                (
                    format!("{}/{}", p.id, m.id),
                    m.name.clone().unwrap_or_default(),
                )
            })
        })
        .collect()
}

/// The MCP servers of the configuration.
fn mcp_servers(global: &Global) -> Vec<(String, String)> {
    let Ok(loaded) = app::load_config(global) else {
        return Vec::new();
    };
    loaded
        .config
        .mcp
        .as_object()
        .map(|m| m.keys().map(|k| (k.clone(), String::new())).collect())
        .unwrap_or_default()
}

/// Entries of the directory `cur` is in whose names start as `cur`'s last part does
/// (directories with a trailing `/`); only directories when `dirs_only`. Hidden entries only
/// when asked for with a leading dot.
fn paths(cur: &str, dirs_only: bool) -> Vec<(String, String)> {
    let (dir, prefix) = match cur.rfind('/') {
        Some(i) => (&cur[..=i], &cur[i + 1..]),
        None => ("", cur),
    };
    let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "." } else { dir }) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let is_dir = e.path().is_dir();
            if dirs_only && !is_dir {
                return None;
            }
            let slash = if is_dir { "/" } else { "" };
            Some((format!("{dir}{name}{slash}"), String::new()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        let mut w: Vec<String> = s.split(' ').map(str::to_string).collect();
        if s.ends_with(' ') {
            w.pop();
            w.push(String::new());
        }
        w
    }

    #[test]
    fn the_line_says_what_is_completed() {
        let l = Line::read(&words("-c /p run -s")[..3]);
        assert_eq!(l.global.cwd, Some(PathBuf::from("/p")));
        assert_eq!(l.command.as_deref(), Some("run"));
        let l = Line::read(&words("run -s"));
        assert_eq!(l.prev.as_deref(), Some("-s"));
        let l = Line::read(&words("-m x sessions show"));
        assert_eq!(l.command.as_deref(), Some("sessions"));
        assert_eq!(l.positionals, ["show"]);
        assert_eq!(value_flag("--attach"), Some("attach"));
        assert_eq!(value_flag("-y"), None);
    }

    #[test]
    fn help_offers_the_commands() {
        let out = answer(&words("help ru"));
        assert!(out.starts_with("run\t"), "{out}");
        assert!(!out.contains("sessions"), "{out}");
        assert_eq!(answer(&words("run --json ")), "");
    }
}
