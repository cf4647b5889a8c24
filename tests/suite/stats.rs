//! `crush stats` across projects: --all and --crawl-dir, the per-day figures, the terminal's bar
//! charts and the --html page (read as text, and in headless Chromium when it is installed).

use super::go_compat::{GO_MIGRATIONS, go_conversation, go_database, go_open};
use crate::support::env::run_command;
use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What the three projects of [`three_projects`] cost: 3500 input and 350 output tokens at
/// $3/$15 per million.
const COST: f64 = (3500.0 * 3.0 + 350.0 * 15.0) / 1e6;

/// Two projects crush used (three calls) and one only Go Crush used (no ledger, $0.02 in its
/// session row), all in projects.json: the server, the env, and the Go project's directory.
pub(super) fn three_projects() -> (FakeServer, TestEnv, PathBuf) {
    let server = FakeServer::with_script(vec![
        Reply::text("a1").with_usage(1000, 200, 0, 0),
        Reply::text("a2").with_usage(2000, 100, 0, 0),
        Reply::text("b1").with_usage(500, 50, 0, 0),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "one"], None).assert_success();
    env.run(&["run", "-q", "two"], None).assert_success();
    let b = env.root().join("b");
    std::fs::create_dir_all(&b).unwrap();
    env.run(&["-c", b.to_str().unwrap(), "run", "-q", "three"], None)
        .assert_success();
    let c = env.root().join("c");
    let c_db = c.join(".crush").join("crush.db");
    go_database(&c_db, GO_MIGRATIONS);
    go_conversation(&go_open(&c_db));
    let list_path = env.data_dir().join("projects.json");
    let mut list: Value =
        serde_json::from_str(&std::fs::read_to_string(&list_path).unwrap()).expect("projects.json");
    list["projects"].as_array_mut().unwrap().push(json!({
        "path": c.display().to_string(),
        "data_dir": c.join(".crush").display().to_string(),
        "last_accessed": "2026-01-01T00:00:00Z"
    }));
    std::fs::write(&list_path, list.to_string()).unwrap();
    (server, env, c)
}

fn json_of(env: &TestEnv, args: &[&str]) -> Value {
    let out = env.run(args, None);
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn crawl_dir_finds_what_projects_json_lists_and_days_add_up() {
    let (_server, env, go) = three_projects();
    let go_db = go.join(".crush").join("crush.db");
    let before = std::fs::read(&go_db).unwrap();
    let root = env.root().display().to_string();
    let all = json_of(&env, &["stats", "--all", "--json"]);
    let crawled = json_of(&env, &["stats", "--crawl-dir", &root, "--json"]);
    let both = json_of(&env, &["stats", "--all", "--crawl-dir", &root, "--json"]);
    for v in [&all, &crawled, &both] {
        assert_eq!(v["projects"].as_array().unwrap().len(), 3, "{v}");
        assert_eq!(v["total"]["calls"], 3);
        assert!(close(&v["total"]["cost"], COST), "{v}");
        assert_eq!(v["unitemized"]["sessions"], 1);
    }
    let paths = |v: &Value| -> Vec<String> {
        let mut p: Vec<String> = v["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["path"].as_str().unwrap().to_string())
            .collect();
        p.sort();
        p
    };
    assert_eq!(paths(&all), paths(&crawled));
    // The crawl left the Go Crush database as it was, with no WAL beside it.
    assert_eq!(std::fs::read(&go_db).unwrap(), before);
    assert!(!go.join(".crush").join("crush.db-wal").exists());

    // Per day: every call was made today (UTC), and the days add up to the total.
    let days = all["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{all}");
    let today = days[0]["day"].as_str().unwrap();
    assert_eq!(today.len(), 10);
    assert_eq!(days[0]["calls"], 3);
    assert!(close(&days[0]["cost"], COST));
    assert_eq!(days[0]["models"][0]["model"], "fake-model");
    assert_eq!(all["models"][0]["calls"], 3);
    let one = json_of(&env, &["stats", "--json"]);
    assert_eq!(one["days"][0]["calls"], 2, "this project's day");
    let csv = env.run(&["stats", "--all", "--format", "csv"], None);
    csv.assert_success();
    let day = csv.stdout_line("day,");
    assert!(
        day.starts_with(&format!("day,\"{today}\",3,3500,350,")),
        "{}",
        csv.stdout
    );
    let text = env.run(&["stats", "--all"], None);
    text.assert_success();
    assert!(text.stdout.contains("DAY (UTC)"), "{}", text.stdout);
    let line = text.stdout_line(today);
    assert!(line.contains(&format!("${COST:.4}")), "{line}");

    let bad = env.run(&["stats", "--crawl-dir", "/nonexistent/dir"], None);
    bad.assert_code(2);
    assert!(
        bad.stderr
            .contains("--crawl-dir /nonexistent/dir: not a directory"),
        "{}",
        bad.stderr
    );
}

#[test]
fn bar_charts_on_a_terminal_ascii_without_colour_none_in_a_pipe() {
    let (_server, env, _) = three_projects();
    let term = env.run_on_terminal(&["stats"]);
    term.assert_success();
    assert!(
        term.stdout.contains("SPEND PER DAY (UTC)"),
        "{}",
        term.stdout
    );
    let model = term
        .stdout
        .lines()
        .find(|l| l.starts_with("fake/fake-model █"))
        .unwrap_or_else(|| panic!("a block bar per model:\n{}", term.stdout));
    assert!(model.contains("$0."), "{model}");
    let piped = env.run(&["stats"], None);
    assert!(!piped.stdout.contains("SPEND PER"), "{}", piped.stdout);
    let asked = env.run_with_env(&["stats", "--all", "--chart"], &[("NO_COLOR", "1")]);
    asked.assert_success();
    let bar = asked.stdout_line("fake/fake-model #");
    assert!(
        bar.contains(&"#".repeat(30)),
        "the biggest bar is full: {bar}"
    );
    assert!(!asked.stdout.contains('█'), "{}", asked.stdout);
}

/// Every tag of `html` is closed in order (void and self-closed elements aside) and every
/// attribute value is quoted: a page a strict parser reads as it was meant.
fn assert_well_formed(html: &str) {
    const VOID: &[&str] = &["meta", "br", "hr", "img", "link", "input"];
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let end = rest[start..]
            .find('>')
            .unwrap_or_else(|| panic!("an unclosed '<' at {}", &rest[start..]))
            + start;
        let tag = &rest[start + 1..end];
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        assert!(!tag.contains('<'), "a '<' inside <{tag}>");
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let top = open
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name, "</{name}> closes <{top}>");
            continue;
        }
        let name = tag
            .split(|c: char| c.is_whitespace() || c == '/')
            .next()
            .unwrap();
        if tag.ends_with('/') || VOID.contains(&name) {
            continue;
        }
        open.push(name.to_string());
    }
    assert!(open.is_empty(), "never closed: {open:?}");
}

/// The value of the first element with `data-figure="name"`.
fn figure(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("data-figure=\"{name}\" data-value=\""))
        .unwrap_or_else(|| panic!("no figure {name}"));
    let rest = &html[at + name.len() + 27..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The page of `crush stats --all --html FILE` and its path, checked as text.
fn page(env: &TestEnv, args: &[&str]) -> (PathBuf, String) {
    let out = env.run(args, None);
    out.assert_success();
    let path = PathBuf::from(out.stdout.trim_end());
    assert!(path.is_absolute(), "{}", out.stdout);
    let html = std::fs::read_to_string(&path).unwrap();
    (path, html)
}

#[test]
fn the_html_page_is_self_contained_and_carries_the_ledgers_figures() {
    let (_server, env, _) = three_projects();
    let (path, html) = page(&env, &["stats", "--all", "--html", "report.html"]);
    assert_eq!(
        path,
        env.project().join("report.html").canonicalize().unwrap()
    );
    assert_well_formed(&html);
    for external in [
        "http://", "https://", "src=", "href=", "url(", "@import", "<script",
    ] {
        assert!(!html.contains(external), "{external} in the page");
    }
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    assert_eq!(figure(&html, "total-calls"), "3");
    let cost: f64 = figure(&html, "total-cost").parse().unwrap();
    assert!((cost - COST).abs() < 1e-9, "{cost}");
    assert_eq!(figure(&html, "tokens-input"), "3500");
    assert_eq!(figure(&html, "tokens-output"), "350");
    assert_eq!(figure(&html, "total-unpriced-calls"), "0");
    assert_eq!(figure(&html, "unitemized-cost"), "0.02");
    assert_eq!(figure(&html, "cache-hit-rate"), "0");
    assert!(html.contains("data-model=\"fake/fake-model\""));
    assert!(html.contains("Recorded by another client, not itemized: 1 session(s), $0.0200"));
    // Each top-level session is listed with the command that shows it.
    let sessions = json_of(&env, &["sessions", "list", "--json"]);
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    for s in sessions {
        let id = s["id"].as_str().unwrap();
        assert!(html.contains(&format!("data-session=\"{id}\"")), "{id}");
        assert!(html.contains(&format!("crush sessions show {}", &id[..7])));
    }
    // Written atomically: no temp file is left beside it; a second write replaces it.
    let (again, _) = page(&env, &["stats", "--html", "report.html"]);
    assert_eq!(again, path);
    let left: Vec<_> = std::fs::read_dir(env.project())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("report.html"))
        .collect();
    assert_eq!(left, ["report.html"]);
    // The default place is the project's data directory; --open without --html is refused.
    let (default, _) = page(&env, &["stats", "--html"]);
    assert_eq!(
        default,
        env.project()
            .join(".crush/stats/index.html")
            .canonicalize()
            .unwrap()
    );
    env.run(&["stats", "--open"], None).assert_code(2);
}

/// Runs headless Chromium with `args` then `url`, killed after a minute; its HTTP proxy is
/// `proxy`, so any request the page made would reach it.
fn chromium(env: &TestEnv, proxy: &FakeServer, args: &[&str], url: &str) -> String {
    let profile = env.root().join("chromium-profile");
    let mut cmd = Command::new("/usr/bin/chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--proxy-server=http://{}", proxy.addr()))
    .args(args)
    .arg(url)
    .env("HOME", env.home());
    let out = run_command(cmd, None, Duration::from_secs(60));
    out.assert_success();
    out.stdout
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

#[test]
fn the_html_page_in_headless_chromium_shows_the_ledgers_numbers_and_fetches_nothing() {
    if !Path::new("/usr/bin/chromium").exists() {
        eprintln!(
            "skipped: /usr/bin/chromium is not installed (apt-get install -y chromium) — the page is checked as text by the_html_page_is_self_contained_and_carries_the_ledgers_figures"
        );
        return;
    }
    let (_server, env, _) = three_projects();
    let (path, _) = page(&env, &["stats", "--all", "--html", "report.html"]);
    let proxy = FakeServer::always_text("nothing should ask");
    let dom = chromium(&env, &proxy, &["--dump-dom"], &file_url(&path));
    assert!(dom.contains("crush usage"), "{dom}");
    assert_eq!(figure(&dom, "total-calls"), "3");
    let cost: f64 = figure(&dom, "total-cost").parse().unwrap();
    assert!((cost - COST).abs() < 1e-9, "{cost}");
    assert_eq!(figure(&dom, "tokens-input"), "3500");
    assert_eq!(figure(&dom, "table-total-output"), "350");
    let shot = env.root().join("page.png");
    chromium(
        &env,
        &proxy,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1600",
        ],
        &file_url(&path),
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
    // Chromium's own services (its clock, updates, accounts) may still call out through the
    // proxy; nothing else may, and the page names no host at all.
    let page_requests: Vec<String> = proxy
        .requests()
        .iter()
        .map(|r| format!("{} {} {:?}", r.method, r.path, r.headers.get("host")))
        .filter(|r| {
            !["google.com", "googleapis.com", "gvt1.com", "gstatic.com"]
                .iter()
                .any(|h| r.contains(h))
        })
        .collect();
    assert!(page_requests.is_empty(), "{page_requests:?}");
}
