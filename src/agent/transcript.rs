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
pub struct Transcript {
    dir: PathBuf,
    /// A sub-agent's transcript (`isSidechain`).
    sidechain: bool,
    /// The session whose file this process wrote, how many messages it holds, and the last
    /// message's id.
    written: RefCell<Option<(String, usize, Option<String>)>>,
}

impl Transcript {
    /// Transcripts in `<data dir>/transcripts`.
    pub fn new(data_dir: &Path, sidechain: bool) -> Transcript {
        Transcript {
            dir: data_dir.join("transcripts"),
            sidechain,
            written: RefCell::new(None),
        }
    }

    /// A sub-agent's transcripts, next to this one's.
    pub fn for_sub_agent(&self) -> Transcript {
        Transcript {
            dir: self.dir.clone(),
            sidechain: true,
            written: RefCell::new(None),
        }
    }

    /// The file of `session_id`.
    pub fn path(&self, session_id: &str) -> PathBuf {
        self.dir.join(format!("{session_id}.jsonl"))
    }

    /// Appends the messages of `session_id` not yet in its file; the first time in this process
    /// the file is written whole. A failure is logged: hooks then read an older transcript.
    pub fn sync(&self, store: &Store, session_id: &str, cwd: &Path, tools: &[&dyn Tool]) {
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
    ) -> Result<(), String> {
        let messages = store.messages(session_id).map_err(|e| e.to_string())?;
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
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let path = self.path(session_id);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(done > 0)
            .truncate(done == 0)
            .open(&path)
            .map_err(|e| e.to_string())?;
        f.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
        *written = Some((session_id.to_string(), messages.len(), parent));
        Ok(())
    }
}
