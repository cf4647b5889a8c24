//! Test helpers: a temporary project directory, an in-memory read tracker and a context.

use super::todos::Todo;
use super::write::FileChange;
use super::{Content, Files, ReadTracker, SessionState, ToolCtx, ToolError, ToolOutput};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A file change a call reported: path, content before, content after.
pub(crate) type Change = (PathBuf, Option<Vec<u8>>, Option<Vec<u8>>);

/// The session of a test, in memory: reads, the task list and the file changes reported.
#[derive(Default)]
pub(crate) struct MapTracker {
    reads: Mutex<HashMap<PathBuf, i64>>,
    todos: Mutex<Vec<Todo>>,
    pub changes: Mutex<Vec<Change>>,
}

impl ReadTracker for MapTracker {
    fn record_read(&self, path: &Path, mtime_ns: i64) {
        self.reads
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), mtime_ns);
    }
    fn last_read(&self, path: &Path) -> Option<i64> {
        self.reads.lock().unwrap().get(path).copied()
    }
}

impl SessionState for MapTracker {
    fn session_id(&self) -> &str {
        "test-session"
    }
    fn todos(&self) -> Result<Vec<Todo>, ToolError> {
        Ok(self.todos.lock().unwrap().clone())
    }
    fn set_todos(&self, todos: &[Todo]) -> Result<(), ToolError> {
        *self.todos.lock().unwrap() = todos.to_vec();
        Ok(())
    }
    fn file_changed(&self, path: &Path, before: Content, after: Content) {
        let bytes = |c: Content| match c {
            Content::Bytes(b) => Some(b.to_vec()),
            Content::Absent => None,
            Content::Omitted => Some(b"(omitted)".to_vec()),
        };
        self.changes
            .lock()
            .unwrap()
            .push((path.to_path_buf(), bytes(before), bytes(after)));
    }
}

/// An editor's buffers: reads see `buffers` (a path it has no buffer of is an error), writes
/// are recorded and land in `buffers`, never on disk.
#[derive(Default)]
pub(crate) struct Buffers {
    pub buffers: Mutex<HashMap<PathBuf, String>>,
    pub written: Mutex<Vec<FileChange>>,
}

impl Files for Buffers {
    fn read(&self, path: &Path) -> Option<Result<String, ToolError>> {
        let b = self.buffers.lock().unwrap();
        Some(b.get(path).cloned().ok_or_else(|| "no such buffer".into()))
    }
    fn write(&self, change: &FileChange) -> Option<Result<(), ToolError>> {
        self.written.lock().unwrap().push(change.clone());
        let mut b = self.buffers.lock().unwrap();
        b.insert(change.path.clone(), change.new.clone());
        Some(Ok(()))
    }
}

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    pub reads: MapTracker,
    pub cancel: Arc<AtomicBool>,
    pub skills: super::SkillFiles,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        Fixture {
            _dir: dir,
            root,
            reads: MapTracker::default(),
            cancel: Arc::new(AtomicBool::new(false)),
            skills: super::SkillFiles::default(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file (creating parent directories).
    pub(crate) fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Moves a file's modification time `secs` seconds into the past (makes mtime order and
    /// "changed since read" deterministic regardless of timestamp granularity).
    pub(crate) fn age(&self, rel: &str, secs: u64) {
        let f = fs::File::options()
            .write(true)
            .open(self.path(rel))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    /// Creates a FIFO (reading one blocks until a writer appears).
    pub(crate) fn mkfifo(&self, rel: &str) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        let p = self.path(rel);
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        p
    }

    /// Creates a symbolic link `rel` pointing at `target`.
    pub(crate) fn symlink(&self, target: &Path, rel: &str) -> PathBuf {
        let p = self.path(rel);
        std::os::unix::fs::symlink(target, &p).unwrap();
        p
    }

    /// A context whose project (and working directory) is the subdirectory `rel`, so the rest of
    /// the fixture is outside the project.
    pub(crate) fn ctx_in<'a>(&'a self, project: &'a Path) -> ToolCtx<'a> {
        ToolCtx {
            cwd: project,
            project_root: project,
            ..self.ctx()
        }
    }

    pub(crate) fn ctx(&self) -> ToolCtx<'_> {
        ToolCtx {
            cwd: &self.root,
            project_root: &self.root,
            reads: &self.reads,
            session: &self.reads,
            images: true,
            cancel: self.cancel.clone(),
            session_models: None,
            diagnostics: None,
            shell_env_allow: &[],
            env: &NO_ENV,
            env_file: None,
            files: None,
            skills: &self.skills,
            bounds: &NO_BOUNDS,
            sandbox: None,
        }
    }
}

static NO_BOUNDS: super::confine::Bounds = super::confine::Bounds {
    jail: None,
    data_dirs: Vec::new(),
    guarded_dirs: Vec::new(),
    guarded_files: Vec::new(),
    read_denied: Vec::new(),
};

static NO_ENV: std::sync::LazyLock<crate::env::Overlay> =
    std::sync::LazyLock::new(Default::default);

static NO_SKILLS: super::SkillFiles = super::SkillFiles {
    dirs: Vec::new(),
    builtin: Vec::new(),
};

/// Runs `f` with a fresh context for the project `root` on a thread, and fails the test when it
/// takes longer than `secs` (a read that blocks forever would otherwise hang the test run).
pub(crate) fn within<T: Send + 'static>(
    secs: u64,
    root: &Path,
    f: impl FnOnce(&ToolCtx) -> T + Send + 'static,
) -> T {
    let root = root.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let reads = MapTracker::default();
        let ctx = ToolCtx {
            cwd: &root,
            project_root: &root,
            reads: &reads,
            session: &reads,
            images: true,
            cancel: Arc::new(AtomicBool::new(false)),
            session_models: None,
            diagnostics: None,
            shell_env_allow: &[],
            env: &NO_ENV,
            env_file: None,
            files: None,
            skills: &NO_SKILLS,
            bounds: &NO_BOUNDS,
            sandbox: None,
        };
        let _ = tx.send(f(&ctx));
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the call did not finish (blocked)")
}

/// A tool's result as the model sees it (`ToolError`s become error outputs).
pub(crate) trait Out {
    fn out(self) -> ToolOutput;
}

impl Out for Result<ToolOutput, super::ToolError> {
    fn out(self) -> ToolOutput {
        self.unwrap_or_else(|e| ToolOutput::error(e.to_string()))
    }
}
