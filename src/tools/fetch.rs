//! The `fetch` tool: GET an http(s) URL and return its body as text, markdown or raw HTML
//! (capped at 100 KB). HTML is converted by a small tag stripper.

use super::ToolError;
use super::common::{opt_u64, req_str};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use crate::paths::canonicalize_lenient;
use serde_json::{Value, json};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub(crate) struct Fetch;

pub(crate) const MAX_BODY_BYTES: usize = 100 * 1024;
pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub(crate) const MAX_TIMEOUT_SECS: u64 = 120;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Markdown,
    Html,
}

fn parse_format(input: &Value) -> Result<Format, ToolError> {
    match req_str(input, "format")?.to_ascii_lowercase().as_str() {
        "text" => Ok(Format::Text),
        "markdown" | "md" => Ok(Format::Markdown),
        "html" => Ok(Format::Html),
        other => Err(format!("unsupported format `{other}`: use text, markdown or html").into()),
    }
}

fn check_url(url: &str) -> Result<(), ToolError> {
    Ok(crate::net::check_web_url(url)?)
}

fn timeout_secs(input: &Value) -> Result<u64, ToolError> {
    Ok(opt_u64(input, "timeout")?
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .clamp(1, MAX_TIMEOUT_SECS))
}

struct Fetched {
    content_type: String,
    body: Vec<u8>,
    truncated: bool,
}

/// Why `get` has no page.
#[derive(Debug)]
enum GetError {
    Web(crate::net::WebError),
    /// The server answered with this status, not a 2xx one.
    Status(u16),
}

impl std::fmt::Display for GetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GetError::Web(e) => write!(f, "{e}"),
            GetError::Status(n) => write!(f, "request failed with status code: {n}"),
        }
    }
}

impl From<crate::net::WebError> for GetError {
    fn from(e: crate::net::WebError) -> GetError {
        GetError::Web(e)
    }
}

impl From<GetError> for ToolError {
    fn from(e: GetError) -> ToolError {
        match e {
            GetError::Web(e) => e.into(),
            e => ToolError::RespondToModel(e.to_string()),
        }
    }
}

fn get(url: &str, timeout: Duration, env: &crate::env::Overlay) -> Result<Fetched, GetError> {
    let req = crate::net::WebRequest::get(url, timeout).env(env).header(
        "Accept",
        "text/html,application/xhtml+xml,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.8",
    );
    let mut resp = crate::net::web(&req)?;
    if !(200..300).contains(&resp.status()) {
        return Err(GetError::Status(resp.status()));
    }
    let content_type = resp.header("content-type").to_ascii_lowercase();
    let (body, truncated) = resp.read_capped(MAX_BODY_BYTES as u64)?;
    Ok(Fetched {
        content_type,
        body,
        truncated,
    })
}

/// Runs the request on a worker thread so a cancel returns at once (the worker is abandoned and
/// ends at its timeout).
fn get_cancellable(
    url: &str,
    timeout: Duration,
    cancel: &AtomicBool,
    env: &crate::env::Overlay,
) -> Result<Fetched, ToolError> {
    let u = url.to_string();
    let env = env.clone();
    crate::net::cancellable(cancel, move || get(&u, timeout, &env)).map_err(|e| match e {
        GetError::Web(crate::net::WebError::Canceled) => "fetch canceled".into(),
        e => e.into(),
    })
}

// ------------------------------------------------------------------------------------------
// HTML → text / markdown

/// `s` with its HTML character references decoded (the common named ones and numeric ones).
pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        // Bytes, not a str slice: byte 12 may fall inside a multi-byte character.
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|&b| b == b';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                "mdash" => Some('—'),
                "ndash" => Some('–'),
                "hellip" => Some('…'),
                "copy" => Some('©'),
                _ => {
                    if let Some(h) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                        u32::from_str_radix(h, 16).ok().and_then(char::from_u32)
                    } else if let Some(d) = name.strip_prefix('#') {
                        d.parse::<u32>().ok().and_then(char::from_u32)
                    } else {
                        None
                    }
                }
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of attribute `name` of a tag's text (entities decoded).
pub(crate) fn attr(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(name) {
        let start = from + pos;
        from = start + name.len();
        let before_ok = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = lower[from..].trim_start();
        if !before_ok || !after.starts_with('=') {
            continue;
        }
        let vstart = tag.len() - after.len() + 1;
        let v = tag[vstart..].trim_start();
        let value = match v.chars().next() {
            Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or(""),
            _ => v
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        return Some(decode_entities(value));
    }
    None
}

/// Converts HTML to readable text; with `markdown`, keeps headings, lists, links, emphasis and
/// code in Markdown syntax.
pub(crate) fn html_to_text(html: &str, markdown: bool) -> String {
    let mut out = String::new();
    let mut skip_until: Option<String> = None;
    let mut pre = 0usize;
    let mut links: Vec<Option<String>> = Vec::new();
    let mut rest = html;
    let newline = |out: &mut String, n: usize| {
        while out.ends_with(' ') {
            out.pop();
        }
        let have = out.chars().rev().take_while(|c| *c == '\n').count();
        if !out.is_empty() {
            for _ in have..n {
                out.push('\n');
            }
        }
    };
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if skip_until.is_none() {
                push_text(&mut out, rest, pre > 0);
            }
            break;
        };
        if skip_until.is_none() {
            push_text(&mut out, &rest[..lt], pre > 0);
        }
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else {
            break;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(until) = &skip_until {
            if closing && *until == name {
                skip_until = None;
            }
            continue;
        }
        match name.as_str() {
            "script" | "style" | "head" | "noscript" | "svg" | "template" | "iframe"
                if !closing && !tag.ends_with('/') =>
            {
                skip_until = Some(name);
            }
            "br" => out.push('\n'),
            "hr" => {
                newline(&mut out, 2);
                if markdown {
                    out.push_str("---\n\n");
                }
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                newline(&mut out, 2);
                if markdown && !closing {
                    let level = name[1..].parse::<usize>().unwrap_or(1);
                    out.push_str(&"#".repeat(level));
                    out.push(' ');
                }
            }
            "li" if !closing => {
                newline(&mut out, 1);
                out.push_str(if markdown { "- " } else { "• " });
            }
            "pre" => {
                if closing {
                    pre = pre.saturating_sub(1);
                    if markdown {
                        newline(&mut out, 1);
                        out.push_str("```");
                    }
                    newline(&mut out, 2);
                } else {
                    newline(&mut out, 2);
                    pre += 1;
                    if markdown {
                        out.push_str("```\n");
                    }
                }
            }
            "code" if markdown && pre == 0 => out.push('`'),
            "strong" | "b" if markdown => out.push_str("**"),
            "em" | "i" if markdown => out.push('*'),
            "a" if markdown => {
                if closing {
                    if let Some(Some(href)) = links.pop() {
                        out.push_str(&format!("]({href})"));
                    }
                } else {
                    let href = attr(tag, "href").filter(|h| {
                        !h.is_empty() && !h.starts_with("javascript:") && !h.starts_with('#')
                    });
                    if href.is_some() {
                        out.push('[');
                    }
                    links.push(href);
                }
            }
            "img" if markdown => {
                if let Some(alt) = attr(tag, "alt").filter(|a| !a.is_empty()) {
                    out.push_str(&format!("[image: {alt}]"));
                }
            }
            "td" | "th" if closing => out.push_str(" | "),
            "p" | "div" | "section" | "article" | "header" | "footer" | "nav" | "main"
            | "aside" | "ul" | "ol" | "table" | "blockquote" | "form" | "dl" | "figure" => {
                newline(&mut out, 2);
            }
            "tr" | "dt" | "dd" | "title" | "li" => newline(&mut out, 1),
            _ => {}
        }
    }
    // Tidy: trailing spaces, at most one blank line in a row.
    let mut tidy = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        tidy.push_str(line);
        tidy.push('\n');
    }
    tidy.trim().to_string()
}

fn push_text(out: &mut String, raw: &str, pre: bool) {
    let text = decode_entities(raw);
    if pre {
        out.push_str(&text);
        return;
    }
    let open = |out: &String| !out.is_empty() && !out.ends_with([' ', '\n']);
    let mut need_space = text.starts_with(char::is_whitespace);
    for word in text.split_whitespace() {
        if need_space && open(out) {
            out.push(' ');
        }
        out.push_str(word);
        need_space = true;
    }
    if text.ends_with(char::is_whitespace) && open(out) {
        out.push(' ');
    }
}

// ------------------------------------------------------------------------------------------

fn fetch(input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let url = req_str(input, "url")?;
    check_url(url)?;
    let format = parse_format(input)?;
    let timeout = timeout_secs(input)?;
    let f = get_cancellable(url, Duration::from_secs(timeout), &ctx.cancel, ctx.env)?;
    let is_html = f.content_type.contains("html")
        || (f.content_type.is_empty() && {
            let head =
                String::from_utf8_lossy(&f.body[..f.body.len().min(512)]).to_ascii_lowercase();
            head.contains("<html") || head.contains("<!doctype html")
        });
    if !is_html
        && !f.content_type.starts_with("text/")
        && !f.content_type.contains("json")
        && !f.content_type.contains("xml")
        && !f.content_type.contains("javascript")
        && super::common::looks_binary(&f.body)
    {
        return Err(format!(
            "the response is binary ({}); fetch only returns text",
            if f.content_type.is_empty() {
                "unknown type"
            } else {
                &f.content_type
            }
        )
        .into());
    }
    let body = String::from_utf8_lossy(&f.body);
    let mut content = match format {
        Format::Html => body.into_owned(),
        Format::Text if is_html => html_to_text(&body, false),
        Format::Markdown if is_html => html_to_text(&body, true),
        _ => body.into_owned(),
    };
    if f.truncated {
        content.push_str(&format!(
            "\n\n[Content truncated: the response is larger than {} KB]",
            MAX_BODY_BYTES / 1024
        ));
    }
    if content.trim().is_empty() {
        content = "(empty response)".to_string();
    }
    Ok(ToolOutput {
        content,
        is_error: false,
        metadata: json!({
            "url": url,
            "content_type": f.content_type,
            "truncated": f.truncated,
        }),
        ..Default::default()
    })
}

impl Tool for Fetch {
    fn name(&self) -> &'static str {
        "fetch"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Fetch
    }

    fn read_only(&self) -> bool {
        false
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("WebFetch".into())
    }

    fn title(&self, input: &Value, _cwd: &std::path::Path) -> String {
        format!("Fetch {}", super::common::arg(input, "url").unwrap_or(""))
            .trim_end()
            .to_string()
    }

    fn description(&self) -> String {
        format!(
            "Fetches a URL (http or https, GET) and returns its content.\n\
             \n\
             - `format`: `text` (HTML reduced to plain text), `markdown` (HTML converted to \
             Markdown, keeping headings, lists and links) or `html` (the raw body).\n\
             - `timeout` in seconds (default {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS}).\n\
             - Only the first {} KB of the body are returned; binary content is refused.\n\
             - Every fetch asks the user for permission.",
            MAX_BODY_BYTES / 1024
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http(s) URL to fetch"},
                "format": {
                    "type": "string",
                    "enum": ["text", "markdown", "html"],
                    "description": "How to return the content"
                },
                "timeout": {
                    "type": "integer",
                    "description": format!("Timeout in seconds (default {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS})")
                }
            },
            "required": ["url", "format"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let url = req_str(input, "url")?;
        check_url(url)?;
        parse_format(input)?;
        timeout_secs(input)?;
        Ok(Some(PermissionRequest {
            tool: self.name().to_string(),
            action: "fetch",
            path: canonicalize_lenient(ctx.cwd),
            description: url.trim().to_string(),
            diff: None,
            ..Default::default()
        }))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        fetch(input, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;

    /// Serves one canned response per connection on loopback; returns the base URL.
    fn serve(responses: Vec<(u16, &'static str, Vec<u8>)>) -> String {
        use crate::net::test_server::{Canned, serve};
        serve(
            responses
                .into_iter()
                .map(|(status, ctype, body)| {
                    Canned::new(status, body).header("Content-Type", ctype)
                })
                .collect(),
        )
        .url
    }

    #[test]
    fn fetches_and_converts() {
        let html = b"<html><head><title>T</title><style>x{}</style></head><body>\
            <h1>Title &amp; more</h1><p>Hello <a href=\"https://e.x/a\">link</a> <b>bold</b></p>\
            <ul><li>one</li><li>two</li></ul><script>evil()</script></body></html>"
            .to_vec();
        let base = serve(vec![
            (200, "text/html; charset=utf-8", html.clone()),
            (200, "text/html", html.clone()),
            (200, "text/html", html),
            (404, "text/plain", b"nope".to_vec()),
            (200, "text/plain", vec![b'a'; 150 * 1024]),
        ]);
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let run = |format: &str| fetch(&json!({"url": base, "format": format}), &ctx);
        let md = run("markdown").unwrap();
        assert_eq!(
            md.content,
            "# Title & more\n\nHello [link](https://e.x/a) **bold**\n\n- one\n- two"
        );
        let text = run("text").unwrap();
        assert_eq!(
            text.content,
            "Title & more\n\nHello link bold\n\n• one\n• two"
        );
        let raw = run("html").unwrap();
        assert!(raw.content.contains("<script>"));
        let err = run("text").unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
        let big = run("text").unwrap();
        assert!(big.content.contains("[Content truncated"));
        assert_eq!(big.metadata["truncated"], true);
        assert!(big.content.len() < MAX_BODY_BYTES + 200);
    }

    #[test]
    fn rejects_bad_urls_and_asks_permission() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        for url in [
            "file:///etc/passwd",
            "ftp://x",
            "http://",
            "javascript:alert(1)",
        ] {
            let input = json!({"url": url, "format": "text"});
            assert!(Fetch.permission(&input, &ctx).is_err(), "{url}");
            assert!(Fetch.run(&input, &ctx).out().is_error, "{url}");
        }
        assert!(
            Fetch
                .permission(&json!({"url": "https://x.y", "format": "pdf"}), &ctx)
                .is_err()
        );
        let req = Fetch
            .permission(&json!({"url": "https://x.y/z", "format": "text"}), &ctx)
            .unwrap()
            .unwrap();
        assert_eq!(
            (req.action, req.description.as_str()),
            ("fetch", "https://x.y/z")
        );
    }

    #[test]
    fn entities_and_attrs() {
        assert_eq!(
            decode_entities("a &lt;b&gt; &#65;&#x42; &bogus; &"),
            "a <b> AB &bogus; &"
        );
        assert_eq!(
            attr("a class=x href='/p?q=1&amp;r=2'", "href").as_deref(),
            Some("/p?q=1&r=2")
        );
        assert_eq!(attr("a data-href=\"no\"", "href"), None);
        // A multi-byte character across the 12-byte look-ahead of an entity.
        assert_eq!(decode_entities("&aaaaaaaaaaé;"), "&aaaaaaaaaaé;");
        assert_eq!(decode_entities("x&ééééééé;&amp;"), "x&ééééééé;&");
        assert_eq!(
            html_to_text("<p title='&aaaaaaaaaaé;'>&aaaaaaaaaaé; ü&#252;</p>", false),
            "&aaaaaaaaaaé; üü"
        );
        assert_eq!(
            attr("a title=\"é&aaaaaaaaaaé;\" href=ü", "href").as_deref(),
            Some("ü")
        );
        assert_eq!(
            html_to_text("<pre>  keep\n  this</pre><p>x</p>", true),
            "```\n  keep\n  this\n```\n\nx"
        );
    }
}
