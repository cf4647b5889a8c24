//! Go Crush and crush share a project's `.crush/crush.db`, in both directions.
//!
//! The fixture below builds a database exactly as Go Crush's goose migrations leave it (tables,
//! columns, constraints, indexes, triggers and `goose_db_version` rows), and the `GO_*`
//! statements are the writes and reads Go Crush makes (its sqlc queries), run here against files
//! the real `crush` binary created and touched. `goose_up` does what Go Crush does to the file at
//! startup. Each test fails if Go Crush could not start or write afterwards.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `goose_db_version` exactly as goose (v3, sqlite3 dialect) creates it.
const GOOSE_TABLE: &str = "CREATE TABLE goose_db_version (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		version_id INTEGER NOT NULL,
		is_applied INTEGER NOT NULL,
		tstamp TIMESTAMP DEFAULT (datetime('now'))
	)";

/// Go Crush's migrations (the `-- +goose Up` sections), oldest first.
pub(super) const GO_MIGRATIONS: &[(i64, &str)] = &[
    (
        20250424200609,
        r#"
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    created_at INTEGER NOT NULL   -- Unix timestamp in milliseconds
);

CREATE TRIGGER IF NOT EXISTS update_sessions_updated_at
AFTER UPDATE ON sessions
BEGIN
UPDATE sessions SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE(path, session_id, version)
);

CREATE INDEX IF NOT EXISTS idx_files_session_id ON files (session_id);
CREATE INDEX IF NOT EXISTS idx_files_path ON files (path);

CREATE TRIGGER IF NOT EXISTS update_files_updated_at
AFTER UPDATE ON files
BEGIN
UPDATE files SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    finished_at INTEGER,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id);

CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
UPDATE messages SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count + 1
WHERE id = new.session_id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_delete
AFTER DELETE ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count - 1
WHERE id = old.session_id;
END;
"#,
    ),
    (
        20250515105448,
        "ALTER TABLE sessions ADD COLUMN summary_message_id TEXT;",
    ),
    (
        20250624000000,
        "CREATE INDEX IF NOT EXISTS idx_sessions_created_at ON sessions (created_at);
CREATE INDEX IF NOT EXISTS idx_messages_created_at ON messages (created_at);
CREATE INDEX IF NOT EXISTS idx_files_created_at ON files (created_at);",
    ),
    (
        20250627000000,
        "ALTER TABLE messages ADD COLUMN provider TEXT;",
    ),
    (
        20250810000000,
        "ALTER TABLE messages ADD COLUMN is_summary_message INTEGER DEFAULT 0 NOT NULL;",
    ),
    (
        20250812000000,
        "ALTER TABLE sessions ADD COLUMN todos TEXT;",
    ),
    (
        20260127000000,
        "CREATE TABLE IF NOT EXISTS read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,  -- Unix timestamp in seconds when file was last read
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
);

CREATE INDEX IF NOT EXISTS idx_read_files_session_id ON read_files (session_id);
CREATE INDEX IF NOT EXISTS idx_read_files_path ON read_files (path);",
    ),
];

/// The newest migration Go Crush ships.
const GO_LATEST: i64 = 20260127000000;

// Go Crush's statements (sqlc), verbatim in what they set and return.
const GO_CREATE_SESSION: &str = "INSERT INTO sessions (
    id, parent_session_id, title, message_count, prompt_tokens, completion_tokens, cost,
    summary_message_id, updated_at, created_at
) VALUES (?, ?, ?, ?, ?, ?, ?, null, strftime('%s', 'now'), strftime('%s', 'now'))
RETURNING id, parent_session_id, title, message_count, prompt_tokens, completion_tokens, cost,
    updated_at, created_at, summary_message_id, todos";
const GO_CREATE_MESSAGE: &str = "INSERT INTO messages (
    id, session_id, role, parts, model, provider, is_summary_message, created_at, updated_at
) VALUES (?, ?, ?, ?, ?, ?, ?, strftime('%s', 'now'), strftime('%s', 'now'))
RETURNING id, session_id, role, parts, model, created_at, updated_at, finished_at, provider,
    is_summary_message";
const GO_UPDATE_MESSAGE: &str = "UPDATE messages SET parts = ?, finished_at = ?,
    updated_at = strftime('%s', 'now') WHERE id = ?";
const GO_UPDATE_SESSION: &str = "UPDATE sessions SET title = ?, prompt_tokens = ?,
    completion_tokens = ?, summary_message_id = ?, cost = ?, todos = ? WHERE id = ?
RETURNING id, parent_session_id, title, message_count, prompt_tokens, completion_tokens, cost,
    updated_at, created_at, summary_message_id, todos";
const GO_UPDATE_SESSION_TITLE_AND_USAGE: &str = "UPDATE sessions SET title = ?,
    prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?,
    cost = cost + ?, updated_at = strftime('%s', 'now') WHERE id = ?";
const GO_CREATE_FILE: &str = "INSERT INTO files (
    id, session_id, path, content, version, created_at, updated_at
) VALUES (?, ?, ?, ?, ?, strftime('%s', 'now'), strftime('%s', 'now'))
RETURNING id, session_id, path, content, version, created_at, updated_at";
const GO_RECORD_FILE_READ: &str = "INSERT INTO read_files (session_id, path, read_at)
VALUES (?, ?, strftime('%s', 'now'))
ON CONFLICT(path, session_id) DO UPDATE SET read_at = excluded.read_at";
const GO_GET_SESSION: &str = "SELECT id, parent_session_id, title, message_count, prompt_tokens,
    completion_tokens, cost, updated_at, created_at, summary_message_id, todos
FROM sessions WHERE id = ? LIMIT 1";
const GO_LIST_SESSIONS: &str = "SELECT id, parent_session_id, title, message_count,
    prompt_tokens, completion_tokens, cost, updated_at, created_at, summary_message_id, todos
FROM sessions WHERE parent_session_id is NULL ORDER BY updated_at DESC";
const GO_LIST_MESSAGES: &str = "SELECT id, session_id, role, parts, model, created_at,
    updated_at, finished_at, provider, is_summary_message
FROM messages WHERE session_id = ? ORDER BY created_at ASC";

/// A session row scanned into Go Crush's types (`db.Session`).
#[derive(Debug)]
struct GoSession {
    id: String,
    title: String,
    message_count: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
    cost: f64,
}

fn go_session(r: &rusqlite::Row<'_>) -> rusqlite::Result<GoSession> {
    let _parent: Option<String> = r.get(1)?;
    let _updated: i64 = r.get(7)?;
    let _created: i64 = r.get(8)?;
    let _summary: Option<String> = r.get(9)?;
    let _todos: Option<String> = r.get(10)?;
    Ok(GoSession {
        id: r.get(0)?,
        title: r.get(2)?,
        message_count: r.get(3)?,
        prompt_tokens: r.get(4)?,
        completion_tokens: r.get(5)?,
        cost: r.get(6)?,
    })
}

/// A message row scanned into Go Crush's types (`db.Message`), parts decoded as Go decodes them.
#[derive(Debug)]
struct GoMessage {
    id: String,
    role: String,
    parts: String,
    decoded: Vec<(String, Value)>,
}

fn go_message(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String)> {
    let _session: String = r.get(1)?;
    let _model: Option<String> = r.get(4)?;
    let _created: i64 = r.get(5)?;
    let _updated: i64 = r.get(6)?;
    let _finished: Option<i64> = r.get(7)?;
    let _provider: Option<String> = r.get(8)?;
    let _summary: i64 = r.get(9)?;
    Ok((r.get(0)?, r.get(2)?, r.get(3)?))
}

/// Opens the file as Go Crush does (its pragmas).
pub(super) fn go_open(path: &Path) -> Connection {
    let c = Connection::open(path).expect("open the database as Go Crush");
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.pragma_update(None, "foreign_keys", "ON").unwrap();
    let _: String = c
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    c.pragma_update(None, "secure_delete", "ON").unwrap();
    c
}

fn table_exists(c: &Connection, name: &str) -> bool {
    c.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |_| Ok(()),
    )
    .optional()
    .unwrap()
    .is_some()
}

/// What Go Crush's startup (`goose.Up` over `migrations`) does to the file: create the version
/// table (with a row for version 0) if missing, refuse migrations missing below the newest
/// version recorded, apply the newer ones, each in a transaction with its version row. Returns
/// the versions applied, or goose's error.
fn goose_up(c: &mut Connection, migrations: &[(i64, &str)]) -> Result<Vec<i64>, String> {
    let e = |e: rusqlite::Error| e.to_string();
    if !table_exists(c, "goose_db_version") {
        let tx = c.transaction().map_err(e)?;
        tx.execute_batch(GOOSE_TABLE).map_err(e)?;
        tx.execute(
            "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)",
            params![0, true],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
    }
    let recorded: Vec<i64> = c
        .prepare("SELECT version_id, is_applied from goose_db_version ORDER BY id DESC")
        .map_err(e)?
        .query_map([], |r| r.get(0))
        .map_err(e)?
        .collect::<rusqlite::Result<_>>()
        .map_err(e)?;
    let max = recorded.iter().copied().max().unwrap_or(0);
    let missing: Vec<i64> = migrations
        .iter()
        .map(|m| m.0)
        .filter(|v| !recorded.contains(v) && *v < max)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "found {} missing migrations before current version {max}: {missing:?}",
            missing.len()
        ));
    }
    let mut applied = Vec::new();
    for (v, sql) in migrations.iter().filter(|m| m.0 > max) {
        let tx = c.transaction().map_err(e)?;
        tx.execute_batch(sql)
            .map_err(|err| format!("ERROR {v}: failed to run SQL migration: {err}"))?;
        tx.execute(
            "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)",
            params![v, true],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        applied.push(*v);
    }
    Ok(applied)
}

/// Builds a database as Go Crush leaves it after `migrations` (at rest: WAL mode, no -wal file).
pub(super) fn go_database(path: &Path, migrations: &[(i64, &str)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut c = go_open(path);
    assert_eq!(
        goose_up(&mut c, migrations).unwrap().len(),
        migrations.len()
    );
}

/// Go Crush's `session.Create`.
fn go_create_session(c: &Connection, id: &str, title: &str) -> Result<GoSession, String> {
    c.query_row(
        GO_CREATE_SESSION,
        params![id, None::<String>, title, 0, 0, 0, 0.0],
        go_session,
    )
    .map_err(|e| e.to_string())
}

/// Go Crush's `message.Create` (it sets no ordering key).
fn go_create_message(
    c: &Connection,
    id: &str,
    session: &str,
    role: &str,
    parts: &str,
) -> Result<(), String> {
    c.query_row(
        GO_CREATE_MESSAGE,
        params![id, session, role, parts, "gpt-go", "openai", 0],
        go_message,
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

fn go_get_session(c: &Connection, id: &str) -> GoSession {
    c.query_row(GO_GET_SESSION, [id], go_session)
        .unwrap_or_else(|e| panic!("Go's GetSessionByID {id}: {e}"))
}

/// Go Crush's `message.List`: every row scanned and its parts decoded with Go's types.
fn go_list_messages(c: &Connection, session: &str) -> Vec<GoMessage> {
    let rows: Vec<(String, String, String)> = c
        .prepare(GO_LIST_MESSAGES)
        .unwrap()
        .query_map([session], go_message)
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap_or_else(|e| panic!("Go's ListMessagesBySession: {e}"));
    rows.into_iter()
        .map(|(id, role, parts)| {
            let decoded = go_unmarshal_parts(&parts)
                .unwrap_or_else(|e| panic!("Go cannot decode message {id} ({parts}): {e}"));
            GoMessage {
                id,
                role,
                parts,
                decoded,
            }
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Object,
    Base64,
}

/// Go Crush's `unmarshalParts`: an array of `{type, data}`; an unknown type is an error, and a
/// field whose JSON value does not fit its Go type is an error (missing and extra fields are not).
fn go_unmarshal_parts(text: &str) -> Result<Vec<(String, Value)>, String> {
    use Kind::*;
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let parts = v.as_array().ok_or("parts is not an array")?;
    let mut out = Vec::new();
    for p in parts {
        let ty = p["type"].as_str().unwrap_or_default();
        let fields: &[(&str, Kind)] = match ty {
            "text" => &[("text", Str)],
            "reasoning" => &[
                ("thinking", Str),
                ("signature", Str),
                ("thought_signature", Str),
                ("tool_id", Str),
                ("responses_data", Object),
                ("started_at", Int),
                ("finished_at", Int),
            ],
            "image_url" => &[("url", Str), ("detail", Str)],
            "binary" => &[("Path", Str), ("MIMEType", Str), ("Data", Base64)],
            "tool_call" => &[
                ("id", Str),
                ("name", Str),
                ("input", Str),
                ("provider_executed", Bool),
                ("finished", Bool),
            ],
            "tool_result" => &[
                ("tool_call_id", Str),
                ("name", Str),
                ("content", Str),
                ("data", Str),
                ("mime_type", Str),
                ("metadata", Str),
                ("is_error", Bool),
            ],
            "finish" => &[
                ("reason", Str),
                ("time", Int),
                ("message", Str),
                ("details", Str),
            ],
            "shell_command" => &[("command", Str), ("output", Str), ("exit_code", Int)],
            other => return Err(format!("unknown part type: {other}")),
        };
        let data = &p["data"];
        let obj = match data {
            Value::Null => None,
            Value::Object(o) => Some(o),
            other => return Err(format!("{ty}: data is {other}, not an object")),
        };
        for (name, kind) in fields {
            // Go matches field names case-insensitively.
            let Some(val) = obj.and_then(|o| {
                o.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v)
            }) else {
                continue;
            };
            let fits = match (kind, val) {
                (_, Value::Null) => true,
                (Str, v) => v.is_string(),
                (Int, v) => v.is_i64(),
                (Bool, v) => v.is_boolean(),
                (Object, v) => v.is_object(),
                (Base64, Value::String(s)) => is_base64(s),
                (Base64, _) => false,
            };
            if !fits {
                return Err(format!("{ty}.{name}: {val} does not fit the Go field"));
            }
        }
        out.push((ty.to_string(), data.clone()));
    }
    Ok(out)
}

fn is_base64(s: &str) -> bool {
    s.len().is_multiple_of(4)
        && s.trim_end_matches('=').len() + 2 >= s.len()
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The text Go Crush attached (a `binary` part of MIME type text/plain).
const ATTACHED_TEXT: &str = "remember the milk";
/// A Go Crush session using every part type, written with Go's statements. Returns its id.
pub(super) fn go_conversation(c: &Connection) -> String {
    let sid = "0b6e2a9c-5c2f-4b7e-9d51-2f1a7c3e8d40";
    go_create_session(c, sid, "Go made this").unwrap();
    let user = json!([
        {"type": "text", "data": {"text": "What does notes.md say?"}},
        {"type": "binary", "data": {"Path": "notes.md", "MIMEType": "text/plain",
            "Data": base64(ATTACHED_TEXT.as_bytes())}},
        {"type": "binary", "data": {"Path": "shot.png", "MIMEType": "image/png",
            "Data": base64(b"\x89PNG\r\n\x1a\nfake")}},
        {"type": "image_url", "data": {"url": "https://example.com/cat.png", "detail": "high"}},
        {"type": "finish", "data": {"reason": "stop", "time": 0}}
    ]);
    let assistant = json!([
        {"type": "reasoning", "data": {"thinking": "Look at the file.", "signature": "sig-1",
            "thought_signature": "", "tool_id": "", "responses_data": null,
            "started_at": 1_700_000_000, "finished_at": 1_700_000_001}},
        {"type": "text", "data": {"text": "Let me read it."}},
        {"type": "tool_call", "data": {"id": "call_go_1", "name": "view",
            "input": "{\"file_path\":\"notes.md\"}", "provider_executed": false, "finished": true}},
        {"type": "finish", "data": {"reason": "tool_use", "time": 1_700_000_002}}
    ]);
    let tool = json!([
        {"type": "tool_result", "data": {"tool_call_id": "call_go_1", "name": "view",
            "content": "remember the milk", "data": "", "mime_type": "", "metadata": "",
            "is_error": false}},
        {"type": "finish", "data": {"reason": "stop", "time": 0}}
    ]);
    let answer = json!([
        {"type": "text", "data": {"text": "It says: remember the milk."}},
        {"type": "finish", "data": {"reason": "end_turn", "time": 1_700_000_003}}
    ]);
    let shell = json!([
        {"type": "shell_command", "data": {"command": "ls", "output": "notes.md\n", "exit_code": 0}},
        {"type": "finish", "data": {"reason": "stop", "time": 0}}
    ]);
    for (id, role, parts) in [
        ("go-m1", "user", user),
        ("go-m2", "assistant", assistant),
        ("go-m3", "tool", tool),
        ("go-m4", "assistant", answer),
        ("go-m5", "user", shell),
    ] {
        go_create_message(c, id, sid, role, &parts.to_string())
            .unwrap_or_else(|e| panic!("Go's CreateMessage {id}: {e}"));
    }
    c.query_row(
        GO_UPDATE_SESSION,
        params![
            "Go made this",
            1500,
            40,
            None::<String>,
            0.02,
            None::<String>,
            sid
        ],
        go_session,
    )
    .unwrap();
    c.query_row(
        GO_CREATE_FILE,
        params!["go-f1", sid, "notes.md", ATTACHED_TEXT, 0],
        |_| Ok(()),
    )
    .unwrap();
    c.execute(GO_RECORD_FILE_READ, params![sid, "notes.md"])
        .unwrap();
    sid.to_string()
}

/// Every write Go Crush makes in a turn, on `session` (which may be one crush created) and on a
/// new session of its own; fails (with Go's error) if any of them does. Returns the new session.
fn go_writes(c: &Connection, session: &str, tag: &str) -> Result<String, String> {
    let e = |what: &str, err: rusqlite::Error| format!("Go's {what}: {err}");
    let text = |t: &str| json!([{"type": "text", "data": {"text": t}}]).to_string();
    // Two messages in a row in an existing session: the second is where a per-session ordering
    // key without a value would collide.
    go_create_message(c, &format!("{tag}-u"), session, "user", &text("go asks"))?;
    go_create_message(c, &format!("{tag}-a"), session, "assistant", "[]")?;
    let done = json!([{"type": "text", "data": {"text": "go answers"}},
        {"type": "finish", "data": {"reason": "end_turn", "time": 1_700_000_100}}]);
    c.execute(
        GO_UPDATE_MESSAGE,
        params![done.to_string(), 1_700_000_100_i64, format!("{tag}-a")],
    )
    .map_err(|err| e("UpdateMessage", err))?;
    let s = go_get_session(c, session);
    c.query_row(
        GO_UPDATE_SESSION,
        params![
            s.title,
            1234,
            56,
            None::<String>,
            s.cost + 0.01,
            r#"[{"content":"x","status":"pending","active_form":"x"}]"#,
            session
        ],
        go_session,
    )
    .map_err(|err| e("UpdateSession", err))?;
    c.execute(
        GO_UPDATE_SESSION_TITLE_AND_USAGE,
        params![s.title, 10, 2, 0.001, session],
    )
    .map_err(|err| e("UpdateSessionTitleAndUsage", err))?;
    c.query_row(
        GO_CREATE_FILE,
        params![
            format!("{tag}-f"),
            session,
            format!("{tag}.txt"),
            "content",
            0
        ],
        |_| Ok(()),
    )
    .map_err(|err| e("CreateFile", err))?;
    c.execute(GO_RECORD_FILE_READ, params![session, format!("{tag}.txt")])
        .map_err(|err| e("RecordFileRead", err))?;
    // A new session of Go's own, with two messages.
    let sid = format!("{tag}-session");
    go_create_session(c, &sid, "Go's own")?;
    go_create_message(c, &format!("{tag}-n1"), &sid, "user", &text("one"))?;
    go_create_message(c, &format!("{tag}-n2"), &sid, "assistant", &text("two"))?;
    Ok(sid)
}

fn db_path(env: &TestEnv) -> PathBuf {
    env.project().join(".crush").join("crush.db")
}

fn goose_rows(c: &Connection) -> Vec<(i64, i64, i64)> {
    c.prepare("SELECT id, version_id, is_applied FROM goose_db_version ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// `(version, id)` rows goose writes for `migrations` on a new file: version 0 first.
fn expected_goose_rows(migrations: &[(i64, &str)]) -> Vec<(i64, i64, i64)> {
    std::iter::once(0)
        .chain(migrations.iter().map(|m| m.0))
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, v, 1))
        .collect()
}

/// SQL text without comments, case or layout differences.
fn normalize(sql: &str) -> String {
    let no_comments: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::new();
    for word in no_comments.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    for p in ["(", ")", ",", "=", ">", "!", "+", "-"] {
        out = out
            .replace(&format!(" {p}"), p)
            .replace(&format!("{p} "), p);
    }
    out
}

/// A normalized CREATE TABLE without the definitions of `columns`.
fn without_columns(create: &str, columns: &[String]) -> String {
    let Some(open) = create.find('(') else {
        return create.to_string();
    };
    let body = &create[open + 1..create.len() - 1];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in body.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    let kept: Vec<&str> = items
        .into_iter()
        .filter(|item| !columns.iter().any(|c| item.starts_with(&format!("{c} "))))
        .collect();
    format!("{}({})", &create[..open], kept.join(","))
}

type Rows = Vec<Vec<String>>;

fn pragma_rows(c: &Connection, pragma: &str) -> Rows {
    let mut stmt = c.prepare(pragma).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| {
                r.get::<_, rusqlite::types::Value>(i)
                    .map(|v| format!("{v:?}"))
            })
            .collect()
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

fn schema_objects(c: &Connection, kind: &str) -> BTreeMap<String, (String, Option<String>)> {
    c.prepare("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = ?1")
        .unwrap()
        .query_map([kind], |r| {
            Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?)))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Everything Go Crush's migrations leave in `go` is in `ours` as they leave it: the same
/// `goose_db_version` (definition and rows), each of Go's tables with Go's columns first and
/// exactly as declared (types, NOT NULL, defaults, keys, CHECKs, foreign keys), our columns only
/// appended, and each of Go's indexes and triggers.
fn assert_go_schema(ours: &Connection, go: &Connection) {
    assert_eq!(goose_rows(ours), goose_rows(go), "goose_db_version rows");
    let goose_sql = |c: &Connection| {
        c.query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'goose_db_version'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
    };
    assert_eq!(goose_sql(ours), goose_sql(go));
    let stamps: Vec<String> = ours
        .prepare("SELECT tstamp FROM goose_db_version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for s in stamps {
        let b = s.as_bytes();
        assert!(
            s.len() == 19 && b[4] == b'-' && b[10] == b' ' && b[13] == b':',
            "tstamp {s:?} is SQLite datetime('now')"
        );
    }
    let ours_tables = schema_objects(ours, "table");
    for (name, (_, sql)) in schema_objects(go, "table") {
        let (_, our_sql) = ours_tables
            .get(&name)
            .unwrap_or_else(|| panic!("table {name} is missing"));
        if name == "sqlite_sequence" || name == "goose_db_version" {
            continue;
        }
        let go_cols = pragma_rows(go, &format!("PRAGMA table_xinfo({name})"));
        let our_cols = pragma_rows(ours, &format!("PRAGMA table_xinfo({name})"));
        assert!(
            our_cols.len() >= go_cols.len() && our_cols[..go_cols.len()] == go_cols[..],
            "columns of {name}:\n go:   {go_cols:?}\n ours: {our_cols:?}"
        );
        assert_eq!(
            pragma_rows(ours, &format!("PRAGMA foreign_key_list({name})")),
            pragma_rows(go, &format!("PRAGMA foreign_key_list({name})")),
            "foreign keys of {name}"
        );
        // Go's definition (CHECKs and table constraints included), once our columns are left
        // out of ours.
        let extra: Vec<String> = our_cols[go_cols.len()..]
            .iter()
            .map(|c| {
                c[1].trim_start_matches("Text(\"")
                    .trim_end_matches("\")")
                    .to_string()
            })
            .collect();
        let g = normalize(sql.as_deref().unwrap_or_default());
        let o = without_columns(&normalize(our_sql.as_deref().unwrap_or_default()), &extra);
        assert_eq!(o, g, "definition of {name} without {extra:?}");
        // Our indexes on Go's tables are ours; Go's are all there.
        let our_indexes: Vec<String> = pragma_rows(ours, &format!("PRAGMA index_list({name})"))
            .into_iter()
            .map(|r| r[1].clone())
            .collect();
        for gi in pragma_rows(go, &format!("PRAGMA index_list({name})")) {
            assert!(
                our_indexes.contains(&gi[1]),
                "index {} of {name} is missing",
                gi[1]
            );
            let index = gi[1].trim_start_matches("Text(\"").trim_end_matches("\")");
            assert_eq!(
                pragma_rows(ours, &format!("PRAGMA index_xinfo({index})")),
                pragma_rows(go, &format!("PRAGMA index_xinfo({index})")),
                "index {index}"
            );
        }
    }
    for kind in ["index", "trigger"] {
        let theirs = schema_objects(go, kind);
        let mine = schema_objects(ours, kind);
        for (name, (table, sql)) in theirs {
            let (our_table, our_sql) = mine
                .get(&name)
                .unwrap_or_else(|| panic!("{kind} {name} is missing"));
            assert_eq!(our_table, &table, "{kind} {name}");
            assert_eq!(
                our_sql.as_deref().map(normalize),
                sql.as_deref().map(normalize),
                "{kind} {name}"
            );
        }
    }
    let seq = |c: &Connection| -> i64 {
        c.query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'goose_db_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        seq(ours),
        seq(go),
        "goose_db_version's AUTOINCREMENT counter"
    );
}

/// The ordering key crush keeps for `session`, in Go's insertion order: present for every
/// message, unique, increasing.
fn assert_ordering_key(c: &Connection, session: &str) {
    let seqs: Vec<Option<i64>> = c
        .prepare("SELECT seq FROM messages WHERE session_id = ?1 ORDER BY rowid")
        .unwrap()
        .query_map([session], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(!seqs.is_empty());
    for w in seqs.windows(2) {
        assert!(
            matches!(w, [Some(a), Some(b)] if a < b),
            "seq of {session} in insertion order: {seqs:?}"
        );
    }
}

fn server() -> FakeServer {
    FakeServer::always_text("Noted.")
}

fn env_with(server: &FakeServer) -> TestEnv {
    let env = TestEnv::new();
    env.use_server(server, Dialect::OpenAi);
    env
}

#[test]
fn a_database_crush_creates_is_the_one_go_crush_migrations_leave_and_go_writes_to_it() {
    // A turn with a tool call: crush writes text, tool_call, tool_result and finish parts.
    let server = FakeServer::with_script(vec![Reply::tool_call("ls", json!({}))]);
    server.set_fallback(Some(Reply::text("Noted.")));
    let env = env_with(&server);
    env.run(&["run", "-q", "hello"], None).assert_success();
    let ours_path = db_path(&env);

    let fixture = env.root().join("go").join("crush.db");
    go_database(&fixture, GO_MIGRATIONS);
    assert_eq!(
        goose_rows(&go_open(&fixture)),
        expected_goose_rows(GO_MIGRATIONS)
    );
    assert_go_schema(&go_open(&ours_path), &go_open(&fixture));

    // Go Crush starts: goose has nothing to apply.
    let mut c = go_open(&ours_path);
    assert_eq!(goose_up(&mut c, GO_MIGRATIONS), Ok(vec![]));
    // Go Crush writes to crush's session and to one of its own.
    let ours = c
        .query_row(GO_LIST_SESSIONS, [], go_session)
        .expect("Go lists crush's session");
    let before = ours.message_count;
    let go_sid = go_writes(&c, &ours.id, "go").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(go_get_session(&c, &ours.id).message_count, before + 2);
    assert_ordering_key(&c, &ours.id);
    assert_ordering_key(&c, &go_sid);
    // Go reads crush's messages with its own types.
    let msgs = go_list_messages(&c, &ours.id);
    assert_eq!(msgs.len() as i64, before + 2);
    let kinds: Vec<&str> = msgs
        .iter()
        .flat_map(|m| m.decoded.iter().map(|(t, _)| t.as_str()))
        .collect();
    for kind in ["text", "tool_call", "tool_result", "finish"] {
        assert!(kinds.contains(&kind), "no {kind} part in {kinds:?}");
    }
    assert!(msgs.iter().any(|m| {
        m.role == "assistant"
            && m.decoded
                .iter()
                .any(|(t, d)| t == "text" && d["text"] == "Noted.")
    }));
    drop(c);

    // crush reads and continues the session Go wrote to last, in Go's order.
    let list = env.run(&["sessions", "list"], None);
    list.assert_success();
    assert!(list.stdout.contains("Go's own"), "{}", list.stdout);
    env.run(&["run", "-q", "-s", &ours.id, "and now?"], None)
        .assert_success();
    let last = server.model_requests().last().unwrap().user_texts();
    assert_eq!(last, ["hello", "go asks", "and now?"], "history in order");
    let c = go_open(&ours_path);
    assert_ordering_key(&c, &ours.id);
    // And Go writes again.
    go_writes(&c, &ours.id, "go2").unwrap_or_else(|e| panic!("{e}"));
    for s in [&ours.id, &go_sid] {
        go_list_messages(&c, s);
    }
}

#[test]
fn read_only_commands_leave_a_go_database_untouched() {
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, GO_MIGRATIONS);
    let sid = go_conversation(&go_open(&path));
    // Go Crush closed it: the WAL is checkpointed and gone.
    assert!(!path.with_extension("db-wal").exists());
    let bytes = std::fs::read(&path).unwrap();
    let listing = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let files = listing(path.parent().unwrap());

    let show = env.run(&["sessions", "show", &sid[..8]], None);
    show.assert_success();
    for want in [
        "What does notes.md say?",
        "notes.md (text/plain",
        "shot.png (image/png",
        "https://example.com/cat.png",
        "It says: remember the milk.",
        "$ ls",
        "tokens not itemized (Go Crush's last call: 1500 in, 40 out)",
    ] {
        assert!(
            show.stdout.contains(want),
            "show lacks {want:?}:\n{}",
            show.stdout
        );
    }
    assert!(!show.stdout.contains("finished: stop"), "{}", show.stdout);
    let export = env.run(&["sessions", "export", &sid[..8]], None);
    export.assert_success();
    assert!(export.stdout.contains("shot.png"), "{}", export.stdout);
    let json_export = env.run(&["sessions", "export", &sid, "--format", "json"], None);
    json_export.assert_success();
    let doc: Value = serde_json::from_str(&json_export.stdout).unwrap();
    let parts = &doc["messages"][0]["parts"];
    assert_eq!(parts[1]["type"], "binary");
    assert_eq!(parts[1]["data"]["Path"], "notes.md");
    assert_eq!(parts[3]["type"], "image_url");
    assert_eq!(
        doc["meta"]["prompt_tokens"], 1500,
        "Go's value, Go's meaning"
    );
    for args in [
        &["sessions", "list"][..],
        &["sessions", "list", "--json"][..],
        &["sessions", "show", &sid, "--json"][..],
        &["stats"][..],
        &["stats", "--json"][..],
    ] {
        let out = env.run(args, None);
        out.assert_success();
        if args[0] == "sessions" && args[1] == "list" {
            assert!(
                out.stdout.contains("Go made this"),
                "{args:?}: {}",
                out.stdout
            );
        }
    }
    // `logs` reads no database (and there is no log yet).
    let logs = env.run(&["logs"], None);
    assert!(!logs.stderr.contains("crush.db"), "{}", logs.stderr);

    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");
    assert_eq!(listing(path.parent().unwrap()), files, "files appeared");
    let c = go_open(&path);
    assert_eq!(goose_rows(&c), expected_goose_rows(GO_MIGRATIONS));
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 0);
    assert!(!table_exists(&c, "usage"));
}

#[test]
fn crush_continues_a_go_session_with_every_part_type_and_go_keeps_writing() {
    let server = FakeServer::with_script(vec![
        Reply::text("Still milk.").with_usage(2000, 30, 500, 100),
    ]);
    server.set_fallback(Some(Reply::text("ok")));
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, GO_MIGRATIONS);
    let sid = go_conversation(&go_open(&path));
    let go_parts: Vec<(String, String)> = go_list_messages(&go_open(&path), &sid)
        .into_iter()
        .map(|m| (m.id, m.parts))
        .collect();

    let out = env.run(&["run", "-q", "-C", "and the picture?"], None);
    out.assert_success();
    assert_eq!(out.stdout, "Still milk.\n");
    let req = server.model_requests()[0].clone();
    let users = req.user_texts();
    assert!(users[0].contains("What does notes.md say?"), "{users:?}");
    assert!(
        users[0].contains(ATTACHED_TEXT),
        "the attached text reaches the model: {users:?}"
    );
    assert!(
        users[0].contains("shot.png"),
        "the image is named in a placeholder: {users:?}"
    );
    assert!(
        users
            .iter()
            .any(|u| u.contains("$ ls") || u.contains("!ls"))
    );
    assert_eq!(users.last().unwrap(), "and the picture?");
    let results = req.tool_results();
    assert_eq!(results[0].0, "call_go_1");

    let mut c = go_open(&path);
    // Go Crush still starts, with nothing to migrate, and its rows are as it wrote them.
    assert_eq!(goose_up(&mut c, GO_MIGRATIONS), Ok(vec![]));
    assert_eq!(goose_rows(&c), expected_goose_rows(GO_MIGRATIONS));
    let msgs = go_list_messages(&c, &sid);
    for (id, parts) in &go_parts {
        let now = msgs.iter().find(|m| &m.id == id).unwrap();
        assert_eq!(&now.parts, parts, "message {id} is unchanged");
    }
    assert_eq!(msgs.len(), go_parts.len() + 2);
    // Go's context meter reads the last call's context, as Go assigns it.
    let s = go_get_session(&c, &sid);
    assert_eq!((s.prompt_tokens, s.completion_tokens), (2500, 30));
    assert!(s.cost > 0.02, "crush added its cost to Go's: {}", s.cost);
    let (tp, tc): (i64, i64) = c
        .query_row(
            "SELECT total_prompt_tokens, total_completion_tokens FROM sessions WHERE id = ?1",
            [&sid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(tp >= 2600 && tc >= 30, "crush's totals: {tp} {tc}");
    // Go's turn after crush's.
    go_writes(&c, &sid, "go").unwrap_or_else(|e| panic!("{e}"));
    assert_ordering_key(&c, &sid);
    let fixture = env.root().join("go").join("crush.db");
    go_database(&fixture, GO_MIGRATIONS);
    assert_go_schema(&c, &go_open(&fixture));
}

#[test]
fn an_older_go_database_is_brought_to_gos_latest_level_as_goose_would() {
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, &GO_MIGRATIONS[..3]);
    let sid = "0b6e2a9c-0000-4b7e-9d51-2f1a7c3e8d40";
    let c = go_open(&path);
    c.execute(
        "INSERT INTO sessions (id, title, created_at, updated_at)
         VALUES (?1, 'old go', 5, 5)",
        [sid],
    )
    .unwrap();
    c.execute(
        "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
         VALUES ('old-1', ?1, 'user', '[{\"type\":\"text\",\"data\":{\"text\":\"old question\"}}]', 7, 7)",
        [sid],
    )
    .unwrap();
    drop(c);
    env.run(&["run", "-q", "-C", "new question"], None)
        .assert_success();
    assert_eq!(
        server.model_requests()[0].user_texts(),
        ["old question", "new question"]
    );
    let fixture = env.root().join("go").join("crush.db");
    go_database(&fixture, GO_MIGRATIONS);
    let mut c = go_open(&path);
    assert_go_schema(&c, &go_open(&fixture));
    assert_eq!(goose_up(&mut c, GO_MIGRATIONS), Ok(vec![]));
    go_writes(&c, sid, "go").unwrap_or_else(|e| panic!("{e}"));
}

/// A migration of a Go Crush newer than this crush.
const NEWER: i64 = 20260301000000;

#[test]
fn a_newer_go_database_is_read_and_written_only_when_every_write_fits() {
    // A newer migration that crush's writes satisfy (a column with a default).
    let compatible: Vec<(i64, &str)> = GO_MIGRATIONS
        .iter()
        .copied()
        .chain([(
            NEWER,
            "ALTER TABLE messages ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;",
        )])
        .collect();
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, &compatible);
    let sid = go_conversation(&go_open(&path));
    env.run(&["sessions", "list"], None).assert_success();
    env.run(&["run", "-q", "-C", "more"], None).assert_success();
    let mut c = go_open(&path);
    assert_eq!(goose_rows(&c), expected_goose_rows(&compatible));
    assert_eq!(goose_up(&mut c, &compatible), Ok(vec![]));
    go_writes(&c, &sid, "go").unwrap_or_else(|e| panic!("{e}"));
    drop(c);

    // One that they do not: a column crush does not know and cannot fill.
    let incompatible: Vec<(i64, &str)> = GO_MIGRATIONS
        .iter()
        .copied()
        .chain([(
            NEWER,
            "CREATE TABLE messages_new (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
                role TEXT NOT NULL, parts TEXT NOT NULL default '[]', model TEXT,
                created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER,
                provider TEXT, is_summary_message INTEGER DEFAULT 0 NOT NULL,
                turn_id TEXT NOT NULL,
                FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE);
             DROP TABLE messages;
             ALTER TABLE messages_new RENAME TO messages;",
        )])
        .collect();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, &incompatible);
    let c = go_open(&path);
    go_create_session(&c, "s-new", "newer go").unwrap();
    drop(c);
    let bytes = std::fs::read(&path).unwrap();
    let requests = server.model_requests().len();
    let list = env.run(&["sessions", "list"], None);
    list.assert_success();
    assert!(list.stdout.contains("newer go"), "{}", list.stdout);
    let out = env.run(&["run", "-q", "-C", "more"], None);
    assert_ne!(out.code, 0);
    for want in [
        NEWER.to_string(),
        GO_LATEST.to_string(),
        "messages.turn_id".into(),
    ] {
        assert!(
            out.stderr.contains(&want),
            "error lacks {want}: {}",
            out.stderr
        );
    }
    assert_eq!(server.model_requests().len(), requests, "no model call");
    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");
}

/// The schema this crush's previous release created (`PRAGMA user_version` 1): Go's columns, but
/// `messages.seq` without a default and no `goose_db_version`.
const OLD_CRUSH_SCHEMA: &str = r#"
CREATE TABLE sessions (
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
CREATE INDEX idx_sessions_created_at ON sessions (created_at);
CREATE INDEX idx_sessions_parent_session_id ON sessions (parent_session_id);
CREATE TRIGGER update_sessions_updated_at AFTER UPDATE ON sessions
BEGIN UPDATE sessions SET updated_at = strftime('%s', 'now') WHERE id = new.id; END;
CREATE TABLE files (
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
CREATE INDEX idx_files_session_id ON files (session_id);
CREATE INDEX idx_files_path ON files (path);
CREATE INDEX idx_files_created_at ON files (created_at);
CREATE TRIGGER update_files_updated_at AFTER UPDATE ON files
BEGIN UPDATE files SET updated_at = strftime('%s', 'now') WHERE id = new.id; END;
CREATE TABLE messages (
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
CREATE INDEX idx_messages_session_id ON messages (session_id);
CREATE INDEX idx_messages_created_at ON messages (created_at);
CREATE TRIGGER update_messages_updated_at AFTER UPDATE ON messages
BEGIN UPDATE messages SET updated_at = strftime('%s', 'now') WHERE id = new.id; END;
CREATE TRIGGER update_session_message_count_on_insert AFTER INSERT ON messages
BEGIN UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id; END;
CREATE TRIGGER update_session_message_count_on_delete AFTER DELETE ON messages
BEGIN UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id; END;
CREATE TABLE read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,
    mtime_ns INTEGER,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
);
CREATE TABLE usage (
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
CREATE INDEX idx_usage_session_id ON usage (session_id);
INSERT INTO sessions (id, title, prompt_tokens, completion_tokens, cost, context_tokens,
    created_at, updated_at)
    VALUES ('old-crush', 'from an older crush', 3100, 60, 0.01, 1560, 5, 5);
INSERT INTO messages (id, session_id, role, parts, created_at, updated_at, seq) VALUES
    ('oc-1', 'old-crush', 'user', '[{"type":"text","data":{"text":"q1"}}]', 5, 5, 1),
    ('oc-2', 'old-crush', 'assistant', '[{"type":"text","data":{"text":"a1"}}]', 5, 5, 2),
    ('oc-3', 'old-crush', 'user', '[{"type":"text","data":{"text":"q2"}}]', 5, 5, 3),
    ('oc-4', 'old-crush', 'assistant', '[{"type":"text","data":{"text":"a2"}}]', 5, 5, 4);
INSERT INTO usage (session_id, message_id, provider, model, input_tokens, output_tokens,
    cache_read_tokens, cache_write_tokens, cost, price_source, created_at) VALUES
    ('old-crush', 'oc-2', 'fake', 'fake-model', 1500, 30, 0, 0, 0.005, 'catalog', 5),
    ('old-crush', 'oc-4', 'fake', 'fake-model', 1100, 30, 400, 100, 0.005, 'catalog', 5);
PRAGMA user_version = 1;
"#;

#[test]
fn a_database_an_older_crush_made_is_repaired_for_go() {
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(OLD_CRUSH_SCHEMA)
        .unwrap();
    // As it was: Go Crush cannot start on it.
    {
        let copy = env.root().join("copy.db");
        std::fs::copy(&path, &copy).unwrap();
        let err = goose_up(&mut go_open(&copy), GO_MIGRATIONS).unwrap_err();
        assert!(err.contains("duplicate column name"), "{err}");
    }
    // Read-only commands read it as it is.
    let bytes = std::fs::read(&path).unwrap();
    let show = env.run(&["sessions", "show", "old-crush"], None);
    show.assert_success();
    assert!(show.stdout.contains("q2"), "{}", show.stdout);
    assert!(
        show.stdout.contains("tokens in 3100 out 60"),
        "the running totals, where that crush kept them: {}",
        show.stdout
    );
    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");

    env.run(&["run", "-q", "-C", "q3"], None).assert_success();
    assert_eq!(server.model_requests()[0].user_texts(), ["q1", "q2", "q3"]);
    let mut c = go_open(&path);
    assert_eq!(goose_rows(&c), expected_goose_rows(GO_MIGRATIONS));
    assert_eq!(goose_up(&mut c, GO_MIGRATIONS), Ok(vec![]));
    let fixture = env.root().join("go").join("crush.db");
    go_database(&fixture, GO_MIGRATIONS);
    assert_go_schema(&c, &go_open(&fixture));
    // The running totals moved to crush's own columns; Go's hold the last call's context.
    let (p, cp, tp, tc): (i64, i64, i64, i64) = c
        .query_row(
            "SELECT prompt_tokens, completion_tokens, total_prompt_tokens,
                    total_completion_tokens FROM sessions WHERE id = 'old-crush'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (p, cp),
        (100, 20),
        "the last call (the fake's default usage)"
    );
    assert_eq!((tp, tc), (3100 + 100, 60 + 20));
    go_writes(&c, "old-crush", "go").unwrap_or_else(|e| panic!("{e}"));
    assert_ordering_key(&c, "old-crush");
}

#[test]
fn go_crush_adopted_by_an_older_crush_writes_again() {
    // Go's file, then what the previous crush release did to it: `messages.seq` with a default
    // of 0 and a unique index, so that Go's second message in a session collided.
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, GO_MIGRATIONS);
    let sid = go_conversation(&go_open(&path));
    go_open(&path)
        .execute_batch(
            "ALTER TABLE sessions ADD COLUMN context_tokens INTEGER NOT NULL DEFAULT 0
                 CHECK (context_tokens >= 0);
             ALTER TABLE messages ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
             UPDATE messages SET seq = (SELECT COUNT(*) FROM messages m
                 WHERE m.session_id = messages.session_id AND m.rowid <= messages.rowid);
             CREATE UNIQUE INDEX idx_messages_session_seq ON messages (session_id, seq);
             ALTER TABLE read_files ADD COLUMN mtime_ns INTEGER;
             CREATE TABLE usage (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                 message_id TEXT, provider TEXT NOT NULL, model TEXT NOT NULL,
                 input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
                 cache_write_tokens INTEGER, cost REAL, price_source TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE);
             PRAGMA user_version = 1;",
        )
        .unwrap();
    {
        let c = go_open(&path);
        go_create_message(&c, "before-1", &sid, "user", "[]").unwrap();
        let err = go_create_message(&c, "before-2", &sid, "user", "[]").unwrap_err();
        assert!(err.contains("UNIQUE constraint failed"), "{err}");
        c.execute("DELETE FROM messages WHERE id = 'before-1'", [])
            .unwrap();
    }
    env.run(&["run", "-q", "-C", "go on"], None)
        .assert_success();
    let mut c = go_open(&path);
    assert_eq!(goose_up(&mut c, GO_MIGRATIONS), Ok(vec![]));
    go_writes(&c, &sid, "go").unwrap_or_else(|e| panic!("{e}"));
    assert_ordering_key(&c, &sid);
}

#[test]
fn go_crush_hash_ids_and_session_json_shapes() {
    // A session Go Crush made: Go names it by the XXH3 hash of its UUID.
    const UUID: &str = "5c1a2e21-187c-42a3-83ea-91086401001f";
    const HASH: &str = "8647e2a631f89b8f";
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, GO_MIGRATIONS);
    {
        let c = go_open(&path);
        go_create_session(&c, UUID, "Go made this").unwrap();
        go_create_message(
            &c,
            "m1",
            UUID,
            "user",
            r#"[{"type":"text","data":{"text":"hello from Go"}}]"#,
        )
        .unwrap();
    }
    let json_of = |args: &[&str]| -> Value {
        let out = env.run(args, None);
        out.assert_success();
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    let list = json_of(&["session", "list", "--json"]);
    assert_eq!(list[0]["id"], HASH);
    assert_eq!(list[0]["uuid"], UUID);
    assert_eq!(list[0]["title"], "Go made this");
    for k in ["created", "modified"] {
        assert!(list[0][k].is_string(), "{k}: {list}");
    }
    let human = env.run(&["s", "ls"], None);
    assert!(
        human.stdout.starts_with(&format!("{} ", &HASH[..7])),
        "{}",
        human.stdout
    );
    for args in [
        &["sessions", "show", &HASH[..7], "--json"][..],
        &["session", "last", "--json"][..],
    ] {
        let doc = json_of(args);
        assert_eq!(doc["meta"]["id"], HASH, "{args:?}");
        assert_eq!(doc["meta"]["uuid"], UUID);
        assert_eq!(doc["meta"]["total_tokens"], 0);
        let m = &doc["messages"][0];
        assert_eq!(
            (m["id"].as_str(), m["role"].as_str()),
            (Some("m1"), Some("user"))
        );
        assert_eq!(
            m["parts"][0],
            json!({"type": "text", "text": "hello from Go", "data": {"text": "hello from Go"}})
        );
    }
    // -s takes Go's hash prefix, as Go's exit hint prints it.
    env.run(&["run", "-q", "-s", &HASH[..7], "and now?"], None)
        .assert_success();
    assert_eq!(
        server.last_request().user_texts(),
        ["hello from Go", "and now?"]
    );
    let renamed = json_of(&["session", "rename", &HASH[..9], "New", "name", "--json"]);
    assert_eq!(
        renamed,
        json!({"id": HASH, "uuid": UUID, "title": "New name", "renamed": true})
    );
    let deleted = json_of(&["session", "delete", HASH, "--json"]);
    assert_eq!(
        deleted,
        json!({"id": HASH, "uuid": UUID, "title": "New name", "deleted": true})
    );
    assert_eq!(json_of(&["session", "list", "--json"]), json!([]));
}

#[test]
fn stats_count_what_go_crush_spent_apart_from_the_ledger() {
    let server = server();
    let env = env_with(&server);
    let path = db_path(&env);
    go_database(&path, GO_MIGRATIONS);
    let sid = go_conversation(&go_open(&path));
    // Go Crush keeps no ledger: its spend is in the session row only.
    let out = env.run(&["stats"], None);
    out.assert_success();
    assert!(
        out.stdout.contains(
            "recorded by another client, not itemized: 1 session, $0.0200 (tokens of their last calls: 1500 in, 40 out)"
        ),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    // crush continues the session: its call is itemized, Go's spend stays apart.
    env.run(&["run", "-q", "-s", &sid, "and now?"], None)
        .assert_success();
    let v: Value = serde_json::from_str(&env.run(&["stats", "--json"], None).stdout).unwrap();
    assert_eq!(v["total"]["calls"], 1);
    assert_eq!(v["unitemized"]["sessions"], 1);
    assert!(
        (v["unitemized"]["cost"].as_f64().unwrap() - 0.02).abs() < 1e-9,
        "{v}"
    );
    let text = env.run(&["stats"], None).stdout;
    assert!(
        text.contains("recorded by another client, not itemized: 1 session, $0.0200\n"),
        "{text}"
    );
}

#[test]
fn stats_all_sums_every_project_and_its_formats_agree() {
    let (_server, env, c) = super::stats::three_projects();
    let c_db = c.join(".crush").join("crush.db");
    let before = std::fs::read(&c_db).unwrap();

    let out = env.run(&["stats", "--all", "--format", "json"], None);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let projects = v["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 3, "{v}");
    let sum = |k: &str| -> f64 {
        projects
            .iter()
            .map(|p| p["total"][k].as_f64().unwrap_or(0.0))
            .sum()
    };
    assert_eq!(v["total"]["calls"], 3);
    assert_eq!(sum("calls"), 3.0);
    assert_eq!(sum("input_tokens"), 3500.0);
    let cost = (3500.0 * 3.0 + 350.0 * 15.0) / 1e6;
    assert!(
        (v["total"]["cost"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{v}"
    );
    assert!((sum("cost") - cost).abs() < 1e-9);
    // Go Crush's spend: from the session row, apart, never its tokens as calls.
    assert_eq!(v["unitemized"]["sessions"], 1);
    assert!((v["unitemized"]["cost"].as_f64().unwrap() - 0.02).abs() < 1e-9);
    let go = projects
        .iter()
        .find(|p| p["path"] == c.display().to_string().as_str())
        .unwrap();
    assert_eq!(go["total"]["calls"], 0);
    assert_eq!(go["total"]["input_tokens"], 0);
    // Read-only: the file is as it was, and no WAL is left behind.
    assert_eq!(std::fs::read(&c_db).unwrap(), before);
    assert!(!c.join(".crush").join("crush.db-wal").exists());

    let csv = env.run(&["stats", "--all", "--format", "csv"], None);
    csv.assert_success();
    let total = csv
        .stdout
        .lines()
        .find(|l| l.starts_with("total,"))
        .expect("a total row");
    assert_eq!(
        total,
        format!("total,\"all projects\",3,3500,350,0,0,0,3,0,{cost}"),
        "{}",
        csv.stdout
    );
    assert_eq!(
        csv.stdout
            .lines()
            .filter(|l| l.starts_with("project,"))
            .count(),
        3
    );
    let text = env.run(&["stats", "--all"], None);
    text.assert_success();
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("all projects"))
        .expect("a total line");
    assert!(line.contains(&format!("${cost:.4}")), "{}", text.stdout);
    assert!(
        text.stdout
            .contains("recorded by another client, not itemized: 1 session, $0.0200"),
        "{}",
        text.stdout
    );

    // Filters: one model, none of another, and a window with nothing in it.
    let j = |args: &[&str]| -> Value {
        let o = env.run(args, None);
        o.assert_success();
        serde_json::from_str(&o.stdout).unwrap()
    };
    let v = j(&["stats", "--all", "--json", "--model", "fake-model"]);
    assert_eq!(v["total"]["calls"], 3);
    assert_eq!(v["unitemized"]["sessions"], 0, "Go's spend has no model");
    let v = j(&["stats", "--all", "--json", "--provider", "nobody"]);
    assert_eq!(v["total"]["calls"], 0);
    let v = j(&["stats", "--json", "--until", "2000-01-01"]);
    assert_eq!(v["total"]["calls"], 0);
    let v = j(&["stats", "--json", "--since", "1d"]);
    assert_eq!(v["total"]["calls"], 2, "this project only");
    let bad = env.run(&["stats", "--since", "last week"], None);
    bad.assert_code(2);
    assert!(bad.stderr.contains("--since takes"), "{}", bad.stderr);
    env.run(&["stats", "--format", "xml"], None).assert_code(2);
}
