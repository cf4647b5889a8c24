//! The session as a Claude Code transcript (JSONL, one line per message) for hooks in Claude
//! Code's shape, whose payloads carry its `transcript_path` (crush(1) HOOKS). It lives in the
//! project data directory (`transcripts/<session id>.jsonl`) and is brought up to date after
//! every step and before every hook that may read it; the session store stays the record.

use crate::hooks::claude::{LineContext, transcript_line};
use crate::store::Store;
use crate::tools::Tool;
use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The transcripts of one agent's sessions.
#[derive(Debug, Clone)]
pub(crate) struct Transcript {
    dir: PathBuf,
    /// A sub-agent's transcript (`isSidechain`).
    sidechain: bool,
    /// The session whose file this process wrote, how many messages it holds, and the last
    /// message's id.
    written: RefCell<Option<(String, usize, Option<String>)>>,
}

impl Transcript {
    /// Transcripts in `<data dir>/transcripts`.
    pub(crate) fn new(data_dir: &Path, sidechain: bool) -> Transcript {
        Transcript {
            dir: data_dir.join("transcripts"),
            sidechain,
            written: RefCell::new(None),
        }
    }

    /// A sub-agent's transcripts, next to this one's.
    pub(crate) fn for_sub_agent(&self) -> Transcript {
        Transcript {
            dir: self.dir.clone(),
            sidechain: true,
            written: RefCell::new(None),
        }
    }

    /// The file of `session_id`.
    pub(crate) fn path(&self, session_id: &str) -> PathBuf {
        self.dir.join(format!("{session_id}.jsonl"))
    }

    /// Appends the messages of `session_id` not yet in its file; the first time in this process
    /// the file is written whole. A failure is logged: hooks then read an older transcript.
    pub(crate) fn sync(&self, store: &Store, session_id: &str, cwd: &Path, tools: &[&dyn Tool]) {
        if session_id.is_empty() {
            return;
        }
        if let Err(e) = self.try_sync(store, session_id, cwd, tools) {
            crate::log::warn(&format!(
                "cannot write the transcript {}: {e}",
                self.path(session_id).display()
            ));
        }
    }

    fn try_sync(
        &self,
        store: &Store,
        session_id: &str,
        cwd: &Path,
        tools: &[&dyn Tool],
    ) -> Result<(), TranscriptError> {
        let messages = store.messages(session_id)?;
        let mut written = self.written.borrow_mut();
        let (done, mut parent) = match written.as_ref() {
            Some((s, n, last)) if s == session_id && *n <= messages.len() => (*n, last.clone()),
            _ => (0, None),
        };
        if done == messages.len() && done > 0 {
            return Ok(());
        }
        let mut text = String::new();
        for m in &messages[done..] {
            let at = LineContext {
                session_id,
                cwd,
                parent: parent.as_deref(),
                sidechain: self.sidechain,
                tools,
            };
            if let Some(line) = transcript_line(m, &at) {
                text.push_str(&line.to_string());
                text.push('\n');
                parent = Some(m.id.clone());
            }
        }
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(session_id);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(done > 0)
            .truncate(done == 0)
            .open(&path)?;
        f.write_all(text.as_bytes())?;
        *written = Some((session_id.to_string(), messages.len(), parent));
        Ok(())
    }
}

/// Why the transcript could not be brought up to date.
#[derive(Debug)]
enum TranscriptError {
    Store(crate::store::StoreError),
    Io(std::io::Error),
}

impl std::fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TranscriptError::Store(e) => e.fmt(f),
            TranscriptError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TranscriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TranscriptError::Store(e) => Some(e),
            TranscriptError::Io(e) => Some(e),
        }
    }
}

impl From<crate::store::StoreError> for TranscriptError {
    fn from(e: crate::store::StoreError) -> Self {
        TranscriptError::Store(e)
    }
}

impl From<std::io::Error> for TranscriptError {
    fn from(e: std::io::Error) -> Self {
        TranscriptError::Io(e)
    }
}
