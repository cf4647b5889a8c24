//! The session store: SQLite at `<project data>/crush.db`, Crush's tables and columns plus an
//! ordering key per message and an honest `usage` ledger. The store drives nothing and renders
//! nothing.

use crate::llm::{Part, Role, Usage};
use std::fmt;
use std::path::{Path, PathBuf};

pub mod projects;

#[derive(Debug)]
pub enum StoreError {
    /// The database could not be opened or migrated.
    Open { path: PathBuf, message: String },
    /// The database was written by a newer crush.
    TooNew { path: PathBuf, found: i64, supported: i64 },
    NotFound(String),
    Ambiguous { prefix: String, candidates: Vec<String> },
    Sql(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Open { path, message } => {
                write!(f, "cannot open the session store {}: {message}", path.display())
            }
            StoreError::TooNew {
                path,
                found,
                supported,
            } => write!(
                f,
                "the session store {} has schema version {found}, newer than this crush supports ({supported}); upgrade crush",
                path.display()
            ),
            StoreError::NotFound(id) => write!(f, "no session matches '{id}'"),
            StoreError::Ambiguous { prefix, candidates } => write!(
                f,
                "session id '{prefix}' is ambiguous; it matches: {}",
                candidates.join(", ")
            ),
            StoreError::Sql(m) => write!(f, "session store error: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: String,
    pub parent_session_id: Option<String>,
    pub title: String,
    pub message_count: i64,
    /// Running total of input tokens (input + cache read + cache write) over all model calls.
    pub prompt_tokens: i64,
    /// Running total of output tokens.
    pub completion_tokens: i64,
    /// USD over priced calls.
    pub cost: f64,
    /// Tokens in the context at the last model call.
    pub context_tokens: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub id: String,
    pub session_id: String,
    /// Ordering key, unique within the session.
    pub seq: i64,
    pub role: Role,
    pub parts: Vec<Part>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub created_at: i64,
}

/// A message to append.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

/// One model call, for the `usage` ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageRecord {
    pub provider: String,
    pub model: String,
    /// None: the provider reported no usage (unknown, never zero).
    pub usage: Option<Usage>,
    /// USD; None when unpriced.
    pub cost: Option<f64>,
    /// e.g. "catalog", "config", "provider", "unpriced".
    pub price_source: String,
}

pub struct Store {
    #[allow(dead_code)]
    conn: rusqlite::Connection,
}

#[allow(unused_variables)]
impl Store {
    /// Opens (creating if needed) the database, sets WAL, foreign keys and a busy timeout, and
    /// migrates by `PRAGMA user_version` inside a transaction.
    pub fn open(path: &Path) -> Result<Store> {
        todo!()
    }
    pub fn create_session(&self, title: &str, parent: Option<&str>) -> Result<Session> {
        todo!()
    }
    pub fn session(&self, id: &str) -> Result<Option<Session>> {
        todo!()
    }
    /// A full id or a unique prefix of one.
    pub fn resolve_session(&self, id_or_prefix: &str) -> Result<Session> {
        todo!()
    }
    /// Top-level sessions, most recently updated first.
    pub fn list_sessions(&self) -> Result<Vec<Session>> {
        todo!()
    }
    /// The most recently updated top-level session.
    pub fn latest_session(&self) -> Result<Option<Session>> {
        todo!()
    }
    pub fn messages(&self, session_id: &str) -> Result<Vec<StoredMessage>> {
        todo!()
    }
    pub fn add_message(&self, session_id: &str, msg: &NewMessage) -> Result<StoredMessage> {
        todo!()
    }
    /// One finished step in one transaction: its messages (assistant, then tool results), its
    /// usage row (tied to the first assistant message) and the session's running totals.
    pub fn commit_step(
        &self,
        session_id: &str,
        msgs: &[NewMessage],
        usage: Option<&UsageRecord>,
    ) -> Result<Vec<StoredMessage>> {
        todo!()
    }
    pub fn set_title(&self, session_id: &str, title: &str) -> Result<()> {
        todo!()
    }
    pub fn record_read(&self, session_id: &str, path: &Path, mtime_ns: i64) -> Result<()> {
        todo!()
    }
    pub fn last_read(&self, session_id: &str, path: &Path) -> Result<Option<i64>> {
        todo!()
    }
}
