//! A bounded walk of skills and command folders: entries in name order, symbolic links
//! followed but never in a loop nor twice to the same folder, at most `max_depth` folders deep
//! and `max_dirs` folders read in all, so a huge or looping tree costs a bounded start.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// What an entry of a folder is, symbolic links followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Other,
}

/// One entry of a folder.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub kind: Kind,
    /// A symbolic link (resolved for `kind`).
    pub link: bool,
}

/// A problem met on the way, to be listed: the path and why.
pub(crate) type Problem = (PathBuf, String);

/// The limits and memory of one discovery (shared by all its folders, so the same folder
/// reached twice is read once).
pub(crate) struct Walker {
    pub max_depth: usize,
    /// Folders that may still be read.
    pub budget: usize,
    visited: HashSet<PathBuf>,
    pub problems: Vec<Problem>,
    /// The budget ran out (reported once).
    exhausted: bool,
}

/// Called with each folder as found, its canonical path, its path below the base (folder
/// names) and its entries.
pub(crate) type Visit<'a> = dyn FnMut(&Path, &Path, &[String], &[Entry]) -> Next + 'a;

/// Called with each folder (as found, canonical) before it is listed: Skip leaves it unlisted.
pub(crate) type Probe<'a> = dyn FnMut(&Path, &Path) -> Next + 'a;

/// What to do with a folder after seeing its entries.
#[derive(PartialEq, Eq)]
pub(crate) enum Next {
    Descend,
    Skip,
}

impl Walker {
    pub(crate) fn new(max_depth: usize, max_dirs: usize) -> Walker {
        Walker {
            max_depth,
            budget: max_dirs,
            visited: HashSet::new(),
            problems: Vec::new(),
            exhausted: false,
        }
    }

    /// Walks `base` (which must exist and be a folder), calling `visit` with each folder as
    /// found (`rel`: its path below `base`) and its entries; `visit` says whether to go into
    /// its sub-folders. Folders whose names start with `.` are not entered.
    pub(crate) fn walk(&mut self, base: &Path, visit: &mut Visit) {
        self.walk_probing(base, &mut |_, _| Next::Descend, visit);
    }

    /// [`walk`](Self::walk), `probe` deciding about each folder before it is listed.
    pub(crate) fn walk_probing(&mut self, base: &Path, probe: &mut Probe, visit: &mut Visit) {
        let canon = match fs::canonicalize(base) {
            Ok(c) => c,
            Err(e) => {
                self.problems.push((base.to_path_buf(), e.to_string()));
                return;
            }
        };
        let mut stack = Vec::new();
        let mut w = Walk { probe, visit };
        self.dir(base, canon, &mut Vec::new(), &mut stack, 0, &mut w);
    }

    /// `canon`: `dir` canonical.
    fn dir(
        &mut self,
        dir: &Path,
        canon: PathBuf,
        rel: &mut Vec<String>,
        stack: &mut Vec<PathBuf>,
        depth: usize,
        w: &mut Walk,
    ) {
        if let Some(ancestor) = stack.iter().find(|a| **a == canon) {
            self.problems.push((
                dir.to_path_buf(),
                format!(
                    "symbolic link loop: it leads back to {}",
                    ancestor.display()
                ),
            ));
            return;
        }
        if !self.visited.insert(canon.clone()) {
            return;
        }
        if self.budget == 0 {
            if !self.exhausted {
                self.exhausted = true;
                self.problems.push((
                    dir.to_path_buf(),
                    "not read: too many folders (the discovery stops here)".into(),
                ));
            }
            return;
        }
        self.budget -= 1;
        if (w.probe)(dir, &canon) == Next::Skip {
            return;
        }
        let entries = match read_entries(dir, &mut self.problems) {
            Ok(e) => e,
            Err(e) => {
                self.problems.push((dir.to_path_buf(), e.to_string()));
                return;
            }
        };
        if (w.visit)(dir, &canon, rel, &entries) == Next::Skip {
            return;
        }
        if depth >= self.max_depth {
            return;
        }
        for e in entries
            .iter()
            .filter(|e| e.kind == Kind::Dir && !e.name.starts_with('.'))
        {
            // Only a link needs resolving: a plain folder's canonical path is its parent's plus
            // its name.
            let child = if e.link {
                match fs::canonicalize(&e.path) {
                    Ok(c) => c,
                    Err(err) => {
                        self.problems.push((e.path.clone(), err.to_string()));
                        continue;
                    }
                }
            } else {
                canon.join(&e.name)
            };
            stack.push(canon.clone());
            rel.push(e.name.clone());
            self.dir(&e.path, child, rel, stack, depth + 1, w);
            rel.pop();
            stack.pop();
        }
    }
}

/// The callbacks of one walk.
struct Walk<'p, 'v, 'a, 'b> {
    probe: &'p mut Probe<'a>,
    visit: &'v mut Visit<'b>,
}

/// The entries of `dir` in name order, symbolic links resolved. A link that cannot be
/// followed (a loop, a missing target) is a problem; a name that is not UTF-8 is skipped with
/// one.
fn read_entries(dir: &Path, problems: &mut Vec<Problem>) -> std::io::Result<Vec<Entry>> {
    let rd = fs::read_dir(dir)?;
    let mut out = Vec::new();
    for e in rd {
        let Ok(e) = e else { continue };
        let path = e.path();
        let Ok(name) = e.file_name().into_string() else {
            problems.push((path, "the name is not UTF-8".into()));
            continue;
        };
        let Ok(t) = e.file_type() else { continue };
        let link = t.is_symlink();
        let kind = if link {
            match fs::metadata(&path) {
                Ok(m) if m.is_dir() => Kind::Dir,
                Ok(m) if m.is_file() => Kind::File,
                Ok(_) => Kind::Other,
                Err(err) => {
                    let why = if err.raw_os_error() == Some(libc::ELOOP) {
                        "symbolic link loop (too many levels of symbolic links)".to_string()
                    } else {
                        format!("symbolic link that cannot be followed: {err}")
                    };
                    problems.push((path, why));
                    continue;
                }
            }
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        out.push(Entry {
            name,
            path,
            kind,
            link,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Why a file could not be read as text.
#[derive(Debug)]
pub(crate) struct ReadError {
    /// `NotFound` for a missing file; `InvalidData` for one that is too large or not UTF-8.
    pub kind: std::io::ErrorKind,
    pub message: String,
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

fn invalid(message: String) -> ReadError {
    ReadError {
        kind: std::io::ErrorKind::InvalidData,
        message,
    }
}

/// The text of the regular file `path` (symbolic links followed), at most `max` bytes. Err:
/// why not (missing, too large, not UTF-8, not a regular file).
pub(crate) fn read_text(path: &Path, max: u64) -> Result<String, ReadError> {
    // Non-blocking, regular files only: a FIFO put in place of the file must not hold up the
    // start, nor a link to a device fill the memory.
    let data = match crate::fsutil::read_regular(path, crate::fsutil::Links::Follow, max) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return Err(invalid("not a regular file".into()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            let len = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            return Err(invalid(format!(
                "too large: {len} bytes (the limit is {max} bytes)"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    String::from_utf8(data).map_err(|e| {
        invalid(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(w: &mut Walker, base: &Path) -> Vec<String> {
        let mut seen = Vec::new();
        w.walk(base, &mut |_, _, rel, _| {
            seen.push(rel.join("/"));
            Next::Descend
        });
        seen
    }

    #[test]
    fn depth_count_loops_and_duplicates_are_bounded() {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        fs::create_dir_all(b.join("a/b/c/d/e")).unwrap();
        fs::create_dir_all(b.join(".hidden/x")).unwrap();
        symlink(b, b.join("a/up")).unwrap();
        symlink(b.join("a"), b.join("z")).unwrap();
        symlink("self", b.join("self")).unwrap();
        let mut w = Walker::new(3, 100);
        let seen = names(&mut w, b);
        // `z` is `a` again: read once; `.hidden` is not entered; `e` is too deep.
        assert_eq!(seen, vec!["", "a", "a/b", "a/b/c"]);
        let problems: Vec<String> = w
            .problems
            .iter()
            .map(|(p, why)| format!("{}: {why}", p.strip_prefix(b).unwrap().display()))
            .collect();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("a/up: symbolic link loop")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("self: symbolic link loop")),
            "{problems:?}"
        );
        let mut w = Walker::new(10, 2);
        assert_eq!(names(&mut w, b), vec!["", "a"]);
        assert!(
            w.problems
                .iter()
                .any(|(_, why)| why.contains("too many folders"))
        );
    }

    #[test]
    fn read_text_refuses_large_binary_and_special_files() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        fs::write(&p, "héllo").unwrap();
        assert_eq!(read_text(&p, 100).unwrap(), "héllo");
        assert!(read_text(&p, 3).unwrap_err().message.contains("too large"));
        fs::write(&p, b"ok\xff").unwrap();
        assert!(
            read_text(&p, 100)
                .unwrap_err()
                .message
                .contains("not UTF-8")
        );
        assert!(read_text(t.path(), 100).is_err());
        let missing = read_text(&t.path().join("none"), 100).unwrap_err();
        assert_eq!(missing.kind, std::io::ErrorKind::NotFound);
    }
}
