//! `web_fetch` and `web_search`, the tools of the `agentic_fetch` sub-agent (never offered to
//! the main agent): a page as Markdown, and a web search on DuckDuckGo Lite
//! (`CRUSH_WEB_SEARCH_URL`, default https://lite.duckduckgo.com/lite/), both through the one web
//! path. They ask no permission: the `agentic_fetch` call that starts the sub-agent does.

use super::common::{opt_u64, req_str};
use super::fetch::{attr, decode_entities, html_to_text};
use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use crate::mcp::wire::{percent_decode, percent_encode};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Pages larger than this are saved to a file the sub-agent greps and views.
pub(crate) const LARGE_CONTENT: usize = 50_000;
/// The most of a page that is read.
const MAX_PAGE_BYTES: u64 = 5 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_SEARCH_URL: &str = "https://lite.duckduckgo.com/lite/";

/// A page as the model reads it: HTML as Markdown, JSON indented, text as it is. `env`: the
/// session's variables, read first for the proxy.
pub(crate) fn fetch_as_markdown(url: &str, env: &crate::env::Overlay) -> Result<String, ToolError> {
    crate::net::check_web_url(url)?;
    let req = crate::net::WebRequest::get(url, TIMEOUT)
        .env(env)
        .header(
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .header("Accept-Language", "en-US,en;q=0.5");
    let mut resp = crate::net::web(&req)?;
    if resp.status() != 200 {
        return Err(format!("request failed with status code: {}", resp.status()).into());
    }
    let content_type = resp.header("content-type").to_ascii_lowercase();
    let (body, _) = resp.read_capped(MAX_PAGE_BYTES)?;
    let text =
        String::from_utf8(body).map_err(|_| "response content is not valid UTF-8".to_string())?;
    if content_type.contains("text/html") {
        return Ok(html_to_text(&text, true));
    }
    if content_type.contains("json")
        && let Ok(v) = serde_json::from_str::<Value>(&text)
    {
        return Ok(serde_json::to_string_pretty(&v).unwrap_or(text));
    }
    Ok(text)
}

/// Saves a large page to `dir` (a new `page-N.md`); its path. A failure is crush's (its own
/// temporary directory), not the model's.
pub(crate) fn save_page(dir: &Path, content: &str) -> Result<PathBuf, ToolError> {
    for n in 0..10_000 {
        let p = dir.join(format!("page-{n}.md"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(content.as_bytes()).map_err(|e| {
                    ToolError::Internal(format!("Failed to write content to file: {e}"))
                })?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(ToolError::Internal(format!(
                    "Failed to create temporary file: {e}"
                )));
            }
        }
    }
    Err(ToolError::Internal(
        "Failed to create temporary file: too many pages".into(),
    ))
}

pub(crate) struct WebFetch;

impl Tool for WebFetch {
    fn name(&self) -> &'static str {
        "web_fetch"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Fetch
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("WebFetch".into())
    }

    fn description(&self) -> String {
        format!(
            "Fetch a web URL and return content as markdown; for use inside sub-agents. Large \
             pages (>{}KB) are saved to a temp file for grep/view.",
            LARGE_CONTENT / 1000
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"url": {"type": "string", "description": "The URL to fetch content from"}},
            "required": ["url"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        crate::net::check_web_url(req_str(input, "url")?)?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let url = req_str(input, "url")?.trim().to_string();
        let u = url.clone();
        let env = ctx.env.clone();
        let content = crate::net::cancellable(&ctx.cancel, move || fetch_as_markdown(&u, &env))
            .map_err(|e| format!("Failed to fetch URL: {e}"))?;
        let text = if content.len() > LARGE_CONTENT {
            let path = save_page(ctx.cwd, &content)?;
            format!(
                "Fetched content from {url} (large page)\n\nContent saved to: {}\n\nUse the view and grep tools to analyze this file.",
                path.display()
            )
        } else {
            format!("Fetched content from {url}:\n\n{content}")
        };
        Ok(ToolOutput {
            content: text,
            ..Default::default()
        })
    }
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    pub title: String,
    pub link: String,
    pub snippet: String,
}

/// DuckDuckGo's redirect links (`//duckduckgo.com/l/?uddg=ENCODED&...`) to their target.
fn clean_link(href: &str) -> String {
    match href
        .strip_prefix("//duckduckgo.com/l/?")
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("uddg=")))
    {
        Some(enc) => percent_decode(enc),
        None => href.to_string(),
    }
}

/// The text inside an element whose opening tag ends at `from`, up to `</name>`.
fn inner_text(html: &str, from: usize, name: &str) -> (String, usize) {
    let lower = html[from..].to_ascii_lowercase();
    let end = lower
        .find(&format!("</{name}"))
        .map_or(html.len(), |e| from + e);
    let text = html_to_text(&html[from..end], false);
    (decode_entities(text.trim()), end)
}

/// Results of DuckDuckGo Lite's page: `a.result-link` (title and link), then `td.result-snippet`.
pub(crate) fn parse_lite(html: &str, max: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::new();
    let mut current: Option<Hit> = None;
    let mut i = 0;
    while let Some(lt) = html[i..].find('<') {
        let start = i + lt;
        let Some(gt) = html[start..].find('>') else {
            break;
        };
        let tag = &html[start + 1..start + gt];
        let after = start + gt + 1;
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let classes = attr(tag, "class").unwrap_or_default();
        let has = |c: &str| classes.split_whitespace().any(|x| x == c);
        i = after;
        if name == "a" && has("result-link") {
            if let Some(h) = current.take().filter(|h| !h.link.is_empty()) {
                hits.push(h);
                if hits.len() >= max {
                    return hits;
                }
            }
            let (title, end) = inner_text(html, after, "a");
            current = Some(Hit {
                title,
                link: clean_link(&attr(tag, "href").unwrap_or_default()),
                snippet: String::new(),
            });
            i = end;
        } else if name == "td" && has("result-snippet") {
            let (snippet, end) = inner_text(html, after, "td");
            if let Some(h) = current.as_mut() {
                h.snippet = snippet;
            }
            i = end;
        }
    }
    if let Some(h) = current.filter(|h| !h.link.is_empty())
        && hits.len() < max
    {
        hits.push(h);
    }
    hits
}

/// Marks of the page DuckDuckGo serves instead of results to a client it rate-limits.
const ANOMALY_MARKERS: &[&str] = &[
    "anomaly-modal",
    "/anomaly.js",
    "Unfortunately, bots use DuckDuckGo too",
];

const RATE_LIMITED: &str = "DuckDuckGo is rate-limiting this machine. Do not retry or rephrase; \
wait a few minutes or fetch known URLs directly";

fn search_url() -> String {
    std::env::var("CRUSH_WEB_SEARCH_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_SEARCH_URL.to_string())
}

/// Searches `query` on DuckDuckGo Lite at `base`.
pub(crate) fn search(
    base: &str,
    query: &str,
    max: usize,
    env: &crate::env::Overlay,
) -> Result<Vec<Hit>, ToolError> {
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}q={}", percent_encode(query));
    let req = crate::net::WebRequest::get(&url, TIMEOUT)
        .env(env)
        .header(
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .header("Accept-Language", "en-US,en;q=0.9");
    let mut resp = crate::net::web(&req)?;
    match resp.status() {
        202 => return Err(RATE_LIMITED.into()),
        200 => {}
        s => return Err(format!("search failed with status code: {s}").into()),
    }
    let (body, _) = resp.read_capped(MAX_PAGE_BYTES)?;
    let html = String::from_utf8_lossy(&body);
    if ANOMALY_MARKERS.iter().any(|m| html.contains(m)) {
        return Err(RATE_LIMITED.into());
    }
    Ok(parse_lite(&html, max))
}

fn format_hits(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "No results found. Try rephrasing your search.".to_string();
    }
    let mut s = format!("Found {} search results:\n\n", hits.len());
    for (i, h) in hits.iter().enumerate() {
        s.push_str(&format!(
            "{}. {}\n   URL: {}\n   Summary: {}\n\n",
            i + 1,
            h.title,
            h.link,
            h.snippet
        ));
    }
    s
}

pub(crate) struct WebSearch;

impl Tool for WebSearch {
    fn name(&self) -> &'static str {
        "web_search"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("WebSearch".into())
    }

    fn description(&self) -> String {
        "Search the web via DuckDuckGo; returns titles, URLs, and snippets. Follow up with \
         web_fetch to get full page content."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The search query to find information on the web"},
                "max_results": {
                    "type": "integer",
                    "description": "Maximum number of results to return (default: 10, max: 20)"
                }
            },
            "required": ["query"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "query")?;
        opt_u64(input, "max_results")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let query = req_str(input, "query")?.to_string();
        let max = match opt_u64(input, "max_results")? {
            None | Some(0) => 10,
            Some(n) => n.min(20),
        } as usize;
        let (base, env) = (search_url(), ctx.env.clone());
        let hits = crate::net::cancellable(&ctx.cancel, move || search(&base, &query, max, &env))
            .map_err(|e| format!("Failed to search: {e}"))?;
        Ok(ToolOutput {
            content: format_hits(&hits),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_server::{Canned, serve};

    const LITE: &str = r#"<table><tr><td>1.</td><td><a rel="nofollow" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa%3Fx%3D1&amp;rut=abc" class='result-link'>Example &amp; A</a></td></tr>
<tr><td class='result-snippet'>The <b>first</b> result.</td></tr>
<tr><td><a href="https://b.example/" class="result-link">B</a></td></tr>
<tr><td class="result-snippet">Second.</td></tr></table>"#;

    #[test]
    fn lite_results_are_parsed_and_links_cleaned() {
        let hits = parse_lite(LITE, 10);
        assert_eq!(
            hits,
            [
                Hit {
                    title: "Example & A".into(),
                    link: "https://example.com/a?x=1".into(),
                    snippet: "The first result.".into(),
                },
                Hit {
                    title: "B".into(),
                    link: "https://b.example/".into(),
                    snippet: "Second.".into(),
                },
            ]
        );
        assert_eq!(parse_lite(LITE, 1).len(), 1);
        assert!(format_hits(&hits).starts_with("Found 2 search results:\n\n1. Example & A\n"));
    }

    #[test]
    fn a_search_asks_the_endpoint_and_knows_the_rate_limit_page() {
        let served = serve(vec![
            Canned::new(200, LITE).header("Content-Type", "text/html"),
            Canned::new(202, ""),
            Canned::new(200, "<div class='anomaly-modal'>"),
        ]);
        let base = format!("{}/lite/", served.url);
        assert_eq!(
            search(&base, "rust ureq", 5, &Default::default())
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            served.seen.lock().unwrap()[0].line,
            "GET /lite/?q=rust%20ureq HTTP/1.1"
        );
        assert_eq!(
            search(&base, "x", 5, &Default::default())
                .unwrap_err()
                .to_string(),
            RATE_LIMITED
        );
        assert_eq!(
            search(&base, "x", 5, &Default::default())
                .unwrap_err()
                .to_string(),
            RATE_LIMITED
        );
    }

    #[test]
    fn pages_become_markdown_and_large_ones_go_to_a_file() {
        let served = serve(vec![
            Canned::new(200, "<h1>Title</h1><p>Body</p>").header("Content-Type", "text/html"),
            Canned::new(200, r#"{"a":[1,2]}"#).header("Content-Type", "application/json"),
        ]);
        assert_eq!(
            fetch_as_markdown(&served.url, &Default::default()).unwrap(),
            "# Title\n\nBody"
        );
        assert_eq!(
            fetch_as_markdown(&served.url, &Default::default()).unwrap(),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
        );
        assert!(fetch_as_markdown("file:///etc/passwd", &Default::default()).is_err());
        let d = tempfile::tempdir().unwrap();
        let p = save_page(d.path(), "big").unwrap();
        let q = save_page(d.path(), "other").unwrap();
        assert_ne!(p, q);
        assert_eq!(std::fs::read_to_string(p).unwrap(), "big");
    }
}
