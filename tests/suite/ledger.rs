//! The usage ledger end to end: sub-agents, auto-summarize, `crush stats`, concurrent writers,
//! `kill -9` mid-turn, bad usage and a too-new database. The SQLite file is read directly, as a
//! third-party ledger would.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use rusqlite::Connection;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const BOTH: [Dialect; 2] = [Dialect::OpenAi, Dialect::Anthropic];

/// Prices of the fake model (USD per million tokens): input, output, cache write, cache read.
const PRICES: (f64, f64, f64, f64) = (3.0, 15.0, 3.75, 0.3);

fn price(input: u64, output: u64) -> f64 {
    (input as f64 * PRICES.0 + output as f64 * PRICES.1) / 1e6
}

fn db_path(env: &TestEnv) -> PathBuf {
    env.project().join(".crush").join("crush.db")
}

fn db(env: &TestEnv) -> Connection {
    let c = Connection::open(db_path(env)).expect("open crush.db");
    c.busy_timeout(Duration::from_secs(30))
        .expect("busy timeout");
    c
}

/// A config for `server` with the fake model's window and prices changed.
fn config(server: &FakeServer, d: Dialect, env: &TestEnv, window: u64, priced: bool) -> Value {
    let mut cfg = env.config_for(server, d);
    let m = &mut cfg["providers"]["fake"]["models"][0];
    m["context_window"] = json!(window);
    if !priced {
        let o = m.as_object_mut().expect("model object");
        for k in [
            "cost_per_1m_in",
            "cost_per_1m_out",
            "cost_per_1m_in_cached",
            "cost_per_1m_out_cached",
        ] {
            o.remove(k);
        }
    }
    cfg
}

/// Every session's totals equal the sums of the usage rows of it and its sub-agent sessions
/// (the parent includes each child once). Returns how many sessions were checked.
fn assert_totals_match_ledger(c: &Connection) -> usize {
    let mut stmt = c
        .prepare(
            "WITH RECURSIVE tree(root, id) AS (
                 SELECT id, id FROM sessions
                 UNION
                 SELECT t.root, s.id FROM sessions s JOIN tree t ON s.parent_session_id = t.id
             )
             SELECT s.id, s.total_prompt_tokens, s.total_completion_tokens, s.cost,
                 (SELECT COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(cache_read_tokens, 0)
                          + COALESCE(cache_write_tokens, 0)), 0)
                  FROM usage WHERE session_id IN (SELECT id FROM tree WHERE root = s.id)),
                 (SELECT COALESCE(SUM(output_tokens), 0)
                  FROM usage WHERE session_id IN (SELECT id FROM tree WHERE root = s.id)),
                 (SELECT COALESCE(SUM(cost), 0.0)
                  FROM usage WHERE session_id IN (SELECT id FROM tree WHERE root = s.id))
             FROM sessions s",
        )
        .unwrap();
    let rows: Vec<(String, i64, i64, f64, i64, i64, f64)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (id, prompt, completion, cost, sum_prompt, sum_completion, sum_cost) in &rows {
        assert_eq!(
            (prompt, completion),
            (sum_prompt, sum_completion),
            "session {id}: totals vs ledger"
        );
        assert!(
            (cost - sum_cost).abs() < 1e-9,
            "session {id}: cost {cost} vs ledger {sum_cost}"
        );
    }
    rows.len()
}

fn top_session(c: &Connection) -> String {
    c.query_row(
        "SELECT id FROM sessions WHERE parent_session_id IS NULL",
        [],
        |r| r.get(0),
    )
    .expect("one top-level session")
}

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn sub_agent_works_in_a_child_session_and_its_cost_counts_once() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![
            Reply::tool_call("agent", json!({"prompt": "Find the parser."}))
                .with_usage(1000, 50, 0, 0),
            // The sub-agent: one listing, then its report.
            Reply::tool_call("ls", json!({})).with_usage(300, 20, 0, 0),
            Reply::text("The parser is in src/parse.rs.").with_usage(400, 30, 0, 0),
            // The parent again.
            Reply::text("Found it: src/parse.rs.").with_usage(1200, 40, 0, 0),
        ]);
        let env = TestEnv::new();
        env.use_server(&server, d);
        env.write_project_file("src/parse.rs", "fn parse() {}\n");
        // No --yolo: read-only work inside the project needs no permission.
        let out = env.run(&["run", "-q", "where is the parser?"], None);
        out.assert_success();
        assert_eq!(
            out.stdout, "Found it: src/parse.rs.\n",
            "{d:?}: child text stays out"
        );

        let reqs = server.model_requests();
        assert_eq!(reqs.len(), 4);
        assert!(reqs[0].tool_names().contains(&"agent".to_string()));
        assert_eq!(
            reqs[1].tool_names(),
            ["fetch", "glob", "grep", "ls", "view"],
            "{d:?}: the sub-agent is read-only"
        );
        assert!(reqs[1].system_text().contains("sub-agent"));
        assert_eq!(reqs[1].user_texts(), ["Find the parser."]);
        let results = reqs[3].tool_results();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].1, "The parser is in src/parse.rs.");

        let c = db(&env);
        let parent = top_session(&c);
        let (child, child_parent): (String, String) = c
            .query_row(
                "SELECT id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(child_parent, parent);
        // Crush's id convention: <assistant message id>$$<tool call id>.
        let (msg_id, call_id) = child.split_once("$$").expect("a $$ id");
        assert_eq!(call_id, results[0].0);
        let parts: String = c
            .query_row(
                "SELECT parts FROM messages WHERE id = ?1 AND session_id = ?2",
                [msg_id, &parent],
                |r| r.get(0),
            )
            .expect("the id names the parent's assistant message");
        assert!(parts.contains(call_id));

        let rows = |sid: &str| {
            c.query_row(
                "SELECT COUNT(*) FROM usage WHERE session_id = ?1",
                [sid],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
        };
        assert_eq!((rows(&parent), rows(&child)), (2, 2));
        let (prompt, completion, cost): (i64, i64, f64) = c
            .query_row(
                "SELECT total_prompt_tokens, total_completion_tokens, cost FROM sessions WHERE id = ?1",
                [&parent],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((prompt, completion), (2900, 140));
        let all = price(1000, 50) + price(300, 20) + price(400, 30) + price(1200, 40);
        assert!(
            (cost - all).abs() < 1e-9,
            "{d:?}: parent cost {cost} vs {all}"
        );
        let ledger: f64 = c
            .query_row("SELECT SUM(cost) FROM usage", [], |r| r.get(0))
            .unwrap();
        assert!((ledger - all).abs() < 1e-9);
        assert_eq!(assert_totals_match_ledger(&c), 2);

        // stats: once in total and under the parent session.
        let st = env.run(&["stats", "--json"], None);
        st.assert_success();
        let v: Value = serde_json::from_str(&st.stdout).unwrap();
        assert_eq!(v["total"]["calls"], 4);
        assert!((v["total"]["cost"].as_f64().unwrap() - all).abs() < 1e-9);
        assert_eq!(v["sessions"].as_array().unwrap().len(), 1);
        assert_eq!(v["sessions"][0]["id"], parent.as_str());
        assert_eq!(v["sessions"][0]["calls"], 4);
        assert_eq!(v["sessions"][0]["sub_agent_sessions"], 1);
        assert!((v["sessions"][0]["cost"].as_f64().unwrap() - all).abs() < 1e-9);

        // The child's usage is part of the parent's totals: it cannot be deleted alone.
        let del = env.run(&["sessions", "delete", &child], None);
        del.assert_code(2);
        assert!(del.stderr.contains("sub-agent"), "{}", del.stderr);
        assert_eq!(assert_totals_match_ledger(&db(&env)), 2);
    }
}

#[test]
fn sub_agent_permission_refusal_does_not_hang_a_non_interactive_run() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "Read /etc/hostname."})),
        Reply::tool_call("view", json!({"file_path": "/etc/hostname"})),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "look outside"], None);
    out.assert_code(3);
    assert!(out.stderr.contains("refused view"), "{}", out.stderr);
    assert_eq!(server.model_requests().len(), 2);
    let c = db(&env);
    assert_totals_match_ledger(&c);
    // The parent's agent call got a result saying why.
    let parts: String = c
        .query_row(
            "SELECT parts FROM messages WHERE role = 'tool' AND session_id = ?1",
            [top_session(&c)],
            |r| r.get(0),
        )
        .unwrap();
    assert!(parts.contains("refused"), "{parts}");
}

#[test]
fn unpriced_model_gives_null_cost_and_stats_say_unpriced() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![
            Reply::tool_call("ls", json!({})).with_usage(100, 10, 0, 0),
            Reply::text("ok").with_usage(200, 20, 0, 0),
        ]);
        let env = TestEnv::new();
        env.write_config(&config(&server, d, &env, 200_000, false));
        env.run(&["run", "-q", "list"], None).assert_success();
        let c = db(&env);
        assert_eq!(
            count(
                &c,
                "SELECT COUNT(*) FROM usage WHERE cost IS NULL AND price_source = 'unpriced'"
            ),
            2,
            "{d:?}"
        );
        assert_eq!(
            count(&c, "SELECT SUM(input_tokens) FROM usage"),
            300,
            "tokens are still counted"
        );
        assert_totals_match_ledger(&c);

        let text = env.run(&["stats"], None);
        text.assert_success();
        assert!(text.stdout.contains("unpriced"), "{}", text.stdout);
        assert!(!text.stdout.contains("$0.0000"), "{}", text.stdout);
        let j = env.run(&["stats", "--json"], None);
        let v: Value = serde_json::from_str(&j.stdout).unwrap();
        assert_eq!(v["total"]["cost"], Value::Null);
        assert_eq!(v["total"]["unpriced_calls"], 2);
        assert_eq!(v["total"]["priced_calls"], 0);
        assert_eq!(v["models"][0]["cost"], Value::Null);
        assert_eq!(v["total"]["input_tokens"], 300);
    }
}

#[test]
fn usage_the_provider_did_not_report_is_unknown_not_zero() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![Reply::text("hi").without_usage()]);
        let env = TestEnv::new();
        env.use_server(&server, d);
        let out = env.run(&["run", "--json", "hi"], None);
        out.assert_success();
        let usage: Value = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["type"] == "usage")
            .expect("a usage event");
        assert_eq!(usage["input_tokens"], Value::Null, "{d:?}");
        assert_eq!(usage["cost"], Value::Null);
        let c = db(&env);
        let (tokens, cost, source): (Option<i64>, Option<f64>, String) = c
            .query_row(
                "SELECT input_tokens, cost, price_source FROM usage",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((tokens, cost), (None, None), "{d:?}");
        assert_eq!(source, "estimated", "tokens unknown, the context estimated");
        let v: Value = serde_json::from_str(&env.run(&["stats", "--json"], None).stdout).unwrap();
        assert_eq!(v["total"]["unknown_usage_calls"], 1);
        assert_eq!(v["total"]["estimated_calls"], 1);
        assert_eq!(v["total"]["cost"], Value::Null);
        assert_eq!(v["total"]["input_tokens"], Value::Null, "unknown, not 0");
        assert_eq!(v["models"][0]["output_tokens"], Value::Null);
        let text = env.run(&["stats"], None).stdout;
        let all = text.lines().find(|l| l.starts_with("all calls")).unwrap();
        assert!(all.contains("unknown") && !all.contains(" 0 "), "{text}");
        assert!(text.contains("1 estimated for the context meter"), "{text}");
    }
}

#[test]
fn negative_or_absurd_usage_is_rejected_with_a_log_line() {
    for usage in [
        r#"{"prompt_tokens":-5,"completion_tokens":3}"#,
        r#"{"prompt_tokens":12,"completion_tokens":90000000000}"#,
    ] {
        let body = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"hi\"}},\"finish_reason\":null}}]}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{usage}}}\n\n\
             data: [DONE]\n\n"
        );
        let server = FakeServer::with_script(vec![Reply::raw_sse(&body)]);
        let env = TestEnv::new();
        env.use_server(&server, Dialect::OpenAi);
        let out = env.run(&["run", "-q", "hi"], None);
        out.assert_success();
        assert_eq!(out.stdout, "hi\n");
        assert!(
            out.stderr.contains("ignored the token usage"),
            "{usage}: {}",
            out.stderr
        );
        let c = db(&env);
        assert_eq!(
            count(
                &c,
                "SELECT COUNT(*) FROM usage WHERE input_tokens IS NULL AND output_tokens IS NULL AND cost IS NULL"
            ),
            1,
            "{usage}"
        );
        assert_eq!(
            count(
                &c,
                "SELECT total_prompt_tokens + total_completion_tokens FROM sessions"
            ),
            0
        );
    }
}

#[test]
fn summarize_triggers_at_the_proportional_margin() {
    for d in BOTH {
        // A 1M window: 20 % margin = 200k. 790k + 5k leaves 205k: no summary; 800k + 5k leaves
        // 195k: summary. (Go Crush's flat 20k margin would wait until 980k.)
        let server = FakeServer::with_script(vec![
            Reply::tool_call("ls", json!({})).with_usage(790_000, 5_000, 0, 0),
            Reply::tool_call("glob", json!({"pattern": "*"})).with_usage(800_000, 5_000, 0, 0),
            Reply::text("SUMMARY: listed the files, then globbed them.")
                .with_usage(805_000, 900, 0, 0),
            Reply::text("All done.").with_usage(1_500, 10, 0, 0),
        ]);
        let env = TestEnv::new();
        env.write_config(&config(&server, d, &env, 1_000_000, true));
        let out = env.run(&["run", "-q", "list things"], None);
        out.assert_success();
        assert_eq!(
            out.stdout, "All done.\n",
            "{d:?}: the summary is not the answer"
        );
        assert!(out.stderr.contains("summarizing"), "{}", out.stderr);

        let reqs = server.model_requests();
        assert_eq!(reqs.len(), 4, "{d:?}");
        assert!(
            !reqs[1]
                .system_text()
                .contains("summarizing a coding session")
        );
        assert!(
            reqs[2]
                .system_text()
                .contains("summarizing a coding session")
        );
        assert_eq!(
            reqs[2].user_texts().last().map(String::as_str),
            Some("Provide a detailed summary of our conversation above.")
        );
        // After the summary: the summary and the carried-on request (Anthropic merges the two
        // user messages into one), no old tool results.
        let after = &reqs[3];
        let users = after.user_texts().join("\n");
        let carry = "The previous session was interrupted because it got too long, the initial user request was: `list things`";
        let (s_at, c_at) = (users.find("SUMMARY: listed the files"), users.find(carry));
        assert!(
            matches!((s_at, c_at), (Some(a), Some(b)) if a < b),
            "{d:?}: {users}"
        );
        assert!(!after.user_texts().contains(&"list things".to_string()));
        assert_eq!(
            after
                .messages()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count(),
            0
        );
        assert!(after.tool_results().is_empty());

        let c = db(&env);
        let sid = top_session(&c);
        let (summary_id, context): (String, i64) = c
            .query_row(
                "SELECT summary_message_id, context_tokens FROM sessions WHERE id = ?1",
                [&sid],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let flagged: String = c
            .query_row(
                "SELECT id FROM messages WHERE is_summary_message = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(summary_id, flagged);
        assert_eq!(context, 1_510, "the context meter is the last call's");
        assert_eq!(count(&c, "SELECT COUNT(*) FROM usage"), 4);
        let summary_row: i64 = c
            .query_row(
                "SELECT output_tokens FROM usage WHERE message_id = ?1",
                [&summary_id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(summary_row, 900, "the summary call has its own usage row");
        assert_totals_match_ledger(&c);

        // The next turn starts from the summary.
        server.push(Reply::text("Next.").with_usage(1_600, 5, 0, 0));
        env.run(&["run", "-q", "-C", "and now?"], None)
            .assert_success();
        let users = server.last_request().user_texts();
        assert!(users[0].contains("SUMMARY"), "{users:?}");
        assert_eq!(users.last().map(String::as_str), Some("and now?"));
        assert!(!users.iter().any(|u| u == "list things"));
    }
}

#[test]
fn a_session_left_near_the_window_is_summarized_before_the_next_turn() {
    let server = FakeServer::with_script(vec![
        // 10k window, margin 2k: 8.5k used at the end of the turn.
        Reply::text("first answer").with_usage(8_000, 500, 0, 0),
        Reply::text("SUMMARY of the first turn").with_usage(8_600, 100, 0, 0),
        Reply::text("second answer").with_usage(400, 10, 0, 0),
    ]);
    let env = TestEnv::new();
    env.write_config(&config(&server, Dialect::Anthropic, &env, 10_000, true));
    env.run(&["run", "-q", "one"], None).assert_success();
    assert_eq!(
        server.model_requests().len(),
        1,
        "no summary at the end of a turn"
    );
    let out = env.run(&["run", "-q", "-C", "two"], None);
    out.assert_success();
    assert_eq!(out.stdout, "second answer\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[1]
            .system_text()
            .contains("summarizing a coding session")
    );
    // Anthropic merges the summary and the new prompt into one user message.
    let users = reqs[2].user_texts().join("\n");
    assert!(users.contains("SUMMARY of the first turn"), "{users}");
    assert!(users.ends_with("two"), "{users}");
    assert!(
        !users.contains("interrupted"),
        "no carry-on message between turns"
    );
    assert!(!users.contains("one"), "{users}");
    assert_totals_match_ledger(&db(&env));
}

#[test]
fn a_server_that_reports_no_usage_is_estimated_and_summarized_at_the_margin() {
    // llama.cpp's server streams no usage: the estimate (bytes / 4) is what the margin reads.
    let server = FakeServer::with_script(vec![
        Reply::text("first answer").without_usage(),
        Reply::text("SUMMARY of the first turn").without_usage(),
        Reply::text("second answer").without_usage(),
    ]);
    let env = TestEnv::new();
    env.write_config(&config(&server, Dialect::OpenAi, &env, 30_000, true));
    // 100 kB: about 25k tokens, past the 80 % mark of a 30k window.
    let big = "word ".repeat(20_000);
    env.run(&["run", "-q", &big], None).assert_success();
    let c = db(&env);
    let (context, source): (i64, String) = c
        .query_row(
            "SELECT s.context_tokens, u.price_source FROM sessions s JOIN usage u
             ON u.session_id = s.id",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        (25_000..40_000).contains(&context),
        "estimated context {context}"
    );
    assert_eq!(source, "estimated");
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM usage WHERE input_tokens IS NULL AND cost IS NULL"
        ),
        1,
        "never stored as reported tokens, never priced"
    );
    let out = env.run(&["run", "-q", "-C", "two"], None);
    out.assert_success();
    assert_eq!(out.stdout, "second answer\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 3, "the resume was summarized first");
    assert!(
        reqs[1]
            .system_text()
            .contains("summarizing a coding session")
    );
}

#[test]
fn an_estimated_context_of_mostly_prompt_and_tools_is_not_summarized_at_every_turn() {
    // A local model's small window can be nearly filled by crush's own system prompt and tool
    // list as estimated: summarizing cannot shrink those, so only a history of a quarter of the
    // window is summarized.
    let server = FakeServer::with_script(vec![
        Reply::text("first answer").without_usage(),
        Reply::text("second answer").without_usage(),
        Reply::text("third answer").without_usage(),
        Reply::text("SUMMARY so far").without_usage(),
        Reply::text("fourth answer").without_usage(),
    ]);
    let env = TestEnv::new();
    env.write_config(&config(&server, Dialect::OpenAi, &env, 1_000_000, true));
    env.run(&["run", "-q", "one"], None).assert_success();
    let context: i64 = db(&env)
        .query_row("SELECT context_tokens FROM sessions", [], |r| r.get(0))
        .unwrap();
    // The window is now the size of that first context: past the margin, nearly all of it the
    // fixed part.
    let window = u64::try_from(context).unwrap();
    env.write_config(&config(&server, Dialect::OpenAi, &env, window, true));
    let out = env.run(&["run", "-q", "-C", "two"], None);
    out.assert_success();
    assert_eq!(out.stdout, "second answer\n");
    assert_eq!(
        server.model_requests().len(),
        2,
        "no summary: {}",
        out.stderr
    );
    // A history of more than half the window is worth a summary.
    let big = "word ".repeat(usize::try_from(window / 2).unwrap());
    env.run(&["run", "-q", "-C", &big], None).assert_success();
    let out = env.run(&["run", "-q", "-C", "four"], None);
    out.assert_success();
    assert_eq!(out.stdout, "fourth answer\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 5);
    assert!(
        reqs[3]
            .system_text()
            .contains("summarizing a coding session"),
        "summarized once the history grew: {}",
        out.stderr
    );
}

#[test]
fn auto_summarize_can_be_turned_off() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("ls", json!({})).with_usage(9_500, 100, 0, 0),
        Reply::text("done").with_usage(9_700, 100, 0, 0),
    ]);
    let env = TestEnv::new();
    let mut cfg = config(&server, Dialect::OpenAi, &env, 10_000, true);
    cfg["options"] = json!({"disable_auto_summarize": true});
    env.write_config(&cfg);
    env.run(&["run", "-q", "go"], None).assert_success();
    assert_eq!(server.model_requests().len(), 2);
    assert_eq!(
        count(
            &db(&env),
            "SELECT COUNT(*) FROM messages WHERE is_summary_message = 1"
        ),
        0
    );
}

#[test]
fn concurrent_processes_writing_usage_lose_nothing() {
    const PROCESSES: usize = 3;
    const TOOL_STEPS: usize = 6;
    let server = FakeServer::start();
    // Each run: TOOL_STEPS globs (different ones: identical calls would stop the turn as a
    // loop), then an answer; a run's request k carries 1 user message + 2 per step.
    for k in 0..TOOL_STEPS {
        server.route_when(
            move |r| {
                let turns = r
                    .messages()
                    .iter()
                    .filter(|m| m["role"] != "system")
                    .count();
                r.dialect.is_some() && turns == 1 + 2 * k
            },
            vec![
                Reply::tool_call("glob", json!({"pattern": format!("*.{k}")}))
                    .with_usage(100, 7, 11, 13),
            ],
        );
    }
    server.set_fallback(Some(Reply::text("done").with_usage(100, 7, 11, 13)));
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // Create the store first so the runs race on writes, not only on creation.
    env.run(&["stats"], None).assert_success();

    let children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            env.crush()
                .args(["run", "-q", &format!("run {i}")])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn crush")
        })
        .collect();
    for ch in children {
        let out = ch.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let c = db(&env);
    let calls = (PROCESSES * (TOOL_STEPS + 1)) as i64;
    assert_eq!(count(&c, "SELECT COUNT(*) FROM usage"), calls);
    assert_eq!(count(&c, "SELECT COUNT(*) FROM sessions"), PROCESSES as i64);
    assert_eq!(
        count(&c, "SELECT SUM(total_prompt_tokens) FROM sessions"),
        calls * (100 + 11 + 13)
    );
    assert_eq!(
        count(&c, "SELECT SUM(total_completion_tokens) FROM sessions"),
        calls * 7
    );
    let cost: f64 = c
        .query_row("SELECT SUM(cost) FROM sessions", [], |r| r.get(0))
        .unwrap();
    let one = (100.0 * PRICES.0 + 7.0 * PRICES.1 + 13.0 * PRICES.2 + 11.0 * PRICES.3) / 1e6;
    assert!((cost - one * calls as f64).abs() < 1e-9, "{cost}");
    assert_eq!(assert_totals_match_ledger(&c), PROCESSES);
}

/// Polls `cond` (a hang guard, not a timing assertion).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn usage_rows(env: &TestEnv) -> i64 {
    if !db_path(env).exists() {
        return 0;
    }
    Connection::open(db_path(env))
        .and_then(|c| c.query_row("SELECT COUNT(*) FROM usage", [], |r| r.get(0)))
        .unwrap_or(0)
}

fn spawn_run(env: &TestEnv, args: &[&str]) -> Child {
    env.crush()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn crush")
}

#[test]
fn kill_9_while_a_tool_runs_keeps_totals_equal_to_the_ledger() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "sleep 30"})).with_usage(500, 20, 0, 0),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let mut child = spawn_run(&env, &["run", "-q", "-y", "wait a bit"]);
    // The call is recorded before its tool runs.
    wait_for("the first usage row", || usage_rows(&env) >= 1);
    child.kill().expect("kill -9");
    let _ = child.wait();

    let c = db(&env);
    assert_eq!(assert_totals_match_ledger(&c), 1);
    let sid = top_session(&c);
    assert_eq!(
        count(&c, "SELECT total_prompt_tokens FROM sessions"),
        500,
        "the paid call is in the totals"
    );
    drop(c);
    // The session reloads and continues; the interrupted call is closed for the model.
    env.run(&["sessions", "show", &sid], None).assert_success();
    server.push(Reply::text("resumed"));
    let out = env.run(&["run", "-q", "-s", &sid, "continue"], None);
    out.assert_success();
    assert_eq!(out.stdout, "resumed\n");
    let results = server.last_request().tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("interrupted"), "{results:?}");
    assert_totals_match_ledger(&db(&env));
}

#[test]
fn kill_9_while_a_sub_agent_waits_keeps_totals_equal_to_the_ledger() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "look around"})).with_usage(500, 20, 0, 0),
        Reply::tool_call("ls", json!({})).with_usage(300, 10, 0, 0),
        Reply::stall(Duration::from_secs(30)),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut child = spawn_run(&env, &["run", "-q", "look"]);
    wait_for("the stalled sub-agent call", || {
        server.model_requests().len() >= 3
    });
    child.kill().expect("kill -9");
    let _ = child.wait();

    let c = db(&env);
    assert_eq!(assert_totals_match_ledger(&c), 2);
    let sid = top_session(&c);
    let (p, sub): (i64, i64) = c
        .query_row(
            "SELECT (SELECT total_prompt_tokens FROM sessions WHERE parent_session_id IS NULL),
                    (SELECT total_prompt_tokens FROM sessions WHERE parent_session_id IS NOT NULL)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((p, sub), (800, 300));
    drop(c);
    env.run(&["sessions", "show", &sid], None).assert_success();
    let st = env.run(&["stats", "--json"], None);
    st.assert_success();
    let v: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(v["total"]["calls"], 2);
    assert_eq!(v["sessions"][0]["calls"], 2);
}

#[test]
fn a_database_from_a_newer_crush_is_refused_without_writes() {
    let server = FakeServer::always_text("hi");
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "hi"], None).assert_success();
    {
        let c = db(&env);
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = std::fs::read(db_path(&env)).unwrap();
    let requests = server.model_requests().len();
    for args in [
        &["run", "-q", "again"][..],
        &["stats"][..],
        &["sessions", "list"][..],
    ] {
        let out = env.run(args, None);
        out.assert_code(1);
        assert!(
            out.stderr.contains("newer than this crush supports"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert_eq!(server.model_requests().len(), requests, "no model call");
    assert_eq!(std::fs::read(db_path(&env)).unwrap(), before, "no write");
}

#[test]
fn json_usage_events_include_the_sub_agents_calls_once() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "Count the files."})).with_usage(1000, 50, 0, 0),
        Reply::text("There are none.").with_usage(300, 20, 0, 0),
        Reply::text("No files.").with_usage(1200, 40, 0, 0),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "--json", "count"], None);
    out.assert_success();
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let costs: Vec<f64> = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| e["cost"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), 3, "{}", out.stdout);
    let sum: f64 = costs.iter().sum();
    let all = price(1000, 50) + price(300, 20) + price(1200, 40);
    assert!((sum - all).abs() < 1e-12);
    // The sub-agent's text reaches the parent's stream only as the agent tool's result.
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .expect("the agent call's result");
    assert_eq!(result["name"], "agent");
    assert_eq!(result["content"], "There are none.");
    assert_eq!(
        events.iter().filter(|e| e["type"] == "tool_call").count(),
        1
    );
    let texts: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(texts, "No files.");
    let v: Value = serde_json::from_str(&env.run(&["stats", "--json"], None).stdout).unwrap();
    assert!((v["total"]["cost"].as_f64().unwrap() - sum).abs() < 1e-12);
}

#[test]
fn hooks_see_sub_agent_tool_calls_only_when_they_opt_in() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "List the files."})),
        Reply::tool_call("ls", json!({})),
        Reply::text("Two files."),
        Reply::text("There are two files."),
    ]);
    let env = TestEnv::new();
    let all_log = env.root().join("all.log");
    let main_log = env.root().join("main.log");
    let logger =
        |log: &std::path::Path| format!("cat >> '{}'; echo >> '{}'", log.display(), log.display());
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": [
        {"name": "sees-all", "command": logger(&all_log), "include_sub_agents": true},
        {"name": "main-only", "command": logger(&main_log)}
    ]});
    env.write_config(&cfg);
    env.run(&["run", "-q", "how many files?"], None)
        .assert_success();
    let payloads = |log: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a JSON payload"))
            .collect()
    };
    let all = payloads(&all_log);
    let main = payloads(&main_log);
    let tools = |ps: &[Value]| -> Vec<String> {
        ps.iter()
            .map(|p| p["tool_name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(tools(&all), ["agent", "ls"], "{all:?}");
    assert_eq!(tools(&main), ["agent"], "{main:?}");
    assert_eq!(all[1]["is_sub_agent"], true);
    assert!(
        all[0].get("is_sub_agent").is_none(),
        "the parent's call is not a sub-agent's"
    );
    assert_ne!(
        all[0]["session_id"], all[1]["session_id"],
        "the child session"
    );
}

#[test]
fn a_history_refused_as_too_long_is_summarized_shortened_and_the_request_carried_on() {
    for d in BOTH {
        // One huge tool result jumps past the margin in a single step; the provider refuses
        // the next request. Go Crush's session would be dead: every later request (and its
        // summary call) sends the same history.
        let overflow = match d {
            Dialect::OpenAi => Reply::api_error(
                400,
                "invalid_request_error",
                "This model's maximum context length is 8192 tokens.",
            ),
            Dialect::Bedrock => unreachable!("the test runs the two SSE dialects"),
            _ => Reply::api_error(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        };
        let server = FakeServer::with_script(vec![
            Reply::tool_call("view", json!({"file_path": "big.txt"})),
            overflow,
            Reply::text("SUMMARY: viewed big.txt, a file of x."),
            Reply::text("It is all x."),
        ]);
        let env = TestEnv::new();
        env.use_server(&server, d);
        let line = "x".repeat(1_900);
        env.write_project_file("big.txt", &format!("{line}\n").repeat(100));
        let out = env.run(&["run", "-q", "what is in big.txt?"], None);
        out.assert_success();
        assert_eq!(out.stdout, "It is all x.\n", "{d:?}");
        assert!(out.stderr.contains("too long"), "{}", out.stderr);
        let reqs = server.model_requests();
        assert_eq!(reqs.len(), 4, "{d:?}");
        // The summary request carried a shortened copy of the huge result.
        assert!(
            reqs[2]
                .system_text()
                .contains("summarizing a coding session")
        );
        let (_, viewed, _) = reqs[2].tool_results()[0].clone();
        assert!(viewed.len() < 10_000, "{d:?}: {} chars", viewed.len());
        assert!(viewed.contains("characters left out"), "{d:?}");
        // The retry starts from the summary and carries the request on.
        let users = reqs[3].user_texts().join("\n");
        assert!(users.contains("SUMMARY: viewed big.txt"), "{d:?}: {users}");
        assert!(users.contains("what is in big.txt?"), "{d:?}: {users}");
        assert!(reqs[3].tool_results().is_empty());
        assert_totals_match_ledger(&db(&env));
    }
}

/// The `--json` events of a run.
fn events(out: &crate::support::Output) -> Vec<Value> {
    out.stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn an_overflow_the_summary_cannot_fix_names_compact_and_run_compact_fixes_it() {
    let overflow = || {
        Reply::api_error(
            400,
            "invalid_request_error",
            "This model's maximum context length is 2048 tokens. However, you requested 2300 tokens.",
        )
    };
    // The first turn fits; the second overflows, and so does the automatic summary.
    let server = FakeServer::with_script(vec![Reply::text("first answer"), overflow(), overflow()]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "hello"], None).assert_success();
    let sid = top_session(&db(&env));
    // Hints name the session by the short id (the first 7 of `sessions list`'s id).
    let list = env.run(&["sessions", "list", "--json"], None);
    let listed: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let short = listed[0]["id"].as_str().unwrap()[..7].to_string();
    let out = env.run(&["run", "-q", "-C", "more"], None);
    out.assert_code(1);
    assert!(
        out.stderr.contains("summarizing it")
            && out.stderr.contains(&format!(
                "the session {short} no longer fits the model's context window; summarize it with: crush run -s {short} --compact (or /compact in the REPL)"
            )),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 3);

    // --compact needs a session to continue.
    let bare = env.run(&["run", "--compact"], None);
    bare.assert_code(2);
    assert!(bare.stderr.contains("give -s ID or -C"), "{}", bare.stderr);

    // --compact alone: the summary, nothing else.
    server.push_all(vec![Reply::text("SUMMARY: said hello.")]);
    let out = env.run(&["run", "--json", "-s", &sid, "--compact"], None);
    out.assert_success();
    let ev = events(&out);
    let compacted = ev
        .iter()
        .find(|e| e["type"] == "compacted")
        .expect("a compacted event");
    assert_eq!(compacted["session_id"], sid.as_str());
    assert_eq!(compacted["summary_chars"], "SUMMARY: said hello.".len());
    assert!(ev.iter().all(|e| e["type"] != "finish"), "no turn: {ev:?}");
    assert!(
        out.stderr.contains(&format!("compacted session {short}")),
        "{}",
        out.stderr
    );
    let c = db(&env);
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM messages WHERE is_summary_message = 1"
        ),
        1
    );
    let reqs = server.model_requests();
    assert!(
        reqs[3]
            .system_text()
            .contains("summarizing a coding session")
    );

    // -C --compact PROMPT: the summary, then the prompt, from the summary.
    server.push_all(vec![
        Reply::text("SUMMARY: said hello twice."),
        Reply::text("continued"),
    ]);
    let out = env.run(&["run", "-q", "-C", "--compact", "go on"], None);
    out.assert_success();
    assert_eq!(out.stdout, "continued\n");
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 6);
    let users = reqs[5].user_texts().join("\n");
    assert!(
        users.contains("SUMMARY: said hello twice.") && !users.contains("hello\n"),
        "{users}"
    );
}

#[test]
fn a_stream_cut_once_the_estimate_reached_the_window_is_an_overflow() {
    // A server that reports no usage and drops the stream at its window: the estimate says
    // why, the automatic summary runs, and the request goes on from it.
    let cut = || {
        Reply::text("")
            .fault(crate::support::Fault::NoFinish)
            .without_usage()
    };
    let server = FakeServer::with_script(vec![
        cut(),
        cut(),
        cut(),
        cut(),
        Reply::text("SUMMARY: the user asked about x.").without_usage(),
        Reply::text("answer from the summary").without_usage(),
    ]);
    let env = TestEnv::new();
    // A 1000-token window: the system prompt and tools alone are past it.
    env.write_config(&config(&server, Dialect::OpenAi, &env, 1_000, false));
    let out = env.run_with_env(
        &["run", "-q", "what is x?"],
        &[("CRUSH_RETRY_BASE_MS", "1")],
    );
    out.assert_success();
    assert_eq!(out.stdout, "answer from the summary\n");
    assert!(
        out.stderr
            .contains("at the model's 1000-token context window")
            && out.stderr.contains("summarizing it"),
        "{}",
        out.stderr
    );
}
