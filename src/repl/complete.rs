//! Tab completion of the input line: slash command names, their arguments, and `@path` mentions
//! of the project's files (honouring `.gitignore` and `.crushignore`). What can be completed comes
//! from a `Source`, so every kind of command (built in, or added by configuration) plugs in the
//! same way.

use crate::tools::ignore::{Flow, WalkOptions, walk};
use std::path::Path;

/// One thing the word may become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Candidate {
    pub text: String,
    /// A short description for the list (may be empty).
    pub about: String,
}

impl Candidate {
    pub(super) fn new(text: impl Into<String>, about: impl Into<String>) -> Candidate {
        Candidate {
            text: text.into(),
            about: about.into(),
        }
    }

    pub(super) fn plain(text: impl Into<String>) -> Candidate {
        Candidate::new(text, "")
    }
}

/// What can be completed.
pub(super) trait Source {
    /// The slash commands (names without `/`), with what each does.
    fn commands(&self) -> Vec<Candidate>;
    /// The candidates for the next argument of `/command`, given the arguments before it.
    fn arguments(&self, command: &str, before: &[&str]) -> Vec<Candidate>;
    /// The directory `@path` mentions are relative to.
    fn root(&self) -> Option<&Path>;
    /// Whether the next argument of `/command`, given the arguments before it, names a file
    /// (completed as a path relative to `root`).
    fn takes_path(&self, _command: &str, _before: &[&str]) -> bool {
        false
    }
}

/// The completions of the word before the cursor.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Completion {
    /// Byte offset in the text before the cursor where the word starts.
    pub start: usize,
    /// The word as typed.
    pub word: String,
    /// Candidates that start with the word, sorted, unique.
    pub candidates: Vec<Candidate>,
}

impl Completion {
    /// The longest text every candidate starts with.
    pub(super) fn common_prefix(&self) -> String {
        let mut it = self.candidates.iter();
        let Some(first) = it.next() else {
            return String::new();
        };
        let mut prefix: &str = &first.text;
        for c in it {
            let n = prefix
                .char_indices()
                .zip(c.text.chars())
                .find(|((_, a), b)| a != b)
                .map(|((i, _), _)| i)
                .unwrap_or(prefix.len().min(c.text.len()));
            prefix = &prefix[..n];
        }
        prefix.to_string()
    }
}

/// Most entries a directory listing offers.
const MAX_PATHS: usize = 500;

/// Completes the word that ends at the end of `before` (the text before the cursor).
pub(super) fn complete(before: &str, source: &dyn Source) -> Option<Completion> {
    let start = before
        .rfind(char::is_whitespace)
        .map(|i| i + before[i..].chars().next().map_or(1, char::len_utf8))
        .unwrap_or(0);
    let word = &before[start..];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = &before[line_start..];
    let mut candidates = if let Some(rest) = word.strip_prefix('@') {
        let root = source.root()?;
        paths(root, rest)
            .into_iter()
            .map(|c| Candidate::new(format!("@{}", c.text), c.about))
            .collect()
    } else if line_start == 0 && line.starts_with('/') && start == 0 {
        source
            .commands()
            .into_iter()
            .map(|c| Candidate::new(format!("/{}", c.text), c.about))
            .collect()
    } else if line_start == 0 && line.starts_with('/') {
        let mut words = line[1..].split_whitespace();
        let command = words.next()?;
        let command = resolve(command, &source.commands())?;
        let mut before_words: Vec<&str> = words.collect();
        if !word.is_empty() {
            before_words.pop();
        }
        if source.takes_path(&command, &before_words) {
            paths(source.root()?, word)
        } else {
            source.arguments(&command, &before_words)
        }
    } else {
        return None;
    };
    candidates.retain(|c| c.text.starts_with(word));
    candidates.sort_by(|a, b| a.text.cmp(&b.text));
    candidates.dedup_by(|a, b| a.text == b.text);
    Some(Completion {
        start,
        word: word.to_string(),
        candidates,
    })
}

/// A command name as typed (a unique prefix works, as at the prompt).
fn resolve(typed: &str, commands: &[Candidate]) -> Option<String> {
    let lower = typed.to_ascii_lowercase();
    if let Some(c) = commands.iter().find(|c| c.text == lower) {
        return Some(c.text.clone());
    }
    let mut prefixed = commands.iter().filter(|c| c.text.starts_with(&lower));
    match (prefixed.next(), prefixed.next()) {
        (Some(one), None) => Some(one.text.clone()),
        _ => None,
    }
}

/// Entries of the directory part of `partial` (relative to `root`) whose names start with the
/// rest; directories end with `/`. Hidden names only when the typed name starts with a dot.
fn paths(root: &Path, partial: &str) -> Vec<Candidate> {
    let (dir, name) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    if dir.split('/').any(|seg| seg == "..") {
        return Vec::new();
    }
    let base = root.join(dir);
    let opts = WalkOptions {
        hidden: name.starts_with('.'),
        max_depth: Some(1),
        skip_names: Vec::new(),
        top: Some(root.to_path_buf()),
    };
    let mut out = Vec::new();
    walk(&base, &opts, &mut |e| {
        let file = e.rel.rsplit('/').next().unwrap_or(&e.rel);
        if file.starts_with(name) {
            let slash = if e.is_dir { "/" } else { "" };
            out.push(Candidate::plain(format!("{dir}{file}{slash}")));
        }
        if out.len() >= MAX_PATHS {
            Flow::Stop
        } else {
            Flow::Continue
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Fake(Option<PathBuf>);

    impl Source for Fake {
        fn commands(&self) -> Vec<Candidate> {
            ["help", "model", "new", "export", "exit"]
                .iter()
                .map(|n| Candidate::new(*n, "about"))
                .collect()
        }
        fn arguments(&self, command: &str, before: &[&str]) -> Vec<Candidate> {
            match (command, before) {
                ("model", []) => vec![
                    Candidate::plain("large"),
                    Candidate::plain("small"),
                    Candidate::plain("fake/m1"),
                ],
                ("model", [_]) => vec![Candidate::plain("fake/m1"), Candidate::plain("fake/m2")],
                _ => Vec::new(),
            }
        }
        fn root(&self) -> Option<&Path> {
            self.0.as_deref()
        }
        fn takes_path(&self, command: &str, before: &[&str]) -> bool {
            command == "export" && before.len() == 1
        }
    }

    fn texts(c: &Completion) -> Vec<&str> {
        c.candidates.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn command_names() {
        let c = complete("/mo", &Fake(None)).unwrap();
        assert_eq!((c.start, texts(&c)), (0, vec!["/model"]));
        let c = complete("/e", &Fake(None)).unwrap();
        assert_eq!(texts(&c), vec!["/exit", "/export"]);
        assert_eq!(c.common_prefix(), "/ex");
        assert!(complete("not a command", &Fake(None)).is_none());
    }

    #[test]
    fn arguments_by_position_and_command_prefix() {
        let c = complete("/mod sm", &Fake(None)).unwrap();
        assert_eq!((c.start, texts(&c)), (5, vec!["small"]));
        let c = complete("/model small ", &Fake(None)).unwrap();
        assert_eq!(texts(&c), vec!["fake/m1", "fake/m2"]);
        assert_eq!(c.common_prefix(), "fake/m");
        assert!(complete("/zz a", &Fake(None)).is_none());
    }

    #[test]
    fn path_mentions_honour_ignore_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["src/inner", "srv", "target", ".hidden"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("src/secret.key"), "").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(root.join(".crushignore"), "*.key\n").unwrap();
        let f = Fake(Some(root.to_path_buf()));
        let c = complete("look at @sr", &f).unwrap();
        assert_eq!((c.start, texts(&c)), (8, vec!["@src/", "@srv/"]));
        let c = complete("@src/", &f).unwrap();
        assert_eq!(texts(&c), vec!["@src/inner/", "@src/main.rs"]);
        assert!(texts(&complete("@t", &f).unwrap()).is_empty());
        assert!(
            texts(&complete("@", &f).unwrap())
                .iter()
                .all(|t| !t.starts_with("@."))
        );
        assert_eq!(texts(&complete("@.h", &f).unwrap()), vec!["@.hidden/"]);
        // A command's file argument completes the same way, without the @.
        let c = complete("/exp md src/m", &f).unwrap();
        assert_eq!((c.start, texts(&c)), (8, vec!["src/main.rs"]));
        assert!(texts(&complete("/exp sr", &f).unwrap()).is_empty());
        assert!(texts(&complete("@../", &f).unwrap()).is_empty());
    }
}
