//! The prompt history of a project: `<data dir>/history`, one entry per line, oldest first, with
//! newlines written `\n` and backslashes `\\` so the file stays readable. Entries are unique (an
//! entry typed again moves to the end) and capped; new entries are appended, and the file is
//! rewritten without duplicates when it has grown well past the cap. A line that is not UTF-8 is
//! skipped; a file that cannot be read or written costs a warning, never an entry of this run.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Entries kept.
pub(super) const CAP: usize = 10_000;
/// Longer entries (large pastes) are not recorded.
const MAX_ENTRY: usize = 64 * 1024;
/// The largest history file read.
const MAX_FILE: u64 = 64 << 20;

pub(super) struct History {
    entries: Vec<String>,
    path: Option<PathBuf>,
    cap: usize,
    /// Lines in the file (to know when to compact it).
    file_lines: usize,
    /// A write failed once: do not warn again.
    write_failed: bool,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

impl History {
    /// An empty history that is not saved.
    pub(super) fn in_memory() -> History {
        History {
            entries: Vec::new(),
            path: None,
            cap: CAP,
            file_lines: 0,
            write_failed: false,
        }
    }

    /// Loads `path` (missing: empty). The string is a warning for the user.
    pub(super) fn load(path: &Path, cap: usize) -> (History, Option<String>) {
        let mut h = History {
            path: Some(path.to_path_buf()),
            cap,
            ..History::in_memory()
        };
        // The project data directory may come with the repository: never block or read
        // without end (crush(1) FILES).
        let bytes = match crate::fsutil::read_regular(path, crate::fsutil::Links::Follow, MAX_FILE)
        {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (h, None),
            Err(e) => {
                return (
                    h,
                    Some(format!(
                        "cannot read the prompt history {}: {e}",
                        path.display()
                    )),
                );
            }
        };
        let mut bad = 0;
        let mut all = Vec::new();
        for line in bytes.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            h.file_lines += 1;
            match std::str::from_utf8(line) {
                Ok(s) => all.push(unescape(s.trim_end_matches('\r'))),
                Err(_) => bad += 1,
            }
        }
        h.entries = dedup_keep_last(all, cap);
        let warning = (bad > 0).then(|| {
            format!(
                "skipped {bad} unreadable line{} of the prompt history {}",
                if bad == 1 { "" } else { "s" },
                path.display()
            )
        });
        (h, warning)
    }

    pub(super) fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Records an entry (moved to the end if it was there). The string is a warning for the
    /// user, given once.
    pub(super) fn add(&mut self, entry: &str) -> Option<String> {
        if entry.trim().is_empty() || entry.len() > MAX_ENTRY {
            return None;
        }
        if self.entries.last().is_some_and(|e| e == entry) {
            return None;
        }
        self.entries.retain(|e| e != entry);
        self.entries.push(entry.to_string());
        if self.entries.len() > self.cap {
            let over = self.entries.len() - self.cap;
            self.entries.drain(..over);
        }
        let path = self.path.clone()?;
        let written = if self.file_lines >= self.cap + self.cap / 2 {
            self.rewrite(&path)
        } else {
            append(&path, entry).map(|()| self.file_lines += 1)
        };
        match written {
            Ok(()) => None,
            Err(e) if !self.write_failed => {
                self.write_failed = true;
                Some(format!(
                    "cannot save the prompt history to {}: {e}; it is kept for this run",
                    path.display()
                ))
            }
            Err(_) => None,
        }
    }

    fn rewrite(&mut self, path: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for e in &self.entries {
            text.push_str(&escape(e));
            text.push('\n');
        }
        crate::fsutil::write_atomic(path, text.as_bytes())?;
        self.file_lines = self.entries.len();
        Ok(())
    }
}

fn append(path: &Path, entry: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // One write: concurrent sessions of the project append whole lines.
    f.write_all(format!("{}\n", escape(entry)).as_bytes())
}

/// The last occurrence of each entry, in order, at most `cap` of them.
fn dedup_keep_last(all: Vec<String>, cap: usize) -> Vec<String> {
    let mut keep = vec![false; all.len()];
    let mut seen = std::collections::HashSet::with_capacity(all.len().min(cap));
    let mut kept = 0;
    for (i, e) in all.iter().enumerate().rev() {
        if kept == cap {
            break;
        }
        if seen.insert(e.as_str()) {
            keep[i] = true;
            kept += 1;
        }
    }
    all.into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in ["plain", "two\nlines", "back\\slash\\n", "end\\"] {
            assert_eq!(unescape(&escape(s)), s);
            assert!(!escape(s).contains('\n'));
        }
    }

    #[test]
    fn entries_persist_unique_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history");
        let (mut h, w) = History::load(&path, 3);
        assert!(w.is_none());
        for e in ["one", "two\nlines", "one", "one", "  "] {
            assert_eq!(h.add(e), None);
        }
        assert_eq!(h.entries(), ["two\nlines", "one"]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "one\ntwo\\nlines\none\n", "appended, readable");
        let (mut h, _) = History::load(&path, 3);
        assert_eq!(h.entries(), ["two\nlines", "one"]);
        h.add("three");
        h.add("four");
        assert_eq!(h.entries(), ["one", "three", "four"]);
        // Past the cap and a half, the file is rewritten without duplicates.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "one\nthree\nfour\n"
        );
    }

    #[test]
    fn unreadable_lines_are_skipped_with_one_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history");
        std::fs::write(&path, b"good\n\xff\xfe bad\nalso good\n\xc3\n").unwrap();
        let (h, w) = History::load(&path, CAP);
        assert_eq!(h.entries(), ["good", "also good"]);
        assert!(w.unwrap().contains("skipped 2 unreadable lines"));
    }

    #[test]
    fn an_unwritable_history_warns_once_and_keeps_entries() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: neither readable nor writable as a file.
        let path = dir.path().join("history");
        std::fs::create_dir(&path).unwrap();
        let (mut h, w) = History::load(&path, CAP);
        assert!(w.unwrap().contains("cannot read"));
        assert!(h.add("first").unwrap().contains("kept for this run"));
        assert_eq!(h.add("second"), None);
        assert_eq!(h.entries(), ["first", "second"]);
    }
}
