use super::*;
use std::collections::HashSet;
use tempfile::TempDir;

fn open_tmp() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("data").join("crush.db")).unwrap();
    (dir, store)
}

fn text(role: Role, t: &str) -> NewMessage {
    NewMessage {
        role,
        parts: vec![Part::Text { text: t.into() }],
        model: None,
        provider: None,
    }
}

fn call(id: &str) -> Part {
    Part::ToolCall {
        id: id.into(),
        name: "bash".into(),
        input: "{}".into(),
        provider_executed: false,
        finished: true,
    }
}

fn result(id: &str) -> Part {
    Part::ToolResult {
        tool_call_id: id.into(),
        name: "bash".into(),
        content: "ok".into(),
        data: String::new(),
        mime_type: String::new(),
        metadata: String::new(),
        is_error: false,
    }
}

#[test]
fn price_sources_read_back_as_written_and_keep_what_others_wrote() {
    use super::PriceSource::*;
    for p in [Catalog, Config, FlatRate, Unpriced, UnknownUsage, Estimated] {
        assert_eq!(super::PriceSource::from(p.as_str()), p);
    }
    let other = super::PriceSource::from("provider");
    assert_eq!((other.as_str(), other.is_priced()), ("provider", true));
    assert!(!Unpriced.is_priced() && !FlatRate.is_priced() && Catalog.is_priced());
}

fn rec(usage: Option<Usage>, cost: Option<f64>) -> UsageRecord {
    UsageRecord {
        provider: "anthropic".into(),
        model: "claude".into(),
        usage,
        cost,
        price_source: if cost.is_some() {
            "catalog"
        } else {
            "unpriced"
        }
        .into(),
    }
}

fn u(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
    }
}

fn columns(store: &Store, table: &str) -> Vec<(String, String, bool, Option<String>, i64)> {
    let mut stmt = store
        .conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, bool>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, i64>(5)?,
        ))
    })
    .unwrap()
    .collect::<rusqlite::Result<Vec<_>>>()
    .unwrap()
}

fn has_column(
    cols: &[(String, String, bool, Option<String>, i64)],
    name: &str,
    ty: &str,
    notnull: bool,
) {
    let c = cols
        .iter()
        .find(|c| c.0 == name)
        .unwrap_or_else(|| panic!("missing column {name} in {cols:?}"));
    assert_eq!(c.1, ty, "type of {name}");
    assert_eq!(c.2, notnull, "NOT NULL of {name}");
}

#[test]
fn schema_has_crush_columns() {
    let (_d, s) = open_tmp();
    let c = columns(&s, "sessions");
    has_column(&c, "id", "TEXT", false);
    has_column(&c, "parent_session_id", "TEXT", false);
    has_column(&c, "title", "TEXT", true);
    has_column(&c, "message_count", "INTEGER", true);
    has_column(&c, "prompt_tokens", "INTEGER", true);
    has_column(&c, "completion_tokens", "INTEGER", true);
    has_column(&c, "cost", "REAL", true);
    has_column(&c, "updated_at", "INTEGER", true);
    has_column(&c, "created_at", "INTEGER", true);
    has_column(&c, "summary_message_id", "TEXT", false);
    has_column(&c, "todos", "TEXT", false);
    has_column(&c, "context_tokens", "INTEGER", true);
    has_column(&c, "total_prompt_tokens", "INTEGER", true);
    has_column(&c, "total_completion_tokens", "INTEGER", true);
    assert_eq!(
        c.iter().find(|c| c.0 == "id").unwrap().4,
        1,
        "id is the primary key"
    );

    let c = columns(&s, "messages");
    for (n, t, nn) in [
        ("id", "TEXT", false),
        ("session_id", "TEXT", true),
        ("role", "TEXT", true),
        ("parts", "TEXT", true),
        ("model", "TEXT", false),
        ("created_at", "INTEGER", true),
        ("updated_at", "INTEGER", true),
        ("finished_at", "INTEGER", false),
        ("provider", "TEXT", false),
        ("is_summary_message", "INTEGER", true),
        ("seq", "INTEGER", true),
    ] {
        has_column(&c, n, t, nn);
    }
    assert_eq!(
        c.iter().find(|c| c.0 == "parts").unwrap().3.as_deref(),
        Some("'[]'")
    );

    let c = columns(&s, "files");
    for (n, t, nn) in [
        ("id", "TEXT", false),
        ("session_id", "TEXT", true),
        ("path", "TEXT", true),
        ("content", "TEXT", true),
        ("version", "INTEGER", true),
        ("created_at", "INTEGER", true),
        ("updated_at", "INTEGER", true),
    ] {
        has_column(&c, n, t, nn);
    }

    let c = columns(&s, "read_files");
    has_column(&c, "session_id", "TEXT", true);
    has_column(&c, "path", "TEXT", true);
    has_column(&c, "read_at", "INTEGER", true);
    has_column(&c, "mtime_ns", "INTEGER", false);
    // PK(path, session_id)
    assert_eq!(c.iter().find(|c| c.0 == "path").unwrap().4, 1);
    assert_eq!(c.iter().find(|c| c.0 == "session_id").unwrap().4, 2);

    let c = columns(&s, "usage");
    for (n, t, nn) in [
        ("id", "INTEGER", false),
        ("session_id", "TEXT", true),
        ("message_id", "TEXT", false),
        ("provider", "TEXT", true),
        ("model", "TEXT", true),
        ("input_tokens", "INTEGER", false),
        ("output_tokens", "INTEGER", false),
        ("cache_read_tokens", "INTEGER", false),
        ("cache_write_tokens", "INTEGER", false),
        ("cost", "REAL", false),
        ("price_source", "TEXT", true),
        ("created_at", "INTEGER", true),
    ] {
        has_column(&c, n, t, nn);
    }

    let triggers: HashSet<String> = s
        .conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for t in [
        "update_sessions_updated_at",
        "update_files_updated_at",
        "update_messages_updated_at",
        "update_session_message_count_on_insert",
        "update_session_message_count_on_delete",
    ] {
        assert!(triggers.contains(t), "missing trigger {t}");
    }

    let v: i64 = s
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, schema::SUPPORTED_VERSION);
    let mode: String = s
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = s
        .conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
}

#[test]
fn reopen_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("crush.db");
    let id = Store::open(&p)
        .unwrap()
        .create_session("t", None)
        .unwrap()
        .id;
    let s = Store::open(&p).unwrap();
    assert_eq!(s.session(&id).unwrap().unwrap().title, "t");
}

#[test]
fn parts_round_trip_in_crush_shape() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    let m = s.add_message(&sess.id, &text(Role::User, "hi")).unwrap();
    let raw: String = s
        .conn
        .query_row("SELECT parts FROM messages WHERE id = ?1", [&m.id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(raw, r#"[{"type":"text","data":{"text":"hi"}}]"#);
    let role: String = s
        .conn
        .query_row("SELECT role FROM messages WHERE id = ?1", [&m.id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(role, "user");

    let all = vec![
        Part::reasoning("hmm".into(), "sig".into()),
        Part::Text { text: "x".into() },
        call("c1"),
        Part::Finish {
            reason: "tool_use".into(),
            time: 1234,
            message: None,
            details: None,
        },
    ];
    let a = s
        .add_message(
            &sess.id,
            &NewMessage {
                role: Role::Assistant,
                parts: all.clone(),
                model: Some("m".into()),
                provider: Some("p".into()),
            },
        )
        .unwrap();
    let msgs = s.messages(&sess.id).unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1], a);
    assert_eq!(msgs[1].parts, all);
    let finished: Option<i64> = s
        .conn
        .query_row(
            "SELECT finished_at FROM messages WHERE id = ?1",
            [&a.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(finished, Some(1234));
    let finished: Option<i64> = s
        .conn
        .query_row(
            "SELECT finished_at FROM messages WHERE id = ?1",
            [&m.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(finished, None);
    assert_eq!(s.session(&sess.id).unwrap().unwrap().message_count, 2);
}

#[test]
fn ids_are_uuid_v4() {
    let mut seen = HashSet::new();
    for _ in 0..100 {
        let id = new_id().unwrap();
        assert_eq!(id.len(), 36);
        let b = id.as_bytes();
        assert_eq!([b[8], b[13], b[18], b[23]], [b'-'; 4]);
        assert_eq!(b[14], b'4');
        assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'));
        assert!(seen.insert(id));
    }
}

#[test]
fn seq_is_unique_and_ordered_within_one_second() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    let b = s.create_session("b", None).unwrap();
    for i in 0..200 {
        s.add_message(&a.id, &text(Role::User, &format!("{i}")))
            .unwrap();
        if i % 3 == 0 {
            s.add_message(&b.id, &text(Role::User, "b")).unwrap();
        }
    }
    let msgs = s.messages(&a.id).unwrap();
    assert_eq!(msgs.len(), 200);
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.seq, i as i64 + 1);
        assert_eq!(
            m.parts,
            vec![Part::Text {
                text: format!("{i}")
            }]
        );
    }
    let mb = s.messages(&b.id).unwrap();
    assert_eq!(mb.len(), 67);
    assert_eq!(mb[0].seq, 1);
    // The UNIQUE constraint holds.
    let err = s.conn.execute(
        "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at, seq)
         VALUES ('dup', ?1, 'user', '[]', 0, 0, 1)",
        [&a.id],
    );
    assert!(err.is_err());
}

#[test]
fn add_message_to_missing_session_is_not_found() {
    let (_d, s) = open_tmp();
    assert!(matches!(
        s.add_message("nope", &text(Role::User, "x")),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.create_session("c", Some("nope")),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn commit_step_is_atomic() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.add_message(&sess.id, &text(Role::User, "go")).unwrap();
    // Make the last statement of the step fail: the messages inserted before must vanish.
    s.conn
        .execute_batch(
            "CREATE TRIGGER fail_usage BEFORE INSERT ON usage
             BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        )
        .unwrap();
    let step = [
        NewMessage {
            role: Role::Assistant,
            parts: vec![call("c1")],
            model: Some("m".into()),
            provider: Some("p".into()),
        },
        NewMessage {
            role: Role::Tool,
            parts: vec![result("c1")],
            model: None,
            provider: None,
        },
    ];
    let err = s
        .commit_step(&sess.id, &step, Some(&rec(Some(u(10, 5, 0, 0)), Some(0.5))))
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    let after = s.session(&sess.id).unwrap().unwrap();
    assert_eq!(s.messages(&sess.id).unwrap().len(), 1);
    assert_eq!(after.message_count, 1);
    assert_eq!(after.total_prompt_tokens, 0);
    assert_eq!(after.cost, 0.0);
    assert!(s.usage_rows(&sess.id).unwrap().is_empty());

    // And it works once the fault is gone; the store is still usable after the rollback.
    s.conn.execute_batch("DROP TRIGGER fail_usage").unwrap();
    let stored = s
        .commit_step(&sess.id, &step, Some(&rec(Some(u(10, 5, 0, 0)), Some(0.5))))
        .unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].seq, 2);
    assert_eq!(stored[1].seq, 3);
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].message_id.as_deref(), Some(stored[0].id.as_str()));
}

#[test]
fn out_of_range_usage_is_rejected_and_writes_nothing() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    let msgs = [text(Role::Assistant, "a")];
    for bad in [
        rec(Some(u(u64::MAX, 0, 0, 0)), None),
        rec(Some(u(i64::MAX as u64, 0, 1, 0)), None),
        rec(Some(u(1, 1, 1, 1)), Some(-1.0)),
        rec(Some(u(1, 1, 1, 1)), Some(f64::NAN)),
    ] {
        let err = s.commit_step(&sess.id, &msgs, Some(&bad)).unwrap_err();
        assert!(matches!(err, StoreError::Sql(_)), "{err}");
    }
    assert!(s.messages(&sess.id).unwrap().is_empty());
    assert!(s.usage_rows(&sess.id).unwrap().is_empty());
}

#[test]
fn totals_equal_ledger_sums() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    let steps = [
        (u(100, 20, 0, 50), Some(0.25)),
        (u(10, 30, 150, 0), Some(0.125)),
        (u(5, 7, 160, 3), Some(0.5)),
        (u(1, 2, 3, 4), None),
    ];
    for (usage, cost) in steps {
        s.commit_step(
            &sess.id,
            &[text(Role::Assistant, "a")],
            Some(&rec(Some(usage), cost)),
        )
        .unwrap();
    }
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows.len(), 4);
    let t = s.session(&sess.id).unwrap().unwrap();
    let prompt: u64 = rows
        .iter()
        .map(|r| {
            let u = r.usage.unwrap();
            u.input + u.cache_read + u.cache_write
        })
        .sum();
    let completion: u64 = rows.iter().map(|r| r.usage.unwrap().output).sum();
    let cost: f64 = rows.iter().filter_map(|r| r.cost).sum();
    assert_eq!(t.total_prompt_tokens as u64, prompt);
    assert_eq!(t.total_prompt_tokens, 150 + 160 + 168 + 8);
    assert_eq!(t.total_completion_tokens as u64, completion);
    assert_eq!(t.total_completion_tokens, 59);
    assert_eq!(t.cost, cost);
    assert_eq!(t.cost, 0.875);
    // Context = the last call's tokens, output included.
    assert_eq!(t.context_tokens, 1 + 2 + 3 + 4);
    assert_eq!(rows[3].cost, None);
    assert_eq!(rows[3].price_source.as_str(), "unpriced");
    assert_eq!(rows[0].price_source.as_str(), "catalog");
    assert_eq!(rows[0].provider, "anthropic");
    assert_eq!(rows[0].model, "claude");
}

#[test]
fn unpriced_usage_is_null_not_zero() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "a")],
        Some(&rec(Some(u(10, 1, 0, 0)), Some(0.5))),
    )
    .unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "b")],
        Some(&rec(Some(u(10, 1, 0, 0)), None)),
    )
    .unwrap();
    let cost: Option<f64> = s
        .conn
        .query_row(
            "SELECT cost FROM usage WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
            [&sess.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(cost, None);
    let t = s.session(&sess.id).unwrap().unwrap();
    assert_eq!(t.cost, 0.5);
    assert_eq!(t.total_prompt_tokens, 20);
}

#[test]
fn unknown_usage_is_null_tokens() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "a")],
        Some(&rec(Some(u(7, 3, 0, 0)), None)),
    )
    .unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "b")],
        Some(&rec(None, None)),
    )
    .unwrap();
    let toks: (Option<i64>, Option<i64>, Option<i64>, Option<i64>) = s
        .conn
        .query_row(
            "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
             FROM usage WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
            [&sess.id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(toks, (None, None, None, None));
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows[1].usage, None);
    assert_eq!(rows[0].usage, Some(u(7, 3, 0, 0)));
    let t = s.session(&sess.id).unwrap().unwrap();
    assert_eq!((t.total_prompt_tokens, t.total_completion_tokens), (7, 3));
    // Unknown usage leaves the last known context size.
    assert_eq!(t.context_tokens, 10);
}

#[test]
fn usage_row_without_assistant_message() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.commit_step(&sess.id, &[], Some(&rec(Some(u(1, 1, 0, 0)), Some(0.01))))
        .unwrap();
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].message_id, None);
    // The first *assistant* message is the one referenced.
    let stored = s
        .commit_step(
            &sess.id,
            &[text(Role::User, "u"), text(Role::Assistant, "a")],
            Some(&rec(None, None)),
        )
        .unwrap();
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows[1].message_id.as_deref(), Some(stored[1].id.as_str()));
}

#[test]
fn sub_agent_usage_counts_once_in_parent() {
    let (_d, s) = open_tmp();
    let parent = s.create_session("p", None).unwrap();
    let child = s.create_session("c", Some(&parent.id)).unwrap();
    let grandchild = s.create_session("g", Some(&child.id)).unwrap();
    s.commit_step(
        &parent.id,
        &[text(Role::Assistant, "p")],
        Some(&rec(Some(u(100, 10, 0, 0)), Some(1.0))),
    )
    .unwrap();
    s.commit_step(
        &child.id,
        &[text(Role::Assistant, "c")],
        Some(&rec(Some(u(20, 2, 0, 0)), Some(0.5))),
    )
    .unwrap();
    s.commit_step(
        &grandchild.id,
        &[text(Role::Assistant, "g")],
        Some(&rec(Some(u(3, 1, 0, 0)), Some(0.25))),
    )
    .unwrap();
    let p = s.session(&parent.id).unwrap().unwrap();
    let c = s.session(&child.id).unwrap().unwrap();
    let g = s.session(&grandchild.id).unwrap().unwrap();
    assert_eq!(
        (p.total_prompt_tokens, p.total_completion_tokens, p.cost),
        (123, 13, 1.75)
    );
    assert_eq!(
        (c.total_prompt_tokens, c.total_completion_tokens, c.cost),
        (23, 3, 0.75)
    );
    assert_eq!(
        (g.total_prompt_tokens, g.total_completion_tokens, g.cost),
        (3, 1, 0.25)
    );
    // Context size is per session.
    assert_eq!(p.context_tokens, 110);
    assert_eq!(c.context_tokens, 22);
    // Usage rows live with the session that made the call.
    assert_eq!(s.usage_rows(&parent.id).unwrap().len(), 1);
    assert_eq!(s.usage_rows(&child.id).unwrap().len(), 1);
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    let id = {
        let s = Store::open(&path).unwrap();
        s.create_session("shared", None).unwrap().id
    };
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let path = path.clone();
            let id = id.clone();
            std::thread::spawn(move || {
                let s = Store::open(&path).unwrap();
                for i in 0..50u64 {
                    s.commit_step(
                        &id,
                        &[
                            NewMessage {
                                role: Role::Assistant,
                                parts: vec![call(&format!("{t}-{i}"))],
                                model: None,
                                provider: None,
                            },
                            NewMessage {
                                role: Role::Tool,
                                parts: vec![result(&format!("{t}-{i}"))],
                                model: None,
                                provider: None,
                            },
                        ],
                        Some(&rec(Some(u(i + 1, 2, 3, 4)), Some(0.25))),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = Store::open(&path).unwrap();
    let sess = s.session(&id).unwrap().unwrap();
    let rows = s.usage_rows(&id).unwrap();
    assert_eq!(rows.len(), 100);
    let msgs = s.messages(&id).unwrap();
    assert_eq!(msgs.len(), 200);
    assert_eq!(sess.message_count, 200);
    let seqs: Vec<i64> = msgs.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    // Each step's assistant message is followed by its own tool result.
    for pair in msgs.chunks(2) {
        let Part::ToolCall { id, .. } = &pair[0].parts[0] else {
            panic!("expected a call")
        };
        let Part::ToolResult { tool_call_id, .. } = &pair[1].parts[0] else {
            panic!("expected a result")
        };
        assert_eq!(id, tool_call_id);
    }
    let input: i64 = 2 * (1..=50).sum::<i64>();
    assert_eq!(sess.total_prompt_tokens, input + 100 * 7);
    assert_eq!(sess.total_completion_tokens, 200);
    assert_eq!(sess.cost, 25.0);
}

#[test]
fn concurrent_open_of_a_fresh_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let s = Store::open(&path).unwrap();
                s.create_session("x", None).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        Store::open(&path).unwrap().list_sessions().unwrap().len(),
        4
    );
}

#[test]
fn resolve_by_prefix() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    // Fixed ids to make prefixes predictable; "q" is not a hex digit, so no UUID shares them.
    for id in ["qbc-1", "qbc-2", "qbd-1", "x$$y"] {
        s.conn
            .execute(
                "INSERT INTO sessions (id, parent_session_id, title, created_at, updated_at)
                 VALUES (?1, ?2, 't', 0, 0)",
                params![id, if id == "x$$y" { Some(&a.id) } else { None }],
            )
            .unwrap();
    }
    assert_eq!(s.resolve_session(&a.id).unwrap().id, a.id);
    assert_eq!(s.resolve_session(&a.id[..8]).unwrap().id, a.id);
    assert_eq!(s.resolve_session("qbd").unwrap().id, "qbd-1");
    // Go Crush's hash ids and their prefixes.
    let hash = super::hashid::hash_id(&a.id);
    assert_eq!(s.resolve_session(&hash).unwrap().id, a.id);
    assert_eq!(s.resolve_session(&hash[..7]).unwrap().id, a.id);
    assert_eq!(
        s.resolve_session(&super::hashid::hash_id("qbd-1")[..9])
            .unwrap()
            .id,
        "qbd-1"
    );
    assert_eq!(s.resolve_session("qbc-2").unwrap().id, "qbc-2");
    // Children resolve too.
    assert_eq!(s.resolve_session("x$").unwrap().id, "x$$y");
    match s.resolve_session("qb") {
        Err(StoreError::Ambiguous { prefix, candidates }) => {
            assert_eq!(prefix, "qb");
            let mut c = candidates.clone();
            c.sort();
            assert_eq!(c, ["qbc-1", "qbc-2", "qbd-1"]);
        }
        other => panic!("expected ambiguous, got {other:?}"),
    }
    assert!(matches!(
        s.resolve_session("zzz"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.resolve_session(""),
        Err(StoreError::NotFound(_))
    ));
    // LIKE wildcards are not wildcards here.
    assert!(matches!(
        s.resolve_session("a_c"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.resolve_session("%"),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn listing_and_latest_ignore_children() {
    let (_d, s) = open_tmp();
    assert!(s.latest_session().unwrap().is_none());
    assert!(s.list_sessions().unwrap().is_empty());
    let a = s.create_session("a", None).unwrap();
    let b = s.create_session("b", None).unwrap();
    let child = s.create_session("child", Some(&a.id)).unwrap();
    s.add_message(&child.id, &text(Role::User, "x")).unwrap();
    // Explicit times (the trigger would reset updated_at to now).
    s.conn
        .execute_batch("DROP TRIGGER update_sessions_updated_at")
        .unwrap();
    let set = |id: &str, updated: i64, created: i64| {
        s.conn
            .execute(
                "UPDATE sessions SET updated_at = ?1, created_at = ?2 WHERE id = ?3",
                params![updated, created, id],
            )
            .unwrap();
    };
    set(&a.id, 100, 50);
    set(&b.id, 100, 50);
    set(&child.id, 9999, 9999);
    let ids = |s: &Store| -> Vec<String> {
        s.list_sessions()
            .unwrap()
            .into_iter()
            .map(|x| x.id)
            .collect()
    };
    // Same times: the later-created session (rowid) comes first; the child never appears.
    assert_eq!(ids(&s), [b.id.clone(), a.id.clone()]);
    assert_eq!(s.latest_session().unwrap().unwrap().id, b.id);
    // created_at breaks an updated_at tie before rowid does.
    set(&a.id, 100, 60);
    assert_eq!(ids(&s), [a.id.clone(), b.id.clone()]);
    set(&a.id, 100, 50);
    set(&b.id, 200, 50);
    assert_eq!(s.latest_session().unwrap().unwrap().id, b.id);
    set(&a.id, 300, 50);
    assert_eq!(s.latest_session().unwrap().unwrap().id, a.id);
}

#[test]
fn list_orders_by_updated_at() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    let b = s.create_session("b", None).unwrap();
    let c = s.create_session("c", None).unwrap();
    // Bypass the updated_at trigger to set explicit times.
    s.conn
        .execute_batch("DROP TRIGGER update_sessions_updated_at")
        .unwrap();
    for (id, t) in [(&a.id, 300), (&b.id, 100), (&c.id, 200)] {
        s.conn
            .execute(
                "UPDATE sessions SET updated_at = ?1 WHERE id = ?2",
                params![t, id],
            )
            .unwrap();
    }
    let ids: Vec<String> = s
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|x| x.id)
        .collect();
    assert_eq!(ids, [a.id.clone(), c.id.clone(), b.id.clone()]);
    assert_eq!(s.latest_session().unwrap().unwrap().id, a.id);
}

#[test]
fn too_new_is_refused_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE t (x); PRAGMA user_version = 999;")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    match Store::open(&path) {
        Err(StoreError::TooNew {
            found, supported, ..
        }) => {
            assert_eq!(found, 999);
            assert_eq!(supported, schema::SUPPORTED_VERSION);
        }
        Err(e) => panic!("expected TooNew, got {e}"),
        Ok(_) => panic!("expected TooNew, got a store"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    assert!(!dir.path().join("crush.db-wal").exists());
    let c = Connection::open(&path).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 999);
}

#[test]
fn set_title_changes_only_the_title() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("old", None).unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "a")],
        Some(&rec(Some(u(5, 5, 0, 0)), Some(0.5))),
    )
    .unwrap();
    s.set_title(&sess.id, "new").unwrap();
    let t = s.session(&sess.id).unwrap().unwrap();
    assert_eq!(t.title, "new");
    assert_eq!(
        (t.total_prompt_tokens, t.total_completion_tokens, t.cost),
        (5, 5, 0.5)
    );
    assert!(matches!(
        s.set_title("missing", "x"),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn read_records() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    let p = Path::new("/tmp/some file.rs");
    assert_eq!(s.last_read(&sess.id, p).unwrap(), None);
    s.record_read(&sess.id, p, 123).unwrap();
    assert_eq!(s.last_read(&sess.id, p).unwrap(), Some(123));
    s.record_read(&sess.id, p, 456).unwrap();
    assert_eq!(s.last_read(&sess.id, p).unwrap(), Some(456));
    let other = s.create_session("o", None).unwrap();
    assert_eq!(s.last_read(&other.id, p).unwrap(), None);
    let n: i64 = s
        .conn
        .query_row("SELECT COUNT(*) FROM read_files", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    assert!(matches!(
        s.record_read("missing", p, 1),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn only_a_session_nothing_was_stored_in_is_deleted_as_empty() {
    let (_d, s) = open_tmp();
    let empty = s.create_session("e", None).unwrap();
    let used = s.create_session("u", None).unwrap();
    s.add_message(&used.id, &text(Role::User, "hi")).unwrap();
    let parent = s.create_session("p", None).unwrap();
    s.create_session("c", Some(&parent.id)).unwrap();
    let read = s.create_session("r", None).unwrap();
    s.record_read(&read.id, Path::new("/f"), 1).unwrap();
    assert!(s.delete_if_empty(&empty.id).unwrap());
    assert!(s.session(&empty.id).unwrap().is_none());
    for id in [&used.id, &parent.id, &read.id] {
        assert!(!s.delete_if_empty(id).unwrap());
        assert!(s.session(id).unwrap().is_some());
    }
    assert!(!s.delete_if_empty("missing").unwrap());
}

#[test]
fn delete_session_removes_everything_recursively() {
    let (_d, s) = open_tmp();
    let keep = s.create_session("keep", None).unwrap();
    let p = s.create_session("p", None).unwrap();
    let c = s.create_session("c", Some(&p.id)).unwrap();
    let g = s.create_session("g", Some(&c.id)).unwrap();
    for id in [&keep.id, &p.id, &c.id, &g.id] {
        s.commit_step(
            id,
            &[text(Role::Assistant, "a")],
            Some(&rec(Some(u(1, 1, 0, 0)), Some(0.1))),
        )
        .unwrap();
        s.record_read(id, Path::new("/f"), 1).unwrap();
        s.conn
            .execute(
                "INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
                 VALUES (?1, ?2, '/f', 'x', 0, 0, 0)",
                params![new_id().unwrap(), id],
            )
            .unwrap();
    }
    s.delete_session(&p.id).unwrap();
    for id in [&p.id, &c.id, &g.id] {
        assert!(s.session(id).unwrap().is_none());
    }
    for table in ["messages", "files", "read_files", "usage", "sessions"] {
        let col = if table == "sessions" {
            "id"
        } else {
            "session_id"
        };
        let n: i64 = s
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "{table}");
        let owner: String = s
            .conn
            .query_row(&format!("SELECT {col} FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(owner, keep.id, "{table}");
    }
    assert!(matches!(
        s.delete_session(&p.id),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn ensure_data_dir_creates_private_dir_with_gitignore() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("proj").join(".crush");
    ensure_data_dir(&dir).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    assert_eq!(
        std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
        DATA_DIR_GITIGNORE
    );
    std::fs::write(dir.join(".gitignore"), "custom\n").unwrap();
    ensure_data_dir(&dir).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
        "custom\n"
    );
}

/// Go Crush's schema after its first migrations (before provider, is_summary_message,
/// summary_message_id and todos were added).
const OLD_CRUSH_SCHEMA: &str = r#"
CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL,
    is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER update_sessions_updated_at AFTER UPDATE ON sessions
BEGIN UPDATE sessions SET updated_at = strftime('%s', 'now') WHERE id = new.id; END;
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE TRIGGER update_messages_updated_at AFTER UPDATE ON messages
BEGIN UPDATE messages SET updated_at = strftime('%s', 'now') WHERE id = new.id; END;
CREATE TRIGGER update_session_message_count_on_insert AFTER INSERT ON messages
BEGIN UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id; END;
CREATE TRIGGER update_session_message_count_on_delete AFTER DELETE ON messages
BEGIN UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id; END;
INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s1', 'old', 5, 5);
INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s2', 'other', 5, 5);
INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
    VALUES ('m-c', 's1', 'user', '[{"type":"text","data":{"text":"first"}}]', 7, 7);
INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
    VALUES ('m-a', 's1', 'assistant', '[{"type":"text","data":{"text":"second"}}]', 7, 7);
INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
    VALUES ('m-b', 's1', 'user', '[{"type":"text","data":{"text":"third"}}]', 8, 8);
INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
    VALUES ('m-z', 's2', 'user', '[{"type":"text","data":{"text":"x"}}]', 1, 1);
"#;

#[test]
fn adopts_a_database_made_by_go_crush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(OLD_CRUSH_SCHEMA)
        .unwrap();
    let s = Store::open(&path).unwrap();
    let msgs = s.messages("s1").unwrap();
    let order: Vec<(&str, i64)> = msgs.iter().map(|m| (m.id.as_str(), m.seq)).collect();
    assert_eq!(order, [("m-c", 1), ("m-a", 2), ("m-b", 3)]);
    assert_eq!(s.messages("s2").unwrap()[0].seq, 1);
    // Backfilling seq did not touch Crush's timestamps.
    let updated: Vec<i64> = s
        .conn
        .prepare("SELECT updated_at FROM messages ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(updated, [7, 7, 8, 1]);
    // New columns exist and writing works.
    let c = columns(&s, "sessions");
    has_column(&c, "context_tokens", "INTEGER", true);
    has_column(&c, "todos", "TEXT", false);
    let c = columns(&s, "messages");
    has_column(&c, "provider", "TEXT", false);
    has_column(&c, "is_summary_message", "INTEGER", true);
    let m = s.add_message("s1", &text(Role::User, "new")).unwrap();
    assert_eq!(m.seq, 4);
    s.commit_step(
        "s1",
        &[text(Role::Assistant, "a")],
        Some(&rec(Some(u(1, 2, 3, 4)), Some(0.5))),
    )
    .unwrap();
    s.record_read("s1", Path::new("/f"), 9).unwrap();
    assert_eq!(s.last_read("s1", Path::new("/f")).unwrap(), Some(9));
    let sess = s.session("s1").unwrap().unwrap();
    assert_eq!((sess.message_count, sess.context_tokens), (5, 10));
    // The unique (session_id, seq) key is enforced on adopted databases too.
    assert!(
        s.conn
            .execute(
                "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at, seq)
                 VALUES ('dup', 's1', 'user', '[]', 0, 0, 1)",
                [],
            )
            .is_err()
    );
    drop(s);
    // Reopening does not migrate again.
    let s = Store::open(&path).unwrap();
    assert_eq!(s.messages("s1").unwrap().len(), 5);
}

#[test]
fn read_only_opening_reads_an_old_go_database_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(OLD_CRUSH_SCHEMA)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let s = Store::open_read_only(&path).unwrap();
    // Go Crush's order (created_at, then insertion), numbered on the fly.
    let msgs = s.messages("s1").unwrap();
    let order: Vec<(&str, i64)> = msgs.iter().map(|m| (m.id.as_str(), m.seq)).collect();
    assert_eq!(order, [("m-c", 1), ("m-a", 2), ("m-b", 3)]);
    let sess = s.session("s1").unwrap().unwrap();
    assert_eq!((sess.context_tokens, sess.total_prompt_tokens), (0, 0));
    assert_eq!(s.summary_message_id("s1").unwrap(), None);
    assert!(!s.has_usage_ledger());
    assert_eq!(s.stats().unwrap().total.calls, 0);
    assert!(s.usage_rows("s1").unwrap().is_empty());
    // Nothing can be written through it.
    assert!(s.set_title("s1", "changed").is_err());
    drop(s);
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
}

#[test]
fn a_new_database_records_go_crush_migrations_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crush.db");
    let rows = |s: &Store| -> Vec<(i64, i64, bool)> {
        s.conn
            .prepare("SELECT id, version_id, is_applied FROM goose_db_version ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let first = rows(&Store::open(&path).unwrap());
    let versions: Vec<i64> = first.iter().map(|r| r.1).collect();
    assert_eq!(
        versions,
        [
            0,
            20250424200609,
            20250515105448,
            20250624000000,
            20250627000000,
            20250810000000,
            20250812000000,
            schema::GO_LATEST
        ]
    );
    assert!(first.iter().all(|r| r.2));
    assert_eq!(rows(&Store::open(&path).unwrap()), first);
    assert_eq!(rows(&Store::open_read_only(&path).unwrap()), first);
}

#[test]
fn go_crush_inserts_are_numbered_by_the_trigger() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.add_message(&sess.id, &text(Role::User, "ours")).unwrap();
    // Go Crush's CreateMessage: no seq.
    for id in ["go-1", "go-2"] {
        s.conn
            .execute(
                "INSERT INTO messages (id, session_id, role, parts, model, provider,
                     is_summary_message, created_at, updated_at)
                 VALUES (?1, ?2, 'user', '[]', 'm', NULL, 0, 1, 1)",
                params![id, sess.id],
            )
            .unwrap();
    }
    s.add_message(&sess.id, &text(Role::User, "ours again"))
        .unwrap();
    let seqs: Vec<(String, i64)> = s
        .messages(&sess.id)
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.seq))
        .collect();
    assert_eq!(seqs[1], ("go-1".to_string(), 2));
    assert_eq!(seqs[2], ("go-2".to_string(), 3));
    assert_eq!(seqs[3].1, 4);
}

#[test]
fn record_usage_adds_totals_but_not_context() {
    let (_d, s) = open_tmp();
    let parent = s.create_session("p", None).unwrap();
    let child = s
        .create_session_with_id("msg-1$$call-1", "c", Some(&parent.id))
        .unwrap();
    assert_eq!(child.id, "msg-1$$call-1");
    s.commit_step(
        &parent.id,
        &[text(Role::Assistant, "a")],
        Some(&rec(Some(u(100, 10, 0, 0)), Some(1.0))),
    )
    .unwrap();
    // A title call: a row, totals, no message, context untouched.
    s.record_usage(&child.id, &rec(Some(u(7, 3, 0, 0)), None))
        .unwrap();
    let p = s.session(&parent.id).unwrap().unwrap();
    assert_eq!(
        (p.total_prompt_tokens, p.total_completion_tokens, p.cost),
        (107, 13, 1.0)
    );
    assert_eq!(p.context_tokens, 110);
    let rows = s.usage_rows(&child.id).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].message_id, None);
    assert_eq!(rows[0].cost, None);
    assert_eq!(s.messages(&child.id).unwrap().len(), 0);
    assert!(matches!(
        s.record_usage("nope", &rec(None, None)),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn commit_summary_marks_the_message_and_resets_the_context() {
    let (_d, s) = open_tmp();
    let sess = s.create_session("t", None).unwrap();
    s.commit_step(
        &sess.id,
        &[text(Role::Assistant, "long work")],
        Some(&rec(Some(u(9000, 500, 0, 0)), Some(0.1))),
    )
    .unwrap();
    assert_eq!(s.summary_message_id(&sess.id).unwrap(), None);
    let m = s
        .commit_summary(
            &sess.id,
            &text(Role::Assistant, "the summary"),
            Some(&rec(Some(u(9500, 300, 0, 0)), Some(0.2))),
        )
        .unwrap();
    assert_eq!(s.summary_message_id(&sess.id).unwrap(), Some(m.id.clone()));
    let flag: i64 = s
        .conn
        .query_row(
            "SELECT is_summary_message FROM messages WHERE id = ?1",
            [&m.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(flag, 1);
    let others: i64 = s
        .conn
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE is_summary_message = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(others, 1);
    let t = s.session(&sess.id).unwrap().unwrap();
    // Totals keep counting; the context is now the summary's size.
    assert_eq!(
        (t.total_prompt_tokens, t.total_completion_tokens),
        (18500, 800)
    );
    assert!((t.cost - 0.3).abs() < 1e-12);
    assert_eq!(t.context_tokens, 300);
    // Go Crush's columns after a summary, as Go Crush sets them.
    assert_eq!((t.prompt_tokens, t.completion_tokens), (0, 300));
    let rows = s.usage_rows(&sess.id).unwrap();
    assert_eq!(rows[1].message_id.as_deref(), Some(m.id.as_str()));
}

#[test]
fn go_crush_token_columns_hold_the_last_call() {
    let (_d, s) = open_tmp();
    let parent = s.create_session("p", None).unwrap();
    let child = s.create_session("c", Some(&parent.id)).unwrap();
    let step = |sid: &str, usage: Option<Usage>| {
        s.commit_step(sid, &[text(Role::Assistant, "a")], Some(&rec(usage, None)))
            .unwrap();
        let t = s.session(sid).unwrap().unwrap();
        (t.prompt_tokens, t.completion_tokens)
    };
    // input + cache read (not cache write), and output: assigned, not added.
    assert_eq!(step(&parent.id, Some(u(100, 20, 1000, 50))), (1100, 20));
    assert_eq!(step(&parent.id, Some(u(10, 5, 1200, 0))), (1210, 5));
    // Unknown usage leaves them.
    assert_eq!(step(&parent.id, None), (1210, 5));
    // A sub-agent's call is the child's context, not the parent's.
    assert_eq!(step(&child.id, Some(u(7, 3, 0, 0))), (7, 3));
    let p = s.session(&parent.id).unwrap().unwrap();
    assert_eq!((p.prompt_tokens, p.completion_tokens), (1210, 5));
    assert_eq!(
        (p.total_prompt_tokens, p.total_completion_tokens),
        (1150 + 1210 + 7, 28)
    );
    // A title call is no context.
    s.record_usage(&parent.id, &rec(Some(u(40, 4, 0, 0)), None))
        .unwrap();
    let p = s.session(&parent.id).unwrap().unwrap();
    assert_eq!((p.prompt_tokens, p.completion_tokens), (1210, 5));
}

#[test]
fn stats_sum_the_ledger_and_keep_unpriced_apart() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    let child = s.create_session("a-child", Some(&a.id)).unwrap();
    let b = s.create_session("b", None).unwrap();
    s.commit_step(&a.id, &[], Some(&rec(Some(u(100, 10, 5, 2)), Some(1.0))))
        .unwrap();
    s.commit_step(&child.id, &[], Some(&rec(Some(u(20, 2, 0, 0)), Some(0.5))))
        .unwrap();
    let mut local = rec(Some(u(50, 5, 0, 0)), None);
    local.provider = "local".into();
    local.model = "qwen".into();
    s.commit_step(&b.id, &[], Some(&local)).unwrap();
    local.usage = None;
    s.commit_step(&b.id, &[], Some(&local)).unwrap();

    let st = s.stats().unwrap();
    assert_eq!(st.total.calls, 4);
    assert_eq!(
        (
            st.total.input_tokens,
            st.total.output_tokens,
            st.total.cache_read_tokens,
            st.total.cache_write_tokens
        ),
        (170, 17, 5, 2)
    );
    assert_eq!(st.total.unknown_usage_calls, 1);
    assert_eq!((st.total.priced_calls, st.total.unpriced_calls), (2, 2));
    assert_eq!(st.total.cost_usd(), Some(1.5));

    assert_eq!(st.models.len(), 2);
    let qwen = st.models.iter().find(|m| m.model == "qwen").unwrap();
    assert_eq!(qwen.totals.calls, 2);
    assert_eq!(qwen.totals.cost_usd(), None, "unpriced is not $0");

    assert_eq!(st.sessions.len(), 2, "the child counts under its parent");
    let sa = st.sessions.iter().find(|x| x.id == a.id).unwrap();
    assert_eq!(sa.totals.calls, 2);
    assert_eq!(sa.sub_agent_sessions, 1);
    assert_eq!(sa.totals.cost_usd(), Some(1.5));
    let sb = st.sessions.iter().find(|x| x.id == b.id).unwrap();
    assert_eq!((sb.totals.calls, sb.totals.unpriced_calls), (2, 2));
    assert_eq!(sb.totals.cost_usd(), None);

    // The per-session sums agree with the session totals (which include sub-agents once).
    let ta = s.session(&a.id).unwrap().unwrap();
    assert_eq!(
        ta.total_prompt_tokens,
        sa.totals.input_tokens + sa.totals.cache_read_tokens + sa.totals.cache_write_tokens
    );
    assert_eq!(ta.total_completion_tokens, sa.totals.output_tokens);
}

#[test]
fn session_spend_is_the_top_sessions_with_its_sub_agents() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    let child = s.create_session("a-child", Some(&a.id)).unwrap();
    let grandchild = s.create_session("a-grandchild", Some(&child.id)).unwrap();
    let b = s.create_session("b", None).unwrap();
    s.commit_step(&a.id, &[], Some(&rec(Some(u(100, 10, 0, 0)), Some(1.0))))
        .unwrap();
    s.commit_step(
        &grandchild.id,
        &[],
        Some(&rec(Some(u(20, 2, 0, 0)), Some(0.25))),
    )
    .unwrap();
    s.commit_step(&b.id, &[], Some(&rec(Some(u(20, 2, 0, 0)), None)))
        .unwrap();
    for id in [&a.id, &child.id, &grandchild.id] {
        assert_eq!(s.session_spend(id).unwrap(), 1.25, "{id}");
    }
    assert_eq!(
        s.session_spend(&b.id).unwrap(),
        0.0,
        "unpriced adds no dollars"
    );
    assert_eq!(s.session_spend("no-such-session").unwrap(), 0.0);
}

#[test]
fn stats_sum_per_utc_day_and_merge_across_ledgers() {
    let (_d, s) = open_tmp();
    let a = s.create_session("a", None).unwrap();
    s.commit_step(&a.id, &[], Some(&rec(Some(u(100, 10, 0, 0)), Some(1.0))))
        .unwrap();
    s.commit_step(&a.id, &[], Some(&rec(Some(u(200, 20, 0, 0)), Some(2.0))))
        .unwrap();
    let mut local = rec(Some(u(50, 5, 0, 0)), None);
    local.model = "other".into();
    s.commit_step(&a.id, &[], Some(&local)).unwrap();
    // Day 20000 ends at 20001 * 86400: the first call just before it, the others after.
    let day = 20_000 * 86_400;
    for (id, at) in [(1, day + 86_399), (2, day + 86_400), (3, day + 90_000)] {
        s.conn
            .execute("UPDATE usage SET created_at = ?1 WHERE id = ?2", [at, id])
            .unwrap();
    }
    let st = s.stats().unwrap();
    let days: Vec<_> = st.days.iter().map(|d| (d.date(), d.totals.calls)).collect();
    assert_eq!(
        days,
        [("2024-10-04".to_string(), 1), ("2024-10-05".to_string(), 2)]
    );
    let second = &st.days[1];
    assert_eq!(second.totals.cost_usd(), Some(2.0));
    assert_eq!(second.models.len(), 2);
    assert_eq!(second.totals.unpriced_calls, 1);
    // The models' sums equal the days' sums equal the total.
    let by_day: i64 = st.days.iter().map(|d| d.totals.input_tokens).sum();
    let by_model: i64 = st.models.iter().map(|m| m.totals.input_tokens).sum();
    assert_eq!((by_day, by_model), (350, 350));
    assert_eq!(st.total.input_tokens, 350);
    let filtered = s
        .stats_where(&stats::Filter {
            since: Some(day + 86_400),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(filtered.days.len(), 1);

    let mut all = st.clone();
    all.merge(&st);
    assert_eq!(all.total.calls, 6);
    assert_eq!(all.days.len(), 2);
    assert_eq!(all.days[1].totals.calls, 4);
    assert_eq!(all.days[1].models[0].totals.calls, 2);
    assert_eq!(all.models.iter().map(|m| m.totals.calls).sum::<i64>(), 6);
    let mut from_empty = stats::Stats::default();
    from_empty.merge(&st);
    assert_eq!(from_empty.days, st.days);
    assert!(
        from_empty.sessions.is_empty(),
        "sessions stay with their project"
    );
}

#[test]
fn stats_of_an_empty_store() {
    let (_d, s) = open_tmp();
    let st = s.stats().unwrap();
    assert_eq!(st.total, stats::Totals::default());
    assert!(st.models.is_empty() && st.sessions.is_empty());
}

#[test]
fn record_usage_adds_to_totals_but_not_the_context() {
    let (_d, store) = open_tmp();
    let s = store.create_session("t", None).unwrap();
    store
        .commit_step(
            &s.id,
            &[text(Role::Assistant, "a")],
            Some(&rec(Some(u(100, 10, 0, 0)), Some(0.5))),
        )
        .unwrap();
    store
        .record_usage(&s.id, &rec(Some(u(20, 5, 0, 0)), Some(0.25)))
        .unwrap();
    let after = store.session(&s.id).unwrap().unwrap();
    assert_eq!(after.total_prompt_tokens, 120);
    assert_eq!(after.total_completion_tokens, 15);
    assert!((after.cost - 0.75).abs() < 1e-9);
    assert_eq!(
        after.context_tokens, 110,
        "the title call is not the context"
    );
    let rows = store.usage_rows(&s.id).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].message_id, None);
    assert!(matches!(
        store.record_usage("nope", &rec(None, None)),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn the_man_page_documents_every_table_and_column() {
    let (_d, s) = open_tmp();
    let man = crate::docs::man();
    let store_section = &man[man
        .find(".SH SESSION STORE")
        .expect("a SESSION STORE section")..];
    let tables: Vec<String> = s
        .conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(tables.len(), 6, "{tables:?}");
    for t in &tables {
        assert!(store_section.contains(t.as_str()), "table {t} undocumented");
        for (col, ..) in columns(&s, t) {
            let plain = store_section.replace("\\-", "-");
            assert!(
                plain.contains(&col),
                "column {t}.{col} is not in the man page's SESSION STORE section"
            );
        }
    }
}
