//! `crush stats [--json]`: model calls, tokens by kind and cost from the project's usage ledger,
//! in total, per model and per top-level session. A call without a cost is counted as unpriced
//! and never shown as $0.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::store::stats::{DayStats, Filter, ModelStats, Stats, Totals, Unitemized};
use crate::text::width::{char_width, clip, pad, str_width};
use serde_json::{Value, json};
use std::fmt::{self, Write as _};
use std::io;
use std::path::{Path, PathBuf};

/// Version of the `--json` document; bump on incompatible changes.
pub(crate) const JSON_SCHEMA_VERSION: u32 = 1;

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
pub(crate) fn to_json(stats: &Stats, database: Option<&str>) -> Value {
    let with = with_totals;
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
        "models": models_json(&stats.models),
        "days": days_json(&stats.days),
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

/// A totals object with `extra`'s keys in front.
fn with_totals(mut extra: Value, t: &Totals) -> Value {
    if let (Value::Object(b), Value::Object(sums)) = (&mut extra, totals_json(t)) {
        b.extend(sums);
    }
    extra
}

fn models_json(models: &[ModelStats]) -> Value {
    models
        .iter()
        .map(|m| with_totals(json!({"provider": m.provider, "model": m.model}), &m.totals))
        .collect()
}

/// One object per UTC day with calls, oldest first, each with its models.
fn days_json(days: &[DayStats]) -> Value {
    days.iter()
        .map(|d| {
            let mut v = with_totals(json!({"day": d.date()}), &d.totals);
            v["models"] = models_json(&d.models);
            v
        })
        .collect()
}

/// "$0.0123", "unpriced", or "$0.0123 + 2 unpriced".
pub(crate) fn cost_text(t: &Totals) -> String {
    match (t.cost_usd(), t.unpriced_calls) {
        (None, 0) => "-".into(),
        (None, _) => "unpriced".into(),
        (Some(c), 0) => format!("${c:.4}"),
        (Some(c), n) => format!("${c:.4} + {n} unpriced"),
    }
}

/// A token sum as the text shows it: "unknown" when no call reported its usage, "N+?" when
/// some did not (crush(1) USAGE AND COST).
pub(crate) fn tokens_text(t: &Totals, sum: i64) -> String {
    match t.known(sum) {
        None => "unknown".into(),
        Some(n) if t.unknown_usage_calls > 0 => format!("{n}+?"),
        Some(n) => n.to_string(),
    }
}

fn row(out: &mut String, name: &str, t: &Totals) {
    let _ = writeln!(
        out,
        "{} {:>6} {:>11} {:>10} {:>11} {:>11}  {}",
        pad(name, 40),
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

/// How many days the text table lists (the most recent ones with calls); JSON and CSV list all.
const TEXT_DAYS: usize = 30;
/// How many days the terminal's bar chart draws.
const CHART_DAYS: usize = 14;
/// The widest bar of a chart, in cells.
const BAR_CELLS: usize = 30;

/// The MODEL and DAY tables (the last [`TEXT_DAYS`] days) of a report.
fn models_and_days(out: &mut String, stats: &Stats) {
    header(out, "MODEL");
    for m in &stats.models {
        row(out, &clip(&model_name(m), 40), &m.totals);
    }
    out.push('\n');
    header(out, "DAY (UTC)");
    let skip = stats.days.len().saturating_sub(TEXT_DAYS);
    if skip > 0 {
        let _ = writeln!(
            out,
            "({skip} earlier day{} with calls: see --format json or csv)",
            if skip == 1 { "" } else { "s" }
        );
    }
    for d in &stats.days[skip..] {
        row(out, &d.date(), &d.totals);
    }
}

fn model_name(m: &ModelStats) -> String {
    format!("{}/{}", m.provider, m.model)
}

/// The text table of `crush stats`, with bar charts when `charts` says how to draw them.
pub(crate) fn to_text(stats: &Stats, charts: Option<Bars>) -> String {
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
    if let Some(bars) = charts {
        out.push('\n');
        out.push_str(&charts_text(stats, bars));
    }
    out.push('\n');
    models_and_days(&mut out, stats);
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

/// How bar charts are drawn: Unicode blocks, or `#` where the terminal may not show them
/// (`NO_COLOR`, `TERM=dumb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bars {
    Blocks,
    Ascii,
}

impl Bars {
    /// Blocks where the terminal takes colour (`NO_COLOR` unset or empty, `TERM` not dumb),
    /// ASCII otherwise.
    pub(crate) fn for_terminal() -> Bars {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if no_color || dumb {
            Bars::Ascii
        } else {
            Bars::Blocks
        }
    }

    /// A bar `value / max` of [`BAR_CELLS`], in eighths of a cell with blocks; at least a sliver
    /// for anything above 0.
    pub(crate) fn bar(self, value: f64, max: f64) -> String {
        if !(value > 0.0 && max > 0.0) {
            return String::new();
        }
        let frac = (value / max).min(1.0);
        match self {
            Bars::Ascii => "#".repeat(((frac * BAR_CELLS as f64).round() as usize).max(1)),
            Bars::Blocks => {
                let eighths = ((frac * (BAR_CELLS * 8) as f64).round() as usize).max(1);
                let mut s = "█".repeat(eighths / 8);
                if !eighths.is_multiple_of(8) {
                    s.push(['▏', '▎', '▍', '▌', '▋', '▊', '▉'][eighths % 8 - 1]);
                }
                s
            }
        }
    }
}

/// One chart line: label, bar padded to its full width, the cost text.
fn chart_line(out: &mut String, label: &str, bar: &str, t: &Totals) {
    let _ = writeln!(out, "{label} {} {}", pad(bar, BAR_CELLS), cost_text(t));
}

/// Spend per day (the last [`CHART_DAYS`]) and per model as bar charts.
pub(crate) fn charts_text(stats: &Stats, bars: Bars) -> String {
    let mut out = String::new();
    let days = &stats.days[stats.days.len().saturating_sub(CHART_DAYS)..];
    let max = days.iter().map(|d| d.totals.cost).fold(0.0, f64::max);
    let _ = writeln!(out, "SPEND PER DAY (UTC)");
    for d in days {
        chart_line(
            &mut out,
            &d.date(),
            &bars.bar(d.totals.cost, max),
            &d.totals,
        );
    }
    out.push('\n');
    let _ = writeln!(out, "SPEND PER MODEL");
    let width = stats
        .models
        .iter()
        .map(|m| str_width(&model_name(m)).min(24))
        .max()
        .unwrap_or(0);
    let max = stats
        .models
        .iter()
        .map(|m| m.totals.cost)
        .fold(0.0, f64::max);
    for m in &stats.models {
        let label = pad(&clip(&model_name(m), 24), width);
        chart_line(&mut out, &label, &bars.bar(m.totals.cost, max), &m.totals);
    }
    out
}

/// How `crush stats` prints (crush(1) USAGE AND COST).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Format {
    #[default]
    Text,
    Json,
    Csv,
}

/// The arguments of `crush stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StatsArgs {
    /// `--all`: every project in projects.json.
    pub all: bool,
    /// `--crawl-dir DIR`: every `.crush/crush.db` below DIR.
    pub crawl_dir: Option<PathBuf>,
    pub filter: Filter,
    pub format: Format,
    /// `--html [FILE]`: write the page (to FILE, else the default place) instead of printing.
    pub html: Option<Option<PathBuf>>,
    /// `--open`: open the written page in the browser.
    pub open: bool,
    /// `--chart`: the bar charts even when stdout is not a terminal.
    pub chart: bool,
}

/// A `--since`/`--until` value: `7d` (days before now) or a UTC date `2026-11-01` (its start):
/// Unix seconds, None when it is neither.
pub(crate) fn parse_when(s: &str, now: i64) -> Option<i64> {
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
pub(crate) fn to_csv(rows: &[(&str, String, &Totals)]) -> String {
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

/// The CSV rows of the models and the days of `stats`.
fn model_and_day_rows(stats: &Stats) -> Vec<(&'static str, String, &Totals)> {
    let models = stats
        .models
        .iter()
        .map(|m| ("model", model_name(m), &m.totals));
    let days = stats.days.iter().map(|d| ("day", d.date(), &d.totals));
    models.chain(days).collect()
}

fn csv_of(stats: &Stats) -> String {
    let mut rows = model_and_day_rows(stats);
    rows.push(("total", "all calls".into(), &stats.total));
    to_csv(&rows)
}

/// The typed failures of `crush stats` beyond the store's.
#[derive(Debug)]
pub(crate) enum StatsError {
    /// `--crawl-dir` names something that is not a directory.
    NotADirectory(PathBuf),
    /// The HTML page could not be written.
    WriteHtml { path: PathBuf, source: io::Error },
    /// projects.json could not be read.
    Projects { path: PathBuf, message: String },
}

impl fmt::Display for StatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatsError::NotADirectory(p) => {
                write!(f, "--crawl-dir {}: not a directory", p.display())
            }
            StatsError::WriteHtml { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            StatsError::Projects { path, message } => {
                write!(f, "cannot read {}: {message}", path.display())
            }
        }
    }
}

impl std::error::Error for StatsError {}

impl From<StatsError> for AppError {
    fn from(e: StatsError) -> Self {
        match e {
            StatsError::NotADirectory(_) => AppError::Usage(e.to_string()),
            _ => AppError::Runtime(e.to_string()),
        }
    }
}

/// One project of a report: where it is and its figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ProjectReport {
    /// The project's directory.
    pub path: String,
    /// Its crush.db.
    pub db: String,
    pub stats: Stats,
}

/// The limits of `--crawl-dir` (crush(1) USAGE AND COST): how deep below DIR it looks, how many
/// directories it reads and how many databases it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CrawlBounds {
    pub depth: usize,
    pub dirs: usize,
    pub databases: usize,
}

pub(crate) const CRAWL_BOUNDS: CrawlBounds = CrawlBounds {
    depth: 8,
    dirs: 50_000,
    databases: 1_000,
};

/// Directories a crawl never enters: version control, dependencies, build output and caches
/// (the list Go Crush skips), as no project keeps its `.crush` in them.
const CRAWL_SKIP: &[&str] = &[
    ".git",
    ".svn",
    ".hg",
    "node_modules",
    "vendor",
    "dist",
    "build",
    "target",
    ".idea",
    ".vscode",
    "__pycache__",
    "bin",
    "obj",
    "out",
    "coverage",
    "logs",
    "generated",
    "bower_components",
    "jspm_packages",
    ".cache",
    ".npm",
    ".cargo",
    "Library",
    "Applications",
    "System",
];

/// What a crawl found: (project directory, its crush.db), in path order, and the bound that
/// stopped it early, if one did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Crawl {
    pub found: Vec<(PathBuf, PathBuf)>,
    pub stopped: Option<&'static str>,
}

/// Every `.crush/crush.db` file below `dir`, breadth first, within `bounds`. Symbolic links are
/// not followed; unreadable directories are passed over.
pub(crate) fn crawl(dir: &Path, bounds: CrawlBounds) -> Result<Crawl, StatsError> {
    if !dir.is_dir() {
        return Err(StatsError::NotADirectory(dir.to_path_buf()));
    }
    let mut out = Crawl::default();
    let mut queue = std::collections::VecDeque::from([(dir.to_path_buf(), 0usize)]);
    let mut visited = 0usize;
    while let Some((d, depth)) = queue.pop_front() {
        if visited >= bounds.dirs {
            out.stopped = Some("directories");
            break;
        }
        visited += 1;
        let db = d.join(".crush").join("crush.db");
        if db.is_file() {
            if out.found.len() >= bounds.databases {
                out.stopped = Some("databases");
                break;
            }
            out.found.push((d.clone(), db));
        }
        if depth >= bounds.depth {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name != ".crush" && !CRAWL_SKIP.contains(&name.as_ref())
            })
            .map(|e| e.path())
            .collect();
        subdirs.sort();
        queue.extend(subdirs.into_iter().map(|p| (p, depth + 1)));
    }
    out.found.sort();
    Ok(out)
}

/// The projects `--all` and `--crawl-dir` name, each database once: (project, crush.db).
fn projects_to_read(args: &StatsArgs) -> Result<Vec<(String, PathBuf)>, StatsError> {
    let mut list: Vec<(String, PathBuf)> = Vec::new();
    if args.all {
        let global = crate::paths::global_data_dir();
        let projects = crate::store::projects::list(&global).map_err(|e| StatsError::Projects {
            path: global.join("projects.json"),
            message: e.to_string(),
        })?;
        for p in projects {
            let db = Path::new(&p.data_dir).join("crush.db");
            if db.is_file() {
                list.push((p.path, db));
            }
        }
    }
    if let Some(dir) = &args.crawl_dir {
        let found = crawl(dir, CRAWL_BOUNDS)?;
        if let Some(what) = found.stopped {
            crate::ewriteln!(
                "crush: warning: the crawl of {} stopped at its limit of {what} ({} levels, {} directories, {} databases); the report covers what it found",
                dir.display(),
                CRAWL_BOUNDS.depth,
                CRAWL_BOUNDS.dirs,
                CRAWL_BOUNDS.databases
            );
        }
        for (project, db) in found.found {
            list.push((project.display().to_string(), db));
        }
    }
    // The same database through projects.json and the crawl (or two spellings) counts once.
    let mut seen = std::collections::HashSet::new();
    list.retain(|(_, db)| seen.insert(std::fs::canonicalize(db).unwrap_or_else(|_| db.clone())));
    Ok(list)
}

/// Each project's figures, read on a few threads (each database opened read-only, once). A
/// database that cannot be read is left out with a warning naming it.
fn read_projects(
    list: Vec<(String, PathBuf)>,
    filter: &Filter,
    sessions: bool,
) -> Vec<ProjectReport> {
    let read = |(path, db): &(String, PathBuf)| -> Option<ProjectReport> {
        let result = crate::store::Store::open_read_only(db).and_then(|store| {
            if sessions {
                store.stats_where(filter)
            } else {
                store.summary_where(filter)
            }
        });
        match result {
            Ok(stats) => Some(ProjectReport {
                path: path.clone(),
                db: db.display().to_string(),
                stats,
            }),
            Err(e) => {
                crate::ewriteln!("crush: warning: {} left out: {e}", db.display());
                None
            }
        }
    };
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
        .min(list.len().max(1));
    let chunk = list.len().div_ceil(workers).max(1);
    let mut parts: Vec<Vec<Option<ProjectReport>>> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = list
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(read).collect::<Vec<_>>()))
            .collect();
        for h in handles {
            // A worker that panicked has no figures to give.
            parts.push(h.join().unwrap_or_default());
        }
    });
    parts.into_iter().flatten().flatten().collect()
}

/// The sum of several projects' figures.
pub(crate) fn merged(projects: &[ProjectReport]) -> Stats {
    let mut all = Stats::default();
    for p in projects {
        all.merge(&p.stats);
    }
    all
}

/// `crush stats --all` / `--crawl-dir` in text, JSON or CSV.
fn all_text(
    args: &StatsArgs,
    projects: &[ProjectReport],
    total: &Stats,
    charts: Option<Bars>,
) -> String {
    match args.format {
        Format::Json => format!(
            "{}\n",
            json!({
                "v": JSON_SCHEMA_VERSION,
                "total": totals_json(&total.total),
                "unitemized": {"sessions": total.unitemized.sessions, "cost": total.unitemized.cost},
                "models": models_json(&total.models),
                "days": days_json(&total.days),
                "projects": projects.iter().map(|p| {
                    let mut v = to_json(&p.stats, Some(&p.db));
                    v["path"] = json!(p.path);
                    v
                }).collect::<Vec<_>>(),
            })
        ),
        Format::Csv => {
            let mut rows: Vec<(&str, String, &Totals)> = projects
                .iter()
                .map(|p| ("project", p.path.clone(), &p.stats.total))
                .collect();
            rows.extend(model_and_day_rows(total));
            rows.push(("total", "all projects".into(), &total.total));
            to_csv(&rows)
        }
        Format::Text => {
            let mut out = String::new();
            header(&mut out, "PROJECT");
            for p in projects {
                row(&mut out, &clip_left(&p.path, 40), &p.stats.total);
            }
            row(&mut out, "all projects", &total.total);
            out.push_str(&unitemized_line(&total.unitemized));
            if total.total.calls > 0 {
                if let Some(bars) = charts {
                    out.push('\n');
                    out.push_str(&charts_text(total, bars));
                }
                out.push('\n');
                models_and_days(&mut out, total);
            }
            out
        }
    }
}

/// The end of `s` in at most `n` cells (a path's last components say the most).
fn clip_left(s: &str, n: usize) -> String {
    if str_width(s) <= n {
        return s.to_string();
    }
    let mut used = 1;
    let mut start = s.len();
    for (i, c) in s.char_indices().rev() {
        used += char_width(c);
        if used > n {
            break;
        }
        start = i;
    }
    format!("…{}", &s[start..])
}

/// The bar charts of a text report: on a terminal, or with `--chart`.
fn charts_for(args: &StatsArgs) -> Option<Bars> {
    use std::io::IsTerminal;
    (args.format == Format::Text && (args.chart || std::io::stdout().is_terminal()))
        .then(Bars::for_terminal)
}

pub(crate) fn report(global: &Global, args: &StatsArgs) -> Result<String, AppError> {
    let charts = charts_for(args);
    if args.all || args.crawl_dir.is_some() {
        let projects = read_projects(projects_to_read(args)?, &args.filter, args.html.is_some());
        let total = merged(&projects);
        if let Some(file) = &args.html {
            let scope = match (&args.crawl_dir, args.all) {
                (Some(d), false) => format!("every project below {}", d.display()),
                (Some(d), true) => format!("every known project and those below {}", d.display()),
                _ => "every known project".to_string(),
            };
            let page = super::stats_html::Page {
                scope: &scope,
                filter: &args.filter,
                projects: &projects,
                total: &total,
                generated_at: crate::time::unix_now(),
            };
            let default = crate::paths::global_data_dir()
                .join("stats")
                .join("index.html");
            return write_page(&page, file.as_deref().unwrap_or(&default), args.open);
        }
        return Ok(all_text(args, &projects, &total, charts));
    }
    let loaded = app::load_config(global)?;
    let store = app::open_existing_store(&loaded)?;
    let stats = match &store {
        Some(s) => s.stats_where(&args.filter)?,
        None => Stats::default(),
    };
    let db = store.as_ref().map(|s| s.path().display().to_string());
    if let Some(file) = &args.html {
        let project = ProjectReport {
            path: loaded.project_root.display().to_string(),
            db: db.unwrap_or_default(),
            stats,
        };
        let scope = project.path.clone();
        let projects = std::slice::from_ref(&project);
        let page = super::stats_html::Page {
            scope: &scope,
            filter: &args.filter,
            projects,
            total: &project.stats,
            generated_at: crate::time::unix_now(),
        };
        let default = loaded.data_dir.join("stats").join("index.html");
        return write_page(&page, file.as_deref().unwrap_or(&default), args.open);
    }
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
    Ok(to_text(&stats, charts))
}

/// Writes the page atomically (its directory made if need be), opens it with `--open`, and
/// says where it is.
fn write_page(
    page: &super::stats_html::Page<'_>,
    file: &Path,
    open: bool,
) -> Result<String, AppError> {
    let html = page.render();
    let werr = |source| StatsError::WriteHtml {
        path: file.to_path_buf(),
        source,
    };
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(werr)?;
    }
    // A bare file name has no parent to write the temp file beside: take it as ./FILE.
    let target = if file.parent().is_some_and(|d| d.as_os_str().is_empty()) {
        Path::new(".").join(file)
    } else {
        file.to_path_buf()
    };
    crate::fsutil::write_atomic(&target, html.as_bytes()).map_err(werr)?;
    let shown = std::fs::canonicalize(&target).unwrap_or(target);
    if open && !crate::login::browser::open_page(&shown) {
        crate::ewriteln!(
            "crush: no browser is known ($BROWSER, xdg-open, open): open the file yourself"
        );
    }
    Ok(format!("{}\n", shown.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stats::SessionStats;

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
            days: vec![DayStats {
                day: 20_000,
                totals: totals(3, 1, 0.25),
                models: vec![],
            }],
            sessions: vec![SessionStats {
                id: "0123456789abcdef".into(),
                title: "A title".into(),
                updated_at: 0,
                sub_agent_sessions: 1,
                totals: totals(3, 1, 0.25),
            }],
        };
        let t = to_text(&st, None);
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
        assert_eq!(j["days"][0]["day"], "2024-10-04");
        assert_eq!(j["days"][0]["calls"], 3);
        assert!(t.contains("\n2024-10-04 "), "{t}");
        let csv = csv_of(&st);
        assert!(csv.contains("\nday,\"2024-10-04\",3,"), "{csv}");
        // Charts only when asked for.
        assert!(!t.contains("SPEND PER DAY"), "{t}");
        let c = to_text(&st, Some(Bars::Ascii));
        assert!(c.contains("SPEND PER DAY (UTC)\n2024-10-04 "), "{c}");
        assert!(
            c.contains(&format!("local/free  {} unpriced", " ".repeat(BAR_CELLS))),
            "{c}"
        );
    }

    #[test]
    fn names_and_paths_are_cut_to_cells() {
        let path = "/home/用户/项目/一个很长的目录名字/src";
        let cut = clip_left(path, 16);
        assert!(cut.starts_with('…') && cut.ends_with("/src"), "{cut}");
        assert!(str_width(&cut) <= 16 && str_width(&cut) >= 15, "{cut}");
        assert_eq!(clip_left("/short", 16), "/short");
        assert_eq!(clip_left("/a/b/cdefgh", 6), "…defgh");
    }

    #[test]
    fn bars_are_proportional_in_eighths_or_hashes() {
        let full = "█".repeat(BAR_CELLS);
        assert_eq!(Bars::Blocks.bar(2.0, 2.0), full);
        assert_eq!(Bars::Blocks.bar(1.0, 2.0), "█".repeat(BAR_CELLS / 2));
        // 1/240 of the width is one eighth of a cell; anything above 0 shows.
        assert_eq!(Bars::Blocks.bar(1.0, 240.0), "▏");
        assert_eq!(Bars::Blocks.bar(1e-9, 240.0), "▏");
        assert_eq!(Bars::Blocks.bar(0.0, 2.0), "");
        assert_eq!(Bars::Ascii.bar(1.0, 2.0), "#".repeat(BAR_CELLS / 2));
        assert_eq!(Bars::Ascii.bar(f64::NAN, 2.0), "");
        assert!(Bars::Ascii.bar(3.0, 1.0).chars().all(|c| c == '#'));
    }

    #[test]
    fn the_crawl_finds_project_databases_within_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let db = |rel: &str| {
            let p = dir.path().join(rel).join(".crush");
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("crush.db"), b"").unwrap();
        };
        db("a");
        db("b/c");
        db("b/c/nested");
        db("node_modules/x");
        db("d/e/f/g");
        // A .crush without a database, and a link that would find "a" again.
        std::fs::create_dir_all(dir.path().join("h/.crush")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("link")).unwrap();
        let bounds = CrawlBounds {
            depth: 3,
            dirs: 1000,
            databases: 100,
        };
        let found = crawl(dir.path(), bounds).unwrap();
        let names: Vec<_> = found
            .found
            .iter()
            .map(|(p, db)| {
                assert_eq!(db, &p.join(".crush").join("crush.db"));
                p.strip_prefix(dir.path()).unwrap().display().to_string()
            })
            .collect();
        assert_eq!(
            names,
            ["a", "b/c", "b/c/nested"],
            "d/e/f/g is 4 levels down"
        );
        assert_eq!(found.stopped, None);
        let few = crawl(
            dir.path(),
            CrawlBounds {
                databases: 2,
                ..bounds
            },
        )
        .unwrap();
        assert_eq!((few.found.len(), few.stopped), (2, Some("databases")));
        let short = crawl(dir.path(), CrawlBounds { dirs: 2, ..bounds }).unwrap();
        assert_eq!(short.stopped, Some("directories"));
        assert!(matches!(
            crawl(&dir.path().join("nowhere"), bounds),
            Err(StatsError::NotADirectory(_))
        ));
    }
}
