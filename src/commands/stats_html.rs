//! `crush stats --html`: the usage report as one self-contained page (crush(1) USAGE AND COST):
//! inline CSS and SVG, no script, no font, nothing fetched (its Content-Security-Policy forbids
//! every request). Each figure taken from the ledger carries its raw value in `data-value`, so
//! the page's numbers can be read back from the DOM.

use super::stats::{ProjectReport, cost_text};
use crate::store::stats::{DayStats, Filter, SessionStats, Stats, Totals};
use std::fmt::Write as _;

/// How many sessions the cost-per-session table lists.
pub(crate) const TOP_SESSIONS: usize = 20;
/// How many days the spend-per-day chart spans at most (the most recent ones).
pub(crate) const CHART_DAYS: i64 = 90;
/// Colours of the models in the stacked chart; models beyond them share the last, "other".
const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c9c9c",
];

/// What the page shows.
pub(crate) struct Page<'a> {
    /// The project, or which projects ("every known project").
    pub scope: &'a str,
    pub filter: &'a Filter,
    /// Each project's figures (one for a single project).
    pub projects: &'a [ProjectReport],
    /// Their sum.
    pub total: &'a Stats,
    /// Unix seconds.
    pub generated_at: i64,
}

/// `s` with the characters HTML gives a meaning to escaped.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1234567` as `1,234,567`.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// A cell (or any element) holding one figure: its text and raw value.
fn figure(tag: &str, name: &str, value: &str, text: &str) -> String {
    let close = tag.split(' ').next().unwrap_or(tag);
    format!(
        "<{tag} data-figure=\"{}\" data-value=\"{}\">{}</{close}>",
        esc(name),
        esc(value),
        esc(text)
    )
}

fn count(tag: &str, name: &str, n: i64) -> String {
    figure(tag, name, &n.to_string(), &thousands(n))
}

/// The cost of `t`: its value is empty when no call was priced (unpriced is not $0).
fn cost(tag: &str, name: &str, t: &Totals) -> String {
    let value = t.cost_usd().map(|c| format!("{c}")).unwrap_or_default();
    figure(tag, name, &value, &cost_text(t))
}

/// Cache reads among all input-side tokens (input, cache read, cache write); None without any.
pub(crate) fn cache_hit_rate(t: &Totals) -> Option<f64> {
    let all = t.input_tokens + t.cache_read_tokens + t.cache_write_tokens;
    (all > 0).then(|| t.cache_read_tokens as f64 / all as f64)
}

fn date_time(unix: i64) -> String {
    let (y, m, d) = crate::time::civil_from_days(unix.div_euclid(86_400));
    let secs = unix.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60
    )
}

fn date(day: i64) -> String {
    let (y, m, d) = crate::time::civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

fn filter_text(f: &Filter) -> String {
    let mut parts = Vec::new();
    if let Some(t) = f.since {
        parts.push(format!("from {}", date_time(t)));
    }
    if let Some(t) = f.until {
        parts.push(format!("before {}", date_time(t)));
    }
    if let Some(m) = &f.model {
        parts.push(format!("model {m}"));
    }
    if let Some(p) = &f.provider {
        parts.push(format!("provider {p}"));
    }
    if parts.is_empty() {
        "every call in the ledger".into()
    } else {
        format!("calls {}", parts.join(", "))
    }
}

const STYLE: &str = "
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fbfbfd; --card: #fff; --muted: #6e6e73;
  --line: #d9d9de; --warn: #b25000; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8ed; --bg: #161618; --card: #1f1f22;
  --muted: #9a9aa0; --line: #38383c; --warn: #ff9f43; } }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px; font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 1100px; margin: 0 auto; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 12px; }
.sub, .note { color: var(--muted); }
.note { font-size: 12px; margin: 8px 0 0; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 16px 18px; margin: 16px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(160px, 1fr)); gap: 12px;
  background: none; border: 0; padding: 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; }
.card.apart .v { color: var(--warn); }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { color: var(--muted); font-weight: 500; font-size: 12px; }
th:first-child, td:first-child, td.l, th.l { text-align: left; }
td.title { text-align: left; white-space: normal; }
tr.total td { font-weight: 650; }
code { font: 12px ui-monospace, 'SF Mono', Menlo, Consolas, monospace; }
.unpriced, .apart { color: var(--warn); }
svg { display: block; width: 100%; height: auto; }
svg text { fill: var(--muted); font-size: 11px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 8px 0 0; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
.bar { display: inline-block; height: 9px; border-radius: 2px; background: #4e79a7; vertical-align: middle; }
";

impl Page<'_> {
    /// The whole page.
    pub(crate) fn render(&self) -> String {
        let mut h = String::new();
        let title = format!("crush usage: {}", self.scope);
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
             <h1>crush usage</h1>\n<p class=\"sub\">{} · {} · generated {}</p>\n",
            esc(&title),
            esc(self.scope),
            esc(&filter_text(self.filter)),
            date_time(self.generated_at)
        );
        self.cards(&mut h);
        self.days_chart(&mut h);
        self.tokens(&mut h);
        self.sessions(&mut h);
        self.apart(&mut h);
        self.totals_table(&mut h);
        h.push_str(
            "<p class=\"note\">Written by crush stats --html from the usage ledger (crush(1) USAGE AND COST). \
             Days are UTC days. Unpriced calls are never counted as $0.</p>\n</main>\n</body>\n</html>\n",
        );
        h
    }

    fn cards(&self, h: &mut String) {
        let t = &self.total.total;
        let card = |h: &mut String, class: &str, k: &str, v: String| {
            let _ = writeln!(
                h,
                "<div class=\"card {class}\"><div class=\"k\">{}</div>{v}</div>",
                esc(k)
            );
        };
        h.push_str("<section class=\"cards\">\n");
        let spend = figure(
            "div class=\"v\"",
            "total-cost",
            &t.cost_usd().map(|c| format!("{c}")).unwrap_or_default(),
            &t.cost_usd()
                .map_or("unpriced".into(), |c| format!("${c:.4}")),
        );
        card(h, "", "Spend (priced calls)", spend);
        card(
            h,
            "",
            "Model calls",
            count("div class=\"v\"", "total-calls", t.calls),
        );
        let rate = cache_hit_rate(t);
        card(
            h,
            "",
            "Cache hit rate",
            figure(
                "div class=\"v\"",
                "cache-hit-rate",
                &rate.map(|r| format!("{r}")).unwrap_or_default(),
                &rate.map_or("-".into(), |r| format!("{:.1}%", r * 100.0)),
            ),
        );
        card(
            h,
            "apart",
            "Unpriced calls",
            count("div class=\"v\"", "total-unpriced-calls", t.unpriced_calls),
        );
        card(
            h,
            "apart",
            "Usage unknown (estimated)",
            count(
                "div class=\"v\"",
                "total-unknown-usage-calls",
                t.unknown_usage_calls,
            ),
        );
        if self.total.unitemized.sessions > 0 {
            let u = &self.total.unitemized;
            card(
                h,
                "apart",
                "Not itemized (another client)",
                figure(
                    "div class=\"v\"",
                    "unitemized-cost",
                    &format!("{}", u.cost),
                    &format!("${:.4}", u.cost),
                ),
            );
        }
        h.push_str("</section>\n");
    }

    /// Spend per UTC day stacked by model, an SVG of the last [`CHART_DAYS`] days up to the last
    /// day with calls; a day's unpriced calls are a dot below its bar.
    fn days_chart(&self, h: &mut String) {
        h.push_str("<section>\n<h2>Spend per day (UTC), by model</h2>\n");
        let days = &self.total.days;
        let (Some(first), Some(last)) = (days.first(), days.last()) else {
            h.push_str("<p class=\"sub\">No calls.</p>\n</section>\n");
            return;
        };
        let start = first.day.max(last.day - (CHART_DAYS - 1));
        let span = (last.day - start + 1) as usize;
        // Colour per model in the order of the totals (most calls first).
        let colour = |provider: &str, model: &str| -> &str {
            let i = self
                .total
                .models
                .iter()
                .position(|m| m.provider == provider && m.model == model)
                .unwrap_or(PALETTE.len());
            PALETTE[i.min(PALETTE.len() - 1)]
        };
        let shown: Vec<&DayStats> = days.iter().filter(|d| d.day >= start).collect();
        let max = shown.iter().map(|d| d.totals.cost).fold(0.0, f64::max);
        let (w, ht, left, bottom, top) = (900.0, 260.0, 56.0, 36.0, 10.0);
        let plot_w = w - left - 8.0;
        let plot_h = ht - bottom - top;
        let slot = plot_w / span as f64;
        let bar_w = (slot * 0.8).max(1.0);
        let _ = writeln!(
            h,
            "<svg viewBox=\"0 0 {w} {ht}\" role=\"img\" aria-label=\"spend per day\">"
        );
        // Axis and its two labels: the top figure and 0.
        let base = top + plot_h;
        let _ = writeln!(
            h,
            "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"currentColor\" stroke-opacity=\".3\"/>\
             <line x1=\"{left}\" y1=\"{top}\" x2=\"{}\" y2=\"{top}\" stroke=\"currentColor\" stroke-opacity=\".12\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">${:.2}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">$0</text>",
            w - 8.0,
            w - 8.0,
            left - 6.0,
            top + 4.0,
            max,
            left - 6.0,
            base + 4.0
        );
        let label_every = span.div_ceil(10).max(1);
        for d in &shown {
            let i = (d.day - start) as usize;
            let x = left + slot * i as f64 + (slot - bar_w) / 2.0;
            let mut y = base;
            let _ = writeln!(
                h,
                "<g data-day=\"{}\" data-calls=\"{}\" data-cost=\"{}\">",
                date(d.day),
                d.totals.calls,
                d.totals
                    .cost_usd()
                    .map(|c| format!("{c}"))
                    .unwrap_or_default()
            );
            for m in &d.models {
                if m.totals.cost <= 0.0 || max <= 0.0 {
                    continue;
                }
                let bh = m.totals.cost / max * plot_h;
                y -= bh;
                let _ = writeln!(
                    h,
                    "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{bar_w:.2}\" height=\"{bh:.2}\" fill=\"{}\" \
                     data-model=\"{}\" data-cost=\"{}\"><title>{} {}: ${:.4}</title></rect>",
                    colour(&m.provider, &m.model),
                    esc(&format!("{}/{}", m.provider, m.model)),
                    m.totals.cost,
                    date(d.day),
                    esc(&format!("{}/{}", m.provider, m.model)),
                    m.totals.cost
                );
            }
            if d.totals.unpriced_calls > 0 {
                let _ = writeln!(
                    h,
                    "<circle class=\"unpriced\" cx=\"{:.2}\" cy=\"{}\" r=\"3\" fill=\"currentColor\" \
                     data-unpriced=\"{}\"><title>{}: {} unpriced call(s), not in the bar</title></circle>",
                    x + bar_w / 2.0,
                    base + 7.0,
                    d.totals.unpriced_calls,
                    date(d.day),
                    d.totals.unpriced_calls
                );
            }
            h.push_str("</g>\n");
        }
        for i in (0..span).step_by(label_every) {
            let x = left + slot * i as f64 + slot / 2.0;
            let _ = writeln!(
                h,
                "<text x=\"{x:.2}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                ht - 8.0,
                &date(start + i as i64)[5..]
            );
        }
        h.push_str("</svg>\n<div class=\"legend\">");
        for (i, m) in self.total.models.iter().enumerate() {
            if i >= PALETTE.len() - 1 && self.total.models.len() > PALETTE.len() {
                let _ = write!(
                    h,
                    "<span><i style=\"background:{}\"></i>other models</span>",
                    PALETTE[PALETTE.len() - 1]
                );
                break;
            }
            let _ = write!(
                h,
                "<span><i style=\"background:{}\"></i>{}{}</span>",
                PALETTE[i],
                esc(&format!("{}/{}", m.provider, m.model)),
                if m.totals.priced_calls == 0 {
                    " (unpriced)"
                } else {
                    ""
                }
            );
        }
        h.push_str(
            "<span class=\"unpriced\">● unpriced calls (no price, not in the bars)</span></div>\n",
        );
        if days.len() > shown.len() {
            let _ = writeln!(
                h,
                "<p class=\"note\">The chart shows the last {CHART_DAYS} days; the totals count every day.</p>"
            );
        }
        h.push_str("</section>\n");
    }

    fn tokens(&self, h: &mut String) {
        let t = &self.total.total;
        let kinds = [
            ("Input", "tokens-input", t.input_tokens),
            ("Output", "tokens-output", t.output_tokens),
            ("Cache read", "tokens-cache-read", t.cache_read_tokens),
            ("Cache write", "tokens-cache-write", t.cache_write_tokens),
        ];
        let max = kinds.iter().map(|k| k.2).max().unwrap_or(0).max(1);
        h.push_str("<section>\n<h2>Tokens by kind</h2>\n<table>\n<tr><th>KIND</th><th>TOKENS</th><th style=\"width:55%\"></th></tr>\n");
        for (name, key, n) in kinds {
            let _ = writeln!(
                h,
                "<tr><td>{name}</td>{}<td class=\"l\"><span class=\"bar\" style=\"width:{:.1}%\"></span></td></tr>",
                count("td", key, n),
                n as f64 / max as f64 * 100.0
            );
        }
        h.push_str("</table>\n");
        let rate = cache_hit_rate(t).map_or("-".into(), |r| format!("{:.1}%", r * 100.0));
        let _ = writeln!(
            h,
            "<p class=\"note\">Cache hit rate {rate}: cache reads among all input-side tokens (input, cache read, cache write).{}</p>",
            if t.unknown_usage_calls > 0 {
                format!(
                    " {} call(s) reported no usage: their tokens are unknown and not counted here.",
                    t.unknown_usage_calls
                )
            } else {
                String::new()
            }
        );
        h.push_str("</section>\n");
    }

    /// The sessions that cost the most, with the command that shows each.
    fn sessions(&self, h: &mut String) {
        let several = self.projects.len() > 1;
        let mut all: Vec<(&ProjectReport, &SessionStats)> = self
            .projects
            .iter()
            .flat_map(|p| p.stats.sessions.iter().map(move |s| (p, s)))
            .collect();
        all.sort_by(|a, b| {
            let c = |s: &SessionStats| s.totals.cost_usd().unwrap_or(-1.0);
            c(b.1)
                .total_cmp(&c(a.1))
                .then_with(|| b.1.totals.calls.cmp(&a.1.totals.calls))
        });
        let _ = writeln!(
            h,
            "<section>\n<h2>Cost per session (top {TOP_SESSIONS} of {})</h2>",
            all.len()
        );
        if all.is_empty() {
            h.push_str("<p class=\"sub\">No sessions.</p>\n</section>\n");
            return;
        }
        let max = all
            .first()
            .map_or(0.0, |s| s.1.totals.cost)
            .max(f64::MIN_POSITIVE);
        h.push_str("<table>\n<tr><th>SESSION</th><th class=\"l\">TITLE</th><th>CALLS</th><th>INPUT</th><th>OUTPUT</th><th>COST</th><th></th></tr>\n");
        for (p, s) in all.iter().take(TOP_SESSIONS) {
            let short = super::sessions::short_id(&s.id);
            let hash = crate::store::hashid::hash_id(&s.id);
            let show = format!("crush sessions show {short}");
            let full = if several {
                format!("crush -c {} sessions show {hash}", shell_word(&p.path))
            } else {
                format!("crush sessions show {hash}")
            };
            let mut title = esc(&s.title);
            if s.sub_agent_sessions > 0 {
                let _ = write!(
                    title,
                    " <span class=\"sub\">(+{} sub-agents)</span>",
                    s.sub_agent_sessions
                );
            }
            if several {
                let _ = write!(title, "<br><span class=\"sub\">{}</span>", esc(&p.path));
            }
            let _ = writeln!(
                h,
                "<tr data-session=\"{}\"><td><code title=\"{}\">{}</code></td><td class=\"title\">{title}</td>{}{}{}{}<td class=\"l\"><span class=\"bar\" style=\"width:{:.0}px\"></span></td></tr>",
                esc(&hash),
                esc(&full),
                esc(&show),
                count("td", "session-calls", s.totals.calls),
                count("td", "session-input", s.totals.input_tokens),
                count("td", "session-output", s.totals.output_tokens),
                cost("td", "session-cost", &s.totals),
                (s.totals.cost / max * 120.0).max(0.0)
            );
        }
        h.push_str("</table>\n</section>\n");
    }

    /// What the dollar figures leave out: unpriced calls, calls whose usage is unknown
    /// (estimated), and spend recorded without the ledger.
    fn apart(&self, h: &mut String) {
        let t = &self.total.total;
        let u = &self.total.unitemized;
        h.push_str("<section>\n<h2>Unpriced and estimated usage</h2>\n<table>\n<tr><th>MODEL</th><th>UNPRICED CALLS</th><th>USAGE UNKNOWN</th><th>TOKENS OF UNPRICED CALLS</th></tr>\n");
        let mut any = false;
        for m in &self.total.models {
            let mt = &m.totals;
            if mt.unpriced_calls == 0 && mt.unknown_usage_calls == 0 {
                continue;
            }
            any = true;
            // The tokens of a model none of whose calls was priced are all unpriced.
            let tokens = if mt.priced_calls == 0 {
                thousands(
                    mt.input_tokens
                        + mt.output_tokens
                        + mt.cache_read_tokens
                        + mt.cache_write_tokens,
                )
            } else {
                "(some priced)".into()
            };
            let _ = writeln!(
                h,
                "<tr data-model=\"{}\"><td>{}</td>{}{}<td>{tokens}</td></tr>",
                esc(&format!("{}/{}", m.provider, m.model)),
                esc(&format!("{}/{}", m.provider, m.model)),
                count("td", "model-unpriced-calls", mt.unpriced_calls),
                count("td", "model-unknown-usage-calls", mt.unknown_usage_calls),
            );
        }
        if !any {
            h.push_str(
                "<tr><td colspan=\"4\">Every call was priced and reported its usage.</td></tr>\n",
            );
        }
        h.push_str("</table>\n");
        let _ = writeln!(
            h,
            "<p class=\"note\">{} of {} calls had no price (an unpriced model, a flat-rate provider, or unknown usage); \
             they are not in the dollar figures. A call whose server reported no usage is estimated for the context meter only.</p>",
            thousands(t.unpriced_calls),
            thousands(t.calls)
        );
        if u.sessions > 0 {
            let _ = writeln!(
                h,
                "<p class=\"apart\">Recorded by another client, not itemized: {} session(s), ${:.4} (Go Crush keeps a session's cost, not each call).</p>",
                u.sessions, u.cost
            );
        }
        h.push_str("</section>\n");
    }

    fn totals_table(&self, h: &mut String) {
        h.push_str("<section>\n<h2>Totals</h2>\n<table>\n");
        let head = |h: &mut String, first: &str| {
            let _ = writeln!(
                h,
                "<tr><th>{first}</th><th>CALLS</th><th>INPUT</th><th>OUTPUT</th><th>CACHE READ</th><th>CACHE WRITE</th><th>UNPRICED</th><th>COST</th></tr>"
            );
        };
        let line = |h: &mut String, class: &str, attr: &str, name: &str, key: &str, t: &Totals| {
            let _ = writeln!(
                h,
                "<tr class=\"{class}\" {attr}><td>{}</td>{}{}{}{}{}{}{}</tr>",
                esc(name),
                count("td", &format!("{key}-calls"), t.calls),
                count("td", &format!("{key}-input"), t.input_tokens),
                count("td", &format!("{key}-output"), t.output_tokens),
                count("td", &format!("{key}-cache-read"), t.cache_read_tokens),
                count("td", &format!("{key}-cache-write"), t.cache_write_tokens),
                count("td", &format!("{key}-unpriced"), t.unpriced_calls),
                cost("td", &format!("{key}-cost"), t),
            );
        };
        head(h, "MODEL");
        for m in &self.total.models {
            let name = format!("{}/{}", m.provider, m.model);
            line(
                h,
                "",
                &format!("data-model=\"{}\"", esc(&name)),
                &name,
                "model",
                &m.totals,
            );
        }
        if self.projects.len() > 1 {
            head(h, "PROJECT");
            for p in self.projects {
                line(
                    h,
                    "",
                    &format!("data-project=\"{}\"", esc(&p.path)),
                    &p.path,
                    "project",
                    &p.stats.total,
                );
            }
        }
        line(
            h,
            "total",
            "",
            "all calls",
            "table-total",
            &self.total.total,
        );
        h.push_str("</table>\n</section>\n");
    }
}

/// `s` as one shell word: as it is when it is plain, else in single quotes.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-_.,:+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_groups_digits() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(shell_word("/a/b"), "/a/b");
        assert_eq!(shell_word("/a b/it's"), "'/a b/it'\\''s'");
    }

    #[test]
    fn the_hit_rate_counts_every_input_side_token() {
        let t = Totals {
            input_tokens: 100,
            cache_read_tokens: 300,
            cache_write_tokens: 100,
            ..Totals::default()
        };
        assert_eq!(cache_hit_rate(&t), Some(0.6));
        assert_eq!(cache_hit_rate(&Totals::default()), None);
    }
}
