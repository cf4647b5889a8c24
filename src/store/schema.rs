//! The schema: Go Crush's tables exactly as its goose migrations leave them, recorded in
//! `goose_db_version` as goose records them, so that Go Crush opens a database this program
//! created (or moved on) without migrating it again; plus this program's additions, versioned by
//! `PRAGMA user_version`, which Go Crush does not use.
//!
//! Every added column has a default that Go Crush's inserts satisfy, and the per-session ordering
//! key of messages is numbered by a trigger when an insert (Go Crush's) leaves it at 0.

use rusqlite::{Connection, OptionalExtension, params};

/// The newest schema of this program's additions (`PRAGMA user_version`).
pub(super) const SUPPORTED_VERSION: i64 = 3;

/// One statement of a migration, with what it creates, so that it applies to a database that
/// already has it (an older crush added Go Crush's later columns without recording them).
enum Step {
    /// `CREATE TABLE IF NOT EXISTS` of the named table.
    Table(&'static str, &'static str),
    /// `ALTER TABLE t ADD COLUMN c decl`, skipped when the column exists.
    Column(&'static str, &'static str, &'static str),
    /// `CREATE INDEX` or `CREATE TRIGGER`, `IF NOT EXISTS`.
    Sql(&'static str),
}

use Step::{Column, Sql, Table};

/// One of Go Crush's goose migrations.
struct GoMigration {
    version: i64,
    steps: &'static [Step],
}

/// `goose_db_version` exactly as goose (v3, sqlite3 dialect) creates it.
const GOOSE_TABLE: &str = "CREATE TABLE goose_db_version (
\t\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\t\tversion_id INTEGER NOT NULL,
\t\tis_applied INTEGER NOT NULL,
\t\ttstamp TIMESTAMP DEFAULT (datetime('now'))
\t)";

/// Go Crush's `updated_at` triggers: (name, definition).
const MESSAGES_UPDATED_AT: (&str, &str) = (
    "update_messages_updated_at",
    "CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
UPDATE messages SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END",
);

const SESSIONS_UPDATED_AT: (&str, &str) = (
    "update_sessions_updated_at",
    "CREATE TRIGGER IF NOT EXISTS update_sessions_updated_at
AFTER UPDATE ON sessions
BEGIN
UPDATE sessions SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END",
);

/// Go Crush's migrations, oldest first (timestamps are Unix seconds, whatever the comments of
/// the originals say).
const GO_MIGRATIONS: &[GoMigration] = &[
    GoMigration {
        version: 20250424200609,
        steps: &[
            Table(
                "sessions",
                "CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL
)",
            ),
            Sql(SESSIONS_UPDATED_AT.1),
            Table(
                "files",
                "CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE(path, session_id, version)
)",
            ),
            Sql("CREATE INDEX IF NOT EXISTS idx_files_session_id ON files (session_id)"),
            Sql("CREATE INDEX IF NOT EXISTS idx_files_path ON files (path)"),
            Sql("CREATE TRIGGER IF NOT EXISTS update_files_updated_at
AFTER UPDATE ON files
BEGIN
UPDATE files SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END"),
            Table(
                "messages",
                "CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
)",
            ),
            Sql("CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id)"),
            Sql(MESSAGES_UPDATED_AT.1),
            Sql(
                "CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count + 1
WHERE id = new.session_id;
END",
            ),
            Sql(
                "CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_delete
AFTER DELETE ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count - 1
WHERE id = old.session_id;
END",
            ),
        ],
    },
    GoMigration {
        version: 20250515105448,
        steps: &[Column("sessions", "summary_message_id", "TEXT")],
    },
    GoMigration {
        version: 20250624000000,
        steps: &[
            Sql("CREATE INDEX IF NOT EXISTS idx_sessions_created_at ON sessions (created_at)"),
            Sql("CREATE INDEX IF NOT EXISTS idx_messages_created_at ON messages (created_at)"),
            Sql("CREATE INDEX IF NOT EXISTS idx_files_created_at ON files (created_at)"),
        ],
    },
    GoMigration {
        version: 20250627000000,
        steps: &[Column("messages", "provider", "TEXT")],
    },
    GoMigration {
        version: 20250810000000,
        steps: &[Column(
            "messages",
            "is_summary_message",
            "INTEGER DEFAULT 0 NOT NULL",
        )],
    },
    GoMigration {
        version: 20250812000000,
        steps: &[Column("sessions", "todos", "TEXT")],
    },
    GoMigration {
        version: 20260127000000,
        steps: &[
            Table(
                "read_files",
                "CREATE TABLE IF NOT EXISTS read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
)",
            ),
            Sql("CREATE INDEX IF NOT EXISTS idx_read_files_session_id ON read_files (session_id)"),
            Sql("CREATE INDEX IF NOT EXISTS idx_read_files_path ON read_files (path)"),
        ],
    },
];

/// The newest Go Crush migration this program knows.
pub(super) const GO_LATEST: i64 = 20260127000000;

/// This program's columns on Go Crush's tables. Each has a default Go Crush's inserts satisfy.
const OUR_COLUMNS: &[Step] = &[
    Column(
        "sessions",
        "context_tokens",
        "INTEGER NOT NULL DEFAULT 0 CHECK (context_tokens >= 0)",
    ),
    Column(
        "sessions",
        "total_prompt_tokens",
        "INTEGER NOT NULL DEFAULT 0 CHECK (total_prompt_tokens >= 0)",
    ),
    Column(
        "sessions",
        "total_completion_tokens",
        "INTEGER NOT NULL DEFAULT 0 CHECK (total_completion_tokens >= 0)",
    ),
    // 0 until the trigger below numbers the row.
    Column("messages", "seq", "INTEGER NOT NULL DEFAULT 0"),
    Column("read_files", "mtime_ns", "INTEGER"),
    // File history (schema 3): the tool call that wrote a version, "no file", content omitted.
    Column("files", "tool_call_id", "TEXT"),
    Column("files", "absent", "INTEGER NOT NULL DEFAULT 0"),
    Column("files", "omitted", "INTEGER NOT NULL DEFAULT 0"),
];

/// This program's indexes, triggers and tables.
const OUR_OBJECTS: &[Step] = &[
    Sql(
        "CREATE INDEX IF NOT EXISTS idx_sessions_parent_session_id ON sessions (parent_session_id)",
    ),
    // Unique within a session: an insert that leaves seq at 0 (Go Crush's) passes the check,
    // since no numbered row has 0, and is numbered max + 1 by the trigger in the same statement.
    Sql("CREATE UNIQUE INDEX IF NOT EXISTS idx_messages_session_seq ON messages (session_id, seq)"),
    Sql("CREATE TRIGGER IF NOT EXISTS number_new_message
AFTER INSERT ON messages
WHEN new.seq = 0
BEGIN
UPDATE messages SET seq = (SELECT MAX(seq) + 1 FROM messages WHERE session_id = new.session_id)
WHERE id = new.id;
END"),
    Table(
        "usage",
        "CREATE TABLE IF NOT EXISTS usage (
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
)",
    ),
    Sql("CREATE INDEX IF NOT EXISTS idx_usage_session_id ON usage (session_id)"),
];

/// The columns of Go Crush's tables that this program's statements set; any other column of
/// those tables must have a default or accept NULL for its inserts to fit.
const WRITTEN: &[(&str, &[&str])] = &[
    (
        "sessions",
        &[
            "id",
            "parent_session_id",
            "title",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "summary_message_id",
            "created_at",
            "updated_at",
        ],
    ),
    (
        "messages",
        &[
            "id",
            "session_id",
            "role",
            "parts",
            "model",
            "created_at",
            "updated_at",
            "finished_at",
            "provider",
            "is_summary_message",
        ],
    ),
    ("read_files", &["session_id", "path", "read_at"]),
    (
        "files",
        &[
            "id",
            "session_id",
            "path",
            "content",
            "version",
            "created_at",
            "updated_at",
        ],
    ),
];

/// What `goose_db_version` records of Go Crush's migrations.
pub(super) struct Goose {
    pub exists: bool,
    /// Versions whose latest row says applied (0, goose's own first row, left out).
    pub applied: Vec<i64>,
}

impl Goose {
    pub(super) fn read(conn: &Connection) -> rusqlite::Result<Goose> {
        if !has_table(conn, "goose_db_version")? {
            return Ok(Goose {
                exists: false,
                applied: Vec::new(),
            });
        }
        let rows = conn
            .prepare("SELECT version_id, is_applied FROM goose_db_version ORDER BY id DESC")?
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        // As goose reads it: the newest row of a version says whether it is applied.
        let mut seen = Vec::new();
        let mut applied = Vec::new();
        for (v, is_applied) in rows {
            if v != 0 && !seen.contains(&v) {
                seen.push(v);
                if is_applied {
                    applied.push(v);
                }
            }
        }
        applied.sort_unstable();
        Ok(Goose {
            exists: true,
            applied,
        })
    }

    /// The newest applied migration this program does not know: the file was migrated by a
    /// newer Go Crush.
    pub(super) fn unknown(&self) -> Option<i64> {
        self.applied
            .iter()
            .copied()
            .filter(|v| !GO_MIGRATIONS.iter().any(|m| m.version == *v))
            .max()
    }
}

/// The columns of Go Crush's tables that this program's writes cannot fill ("table.column"):
/// NOT NULL without a default, or expected and missing. Empty when every write fits.
pub(super) fn unfillable_columns(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let ours: Vec<(&str, &str)> = OUR_COLUMNS
        .iter()
        .filter_map(|s| match s {
            Column(t, c, _) => Some((*t, *c)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (table, written) in WRITTEN {
        let cols = table_info(conn, table)?;
        for want in *written {
            if !cols.iter().any(|c| c.name == *want) {
                out.push(format!("{table}.{want} (missing)"));
            }
        }
        for c in cols {
            let filled = written.contains(&c.name.as_str())
                || ours.contains(&(*table, c.name.as_str()))
                || !c.not_null
                || c.default.is_some()
                || c.primary_key;
            if !filled {
                out.push(format!("{table}.{}", c.name));
            }
        }
    }
    Ok(out)
}

/// Brings the database (inside the caller's transaction) from this program's schema `from` to
/// `SUPPORTED_VERSION`, and Go Crush's part to its latest known migration, recording in
/// `goose_db_version` each migration applied here (unless a newer Go Crush migrated the file:
/// then Go Crush's part is left as it is).
pub(super) fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<()> {
    let goose = Goose::read(conn)?;
    if from == 1 && !goose.exists {
        // Made by an older crush: these tables were not declared as Go Crush declares them.
        rebuild(conn, "messages")?;
        rebuild(conn, "read_files")?;
    }
    if goose.unknown().is_none() {
        if !goose.exists {
            conn.execute_batch(GOOSE_TABLE)?;
            record_goose_version(conn, 0)?;
        }
        for m in GO_MIGRATIONS {
            if !goose.applied.contains(&m.version) {
                apply(conn, m.steps, None)?;
                record_goose_version(conn, m.version)?;
            }
        }
    }
    let number_messages = !has_column(conn, "messages", "seq")?;
    apply(conn, OUR_COLUMNS, None)?;
    if number_messages {
        // Crush's own order: by created_at, ties by insertion; updated_at untouched.
        without_trigger(conn, MESSAGES_UPDATED_AT, |c| {
            c.execute_batch(
                "UPDATE messages SET seq = numbered.n
                 FROM (SELECT rowid AS r,
                              ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY created_at, rowid) AS n
                       FROM messages) AS numbered
                 WHERE messages.rowid = numbered.r",
            )
        })?;
    }
    apply(conn, OUR_OBJECTS, None)?;
    if from == 1 {
        without_trigger(conn, SESSIONS_UPDATED_AT, move_totals)?;
    }
    Ok(())
}

/// Schema 1 kept running totals in prompt_tokens and completion_tokens: the totals move to this
/// program's columns (summed from the ledger), and Go Crush's columns get Go Crush's meaning
/// back: the last call's context (input + cache read, and output; 0 and the summary's size after
/// a summary).
fn move_totals(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "WITH RECURSIVE tree(root, id) AS (
             SELECT id, id FROM sessions
             UNION
             SELECT t.root, s.id FROM sessions s JOIN tree t ON s.parent_session_id = t.id
         ),
         sums AS (
             SELECT t.root AS id,
                    SUM(COALESCE(u.input_tokens, 0) + COALESCE(u.cache_read_tokens, 0)
                        + COALESCE(u.cache_write_tokens, 0)) AS prompt,
                    SUM(COALESCE(u.output_tokens, 0)) AS completion
             FROM tree t JOIN usage u ON u.session_id = t.id
             GROUP BY t.root
         )
         UPDATE sessions SET total_prompt_tokens = sums.prompt,
                             total_completion_tokens = sums.completion
         FROM sums WHERE sessions.id = sums.id;

         WITH last AS (
             SELECT session_id, MAX(id) AS id FROM usage
             WHERE message_id IS NOT NULL AND output_tokens IS NOT NULL
             GROUP BY session_id
         )
         UPDATE sessions SET
             prompt_tokens = CASE WHEN u.message_id = sessions.summary_message_id THEN 0
                 ELSE COALESCE(u.input_tokens, 0) + COALESCE(u.cache_read_tokens, 0) END,
             completion_tokens = u.output_tokens
         FROM last JOIN usage u ON u.id = last.id
         WHERE sessions.id = last.session_id;",
    )
}

/// Runs `f` with one of Go Crush's `updated_at` triggers removed, then puts it back as Go Crush
/// declares it: rewriting columns of every row must not change when rows were last updated.
fn without_trigger(
    conn: &Connection,
    (name, create): (&str, &str),
    f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {name}"))?;
    f(conn)?;
    conn.execute_batch(create)
}

/// Recreates `table` as Go Crush's migrations declare it (then this program's columns), keeping
/// its rows; its indexes and triggers are dropped with the old table and created again by the
/// migration steps that follow.
fn rebuild(conn: &Connection, table: &str) -> rusqlite::Result<()> {
    let old = format!("{table}_before_rebuild");
    conn.execute_batch(&format!("ALTER TABLE {table} RENAME TO {old}"))?;
    for m in GO_MIGRATIONS {
        apply(conn, m.steps, Some(table))?;
    }
    apply(conn, OUR_COLUMNS, Some(table))?;
    let old_cols: Vec<String> = table_info(conn, &old)?
        .into_iter()
        .map(|c| c.name)
        .collect();
    let cols: Vec<String> = table_info(conn, table)?
        .into_iter()
        .map(|c| c.name)
        .filter(|n| old_cols.contains(n))
        .collect();
    let cols = cols.join(", ");
    conn.execute_batch(&format!(
        "INSERT INTO {table} ({cols}) SELECT {cols} FROM {old}; DROP TABLE {old};"
    ))
}

/// Applies `steps` (only those creating or altering `only`, if given).
fn apply(conn: &Connection, steps: &[Step], only: Option<&str>) -> rusqlite::Result<()> {
    for step in steps {
        match step {
            Table(t, sql) if only.is_none_or(|o| o == *t) => conn.execute_batch(sql)?,
            Column(t, c, decl) if only.is_none_or(|o| o == *t) && !has_column(conn, t, c)? => {
                conn.execute_batch(&format!("ALTER TABLE {t} ADD COLUMN {c} {decl}"))?
            }
            Sql(sql) if only.is_none() => conn.execute_batch(sql)?,
            _ => {}
        }
    }
    Ok(())
}

fn record_goose_version(conn: &Connection, version: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?1, ?2)",
        params![version, true],
    )?;
    Ok(())
}

pub(super) struct ColumnInfo {
    pub name: String,
    pub not_null: bool,
    pub default: Option<String>,
    pub primary_key: bool,
}

pub(super) fn table_info(conn: &Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    stmt.query_map([], |r| {
        Ok(ColumnInfo {
            name: r.get(1)?,
            not_null: r.get(3)?,
            default: r.get(4)?,
            primary_key: r.get::<_, i64>(5)? > 0,
        })
    })?
    .collect()
}

pub(super) fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    Ok(table_info(conn, table)?.iter().any(|c| c.name == column))
}

pub(super) fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}
