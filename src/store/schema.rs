//! Schema migrations, applied by `PRAGMA user_version`, each inside one transaction.
//!
//! Version 1 is Crush's schema after its seven goose migrations (same tables, column names, types,
//! CHECKs, defaults, indexes and triggers) plus our additions: `sessions.context_tokens`,
//! `messages.seq` (unique within a session), `read_files.mtime_ns` and the `usage` ledger.

use rusqlite::Connection;

/// `MIGRATIONS[i]` moves the database from `user_version` i to i + 1.
pub(super) const MIGRATIONS: &[&str] = &[V1];

/// The newest schema version this build understands.
pub(super) const SUPPORTED_VERSION: i64 = MIGRATIONS.len() as i64;

const V1: &str = r#"
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    summary_message_id TEXT,
    todos TEXT,
    context_tokens INTEGER NOT NULL DEFAULT 0 CHECK (context_tokens >= 0)
);
CREATE INDEX IF NOT EXISTS idx_sessions_created_at ON sessions (created_at);
CREATE INDEX IF NOT EXISTS idx_sessions_parent_session_id ON sessions (parent_session_id);

CREATE TRIGGER IF NOT EXISTS update_sessions_updated_at
AFTER UPDATE ON sessions
BEGIN
    UPDATE sessions SET updated_at = strftime('%s', 'now') WHERE id = new.id;
END;

CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE (path, session_id, version)
);
CREATE INDEX IF NOT EXISTS idx_files_session_id ON files (session_id);
CREATE INDEX IF NOT EXISTS idx_files_path ON files (path);
CREATE INDEX IF NOT EXISTS idx_files_created_at ON files (created_at);

CREATE TRIGGER IF NOT EXISTS update_files_updated_at
AFTER UPDATE ON files
BEGIN
    UPDATE files SET updated_at = strftime('%s', 'now') WHERE id = new.id;
END;

CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL DEFAULT '[]',
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    provider TEXT,
    is_summary_message INTEGER NOT NULL DEFAULT 0,
    seq INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE (session_id, seq)
);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id);
CREATE INDEX IF NOT EXISTS idx_messages_created_at ON messages (created_at);

CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
    UPDATE messages SET updated_at = strftime('%s', 'now') WHERE id = new.id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_delete
AFTER DELETE ON messages
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
END;

CREATE TABLE IF NOT EXISTS read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,
    mtime_ns INTEGER,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
);

CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message_id TEXT,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER CHECK (input_tokens IS NULL OR input_tokens >= 0),
    output_tokens INTEGER CHECK (output_tokens IS NULL OR output_tokens >= 0),
    cache_read_tokens INTEGER CHECK (cache_read_tokens IS NULL OR cache_read_tokens >= 0),
    cache_write_tokens INTEGER CHECK (cache_write_tokens IS NULL OR cache_write_tokens >= 0),
    cost REAL CHECK (cost IS NULL OR cost >= 0.0),
    price_source TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_usage_session_id ON usage (session_id);
"#;

/// Columns that a database made by Go Crush (any of its migration levels) may lack: Crush's later
/// migrations and ours. `V1` creates only missing tables (`IF NOT EXISTS`), so on such a database
/// these are added after it, in the same transaction.
const ADOPTED_COLUMNS: &[(&str, &str, &str)] = &[
    ("sessions", "summary_message_id", "TEXT"),
    ("sessions", "todos", "TEXT"),
    (
        "sessions",
        "context_tokens",
        "INTEGER NOT NULL DEFAULT 0 CHECK (context_tokens >= 0)",
    ),
    ("messages", "provider", "TEXT"),
    (
        "messages",
        "is_summary_message",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    ("messages", "seq", "INTEGER NOT NULL DEFAULT 0"),
    ("read_files", "mtime_ns", "INTEGER"),
];

const MESSAGES_UPDATED_AT_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
    UPDATE messages SET updated_at = strftime('%s', 'now') WHERE id = new.id;
END;";

/// Brings a database that Go Crush created (tables present, `user_version` 0) up to schema 1:
/// adds the missing columns and numbers existing messages by (created_at, rowid) — Crush's own
/// order — without touching their `updated_at`. A no-op on a database `V1` just created.
pub(super) fn adopt_existing(conn: &Connection) -> rusqlite::Result<()> {
    let mut seq_added = false;
    for (table, column, decl) in ADOPTED_COLUMNS {
        if !has_column(conn, table, column)? {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            seq_added |= *table == "messages" && *column == "seq";
        }
    }
    if seq_added {
        conn.execute_batch(&format!(
            "DROP TRIGGER IF EXISTS update_messages_updated_at;
             UPDATE messages SET seq = (
                 SELECT n FROM (
                     SELECT rowid AS r,
                            ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY created_at, rowid) AS n
                     FROM messages
                 ) WHERE r = messages.rowid
             );
             {MESSAGES_UPDATED_AT_TRIGGER}
             CREATE UNIQUE INDEX IF NOT EXISTS idx_messages_session_seq ON messages (session_id, seq);"
        ))?;
    }
    Ok(())
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names.iter().any(|n| n == column))
}
