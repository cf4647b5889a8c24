//! The mid-session trust check (crush(1) SECURITY, Project trust). Trust is decided at start-up
//! against a hash of the project's definitions and of the project files they name; a tool may
//! rewrite such a file later (a hook's script, a server's program). So before each run of a
//! project hook, each (re)start of a project MCP or LSP server and each run of a project crushrc,
//! the files that definition names are compared with what was trusted: their size, times and
//! inode first (one `stat` each), their SHA-256 only when those changed. A changed file is not
//! run: the user is told once, and the project's hooks, servers and crushrc files stay
//! untrusted for the rest of the process, as the next start (whose hash no longer matches) has
//! it.

use crate::sha256;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The most of one file that is hashed (the size is hashed too).
pub(crate) const MAX_HASHED_FILE: u64 = 16 * 1024 * 1024;

/// What `stat` says of a file: any difference means it may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
        Stamp {
            len: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
        }
    }

    fn now(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }
}

/// A file's fingerprint as the trust hash takes it: `SIZE:SHA256` of its first
/// `MAX_HASHED_FILE` bytes, or `unreadable KIND`; and its stamp when it could be read.
pub(crate) fn fingerprint(path: &Path) -> (String, Option<Stamp>) {
    use std::io::Read;
    let read =
        crate::fsutil::open_regular(path, crate::fsutil::Links::Follow).and_then(|(f, meta)| {
            let mut bytes = Vec::new();
            f.take(MAX_HASHED_FILE).read_to_end(&mut bytes)?;
            Ok((bytes, meta))
        });
    match read {
        Ok((bytes, meta)) => (
            format!("{}:{}", bytes.len(), sha256::hex(&bytes)),
            Some(Stamp::of(&meta)),
        ),
        Err(e) => (format!("unreadable {:?}", e.kind()), None),
    }
}

/// The project files the trusted definitions name, as they were when trust was decided, and
/// which definition names which (built by the trust review).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Baseline {
    files: Vec<(PathBuf, String, Option<Stamp>)>,
    defs: Vec<(String, Vec<usize>)>,
}

impl Baseline {
    /// Records `path` (once) and returns its fingerprint.
    pub(crate) fn file(&mut self, path: &Path) -> String {
        if let Some((_, fp, _)) = self.files.iter().find(|(p, _, _)| p == path) {
            return fp.clone();
        }
        let (fp, stamp) = fingerprint(path);
        self.files.push((path.to_path_buf(), fp.clone(), stamp));
        fp
    }

    /// Records that the definition `key` (see [`key`]) runs code from `files` (none: it is the
    /// project's all the same).
    pub(crate) fn def(&mut self, key: String, files: &[PathBuf]) {
        let idx: Vec<usize> = files
            .iter()
            .map(|f| {
                self.file(f);
                self.files.iter().position(|(p, _, _)| p == f).unwrap_or(0)
            })
            .collect();
        match self.defs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, old)) => {
                for i in idx {
                    if !old.contains(&i) {
                        old.push(i);
                    }
                }
            }
            None => self.defs.push((key, idx)),
        }
    }
}

/// What a check is about: a hook by its command, a server by its name, a crushrc by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum What {
    Hook,
    Mcp,
    Lsp,
    Crushrc,
}

/// The key of a definition in a [`Baseline`].
/// `id` is trimmed: a hook's command is run trimmed, and a project file's `" ./x.sh"` must
/// still be found by the check of the `./x.sh` that runs.
pub(crate) fn key(what: What, id: &str) -> String {
    format!("{what:?}\0{}", id.trim())
}

/// A project file changed since the project was trusted: what was asked is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changed(String);

impl std::fmt::Display for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Changed {}

struct Watched {
    path: PathBuf,
    fingerprint: String,
    stamp: Mutex<Option<Stamp>>,
}

struct Inner {
    root: PathBuf,
    files: Vec<Watched>,
    defs: HashMap<String, Vec<usize>>,
    /// The first change seen: from then on no project definition runs.
    broken: OnceLock<Changed>,
}

/// The running check of a trusted project (inactive when nothing of the project runs).
#[derive(Clone, Default)]
pub(crate) struct Guard(Option<Arc<Inner>>);

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Guard(inactive)"),
            Some(i) => write!(f, "Guard({} files)", i.files.len()),
        }
    }
}

impl Guard {
    /// The check of the project at `root` whose definitions run (it is trusted, or trusted
    /// for this invocation), against `baseline`.
    pub(crate) fn new(root: &Path, baseline: &Baseline) -> Guard {
        Guard(Some(Arc::new(Inner {
            root: root.to_path_buf(),
            files: baseline
                .files
                .iter()
                .map(|(path, fingerprint, stamp)| Watched {
                    path: path.clone(),
                    fingerprint: fingerprint.clone(),
                    stamp: Mutex::new(*stamp),
                })
                .collect(),
            defs: baseline.defs.iter().cloned().collect(),
            broken: OnceLock::new(),
        })))
    }

    /// No check (nothing of the project runs, or there is no project definition).
    pub(crate) fn inactive() -> Guard {
        Guard(None)
    }

    /// Ok when the definition may run: it is not the project's, or every file it names is as
    /// trusted and no other has changed. Err (and, the first time, a notice on stderr) when not.
    pub(crate) fn check(&self, what: What, id: &str) -> Result<(), Changed> {
        let Some(inner) = &self.0 else {
            return Ok(());
        };
        let Some(files) = inner.defs.get(&key(what, id)) else {
            return Ok(());
        };
        if let Some(c) = inner.broken.get() {
            return Err(c.clone());
        }
        for &i in files {
            let Some(w) = inner.files.get(i) else {
                continue;
            };
            if w.unchanged() {
                continue;
            }
            let c = Changed(format!(
                "{} changed since the project was trusted",
                w.path.display()
            ));
            if inner.broken.set(c.clone()).is_ok() {
                let notice = format!(
                    "{} changed since the project {} was trusted: its hooks, MCP and LSP servers and crushrc files do not run in this session; review it with 'crush trust'",
                    w.path.display(),
                    inner.root.display()
                );
                crate::log::warn(&notice);
                crate::ewriteln!("crush: {}", crate::visible::line(&notice));
            }
            return Err(inner.broken.get().cloned().unwrap_or(c));
        }
        Ok(())
    }
}

impl Watched {
    /// One `stat` when nothing changed; the hash only when the stamp did (a file rewritten with
    /// the same bytes is still trusted, and its new stamp kept).
    fn unchanged(&self) -> bool {
        let now = Stamp::now(&self.path);
        let mut stamp = self.stamp.lock().unwrap_or_else(|e| e.into_inner());
        if now.is_some() && now == *stamp {
            return true;
        }
        let (fp, fresh) = fingerprint(&self.path);
        if fp != self.fingerprint {
            return false;
        }
        *stamp = fresh;
        true
    }
}

/// What a definition's check needs: the project's guard and the definition it is about (None:
/// something the trusted project started without defining it, such as a language server found
/// on PATH, which stops once any project file changed). Default: no check (the user's own).
/// Always equal to another (a server is not restarted because its check was rebuilt).
#[derive(Debug, Clone, Default)]
pub(crate) struct Check {
    guard: Guard,
    what: Option<(What, String)>,
}

impl Check {
    pub(crate) fn new(guard: &Guard, what: What, id: &str) -> Check {
        Check {
            guard: guard.clone(),
            what: Some((what, id.to_string())),
        }
    }

    /// The check of what the trusted project starts without defining it.
    pub(crate) fn project(guard: &Guard) -> Check {
        Check {
            guard: guard.clone(),
            what: None,
        }
    }

    /// See [`Guard::check`].
    pub(crate) fn check(&self) -> Result<(), Changed> {
        match (&self.what, &self.guard.0) {
            (Some((what, id)), _) => self.guard.check(*what, id),
            (None, Some(inner)) => inner.broken.get().cloned().map_or(Ok(()), Err),
            (None, None) => Ok(()),
        }
    }
}

impl PartialEq for Check {
    fn eq(&self, _: &Check) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_written_with_blanks_around_it_is_still_watched() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a.sh");
        std::fs::write(&a, "echo a\n").unwrap();
        let mut base = Baseline::default();
        base.def(key(What::Hook, "  ./a.sh \n"), std::slice::from_ref(&a));
        let g = Guard::new(t.path(), &base);
        assert!(g.check(What::Hook, "./a.sh").is_ok());
        std::fs::write(&a, "echo evil\n").unwrap();
        assert!(g.check(What::Hook, "./a.sh").is_err());
    }

    #[test]
    fn a_changed_file_stops_every_project_definition_and_an_unchanged_one_costs_a_stat() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let a = root.join("a.sh");
        let b = root.join("b.sh");
        std::fs::write(&a, "echo a\n").unwrap();
        std::fs::write(&b, "echo b\n").unwrap();
        let mut base = Baseline::default();
        base.def(key(What::Hook, "./a.sh"), std::slice::from_ref(&a));
        base.def(key(What::Mcp, "srv"), std::slice::from_ref(&b));
        base.def(key(What::Hook, "echo inline"), &[]);
        let g = Guard::new(root, &base);
        assert!(g.check(What::Hook, "./a.sh").is_ok());
        assert!(g.check(What::Hook, "not the project's").is_ok());
        // Rewritten with the same bytes: the stamp changed, the hash did not.
        std::fs::write(&a, "echo a\n").unwrap();
        assert!(g.check(What::Hook, "./a.sh").is_ok());
        // The cost of the check of an unchanged file: one stat.
        let n = 10_000;
        let started = std::time::Instant::now();
        for _ in 0..n {
            g.check(What::Hook, "./a.sh").unwrap();
        }
        let per_call = started.elapsed() / n;
        crate::ewriteln!("guard check of an unchanged file: {per_call:?} per call");
        assert!(
            per_call < std::time::Duration::from_millis(1),
            "{per_call:?}"
        );
        std::fs::write(&b, "echo evil\n").unwrap();
        let e = g.check(What::Mcp, "srv").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("b.sh changed since the project was trusted"),
            "{e}"
        );
        // From then on nothing of the project runs, whatever its files; the user's do.
        assert_eq!(g.check(What::Hook, "./a.sh").unwrap_err(), e);
        assert!(g.check(What::Hook, "echo inline").is_err());
        assert!(g.check(What::Lsp, "the user's").is_ok());
        // An untrusted project's guard is inactive: nothing of it runs anyway.
        assert!(Guard::inactive().check(What::Hook, "./a.sh").is_ok());
    }
}
