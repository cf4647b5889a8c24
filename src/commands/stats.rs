//! `crush stats [--json]`: model calls, tokens by kind and cost from the project's usage ledger,
//! in total, per model and per top-level session. A call without a cost is counted as unpriced
//! and never shown as $0.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::store::stats::{Filter, Stats, Totals, Unitemized};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Version of the `--json` document; bump on incompatible changes.
pub const JSON_SCHEMA_VERSION: u32 = 1;

fn totals_json(t: &Totals) -> Value {
    json!({
        "calls": t.calls,
        // null when no call reported its usage: unknown is not zero.
        "input_tokens": t.known(t.input_tokens),
        "output_tokens": t.known(t.output_tokens),
        "cache_read_tokens": t.known(t.cache_read_tokens),
        "cache_write_tokens": t.known(t.cache_write_tokens),
        "unknown_usage_calls": t.unknown_usage_calls,
        "estimated_calls": t.estimated_calls,
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

/// A token sum as the text shows it: "unknown" when no call reported its usage, "N+?" when
/// some did not (crush(1) USAGE AND COST).
pub fn tokens_text(t: &Totals, sum: i64) -> String {
    match t.known(sum) {
        None => "unknown".into(),
        Some(n) if t.unknown_usage_calls > 0 => format!("{n}+?"),
        Some(n) => n.to_string(),
    }
}

fn row(out: &mut String, name: &str, t: &Totals) {
    let _ = writeln!(
        out,
        "{name:<40} {:>6} {:>11} {:>10} {:>11} {:>11}  {}",
        t.calls,
        tokens_text(t, t.input_tokens),
        tokens_text(t, t.output_tokens),
        tokens_text(t, t.cache_read_tokens),
        tokens_text(t, t.cache_write_tokens),
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
        let estimated = match t.estimated_calls {
            0 => String::new(),
            n => format!("; {n} estimated for the context meter, never counted here"),
        };
        let _ = writeln!(
            out,
            "({} calls reported no token usage: their tokens are unknown, not zero{estimated})",
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

/// How `crush stats` prints (crush(1) USAGE AND COST).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
    Csv,
}

/// The arguments of `crush stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsArgs {
    /// `--all`: every project in projects.json.
    pub all: bool,
    pub filter: Filter,
    pub format: Format,
}

/// A `--since`/`--until` value: `7d` (days before now) or a UTC date `2026-11-01` (its start):
/// Unix seconds, None when it is neither.
pub fn parse_when(s: &str, now: i64) -> Option<i64> {
    if let Some(days) = s.strip_suffix('d') {
        return days
            .parse::<u32>()
            .ok()
            .map(|d| now - i64::from(d) * 86_400);
    }
    let mut it = s.splitn(3, '-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = crate::time::days_from_civil(y, m, d);
    // 2026-02-31 is not a date.
    (crate::time::civil_from_days(days) == (y, m, d)).then_some(days * 86_400)
}

/// One line per model and per project, then the total: scope, name, then the sums.
pub fn to_csv(rows: &[(&str, String, &Totals)]) -> String {
    let mut out = String::from(
        "scope,name,calls,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,unknown_usage_calls,priced_calls,unpriced_calls,cost\n",
    );
    for (scope, name, t) in rows {
        let cost = t.cost_usd().map(|c| format!("{c}")).unwrap_or_default();
        // Unknown tokens, like an unpriced cost, are an empty field.
        let n = |sum: i64| t.known(sum).map(|n| n.to_string()).unwrap_or_default();
        let name = format!("\"{}\"", name.replace('"', "\"\""));
        let _ = writeln!(
            out,
            "{scope},{name},{},{},{},{},{},{},{},{},{cost}",
            t.calls,
            n(t.input_tokens),
            n(t.output_tokens),
            n(t.cache_read_tokens),
            n(t.cache_write_tokens),
            t.unknown_usage_calls,
            t.priced_calls,
            t.unpriced_calls
        );
    }
    out
}

fn csv_of(stats: &Stats) -> String {
    let mut rows: Vec<(&str, String, &Totals)> = stats
        .models
        .iter()
        .map(|m| ("model", format!("{}/{}", m.provider, m.model), &m.totals))
        .collect();
    rows.push(("total", "all calls".into(), &stats.total));
    to_csv(&rows)
}

/// `crush stats --all`: every project of projects.json whose database exists, each opened
/// read-only, and their sum.
fn report_all(args: &StatsArgs) -> Result<String, AppError> {
    let global = crate::paths::global_data_dir();
    let list = crate::store::projects::list(&global).map_err(|e| {
        AppError::Runtime(format!(
            "cannot read {}: {e}",
            global.join("projects.json").display()
        ))
    })?;
    let mut projects = Vec::new();
    let mut total = Totals::default();
    let mut unitemized = Unitemized::default();
    for p in list {
        let db = std::path::Path::new(&p.data_dir).join("crush.db");
        if !db.is_file() {
            continue;
        }
        let store = crate::store::Store::open_read_only(&db)?;
        let stats = store.totals_where(&args.filter)?;
        total.add(&stats.total);
        unitemized.sessions += stats.unitemized.sessions;
        unitemized.cost += stats.unitemized.cost;
        projects.push((p.path, db.display().to_string(), stats));
    }
    Ok(match args.format {
        Format::Json => format!(
            "{}\n",
            json!({
                "v": JSON_SCHEMA_VERSION,
                "total": totals_json(&total),
                "unitemized": {"sessions": unitemized.sessions, "cost": unitemized.cost},
                "projects": projects.iter().map(|(path, db, st)| {
                    let mut v = to_json(st, Some(db));
                    v["path"] = json!(path);
                    v
                }).collect::<Vec<_>>(),
            })
        ),
        Format::Csv => {
            let mut rows: Vec<(&str, String, &Totals)> = projects
                .iter()
                .map(|(path, _, st)| ("project", path.clone(), &st.total))
                .collect();
            rows.push(("total", "all projects".into(), &total));
            to_csv(&rows)
        }
        Format::Text => {
            let mut out = String::new();
            header(&mut out, "PROJECT");
            for (path, _, st) in &projects {
                row(&mut out, &clip_left(path, 40), &st.total);
            }
            row(&mut out, "all projects", &total);
            out.push_str(&unitemized_line(&unitemized));
            out
        }
    })
}

/// The end of `s` in at most `n` characters (a path's last components say the most).
fn clip_left(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let mut t = String::from("…");
    t.extend(s.chars().skip(count + 1 - n));
    t
}

pub fn report(global: &Global, args: &StatsArgs) -> Result<String, AppError> {
    if args.all {
        return report_all(args);
    }
    let loaded = app::load_config(global)?;
    let store = app::open_existing_store(&loaded)?;
    let stats = match &store {
        Some(s) => s.stats_where(&args.filter)?,
        None => Stats::default(),
    };
    let db = store.as_ref().map(|s| s.path().display().to_string());
    match args.format {
        Format::Json => return Ok(format!("{}\n", to_json(&stats, db.as_deref()))),
        Format::Csv => return Ok(csv_of(&stats)),
        Format::Text => {}
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
    fn since_and_until_take_days_or_dates() {
        let now = 1_800_000_000;
        assert_eq!(parse_when("7d", now), Some(now - 7 * 86_400));
        assert_eq!(parse_when("0d", now), Some(now));
        assert_eq!(parse_when("1970-01-02", now), Some(86_400));
        assert_eq!(parse_when("2026-11-01", now), Some(1_793_491_200));
        for bad in [
            "2026-02-31",
            "2026-13-01",
            "7",
            "-1d",
            "yesterday",
            "2026-1-1",
            "",
        ] {
            assert_eq!(parse_when(bad, now), None, "{bad}");
        }
    }

    #[test]
    fn csv_quotes_names_and_leaves_unpriced_cost_empty() {
        let t = totals(2, 0, 0.0);
        let csv = to_csv(&[("model", "a\"b".into(), &t)]);
        assert!(
            csv.ends_with("model,\"a\"\"b\",2,20,2,0,0,0,0,2,\n"),
            "{csv}"
        );
    }

    #[test]
    fn unreported_tokens_are_unknown_not_zero() {
        let all = Totals {
            unknown_usage_calls: 2,
            estimated_calls: 2,
            ..totals(2, 0, 0.0)
        };
        let all = Totals {
            input_tokens: 0,
            output_tokens: 0,
            ..all
        };
        assert_eq!(tokens_text(&all, all.input_tokens), "unknown");
        let v = totals_json(&all);
        assert_eq!(v["input_tokens"], Value::Null);
        assert_eq!(v["cache_write_tokens"], Value::Null);
        assert_eq!(v["estimated_calls"], 2);
        assert!(to_csv(&[("total", "x".into(), &all)]).ends_with(",2,,,,,2,0,2,\n"));
        // Some calls known: their sum, marked as partial.
        let some = Totals {
            unknown_usage_calls: 1,
            ..totals(3, 0, 0.0)
        };
        assert_eq!(tokens_text(&some, some.input_tokens), "30+?");
        assert_eq!(totals_json(&some)["input_tokens"], 30);
        // No calls at all: nothing is unknown.
        assert_eq!(totals_json(&Totals::default())["input_tokens"], 0);
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
