//! `crush stats [--json]`: model calls, tokens by kind and cost from the project's usage ledger,
//! in total, per model and per top-level session. A call without a cost is counted as unpriced
//! and never shown as $0.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::store::stats::{Stats, Totals, Unitemized};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Version of the `--json` document; bump on incompatible changes.
pub const JSON_SCHEMA_VERSION: u32 = 1;

fn totals_json(t: &Totals) -> Value {
    json!({
        "calls": t.calls,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "cache_read_tokens": t.cache_read_tokens,
        "cache_write_tokens": t.cache_write_tokens,
        "unknown_usage_calls": t.unknown_usage_calls,
        "priced_calls": t.priced_calls,
        "unpriced_calls": t.unpriced_calls,
        // null when no call was priced: unpriced is not free.
        "cost": t.cost_usd(),
    })
}

/// The JSON document of `crush stats --json`.
pub fn to_json(stats: &Stats, database: Option<&str>) -> Value {
    let with = |mut base: Value, t: &Totals| {
        if let (Value::Object(b), Value::Object(extra)) = (&mut base, totals_json(t)) {
            b.extend(extra);
        }
        base
    };
    json!({
        "v": JSON_SCHEMA_VERSION,
        "database": database,
        "total": totals_json(&stats.total),
        "unitemized": {
            "sessions": stats.unitemized.sessions,
            "cost": stats.unitemized.cost,
            "prompt_tokens": stats.unitemized.prompt_tokens,
            "completion_tokens": stats.unitemized.completion_tokens,
        },
        "models": stats.models.iter().map(|m| with(
            json!({"provider": m.provider, "model": m.model}),
            &m.totals,
        )).collect::<Vec<_>>(),
        "sessions": stats.sessions.iter().map(|s| with(
            json!({
                "id": s.id,
                "title": s.title,
                "sub_agent_sessions": s.sub_agent_sessions,
            }),
            &s.totals,
        )).collect::<Vec<_>>(),
    })
}

/// "$0.0123", "unpriced", or "$0.0123 + 2 unpriced".
pub fn cost_text(t: &Totals) -> String {
    match (t.cost_usd(), t.unpriced_calls) {
        (None, 0) => "-".into(),
        (None, _) => "unpriced".into(),
        (Some(c), 0) => format!("${c:.4}"),
        (Some(c), n) => format!("${c:.4} + {n} unpriced"),
    }
}

fn row(out: &mut String, name: &str, t: &Totals) {
    let _ = writeln!(
        out,
        "{name:<40} {:>6} {:>11} {:>10} {:>11} {:>11}  {}",
        t.calls,
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        t.cache_write_tokens,
        cost_text(t)
    );
}

fn header(out: &mut String, first: &str) {
    let _ = writeln!(
        out,
        "{first:<40} {:>6} {:>11} {:>10} {:>11} {:>11}  COST",
        "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE"
    );
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The line for spend another client recorded without a ledger ("" when there is none).
fn unitemized_line(u: &Unitemized) -> String {
    if u.sessions == 0 {
        return String::new();
    }
    let mut line = format!(
        "recorded by another client, not itemized: {} session{}, ${:.4}",
        u.sessions,
        if u.sessions == 1 { "" } else { "s" },
        u.cost
    );
    if u.prompt_tokens > 0 || u.completion_tokens > 0 {
        line.push_str(&format!(
            " (tokens of their last calls: {} in, {} out)",
            u.prompt_tokens, u.completion_tokens
        ));
    }
    line.push('\n');
    line
}

/// The text table of `crush stats`.
pub fn to_text(stats: &Stats) -> String {
    let mut out = String::new();
    if stats.total.calls == 0 {
        return unitemized_line(&stats.unitemized);
    }
    let t = &stats.total;
    header(&mut out, "TOTAL");
    row(&mut out, "all calls", t);
    out.push_str(&unitemized_line(&stats.unitemized));
    if t.unknown_usage_calls > 0 {
        let _ = writeln!(
            out,
            "({} calls reported no token usage: their tokens are unknown, not zero)",
            t.unknown_usage_calls
        );
    }
    out.push('\n');
    header(&mut out, "MODEL");
    for m in &stats.models {
        row(
            &mut out,
            &clip(&format!("{}/{}", m.provider, m.model), 40),
            &m.totals,
        );
    }
    out.push('\n');
    header(&mut out, "SESSION");
    for s in &stats.sessions {
        let mut name = format!("{} {}", super::sessions::short_id(&s.id), s.title);
        if s.sub_agent_sessions > 0 {
            name = format!("{name} (+{} sub-agents)", s.sub_agent_sessions);
        }
        row(&mut out, &clip(&name, 40), &s.totals);
    }
    out
}

pub fn report(global: &Global, json_out: bool) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let store = app::open_existing_store(&loaded)?;
    let stats = match &store {
        Some(s) => s.stats()?,
        None => Stats::default(),
    };
    let db = store.as_ref().map(|s| s.path().display().to_string());
    if json_out {
        return Ok(format!("{}\n", to_json(&stats, db.as_deref())));
    }
    if let Some(s) = &store
        && !s.has_usage_ledger()
    {
        crate::ewriteln!(
            "No model calls itemized in {}: it has no usage ledger (only Go Crush wrote to it).",
            s.path().display()
        );
        return Ok(unitemized_line(&stats.unitemized));
    }
    if stats.total.calls == 0 && stats.unitemized.sessions == 0 {
        crate::ewriteln!(
            "No model calls recorded yet in {}. Start a session with: crush run \"...\"",
            loaded.project_root.display()
        );
        return Ok(String::new());
    }
    Ok(to_text(&stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stats::{ModelStats, SessionStats};

    fn totals(calls: i64, priced: i64, cost: f64) -> Totals {
        Totals {
            calls,
            input_tokens: 10 * calls,
            output_tokens: calls,
            priced_calls: priced,
            unpriced_calls: calls - priced,
            cost,
            ..Totals::default()
        }
    }

    #[test]
    fn unpriced_is_never_zero_dollars() {
        assert_eq!(cost_text(&totals(2, 0, 0.0)), "unpriced");
        assert_eq!(cost_text(&totals(2, 2, 0.5)), "$0.5000");
        assert_eq!(cost_text(&totals(3, 1, 0.25)), "$0.2500 + 2 unpriced");
        assert_eq!(cost_text(&Totals::default()), "-");
        let v = totals_json(&totals(2, 0, 0.0));
        assert_eq!(v["cost"], Value::Null);
        assert_eq!(v["unpriced_calls"], 2);
    }

    #[test]
    fn text_and_json_carry_every_level() {
        let st = Stats {
            total: totals(3, 1, 0.25),
            unitemized: Unitemized {
                sessions: 1,
                cost: 0.5,
                prompt_tokens: 0,
                completion_tokens: 0,
            },
            models: vec![
                ModelStats {
                    provider: "fake".into(),
                    model: "priced".into(),
                    totals: totals(1, 1, 0.25),
                },
                ModelStats {
                    provider: "local".into(),
                    model: "free".into(),
                    totals: totals(2, 0, 0.0),
                },
            ],
            sessions: vec![SessionStats {
                id: "0123456789abcdef".into(),
                title: "A title".into(),
                updated_at: 0,
                sub_agent_sessions: 1,
                totals: totals(3, 1, 0.25),
            }],
        };
        let t = to_text(&st);
        assert!(t.contains("local/free"), "{t}");
        assert!(t.contains("unpriced"), "{t}");
        let short = super::super::sessions::short_id("0123456789abcdef");
        assert!(
            t.contains(&format!("{short} A title (+1 sub-agents)")),
            "{t}"
        );
        assert!(
            t.contains("recorded by another client, not itemized: 1 session, $0.5000\n"),
            "{t}"
        );
        assert!(!t.contains("$0.0000"), "{t}");
        let j = to_json(&st, Some("/x/crush.db"));
        assert_eq!(j["models"][1]["cost"], Value::Null);
        assert_eq!(j["models"][0]["cost"], 0.25);
        assert_eq!(j["sessions"][0]["sub_agent_sessions"], 1);
        assert_eq!(j["total"]["calls"], 3);
        assert_eq!(j["unitemized"]["cost"], 0.5);
    }
}
