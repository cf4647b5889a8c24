//! Language servers (crush(1) LANGUAGE SERVERS): the client side of the Language Server
//! Protocol, on threads, for the tools that read, edit and navigate code.
//!
//! - `Manager` holds the session's servers (configured ones, and the well-known ones found on
//!   PATH) and starts each lazily, on its own thread, the first time a tool touches a file of
//!   its type. A server that fails to start, dies or stops answering gives one warning and is
//!   not started again in the session (until `restart`).
//! - A server's root is the nearest directory between the file and the project root holding
//!   one of its root markers; else the project root (a detected server needs a marker).
//! - After an edit, `changed` sends the new text and waits for the server's diagnostics of
//!   that file: the first fresh publish, then a quiet settle window, never longer than the
//!   server's timeout. A server still at its start-up work (nothing published yet) gets up to
//!   its timeout for that first publish, once. Nothing waits when no server handles the file.
//!
//! The module takes plain values (`ServerSpec`, `Timing`); the configuration builds them.

mod client;
mod error;
pub(crate) mod known;
pub(crate) mod text;
mod wire;

pub(crate) use client::{Client, Diagnostic, FileDiagnostics, RpcError};
pub(crate) use error::{LspError, NotRunning, StartError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a wait looks at its cancel flag.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(50);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One server as configured (or detected).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Added to crush's environment.
    pub env: Vec<(String, String)>,
    /// Extensions or language ids (empty: every file).
    pub filetypes: Vec<String>,
    pub root_markers: Vec<String>,
    /// `initializationOptions` of `initialize`.
    pub init_options: Value,
    /// Settings: `workspace/didChangeConfiguration` and the answers to
    /// `workspace/configuration`.
    pub options: Value,
    /// Bounds start-up, each request and the wait for diagnostics after an edit.
    pub timeout: Duration,
    /// Found on PATH (`options.auto_lsp`) rather than configured: it handles only files under
    /// one of its root markers, and only where no configured server handles the file.
    pub detected: bool,
    /// Checked before each (re)start: a project server's files are as trusted.
    pub check: crate::guard::Check,
}

/// How long an edit waits for diagnostics (each bounded by the server's timeout).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Timing {
    /// The quiet period after the last publish that ends the wait.
    pub settle: Duration,
    /// How long to wait for the first publish about the edited file, once the server is warm
    /// (`Client::warm`; before, the server's timeout).
    pub first: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            settle: Duration::from_millis(300),
            first: Duration::from_secs(3),
        }
    }
}

enum SlotState {
    Idle,
    Starting { root: PathBuf, open: Vec<PathBuf> },
    Ready(Arc<Client>),
    Failed { why: String, root: Option<PathBuf> },
    Stopped,
}

struct Slot {
    spec: ServerSpec,
    state: Mutex<SlotState>,
    changed: Condvar,
    /// The root found for each directory a file was in (see `Manager::root_for`).
    roots: Mutex<std::collections::HashMap<PathBuf, Option<PathBuf>>>,
}

/// A server's state, for `crush lsp list`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Status {
    pub name: String,
    pub command: String,
    pub detected: bool,
    pub filetypes: Vec<String>,
    /// idle (starts when a file of its type is touched), starting, ready, failed, stopped.
    pub state: &'static str,
    pub error: Option<String>,
    pub root: Option<PathBuf>,
    /// The server's own name and version.
    pub server: Option<String>,
}

/// A server `restart` stopped and started again: its name, and why it is not running when it
/// failed.
pub(crate) type Restarted = (String, Result<(), NotRunning>);

/// The session's language servers.
pub(crate) struct Manager {
    project_root: PathBuf,
    timing: Timing,
    debug: bool,
    slots: Vec<Arc<Slot>>,
    warnings: Arc<Mutex<Vec<String>>>,
}

/// Whether `dir` holds `marker` (a name, or a pattern with `*`).
fn has_marker(dir: &Path, marker: &str) -> bool {
    if !marker.contains('*') {
        return dir.join(marker).exists();
    }
    let (pre, post) = marker.split_once('*').unwrap_or((marker, ""));
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok()).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
        })
    })
}

fn warn(warnings: &Mutex<Vec<String>>, line: String) {
    crate::log::warn(&line);
    lock(warnings).push(line);
}

/// Starts the server of `slot` in `root` (blocking, bounded by its timeout) and opens the files
/// asked for meanwhile.
fn start_slot(slot: &Arc<Slot>, root: PathBuf, debug: bool, warnings: &Arc<Mutex<Vec<String>>>) {
    let name = slot.spec.name.clone();
    let weak = Arc::downgrade(slot);
    let w = warnings.clone();
    let dead_root = root.clone();
    let on_dead = Box::new(move |why: &str| {
        warn(
            &w,
            format!(
                "LSP server {name} {why}; it is not started again in this session (lsp_restart does)"
            ),
        );
        if let Some(s) = weak.upgrade() {
            let mut st = lock(&s.state);
            if matches!(*st, SlotState::Ready(_)) {
                *st = SlotState::Failed {
                    why: why.to_string(),
                    root: Some(dead_root.clone()),
                };
            }
            s.changed.notify_all();
        }
    });
    let started = match slot.spec.check.check() {
        Ok(()) => Client::start(&slot.spec, &root, debug, on_dead),
        Err(e) => Err(StartError::Changed(e)),
    };
    let mut st = lock(&slot.state);
    let open = match &mut *st {
        SlotState::Starting { open, .. } => std::mem::take(open),
        // Stopped meanwhile (crush is ending): the new server goes too.
        _ => {
            if let Ok(c) = started {
                c.kill();
            }
            return;
        }
    };
    match started {
        Ok(c) if c.dead().is_none() => {
            let c = Arc::new(c);
            *st = SlotState::Ready(c.clone());
            drop(st);
            crate::log::info(&format!(
                "LSP server {} started in {}",
                slot.spec.name,
                root.display()
            ));
            for p in open {
                c.open(&p);
            }
        }
        Ok(c) => {
            *st = SlotState::Failed {
                why: c.dead().unwrap_or_default(),
                root: Some(root),
            };
        }
        Err(why) => {
            warn(
                warnings,
                format!(
                    "LSP server {} failed to start: {why}; it is not tried again in this session (lsp_restart does)",
                    slot.spec.name
                ),
            );
            *st = SlotState::Failed {
                why: why.to_string(),
                root: Some(root),
            };
        }
    }
    slot.changed.notify_all();
}

impl Manager {
    pub(crate) fn new(
        project_root: &Path,
        specs: Vec<ServerSpec>,
        timing: Timing,
        debug: bool,
    ) -> Manager {
        Manager {
            project_root: std::fs::canonicalize(project_root)
                .unwrap_or_else(|_| project_root.to_path_buf()),
            timing,
            debug,
            slots: specs
                .into_iter()
                .map(|spec| {
                    Arc::new(Slot {
                        spec,
                        state: Mutex::new(SlotState::Idle),
                        changed: Condvar::new(),
                        roots: Mutex::default(),
                    })
                })
                .collect(),
            warnings: Arc::default(),
        }
    }

    /// Whether no server could ever start.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The servers' names, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.spec.name.clone()).collect()
    }

    /// The root the server of `slot` would have for `path` (None: it does not handle the
    /// file). Looked up once per directory.
    fn root_for(&self, slot: &Slot, path: &Path) -> Option<PathBuf> {
        let spec = &slot.spec;
        if !path.starts_with(&self.project_root) || !text::handles(&spec.filetypes, path) {
            return None;
        }
        let parent = path.parent()?;
        if let Some(r) = lock(&slot.roots).get(parent) {
            return r.clone();
        }
        let mut root = None;
        let mut dir = Some(parent);
        while let Some(d) = dir {
            if !d.starts_with(&self.project_root) {
                break;
            }
            if spec.root_markers.iter().any(|m| has_marker(d, m)) {
                root = Some(d.to_path_buf());
                break;
            }
            dir = d.parent();
        }
        let root = root.or_else(|| (!spec.detected).then(|| self.project_root.clone()));
        lock(&slot.roots).insert(parent.to_path_buf(), root.clone());
        root
    }

    /// The servers that handle `path`, with their roots: the configured ones, else the
    /// detected ones.
    fn for_file(&self, path: &Path) -> Vec<(Arc<Slot>, PathBuf)> {
        let pick = |detected: bool| -> Vec<(Arc<Slot>, PathBuf)> {
            self.slots
                .iter()
                .filter(|s| s.spec.detected == detected)
                .filter_map(|s| self.root_for(s, path).map(|r| (s.clone(), r)))
                .collect()
        };
        let configured = pick(false);
        if configured.is_empty() {
            pick(true)
        } else {
            configured
        }
    }

    /// Whether some server handles `path`.
    pub(crate) fn handles(&self, path: &Path) -> bool {
        !self.for_file(path).is_empty()
    }

    /// Starts the server of `slot` if it is idle; the running client, if any. `open` is opened
    /// now, or as soon as the server is ready.
    fn ensure(&self, slot: &Arc<Slot>, root: &Path, open: Option<&Path>) -> Option<Arc<Client>> {
        let mut st = lock(&slot.state);
        match &mut *st {
            SlotState::Ready(c) => {
                let c = c.clone();
                drop(st);
                if let Some(p) = open {
                    c.open(p);
                }
                return Some(c);
            }
            SlotState::Starting { open: list, .. } => {
                if let Some(p) = open {
                    list.push(p.to_path_buf());
                }
                return None;
            }
            SlotState::Failed { .. } | SlotState::Stopped => return None,
            SlotState::Idle => {}
        }
        *st = SlotState::Starting {
            root: root.to_path_buf(),
            open: open.map(|p| vec![p.to_path_buf()]).unwrap_or_default(),
        };
        drop(st);
        let (s, root, debug, w) = (
            slot.clone(),
            root.to_path_buf(),
            self.debug,
            self.warnings.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("lsp-start".into())
            .spawn(move || start_slot(&s, root, debug, &w));
        if let Err(e) = spawned {
            *lock(&slot.state) = SlotState::Failed {
                why: format!("cannot start a thread: {e}"),
                root: None,
            };
        }
        None
    }

    /// Waits (until `deadline`, or until `cancel` is set) for the server of `slot` to be ready.
    fn wait_ready(
        &self,
        slot: &Slot,
        deadline: Instant,
        cancel: &AtomicBool,
    ) -> Option<Arc<Client>> {
        let mut st = lock(&slot.state);
        loop {
            match &*st {
                SlotState::Ready(c) => return c.dead().is_none().then(|| c.clone()),
                SlotState::Starting { .. } => {}
                _ => return None,
            }
            let now = Instant::now();
            if now >= deadline || cancel.load(Ordering::Relaxed) {
                return None;
            }
            st = slot
                .changed
                .wait_timeout(st, (deadline - now).min(CANCEL_POLL))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// A file was read: the servers for its type start (if they have not), and it is opened.
    /// Nothing waits.
    pub(crate) fn open(&self, path: &Path) {
        for (slot, root) in self.for_file(path) {
            self.ensure(&slot, &root, Some(path));
        }
    }

    /// Files were written: each server for their type (started if needed, waited for) gets
    /// the new text, and its diagnostics are waited for (see `Timing`), all within the
    /// server's timeout from now. False when no server handles any of them (nothing waited).
    pub(crate) fn changed(&self, paths: &[&Path], cancel: &AtomicBool) -> bool {
        let mut targets: Vec<(Arc<Slot>, PathBuf, Vec<&Path>)> = Vec::new();
        for p in paths {
            for (slot, root) in self.for_file(p) {
                match targets.iter_mut().find(|t| Arc::ptr_eq(&t.0, &slot)) {
                    Some(t) => t.2.push(p),
                    None => targets.push((slot, root, vec![*p])),
                }
            }
        }
        if targets.is_empty() {
            return false;
        }
        let start = Instant::now();
        std::thread::scope(|scope| {
            for (slot, root, files) in &targets {
                scope.spawn(move || {
                    self.ensure(slot, root, None);
                    let deadline = start + slot.spec.timeout;
                    let Some(c) = self.wait_ready(slot, deadline, cancel) else {
                        return;
                    };
                    let mut mark = None;
                    for f in files {
                        let m = c.sync(f);
                        mark.get_or_insert(m);
                    }
                    let first = if c.warm() {
                        Instant::now() + self.timing.first
                    } else {
                        deadline
                    };
                    let only = match files.as_slice() {
                        [one] => Some(*one),
                        _ => None,
                    };
                    let synced = Instant::now();
                    let w = c.wait_diagnostics(
                        only,
                        mark.unwrap_or(0),
                        first,
                        self.timing.settle,
                        deadline,
                        cancel,
                    );
                    let ms = |d: Duration| format!("{} ms", d.as_millis());
                    crate::log::info(&format!(
                        "LSP server {}: {} changed; first diagnostics after {}, the wait ended {} after the last publish, {} in all ({} waiting for the server)",
                        slot.spec.name,
                        files
                            .iter()
                            .map(|f| f.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        w.first.map_or("none".into(), ms),
                        w.after_last.map_or("-".into(), ms),
                        ms(start.elapsed()),
                        ms(synced - start)
                    ));
                });
            }
        });
        true
    }

    /// The running server for `path` (started and waited for, bounded by its timeout), with
    /// the file open. Err says why there is none.
    pub(crate) fn client_for(
        &self,
        path: &Path,
        cancel: &AtomicBool,
    ) -> Result<Arc<Client>, LspError> {
        let targets = self.for_file(path);
        if targets.is_empty() {
            return Err(LspError::NoServerFor {
                path: path.to_path_buf(),
                configured: self.names(),
            });
        }
        let mut why = Vec::new();
        for (slot, root) in &targets {
            self.ensure(slot, root, Some(path));
            let deadline = Instant::now() + slot.spec.timeout;
            if let Some(c) = self.wait_ready(slot, deadline, cancel) {
                c.open(path);
                return Ok(c);
            }
            why.push(match &*lock(&slot.state) {
                SlotState::Failed { why, .. } => format!("{}: {why}", slot.spec.name),
                SlotState::Starting { .. } => format!(
                    "{} is still starting after {:.1}s",
                    slot.spec.name,
                    slot.spec.timeout.as_secs_f64()
                ),
                _ => format!("{} is not running", slot.spec.name),
            });
        }
        Err(LspError::Unavailable {
            path: path.to_path_buf(),
            why,
        })
    }

    /// The running servers.
    pub(crate) fn running(&self) -> Vec<Arc<Client>> {
        self.slots
            .iter()
            .filter_map(|s| match &*lock(&s.state) {
                SlotState::Ready(c) if c.dead().is_none() => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// Files may have changed behind the servers' back (a shell command ran): open files that
    /// changed on disk are sent again. Nothing waits.
    pub(crate) fn resync(&self) {
        for c in self.running() {
            c.resync();
        }
    }

    /// Every running server re-reads its open files and its diagnostics are waited for (the
    /// settle window after the last publish, bounded by its timeout).
    pub(crate) fn refresh(&self, cancel: &AtomicBool) {
        let start = Instant::now();
        std::thread::scope(|scope| {
            for c in self.running() {
                scope.spawn(move || {
                    let mark = c.sync_marker();
                    if c.resync() == 0 {
                        return;
                    }
                    let deadline = start + c.timeout();
                    let first = Instant::now() + self.timing.first;
                    c.wait_diagnostics(None, mark, first, self.timing.settle, deadline, cancel);
                });
            }
        });
    }

    /// Every running server's diagnostics, with its name.
    pub(crate) fn diagnostics(&self) -> Vec<(String, FileDiagnostics)> {
        let mut out = Vec::new();
        for c in self.running() {
            for d in c.diagnostics() {
                out.push((c.name().to_string(), d));
            }
        }
        out
    }

    /// Stops and starts again the server `name` (every server that was started when None),
    /// reopening its files; waits for each (bounded by its timeout). One line per server.
    pub(crate) fn restart(&self, name: Option<&str>) -> Result<Vec<Restarted>, LspError> {
        let chosen: Vec<Arc<Slot>> = match name {
            Some(n) => {
                let Some(s) = self.slots.iter().find(|s| s.spec.name == n) else {
                    return Err(LspError::NoServer {
                        name: n.to_string(),
                        known: self.names(),
                    });
                };
                vec![s.clone()]
            }
            None => self
                .slots
                .iter()
                .filter(|s| !matches!(*lock(&s.state), SlotState::Idle))
                .cloned()
                .collect(),
        };
        let mut out = Vec::new();
        for slot in chosen {
            let old = std::mem::replace(&mut *lock(&slot.state), SlotState::Stopped);
            let (root, files) = match old {
                SlotState::Ready(c) => {
                    let files = c.open_files();
                    c.shutdown(slot.spec.timeout.min(Duration::from_secs(2)));
                    (Some(c.root().to_path_buf()), files)
                }
                SlotState::Failed { root, .. } => (root, Vec::new()),
                SlotState::Starting { root, open } => (Some(root), open),
                SlotState::Idle | SlotState::Stopped => (None, Vec::new()),
            };
            let root = root.unwrap_or_else(|| self.project_root.clone());
            *lock(&slot.state) = SlotState::Starting {
                root: root.clone(),
                open: files,
            };
            start_slot(&slot, root, self.debug, &self.warnings);
            let r = match &*lock(&slot.state) {
                SlotState::Ready(_) => Ok(()),
                SlotState::Failed { why, .. } => Err(NotRunning(Some(why.clone()))),
                _ => Err(NotRunning(None)),
            };
            out.push((slot.spec.name.clone(), r));
        }
        Ok(out)
    }

    /// Starts every server that can start without a file (configured ones in the project
    /// root, detected ones when the project root holds a root marker) and waits for each,
    /// bounded by its timeout (`crush lsp list`).
    pub(crate) fn start_all(&self) {
        for slot in &self.slots {
            if let Some(r) = self.project_start_root(slot) {
                self.ensure(slot, &r, None);
            }
        }
        for slot in &self.slots {
            self.wait_ready(
                slot,
                Instant::now() + slot.spec.timeout,
                &AtomicBool::new(false),
            );
        }
    }

    /// Where the server of `slot` starts without a file: the project root (a detected server
    /// only when the project root holds one of its root markers).
    fn project_start_root(&self, slot: &Slot) -> Option<PathBuf> {
        let marked = || {
            slot.spec
                .root_markers
                .iter()
                .any(|m| has_marker(&self.project_root, m))
        };
        (!slot.spec.detected || marked()).then(|| self.project_root.clone())
    }

    /// Starts the servers that have not started and can start without a file (as `start_all`)
    /// and waits for each, bounded by its timeout and ended by `cancel`. The ones that started.
    pub(crate) fn start_idle(&self, cancel: &AtomicBool) -> Vec<Arc<Client>> {
        let start = Instant::now();
        let idle: Vec<&Arc<Slot>> = self
            .slots
            .iter()
            .filter(|s| matches!(*lock(&s.state), SlotState::Idle))
            .filter(|s| match self.project_start_root(s) {
                Some(r) => {
                    self.ensure(s, &r, None);
                    true
                }
                None => false,
            })
            .collect();
        idle.into_iter()
            .filter_map(|s| self.wait_ready(s, start + s.spec.timeout, cancel))
            .collect()
    }

    /// For the diagnostics of the whole project: the servers that had not started start
    /// (`start_idle`) and their first diagnostics are waited for (`Timing::first`, then the
    /// settle window); the running ones re-read their open files (`refresh`). Each bounded by
    /// its server's timeout, and ended by `cancel`.
    pub(crate) fn start_for_project(&self, cancel: &AtomicBool) {
        let fresh = self.start_idle(cancel);
        std::thread::scope(|scope| {
            scope.spawn(|| self.refresh(cancel));
            for c in &fresh {
                scope.spawn(move || {
                    let now = Instant::now();
                    let (first, settle) = (now + self.timing.first, self.timing.settle);
                    c.wait_diagnostics(None, 0, first, settle, now + c.timeout(), cancel);
                });
            }
        });
    }

    /// Each server's state.
    pub(crate) fn statuses(&self) -> Vec<Status> {
        self.slots
            .iter()
            .map(|s| {
                let spec = &s.spec;
                let mut st = Status {
                    name: spec.name.clone(),
                    command: std::iter::once(spec.command.as_str())
                        .chain(spec.args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" "),
                    detected: spec.detected,
                    filetypes: spec.filetypes.clone(),
                    state: "idle",
                    error: None,
                    root: None,
                    server: None,
                };
                match &*lock(&s.state) {
                    SlotState::Idle => {}
                    SlotState::Starting { root, .. } => {
                        st.state = "starting";
                        st.root = Some(root.clone());
                    }
                    SlotState::Ready(c) => {
                        st.state = if c.dead().is_some() {
                            "failed"
                        } else {
                            "ready"
                        };
                        st.error = c.dead();
                        st.root = Some(c.root().to_path_buf());
                        st.server = c.server_info();
                    }
                    SlotState::Failed { why, root } => {
                        st.state = "failed";
                        st.error = Some(why.clone());
                        st.root = root.clone();
                    }
                    SlotState::Stopped => st.state = "stopped",
                }
                st
            })
            .collect()
    }

    /// The warnings since the last call (a server that failed, died or hung), one line each.
    pub(crate) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.warnings))
    }

    /// Stops every server (`shutdown` and `exit`, then its process group), in parallel, each
    /// within its timeout and at most 2 s.
    pub(crate) fn shutdown(&self) {
        let clients: Vec<Arc<Client>> = self
            .slots
            .iter()
            .filter_map(
                |s| match std::mem::replace(&mut *lock(&s.state), SlotState::Stopped) {
                    SlotState::Ready(c) => Some(c),
                    _ => None,
                },
            )
            .collect();
        std::thread::scope(|scope| {
            for c in &clients {
                scope.spawn(move || c.shutdown(c.timeout().min(Duration::from_secs(2))));
            }
        });
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.shutdown();
    }
}
