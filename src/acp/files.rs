//! The file tools' reads and writes through the editor (`fs/read_text_file`,
//! `fs/write_text_file`) when it offers them, and the record of every change a call made,
//! which the editor is shown as diffs of the content crush wrote.

use super::rpc::{AskError, Peer};
use crate::tools::write::FileChange;
use crate::tools::{Files, ToolError};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a file request may wait for the editor (`CRUSH_ACP_FS_TIMEOUT_MS`, default 30 s).
fn fs_timeout() -> Duration {
    let ms = std::env::var("CRUSH_ACP_FS_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(30_000);
    Duration::from_millis(ms)
}

/// What the editor offers, from its `clientCapabilities.fs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FsCaps {
    pub read: bool,
    pub write: bool,
}

pub(super) struct EditorFiles {
    peer: Arc<Peer>,
    session_id: String,
    caps: FsCaps,
    cancel: Arc<AtomicBool>,
    timeout: Duration,
    /// Changes written since the last `take_changes`.
    changes: Mutex<Vec<FileChange>>,
}

impl EditorFiles {
    pub(super) fn new(
        peer: Arc<Peer>,
        session_id: String,
        caps: FsCaps,
        cancel: Arc<AtomicBool>,
    ) -> EditorFiles {
        EditorFiles {
            peer,
            session_id,
            caps,
            cancel,
            timeout: fs_timeout(),
            changes: Mutex::new(Vec::new()),
        }
    }

    /// The changes written since the last call (those of the call that just ended).
    pub(super) fn take_changes(&self) -> Vec<FileChange> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// `method` asked of the editor. What it refuses, or fails to answer, is the model's to
    /// hear, as a file it cannot read would be.
    fn ask(&self, method: &str, params: serde_json::Value) -> Result<serde_json::Value, ToolError> {
        self.peer
            .request(method, params, &self.cancel, Some(self.timeout))
            .map_err(|e| match e {
                AskError::Canceled => "the user canceled the turn".into(),
                e => ToolError::RespondToModel(e.to_string()),
            })
    }
}

impl Files for EditorFiles {
    fn read(&self, path: &Path) -> Option<Result<String, ToolError>> {
        if !self.caps.read {
            return None;
        }
        let r = self.ask(
            "fs/read_text_file",
            json!({"sessionId": self.session_id, "path": path.display().to_string()}),
        );
        Some(
            r.and_then(|v| match v.get("content").and_then(|c| c.as_str()) {
                Some(c) => Ok(c.to_string()),
                None => Err("the editor's answer has no content".into()),
            }),
        )
    }

    fn write(&self, change: &FileChange) -> Option<Result<(), ToolError>> {
        let record = || {
            self.changes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(change.clone())
        };
        if !self.caps.write {
            // crush writes the disk itself; the editor is still shown the change.
            record();
            return None;
        }
        let r = self.ask(
            "fs/write_text_file",
            json!({"sessionId": self.session_id, "path": change.path.display().to_string(),
                "content": change.new}),
        );
        if r.is_ok() {
            record();
        }
        Some(r.map(|_| ()))
    }
}
