//! The session store: SQLite at `<project data>/crush.db`, shared with Go Crush: its tables as
//! its migrations leave them, plus an ordering key per message, running totals and an honest
//! `usage` ledger. The store drives nothing and renders nothing.

use crate::llm::{Part, Role, Usage};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use files::{Content, FileVersion, MAX_KEPT_BYTES};

mod files;
pub(crate) mod hashid;
pub(crate) mod projects;
mod schema;
pub(crate) mod stats;
mod watchdog;

#[derive(Debug)]
pub(crate) enum StoreError {
    /// The database could not be opened or migrated.
    Open {
        path: PathBuf,
        message: String,
    },
    /// The database was written by a newer crush.
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// A newer Go Crush migrated the database, and some of this program's writes would not fit.
    NewerGoCrush {
        path: PathBuf,
        /// The newest migration recorded in `goose_db_version`.
        found: i64,
        /// The newest one this program knows.
        known: i64,
        /// "table.column" that the writes cannot fill.
        columns: Vec<String>,
    },
    NotFound(String),
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    Sql(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Open { path, message } => {
                write!(
                    f,
                    "cannot open the session store {}: {message}",
                    path.display()
                )
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
            StoreError::NewerGoCrush {
                path,
                found,
                known,
                columns,
            } => write!(
                f,
                "the session store {} was migrated by a newer Go Crush (migration {found}; this \
                 crush knows Go Crush's migrations up to {known}), and crush's writes cannot fill \
                 {}: crush will not write to it. It can still read it (sessions list, show, \
                 export; stats); go on with Go Crush in this project, or use a crush that knows \
                 migration {found}",
                path.display(),
                columns.join(", ")
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

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Session {
    pub id: String,
    pub parent_session_id: Option<String>,
    pub title: String,
    pub message_count: i64,
    /// Go Crush's meaning: input + cache read tokens of the session's last model call (0 after a
    /// summary), which Go Crush's context meter reads.
    pub prompt_tokens: i64,
    /// Go Crush's meaning: output tokens of the session's last model call.
    pub completion_tokens: i64,
    /// Running total of input tokens (input + cache read + cache write) over every call of the
    /// session and its sub-agent sessions.
    pub total_prompt_tokens: i64,
    /// Running total of output tokens, same scope.
    pub total_completion_tokens: i64,
    /// USD over priced calls, same scope.
    pub cost: f64,
    /// Tokens in the context at the last model call.
    pub context_tokens: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredMessage {
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
pub(crate) struct NewMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

/// One model call, for the `usage` ledger.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UsageRecord {
    pub provider: String,
    pub model: String,
    /// None: the provider reported no usage (unknown, never zero).
    pub usage: Option<Usage>,
    /// USD; None when unpriced.
    pub cost: Option<f64>,
    pub price_source: PriceSource,
}

/// Where a call's cost came from, as the ledger's `price_source` column holds it (crush(1)
/// USAGE AND COST).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PriceSource {
    /// Catwalk's prices.
    Catalog,
    /// The user's prices.
    Config,
    /// A flat-rate provider: no cost per call.
    FlatRate,
    /// The model has no price.
    Unpriced,
    /// A priced model whose call reported no usage: the cost is unknown.
    UnknownUsage,
    /// The server reported no usage and crush estimated it: never priced.
    Estimated,
    /// A value this build does not write (another program's row), kept as read.
    Other(String),
}

impl PriceSource {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            PriceSource::Catalog => "catalog",
            PriceSource::Config => "config",
            PriceSource::FlatRate => "flat_rate",
            PriceSource::Unpriced => "unpriced",
            PriceSource::UnknownUsage => "unknown_usage",
            PriceSource::Estimated => "estimated",
            PriceSource::Other(s) => s,
        }
    }

    /// A cost in dollars can be known (neither unpriced nor flat-rate).
    pub(crate) fn is_priced(&self) -> bool {
        !matches!(self, PriceSource::Unpriced | PriceSource::FlatRate)
    }
}

impl From<&str> for PriceSource {
    fn from(s: &str) -> PriceSource {
        match s {
            "catalog" => PriceSource::Catalog,
            "config" => PriceSource::Config,
            "flat_rate" => PriceSource::FlatRate,
            "unpriced" => PriceSource::Unpriced,
            "unknown_usage" => PriceSource::UnknownUsage,
            "estimated" => PriceSource::Estimated,
            other => PriceSource::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for PriceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the `usage` ledger: one model call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UsageRow {
    pub id: i64,
    pub session_id: String,
    /// The first assistant message of the step, if the step had one.
    pub message_id: Option<String>,
    pub provider: String,
    pub model: String,
    /// None: the provider reported no usage.
    pub usage: Option<Usage>,
    /// USD; None when unpriced.
    pub cost: Option<f64>,
    pub price_source: PriceSource,
    /// Unix seconds.
    pub created_at: i64,
}

pub(crate) struct Store {
    /// What the signal watchdog does with the connection if crush is stuck when it ends the
    /// process (`watchdog`). Declared before `conn`, so it is taken back before the connection
    /// closes (fields drop in order).
    _last_word: Option<crate::signal::LastWord>,
    conn: Connection,
    path: PathBuf,
    layout: Layout,
}

/// How to read the file: a database opened for writing has every column; one opened read-only
/// may lack this program's additions (Go Crush made it) or Go Crush's later columns, which read
/// as their defaults.
struct Layout {
    /// The select list read by `session_from_row`.
    sessions: String,
    /// The select list read by `load_messages`.
    messages: String,
    /// ORDER BY of a session's messages.
    message_order: &'static str,
    /// The select list read by the file history.
    files: String,
    usage: bool,
    summary: bool,
}

const SESSION_COLUMNS: &[(&str, &str)] = &[
    ("id", "id"),
    ("parent_session_id", "NULL"),
    ("title", "''"),
    ("message_count", "0"),
    ("prompt_tokens", "0"),
    ("completion_tokens", "0"),
    ("total_prompt_tokens", "0"),
    ("total_completion_tokens", "0"),
    ("cost", "0.0"),
    ("context_tokens", "0"),
    ("created_at", "0"),
    ("updated_at", "0"),
];

const MESSAGE_COLUMNS: &[(&str, &str)] = &[
    ("id", "id"),
    ("session_id", "session_id"),
    // Go Crush's order, for a file without the ordering key.
    ("seq", "ROW_NUMBER() OVER (ORDER BY created_at, rowid)"),
    ("role", "role"),
    ("parts", "'[]'"),
    ("model", "NULL"),
    ("provider", "NULL"),
    ("created_at", "0"),
];

impl Layout {
    /// Every column present (a database this program migrated).
    fn full() -> Layout {
        let list =
            |cols: &[(&str, &str)]| cols.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ");
        Layout {
            sessions: list(SESSION_COLUMNS),
            messages: list(MESSAGE_COLUMNS),
            message_order: "seq",
            files: list(files::COLUMNS),
            usage: true,
            summary: true,
        }
    }

    /// What `conn` has; a missing column reads as its default. Schema 1 kept the running totals
    /// in prompt_tokens and completion_tokens.
    fn probe(conn: &Connection, version: i64) -> rusqlite::Result<Layout> {
        let list = |table: &str, cols: &[(&str, &str)]| -> rusqlite::Result<String> {
            let have: Vec<String> = schema::table_info(conn, table)?
                .into_iter()
                .map(|c| c.name)
                .collect();
            Ok(cols
                .iter()
                .map(|(c, fallback)| {
                    let fallback = match (version, *c) {
                        (1, "total_prompt_tokens") => "prompt_tokens",
                        (1, "total_completion_tokens") => "completion_tokens",
                        _ => fallback,
                    };
                    if have.iter().any(|h| h == c) {
                        c.to_string()
                    } else {
                        format!("{fallback} AS {c}")
                    }
                })
                .collect::<Vec<_>>()
                .join(", "))
        };
        let seq = schema::has_column(conn, "messages", "seq")?;
        Ok(Layout {
            sessions: list("sessions", SESSION_COLUMNS)?,
            messages: list("messages", MESSAGE_COLUMNS)?,
            message_order: if seq { "seq" } else { "created_at, rowid" },
            files: list("files", files::COLUMNS)?,
            usage: schema::has_table(conn, "usage")?,
            summary: schema::has_column(conn, "sessions", "summary_message_id")?,
        })
    }
}

/// Adds one call's tokens (and cost) to the session and every ancestor: a sub-agent's usage is
/// recorded against the child session and its parents' totals include it exactly once, in the
/// same transaction.
const ADD_TOTALS_WITH_COST: &str = "WITH RECURSIVE chain(id) AS (
        SELECT ?1
        UNION
        SELECT s.parent_session_id FROM sessions s JOIN chain c ON s.id = c.id
        WHERE s.parent_session_id IS NOT NULL
    )
    UPDATE sessions SET total_prompt_tokens = total_prompt_tokens + ?2,
        total_completion_tokens = total_completion_tokens + ?3,
        cost = cost + ?4,
        updated_at = ?5
    WHERE id IN (SELECT id FROM chain)";

const ADD_TOTALS_NO_COST: &str = "WITH RECURSIVE chain(id) AS (
        SELECT ?1
        UNION
        SELECT s.parent_session_id FROM sessions s JOIN chain c ON s.id = c.id
        WHERE s.parent_session_id IS NOT NULL
    )
    UPDATE sessions SET total_prompt_tokens = total_prompt_tokens + ?2,
        total_completion_tokens = total_completion_tokens + ?3,
        updated_at = ?4
    WHERE id IN (SELECT id FROM chain)";

impl Store {
    /// Opens (creating if needed) the database, sets WAL, foreign keys and a busy timeout, and
    /// migrates it inside a transaction (see `schema`). Refused before anything is written to
    /// it: a database written by a newer crush (`TooNew`), and one a newer Go Crush migrated in
    /// a way this program's writes do not fit (`NewerGoCrush`).
    pub(crate) fn open(path: &Path) -> Result<Store> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|e| open_err(format!("cannot create {}: {e}", parent.display())))?;
        }
        // Serialized (full mutex), unlike rusqlite's default: the signal watchdog may close the
        // database from its own thread (`watchdog`).
        let flags = (rusqlite::OpenFlags::default() - rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)
            | rusqlite::OpenFlags::SQLITE_OPEN_FULL_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_err(e.to_string()))?;
        // SAFETY: the registration holding the handle is the store's `_last_word`, dropped
        // before its connection.
        let handle = unsafe { watchdog::Handle::new(conn.handle()) };
        let last_word = crate::signal::on_forced_exit(move || {
            if let Some(held) = handle.close() {
                // The process ends next: nothing more may start on the connection.
                std::mem::forget(held);
            }
        });
        // Every step runs the same few statements: prepare each once per process.
        conn.set_prepared_statement_cache_capacity(64);
        conn.busy_timeout(Duration::from_millis(30_000))
            .map_err(|e| open_err(e.to_string()))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| open_err(e.to_string()))?;

        // Refuse before anything (even the journal mode) is written.
        let found = user_version(&conn).map_err(|e| open_err(e.to_string()))?;
        check_not_too_new(path, found)?;
        check_writable(path, &conn)?;

        // Switching the journal mode needs an exclusive lock and SQLite does not call the busy
        // handler for it, so several processes opening a fresh file at once must retry.
        let mut attempts = 0;
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
                Ok(m) => break m,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy && attempts < 500 =>
                {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(open_err(format!("cannot enable WAL: {e}"))),
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(open_err(format!(
                "cannot enable WAL (journal mode is {mode})"
            )));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| open_err(e.to_string()))?;

        let store = Store {
            _last_word: Some(last_word),
            conn,
            path: path.to_path_buf(),
            layout: Layout::full(),
        };
        if found < schema::SUPPORTED_VERSION {
            store.migrate()?;
        }
        Ok(store)
    }

    /// Checkpoints the WAL into the database and leaves WAL mode, which removes the `-wal` and
    /// `-shm` files, as closing the last connection would (this one is never closed: it lives
    /// as long as the process). It needs the database to itself: when another connection has it
    /// open, nothing changes (the last one to close removes them). The next `open` switches WAL
    /// on again.
    pub(crate) fn close_wal(&self) {
        if self.conn.busy_timeout(Duration::ZERO).is_err() {
            return;
        }
        let _ = self
            .conn
            .query_row("PRAGMA journal_mode = DELETE", [], |r| {
                r.get::<_, String>(0)
            });
    }

    /// Opens an existing database for reading only: nothing is migrated or written (every
    /// statement is refused by `query_only`), and a schema older than this program's, Go Crush's
    /// included, is read as it is. A database written by a newer crush is refused (`TooNew`).
    ///
    /// The connection is a read-write one when the file allows it, so that closing it removes
    /// the `-wal` and `-shm` files that reading a WAL database creates (unless another process
    /// still uses them); the database file itself is not touched.
    pub(crate) fn open_read_only(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let open_err = |e: rusqlite::Error| StoreError::Open {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        if !path.is_file() {
            return Err(StoreError::Open {
                path: path.to_path_buf(),
                message: "no such file".into(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_READ_WRITE)
            .or_else(|_| {
                Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_READ_ONLY)
            })
            .map_err(open_err)?;
        conn.pragma_update(None, "query_only", true)
            .map_err(open_err)?;
        conn.busy_timeout(Duration::from_millis(30_000))
            .map_err(open_err)?;
        let found = user_version(&conn).map_err(open_err)?;
        check_not_too_new(path, found)?;
        for table in ["sessions", "messages"] {
            if !schema::has_table(&conn, table).map_err(open_err)? {
                return Err(StoreError::Open {
                    path: path.to_path_buf(),
                    message: format!("it has no {table} table: not a crush database"),
                });
            }
        }
        let layout = Layout::probe(&conn, found).map_err(open_err)?;
        Ok(Store {
            _last_word: None,
            conn,
            path: path.to_path_buf(),
            layout,
        })
    }

    /// The database file this store was opened on.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file has this program's usage ledger (a database only Go Crush wrote has not).
    pub(crate) fn has_usage_ledger(&self) -> bool {
        self.layout.usage
    }

    fn migrate(&self) -> Result<()> {
        let open_err = |e: rusqlite::Error| StoreError::Open {
            path: self.path.clone(),
            message: format!("migration failed: {e}"),
        };
        let tx = self.write_tx().map_err(|e| StoreError::Open {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        // Read again inside the transaction: another process may have migrated meanwhile.
        let found = user_version(&tx).map_err(open_err)?;
        check_not_too_new(&self.path, found)?;
        if found == schema::SUPPORTED_VERSION {
            return Ok(());
        }
        schema::migrate(&tx, found).map_err(open_err)?;
        tx.pragma_update(None, "user_version", schema::SUPPORTED_VERSION)
            .map_err(open_err)?;
        tx.commit().map_err(open_err)?;
        Ok(())
    }

    /// A write transaction that takes the write lock up front, so concurrent writers (other
    /// processes, other connections) serialize instead of failing on lock upgrade.
    fn write_tx(&self) -> Result<Transaction<'_>> {
        Ok(Transaction::new_unchecked(
            &self.conn,
            TransactionBehavior::Immediate,
        )?)
    }

    pub(crate) fn create_session(&self, title: &str, parent: Option<&str>) -> Result<Session> {
        self.create_session_with_id(&new_id()?, title, parent)
    }

    /// Creates a session with a given id: a sub-agent's session uses Crush's convention
    /// `<assistant message id>$$<tool call id>` so that Crush finds it from the tool call.
    pub(crate) fn create_session_with_id(
        &self,
        id: &str,
        title: &str,
        parent: Option<&str>,
    ) -> Result<Session> {
        let id = id.to_string();
        let now = now_secs();
        let tx = self.write_tx()?;
        if let Some(p) = parent
            && !session_exists(&tx, p)?
        {
            return Err(StoreError::NotFound(p.to_string()));
        }
        tx.prepare_cached(
            "INSERT INTO sessions (id, parent_session_id, title, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
        )?
        .execute(params![id, parent, title, now])?;
        let s = load_session(&tx, &self.layout, &id)?
            .ok_or_else(|| StoreError::NotFound(id.clone()))?;
        tx.commit()?;
        Ok(s)
    }

    pub(crate) fn session(&self, id: &str) -> Result<Option<Session>> {
        load_session(&self.conn, &self.layout, id)
    }

    /// A full id, Go Crush's hash id of one, or a unique prefix of either (sub-agent sessions
    /// included).
    pub(crate) fn resolve_session(&self, id_or_prefix: &str) -> Result<Session> {
        if let Some(s) = self.session(id_or_prefix)? {
            return Ok(s);
        }
        if id_or_prefix.is_empty() {
            return Err(StoreError::NotFound(String::new()));
        }
        let mut stmt = self.conn.prepare(
            "SELECT id FROM sessions ORDER BY updated_at DESC, created_at DESC, rowid DESC",
        )?;
        // Its id, or Go Crush's hash id of it, starts so.
        let hashable = id_or_prefix.len() <= 16
            && id_or_prefix
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        let ids = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .filter(|r| match r {
                Ok(id) => {
                    id.starts_with(id_or_prefix)
                        || (hashable && hashid::hash_id(id).starts_with(id_or_prefix))
                }
                Err(_) => true,
            })
            .collect::<rusqlite::Result<Vec<_>>>()?;
        match ids.len() {
            0 => Err(StoreError::NotFound(id_or_prefix.to_string())),
            1 => self
                .session(&ids[0])?
                .ok_or_else(|| StoreError::NotFound(id_or_prefix.to_string())),
            n => {
                const SHOWN: usize = 20;
                let mut candidates: Vec<String> = ids.into_iter().take(SHOWN).collect();
                if n > SHOWN {
                    candidates.push(format!("... and {} more", n - SHOWN));
                }
                Err(StoreError::Ambiguous {
                    prefix: id_or_prefix.to_string(),
                    candidates,
                })
            }
        }
    }

    /// Top-level sessions, most recently updated first.
    pub(crate) fn list_sessions(&self) -> Result<Vec<Session>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {} FROM sessions WHERE parent_session_id IS NULL
             ORDER BY updated_at DESC, created_at DESC, rowid DESC",
            self.layout.sessions
        ))?;
        let rows = stmt
            .query_map([], session_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The most recently updated top-level session (never a sub-agent's).
    pub(crate) fn latest_session(&self) -> Result<Option<Session>> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM sessions WHERE parent_session_id IS NULL
                     ORDER BY updated_at DESC, created_at DESC, rowid DESC LIMIT 1",
                self.layout.sessions
            ))?
            .query_row([], session_from_row)
            .optional()?)
    }

    /// The session's messages in order.
    pub(crate) fn messages(&self, session_id: &str) -> Result<Vec<StoredMessage>> {
        load_messages(&self.conn, &self.layout, session_id)
    }

    pub(crate) fn add_message(&self, session_id: &str, msg: &NewMessage) -> Result<StoredMessage> {
        let tx = self.write_tx()?;
        if !session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        let now = now_secs();
        let stored = insert_message(&tx, session_id, msg, now)?;
        tx.prepare_cached("UPDATE sessions SET updated_at = ?1 WHERE id = ?2")?
            .execute(params![now, session_id])?;
        tx.commit()?;
        Ok(stored)
    }

    /// One finished step in one transaction: its messages (assistant, then tool results), its
    /// usage row (tied to the first assistant message) and the session's running totals (and
    /// those of its ancestors, for a sub-agent session).
    pub(crate) fn commit_step(
        &self,
        session_id: &str,
        msgs: &[NewMessage],
        usage: Option<&UsageRecord>,
    ) -> Result<Vec<StoredMessage>> {
        // Validate before taking the write lock.
        let checked = usage.map(CheckedUsage::new).transpose()?;

        let tx = self.write_tx()?;
        if !session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        let now = now_secs();
        let mut stored = Vec::with_capacity(msgs.len());
        for m in msgs {
            stored.push(insert_message(&tx, session_id, m, now)?);
        }
        tx.prepare_cached("UPDATE sessions SET updated_at = ?1 WHERE id = ?2")?
            .execute(params![now, session_id])?;

        if let (Some(rec), Some(c)) = (usage, checked) {
            let message_id = stored
                .iter()
                .find(|m| m.role == Role::Assistant)
                .map(|m| m.id.as_str());
            insert_usage(&tx, session_id, message_id, rec, &c, now, true)?;
        }
        tx.commit()?;
        Ok(stored)
    }

    /// A model call that belongs to no message (title generation): one usage row and the
    /// session's running totals, in one transaction. The context size is left alone: the call
    /// did not see the conversation.
    pub(crate) fn record_usage(&self, session_id: &str, rec: &UsageRecord) -> Result<()> {
        let c = CheckedUsage::new(rec)?;
        let tx = self.write_tx()?;
        if !session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        insert_usage(&tx, session_id, None, rec, &c, now_secs(), false)?;
        tx.commit()?;
        Ok(())
    }

    /// Sets the session's context size from an estimate (a call whose server reported no
    /// usage): what the summarize margin and the context meter read.
    /// Whether the session's last model call had its tokens estimated (its server reported
    /// none), so its context size is crush's estimate too.
    pub(crate) fn last_call_estimated(&self, session_id: &str) -> Result<bool> {
        if !self.layout.usage {
            return Ok(false);
        }
        let source: Option<String> = self
            .conn
            .query_row(
                "SELECT price_source FROM usage WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
                [session_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(source.as_deref() == Some("estimated"))
    }

    pub(crate) fn set_context_estimate(&self, session_id: &str, tokens: u64) -> Result<()> {
        let tx = self.write_tx()?;
        tx.execute(
            "UPDATE sessions SET context_tokens = ?1 WHERE id = ?2",
            params![i64::try_from(tokens).unwrap_or(i64::MAX), session_id],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Stores a summary of the session in one transaction: the assistant message (with
    /// `is_summary_message = 1`), the usage row of the call that wrote it, the running totals,
    /// `sessions.summary_message_id`, and the new context size (the summary's own tokens:
    /// history sent to the model starts at the summary from now on).
    pub(crate) fn commit_summary(
        &self,
        session_id: &str,
        msg: &NewMessage,
        usage: Option<&UsageRecord>,
    ) -> Result<StoredMessage> {
        let checked = usage.map(CheckedUsage::new).transpose()?;
        let tx = self.write_tx()?;
        if !session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        let now = now_secs();
        let stored = insert_message_as(&tx, session_id, msg, now, true)?;
        if let (Some(rec), Some(c)) = (usage, &checked) {
            insert_usage(&tx, session_id, Some(&stored.id), rec, c, now, false)?;
        }
        let context = match checked.as_ref().and_then(|c| c.tokens) {
            Some(t) => t.output,
            // Unknown: about four characters per token.
            None => i64::try_from(
                msg.parts
                    .iter()
                    .map(|p| match p {
                        Part::Text { text } => text.len() / 4,
                        _ => 0,
                    })
                    .sum::<usize>(),
            )
            .unwrap_or(i64::MAX),
        };
        tx.prepare_cached(
            "UPDATE sessions SET summary_message_id = ?1, context_tokens = ?2, updated_at = ?3,
                 prompt_tokens = 0, completion_tokens = ?2
             WHERE id = ?4",
        )?
        .execute(params![stored.id, context, now, session_id])?;
        tx.commit()?;
        Ok(stored)
    }

    /// The id of the session's latest summary message, if it was ever summarized.
    pub(crate) fn summary_message_id(&self, session_id: &str) -> Result<Option<String>> {
        if !self.layout.summary {
            return Ok(None);
        }
        Ok(self
            .conn
            .prepare_cached("SELECT summary_message_id FROM sessions WHERE id = ?1")?
            .query_row([session_id], |r| r.get::<_, Option<String>>(0))
            .optional()?
            .flatten())
    }

    /// Replaces the parts of a stored message: a hook changed a tool call's input after the
    /// assistant message was committed and before the call ran, and the session keeps the call
    /// as it ran.
    pub(crate) fn update_message_parts(&self, message_id: &str, parts: &[Part]) -> Result<()> {
        let text = serde_json::to_string(parts)
            .map_err(|e| StoreError::Sql(format!("cannot encode message parts: {e}")))?;
        let n = self
            .conn
            .prepare_cached("UPDATE messages SET parts = ?1 WHERE id = ?2")?
            .execute(params![text, message_id])?;
        if n == 0 {
            return Err(StoreError::NotFound(message_id.to_string()));
        }
        Ok(())
    }

    /// Sets the title only.
    pub(crate) fn set_title(&self, session_id: &str, title: &str) -> Result<()> {
        let n = self
            .conn
            .prepare_cached("UPDATE sessions SET title = ?1 WHERE id = ?2")?
            .execute(params![title, session_id])?;
        if n == 0 {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        Ok(())
    }

    /// The session's task list as stored (`sessions.todos`; None when empty).
    pub(crate) fn todos(&self, session_id: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT todos FROM sessions WHERE id = ?1")?
            .query_row([session_id], |r| r.get::<_, Option<String>>(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound(session_id.to_string()))
    }

    /// Replaces the session's task list (None or "": empty, stored as NULL as Go Crush does).
    pub(crate) fn set_todos(&self, session_id: &str, todos: Option<&str>) -> Result<()> {
        let todos = todos.filter(|t| !t.is_empty());
        let n = self
            .conn
            .prepare_cached("UPDATE sessions SET todos = ?1 WHERE id = ?2")?
            .execute(params![todos, session_id])?;
        if n == 0 {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        Ok(())
    }

    /// Records that `path` was read now, when its modification time was `mtime_ns`.
    pub(crate) fn record_read(&self, session_id: &str, path: &Path, mtime_ns: i64) -> Result<()> {
        let tx = self.write_tx()?;
        if !session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        tx.prepare_cached(
            "INSERT INTO read_files (session_id, path, read_at, mtime_ns) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (path, session_id)
             DO UPDATE SET read_at = excluded.read_at, mtime_ns = excluded.mtime_ns",
        )?
        .execute(params![session_id, path_text(path), now_secs(), mtime_ns])?;
        tx.commit()?;
        Ok(())
    }

    /// The modification time (ns) `path` had when this session last read it, if it did.
    pub(crate) fn last_read(&self, session_id: &str, path: &Path) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached("SELECT mtime_ns FROM read_files WHERE session_id = ?1 AND path = ?2")?
            .query_row(params![session_id, path_text(path)], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .optional()?
            .flatten())
    }

    /// Deletes a session with its messages, file snapshots, reads, usage rows and, recursively,
    /// its sub-agent sessions, in one transaction. Ancestors keep their totals: that spend
    /// happened.
    pub(crate) fn delete_session(&self, id: &str) -> Result<()> {
        let tx = self.write_tx()?;
        if !session_exists(&tx, id)? {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let ids = {
            let mut stmt = tx.prepare(
                "WITH RECURSIVE tree(id) AS (
                    SELECT ?1
                    UNION
                    SELECT s.id FROM sessions s JOIN tree t ON s.parent_session_id = t.id
                 )
                 SELECT id FROM tree",
            )?;
            stmt.query_map([id], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        for sid in &ids {
            tx.prepare_cached("DELETE FROM messages WHERE session_id = ?1")?
                .execute([sid])?;
            tx.prepare_cached("DELETE FROM files WHERE session_id = ?1")?
                .execute([sid])?;
            tx.prepare_cached("DELETE FROM read_files WHERE session_id = ?1")?
                .execute([sid])?;
            tx.prepare_cached("DELETE FROM usage WHERE session_id = ?1")?
                .execute([sid])?;
        }
        for sid in &ids {
            tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                .execute([sid])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes session `id` if nothing was ever stored in it (no message, file, read, usage row
    /// or child session): what a run that ended before its first message would leave behind.
    /// Whether it was deleted.
    pub(crate) fn delete_if_empty(&self, id: &str) -> Result<bool> {
        let usage = if self.layout.usage {
            " AND NOT EXISTS (SELECT 1 FROM usage WHERE session_id = ?1)"
        } else {
            ""
        };
        let empty = format!(
            "id = ?1
             AND NOT EXISTS (SELECT 1 FROM messages WHERE session_id = ?1)
             AND NOT EXISTS (SELECT 1 FROM files WHERE session_id = ?1)
             AND NOT EXISTS (SELECT 1 FROM read_files WHERE session_id = ?1)
             AND NOT EXISTS (SELECT 1 FROM sessions WHERE parent_session_id = ?1){usage}"
        );
        // A read first (it waits on no writer): the usual session has messages, and exit
        // cleanup should not queue behind a lock for it.
        let n: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) FROM sessions WHERE {empty}"),
            [id],
            |r| r.get(0),
        )?;
        if n == 0 {
            return Ok(false);
        }
        let tx = self.write_tx()?;
        let n = tx.execute(&format!("DELETE FROM sessions WHERE {empty}"), [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// The session's usage ledger rows, oldest first.
    pub(crate) fn usage_rows(&self, session_id: &str) -> Result<Vec<UsageRow>> {
        if !self.layout.usage {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(
            "SELECT id, session_id, message_id, provider, model, input_tokens, output_tokens,
                 cache_read_tokens, cache_write_tokens, cost, price_source, created_at
             FROM usage WHERE session_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([session_id], |r| {
                let toks: [Option<i64>; 4] = [r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?];
                Ok((
                    UsageRow {
                        id: r.get(0)?,
                        session_id: r.get(1)?,
                        message_id: r.get(2)?,
                        provider: r.get(3)?,
                        model: r.get(4)?,
                        usage: None,
                        cost: r.get(9)?,
                        price_source: PriceSource::from(r.get::<_, String>(10)?.as_str()),
                        created_at: r.get(11)?,
                    },
                    toks,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows
            .into_iter()
            .map(|(mut row, toks)| {
                if toks.iter().any(Option::is_some) {
                    let t = |v: Option<i64>| v.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
                    row.usage = Some(Usage {
                        input: t(toks[0]),
                        output: t(toks[1]),
                        cache_read: t(toks[2]),
                        cache_write: t(toks[3]),
                    });
                }
                row
            })
            .collect())
    }
}

/// Token counts of one call converted to SQLite integers, with the sums the totals need.
#[derive(Clone, Copy)]
struct CheckedTokens {
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
    /// input + cache read + cache write
    prompt: i64,
    /// prompt + output
    context: i64,
}

struct CheckedUsage {
    tokens: Option<CheckedTokens>,
    cost: Option<f64>,
}

impl CheckedUsage {
    fn new(rec: &UsageRecord) -> Result<CheckedUsage> {
        let conv = |what: &str, v: u64| {
            i64::try_from(v).map_err(|_| {
                StoreError::Sql(format!(
                    "usage for {}/{}: {what} tokens {v} out of range (must be 0..={})",
                    rec.provider,
                    rec.model,
                    i64::MAX
                ))
            })
        };
        let tokens = match rec.usage {
            None => None,
            Some(u) => {
                let input = conv("input", u.input)?;
                let output = conv("output", u.output)?;
                let cache_read = conv("cache read", u.cache_read)?;
                let cache_write = conv("cache write", u.cache_write)?;
                let overflow = || {
                    StoreError::Sql(format!(
                        "usage for {}/{}: token sum out of range",
                        rec.provider, rec.model
                    ))
                };
                let prompt = input
                    .checked_add(cache_read)
                    .and_then(|n| n.checked_add(cache_write))
                    .ok_or_else(overflow)?;
                let context = prompt.checked_add(output).ok_or_else(overflow)?;
                Some(CheckedTokens {
                    input,
                    output,
                    cache_read,
                    cache_write,
                    prompt,
                    context,
                })
            }
        };
        if let Some(c) = rec.cost
            && !(c.is_finite() && c >= 0.0)
        {
            return Err(StoreError::Sql(format!(
                "usage for {}/{}: cost {c} is not a non-negative number of USD",
                rec.provider, rec.model
            )));
        }
        Ok(CheckedUsage {
            tokens,
            cost: rec.cost,
        })
    }
}

/// Inserts one usage row and adds it to the running totals of the session and its ancestors;
/// `set_context` also records the call's tokens as the session's current context size.
fn insert_usage(
    tx: &Transaction<'_>,
    session_id: &str,
    message_id: Option<&str>,
    rec: &UsageRecord,
    c: &CheckedUsage,
    now: i64,
    set_context: bool,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO usage (session_id, message_id, provider, model, input_tokens,
             output_tokens, cache_read_tokens, cache_write_tokens, cost, price_source,
             created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        session_id,
        message_id,
        rec.provider,
        rec.model,
        c.tokens.map(|t| t.input),
        c.tokens.map(|t| t.output),
        c.tokens.map(|t| t.cache_read),
        c.tokens.map(|t| t.cache_write),
        c.cost,
        rec.price_source.as_str(),
        now,
    ])?;
    let (prompt, completion) = c.tokens.map_or((0, 0), |t| (t.prompt, t.output));
    match c.cost {
        Some(cost) => tx
            .prepare_cached(ADD_TOTALS_WITH_COST)?
            .execute(params![session_id, prompt, completion, cost, now])?,
        None => tx
            .prepare_cached(ADD_TOTALS_NO_COST)?
            .execute(params![session_id, prompt, completion, now])?,
    };
    if set_context && let Some(t) = c.tokens {
        // Go Crush's columns as Go Crush assigns them after a step: the last call's input +
        // cache read and its output, each only when not 0.
        tx.prepare_cached(
            "UPDATE sessions SET context_tokens = ?1,
                 prompt_tokens = CASE WHEN ?2 > 0 THEN ?2 ELSE prompt_tokens END,
                 completion_tokens = CASE WHEN ?3 > 0 THEN ?3 ELSE completion_tokens END
             WHERE id = ?4",
        )?
        .execute(params![
            t.context,
            t.input + t.cache_read,
            t.output,
            session_id
        ])?;
    }
    Ok(())
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

fn check_not_too_new(path: &Path, found: i64) -> Result<()> {
    if found > schema::SUPPORTED_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: schema::SUPPORTED_VERSION,
        });
    }
    Ok(())
}

/// A database a newer Go Crush migrated is written only if every write of this program fits
/// its tables.
fn check_writable(path: &Path, conn: &Connection) -> Result<()> {
    let open_err = |e: rusqlite::Error| StoreError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let Some(found) = schema::Goose::read(conn).map_err(open_err)?.unknown() else {
        return Ok(());
    };
    let columns = schema::unfillable_columns(conn).map_err(open_err)?;
    if columns.is_empty() {
        return Ok(());
    }
    Err(StoreError::NewerGoCrush {
        path: path.to_path_buf(),
        found,
        known: schema::GO_LATEST,
        columns,
    })
}

fn session_exists(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row([id], |_| Ok(()))
        .optional()?
        .is_some())
}

fn load_session(conn: &Connection, layout: &Layout, id: &str) -> Result<Option<Session>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {} FROM sessions WHERE id = ?1",
            layout.sessions
        ))?
        .query_row([id], session_from_row)
        .optional()?)
}

fn session_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
    Ok(Session {
        id: r.get(0)?,
        parent_session_id: r.get(1)?,
        title: r.get(2)?,
        message_count: r.get(3)?,
        prompt_tokens: r.get(4)?,
        completion_tokens: r.get(5)?,
        total_prompt_tokens: r.get(6)?,
        total_completion_tokens: r.get(7)?,
        cost: r.get(8)?,
        context_tokens: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

fn load_messages(
    conn: &Connection,
    layout: &Layout,
    session_id: &str,
) -> Result<Vec<StoredMessage>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {} FROM messages WHERE session_id = ?1 ORDER BY {}",
        layout.messages, layout.message_order
    ))?;
    type Raw = (
        String,
        String,
        i64,
        String,
        String,
        Option<String>,
        Option<String>,
        i64,
    );
    let raw = stmt
        .query_map([session_id], |r| {
            Ok::<Raw, _>((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    raw.into_iter()
        .map(
            |(id, session_id, seq, role, parts, model, provider, created_at)| {
                let role = Role::parse(&role).ok_or_else(|| {
                    StoreError::Sql(format!("message {id}: unknown role '{role}'"))
                })?;
                let parts = crate::llm::parts_from_json(&parts).map_err(|e| {
                    StoreError::Sql(format!("message {id}: cannot decode parts: {e}"))
                })?;
                Ok(StoredMessage {
                    id,
                    session_id,
                    seq,
                    role,
                    parts,
                    model,
                    provider,
                    created_at,
                })
            },
        )
        .collect()
}

/// Inserts one message at the end of the session (seq = max + 1). Must run inside a write
/// transaction so the seq cannot race.
fn insert_message(
    conn: &Connection,
    session_id: &str,
    msg: &NewMessage,
    now: i64,
) -> Result<StoredMessage> {
    insert_message_as(conn, session_id, msg, now, false)
}

/// `insert_message`, marking the message as a summary (`is_summary_message`) or not.
fn insert_message_as(
    conn: &Connection,
    session_id: &str,
    msg: &NewMessage,
    now: i64,
    is_summary: bool,
) -> Result<StoredMessage> {
    let id = new_id()?;
    let parts = serde_json::to_string(&msg.parts)
        .map_err(|e| StoreError::Sql(format!("cannot encode message parts: {e}")))?;
    let finished_at = msg.parts.iter().rev().find_map(|p| match p {
        Part::Finish { time, .. } => Some(*time),
        _ => None,
    });
    let seq: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))?;
    conn.prepare_cached(
        "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at,
             finished_at, provider, is_summary_message, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        id,
        session_id,
        msg.role.as_str(),
        parts,
        msg.model,
        now,
        finished_at,
        msg.provider,
        is_summary,
        seq
    ])?;
    Ok(StoredMessage {
        id,
        session_id: session_id.to_string(),
        seq,
        role: msg.role,
        parts: msg.parts.clone(),
        model: msg.model.clone(),
        provider: msg.provider.clone(),
        created_at: now,
    })
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

use crate::time::unix_now as now_secs;

/// A random (version 4) UUID, from the kernel's random source.
pub(crate) fn new_id() -> Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| StoreError::Sql(format!("cannot read /dev/urandom for an id: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::sha256::to_hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// What a new project data dir's `.gitignore` says: nothing of it goes into git but its
/// `commands/` and `skills/`, which a team shares (crush(1) SKILLS AND COMMANDS).
pub(crate) const DATA_DIR_GITIGNORE: &str = "*\n!commands/\n!commands/**\n!skills/\n!skills/**\n";

/// What crush writes inside a project data dir (crush(1) FILES); the directories' entries too.
const WRITTEN: &[&str] = &[
    "crush.db",
    "crush.db-wal",
    "crush.db-shm",
    "crush.db-journal",
    "history",
    "init",
    "logs",
    "logs/crush.log",
    "logs/crush.log.1",
];
const WRITTEN_DIRS: &[&str] = &["transcripts", "session-env"];

/// Refuses a data dir in which something crush writes is a symbolic link: a repository can ship
/// `.crush/logs/crush.log` pointing at `~/.bashrc`, and what crush appends there would run.
fn refuse_links(dir: &Path) -> io::Result<()> {
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    let mut found: Vec<std::path::PathBuf> = WRITTEN
        .iter()
        .chain(WRITTEN_DIRS)
        .map(|n| dir.join(n))
        .collect();
    for d in WRITTEN_DIRS {
        let d = dir.join(d);
        if !is_link(&d)
            && let Ok(entries) = std::fs::read_dir(&d)
        {
            found.extend(entries.flatten().map(|e| e.path()));
        }
    }
    match found.into_iter().find(|p| is_link(p)) {
        Some(p) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} holds a symbolic link, {}: refusing to write through it (remove it)",
                dir.display(),
                p.display()
            ),
        )),
        None => Ok(()),
    }
}

/// Creates a project data dir (mode 0700) with a `.gitignore` (`DATA_DIR_GITIGNORE`) if it has
/// none. One holding a symbolic link where crush writes is refused.
pub(crate) fn ensure_data_dir(dir: &Path) -> io::Result<()> {
    crate::fsutil::private_dir(dir)?;
    refuse_links(dir)?;
    let gi = dir.join(".gitignore");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&gi)
    {
        Ok(mut f) => f.write_all(DATA_DIR_GITIGNORE.as_bytes()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;
