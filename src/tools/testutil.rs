//! Test helpers: a temporary project directory, an in-memory read tracker and a context.

use super::{ReadTracker, ToolCtx};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

#[derive(Default)]
pub struct MapTracker(Mutex<HashMap<PathBuf, i64>>);

impl ReadTracker for MapTracker {
    fn record_read(&self, path: &Path, mtime_ns: i64) {
        self.0.lock().unwrap().insert(path.to_path_buf(), mtime_ns);
    }
    fn last_read(&self, path: &Path) -> Option<i64> {
        self.0.lock().unwrap().get(path).copied()
    }
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    pub reads: MapTracker,
    pub cancel: Arc<AtomicBool>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        Fixture {
            _dir: dir,
            root,
            reads: MapTracker::default(),
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file (creating parent directories).
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Moves a file's modification time `secs` seconds into the past (makes mtime order and
    /// "changed since read" deterministic regardless of timestamp granularity).
    pub fn age(&self, rel: &str, secs: u64) {
        let f = fs::File::options()
            .write(true)
            .open(self.path(rel))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    pub fn ctx(&self) -> ToolCtx<'_> {
        ToolCtx {
            cwd: &self.root,
            project_root: &self.root,
            reads: &self.reads,
            cancel: self.cancel.clone(),
            session_models: None,
        }
    }
}
