//! The `sourcegraph` tool: code search over public repositories with Sourcegraph's GraphQL API,
//! as Go Crush does (same query, same result layout). It reaches `CRUSH_SOURCEGRAPH_URL`
//! (default https://sourcegraph.com/.api/graphql) through the one web path; like Go Crush it
//! never asks permission. When the network cannot be reached the tool turns itself off for a
//! while (`OFF_AFTER_FAILURE`), so a machine without network is told at once instead of
//! waiting on every call; `options.disabled_tools` removes it for good.

use super::common::{opt_u64, req_str};
use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) struct Sourcegraph;

pub(crate) const DEFAULT_URL: &str = "https://sourcegraph.com/.api/graphql";
pub(crate) const MAX_RESULTS: u64 = 20;
const DEFAULT_RESULTS: u64 = 10;
const DEFAULT_CONTEXT: u64 = 10;
const DEFAULT_TIMEOUT_SECS: u64 = 30;
const MAX_TIMEOUT_SECS: u64 = 120;
/// The largest answer read.
const MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;
/// How long the tool stays off after the network could not be reached.
const OFF_AFTER_FAILURE: Duration = Duration::from_secs(300);

const QUERY: &str = "query Search($query: String!) { search(query: $query, version: V2, patternType: keyword ) { results { matchCount, limitHit, resultCount, approximateResultCount, missing { name }, timedout { name }, indexUnavailable, results { __typename, ... on FileMatch { repository { name }, file { path, url, content }, lineMatches { preview, lineNumber, offsetAndLengths } } } } } }";

/// When the network last failed, and why.
static UNREACHABLE: Mutex<Option<(Instant, String)>> = Mutex::new(None);

fn endpoint() -> String {
    std::env::var("CRUSH_SOURCEGRAPH_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_string())
}

struct Params<'a> {
    query: &'a str,
    count: usize,
    context: usize,
    timeout: Duration,
}

fn params(input: &Value) -> Result<Params<'_>, ToolError> {
    let query = req_str(input, "query")?;
    let count = match opt_u64(input, "count")? {
        None | Some(0) => DEFAULT_RESULTS,
        Some(n) => n.min(MAX_RESULTS),
    };
    let context = match opt_u64(input, "context_window")? {
        None | Some(0) => DEFAULT_CONTEXT,
        Some(n) => n.min(1000),
    };
    let timeout = match opt_u64(input, "timeout")? {
        None | Some(0) => DEFAULT_TIMEOUT_SECS,
        Some(n) => n.min(MAX_TIMEOUT_SECS),
    };
    Ok(Params {
        query,
        count: count as usize,
        context: context as usize,
        timeout: Duration::from_secs(timeout),
    })
}

fn search(
    url: &str,
    query: &str,
    timeout: Duration,
    env: &crate::env::Overlay,
) -> Result<Value, ToolError> {
    let body = json!({"query": QUERY, "variables": {"query": query}}).to_string();
    let req = crate::net::WebRequest {
        method: "POST",
        url,
        headers: vec![("Content-Type", "application/json".to_string())],
        body: Some(body.as_bytes()),
        timeout,
        env: env.clone(),
    };
    let mut resp = match crate::net::web(&req) {
        Ok(r) => r,
        Err(e) => {
            *UNREACHABLE.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), e.to_string()));
            return Err(format!("Sourcegraph could not be reached: {e}").into());
        }
    };
    let (text, _) = resp.read_capped(MAX_RESPONSE_BYTES)?;
    let text = String::from_utf8_lossy(&text);
    if resp.status() != 200 {
        let mut msg = format!("Request failed with status code: {}", resp.status());
        if !text.trim().is_empty() {
            msg.push_str(&format!(
                ", response: {}",
                super::common::truncate_line(text.trim(), 500)
            ));
        }
        return Err(msg.into());
    }
    serde_json::from_str(&text).map_err(|e| {
        ToolError::RespondToModel(format!("failed to parse Sourcegraph's answer: {e}"))
    })
}

/// Go Crush's layout of the results.
fn format_results(result: &Value, context: usize, max: usize) -> Result<String, ToolError> {
    let mut out = String::new();
    if let Some(errors) = result["errors"].as_array().filter(|e| !e.is_empty()) {
        out.push_str("## Sourcegraph API Error\n\n");
        for e in errors {
            if let Some(m) = e["message"].as_str() {
                let _ = writeln!(out, "- {m}");
            }
        }
        return Ok(out);
    }
    let results = &result["data"]["search"]["results"];
    if !results.is_object() {
        return Err("invalid response format: missing data.search.results".into());
    }
    out.push_str("# Sourcegraph Search Results\n\n");
    let _ = writeln!(
        out,
        "Found {} matches across {} results",
        results["matchCount"].as_u64().unwrap_or(0),
        results["resultCount"].as_u64().unwrap_or(0)
    );
    if results["limitHit"].as_bool() == Some(true) {
        out.push_str("(Result limit reached, try a more specific query)\n");
    }
    out.push('\n');
    let list = results["results"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        out.push_str("No results found. Try a different query.\n");
        return Ok(out);
    }
    for (i, r) in list.iter().take(max).enumerate() {
        if r["__typename"] != "FileMatch" {
            continue;
        }
        let (repo, file) = (&r["repository"], &r["file"]);
        if !repo.is_object() || !file.is_object() {
            continue;
        }
        let _ = write!(
            out,
            "## Result {}: {}/{}\n\n",
            i + 1,
            repo["name"].as_str().unwrap_or(""),
            file["path"].as_str().unwrap_or("")
        );
        if let Some(u) = file["url"].as_str().filter(|u| !u.is_empty()) {
            let _ = write!(out, "URL: {u}\n\n");
        }
        let content = file["content"].as_str().unwrap_or("");
        let lines: Vec<&str> = content.split('\n').collect();
        for m in r["lineMatches"].as_array().into_iter().flatten() {
            let line = m["lineNumber"].as_f64().unwrap_or(0.0) as usize;
            let preview = m["preview"].as_str().unwrap_or("");
            out.push_str("```\n");
            if content.is_empty() {
                let _ = writeln!(out, "{line}| {preview}");
                out.push_str("```\n\n");
                continue;
            }
            let start = line.saturating_sub(context).max(1);
            let numbered = |from: usize, to: usize| {
                lines
                    .iter()
                    .enumerate()
                    .take(to.min(lines.len()))
                    .skip(from)
                    .map(|(j, l)| format!("{}| {l}\n", j + 1))
                    .collect::<String>()
            };
            out.push_str(&numbered(start - 1, line.saturating_sub(1)));
            let _ = writeln!(out, "{line}|  {preview}");
            out.push_str(&numbered(line, line + context));
            out.push_str("```\n\n");
        }
    }
    Ok(out)
}

fn run(input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let p = params(input)?;
    if let Some((at, why)) = UNREACHABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .filter(|(at, _)| at.elapsed() < OFF_AFTER_FAILURE)
    {
        return Err(format!(
            "sourcegraph is off: the network could not be reached {} s ago ({why}). Search \
             locally with grep and glob instead.",
            at.elapsed().as_secs()
        )
        .into());
    }
    let (url, query, timeout) = (endpoint(), p.query.to_string(), p.timeout);
    let env = ctx.env.clone();
    let result = crate::net::cancellable(&ctx.cancel, move || search(&url, &query, timeout, &env))?;
    let text = format_results(&result, p.context, p.count)?;
    let matches = result["data"]["search"]["results"]["matchCount"]
        .as_u64()
        .unwrap_or(0);
    Ok(ToolOutput {
        content: text,
        metadata: json!({
            "number_of_matches": matches,
            "truncated": result["data"]["search"]["results"]["limitHit"] == true,
        }),
        ..Default::default()
    })
}

impl Tool for Sourcegraph {
    fn name(&self) -> &'static str {
        "sourcegraph"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Search
    }

    /// It searches on the network.
    fn read_only(&self) -> bool {
        false
    }

    fn description(&self) -> String {
        format!(
            "Search code across public GitHub repositories via Sourcegraph; supports regex, \
             language/repo/file filters, and symbol search (max {MAX_RESULTS} results). Only \
             searches public repos. Query syntax examples: `repo:^github\\.com/org/name$ fmt.Println`, \
             `lang:go context.WithTimeout`, `file:\\.rs$ impl Drop`."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The Sourcegraph search query"},
                "count": {
                    "type": "integer",
                    "description": format!("Optional number of results to return (default: {DEFAULT_RESULTS}, max: {MAX_RESULTS})")
                },
                "context_window": {
                    "type": "integer",
                    "description": format!("The context around the match to return (default: {DEFAULT_CONTEXT} lines)")
                },
                "timeout": {
                    "type": "integer",
                    "description": format!("Optional timeout in seconds (max {MAX_TIMEOUT_SECS})")
                }
            },
            "required": ["query"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        // The query leaves the machine: it asks, unlike Go Crush (crush(1) PERMISSIONS).
        let p = params(input)?;
        Ok(Some(PermissionRequest {
            tool: self.name().to_string(),
            action: "fetch",
            path: crate::paths::canonicalize_lenient(ctx.cwd),
            description: format!(
                "Send this search to Sourcegraph: {}",
                super::common::truncate_line(p.query, 200)
            ),
            diff: None,
            ..Default::default()
        }))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        run(input, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_server::{Canned, serve};

    fn answer() -> Value {
        json!({"data": {"search": {"results": {
            "matchCount": 2, "resultCount": 1, "limitHit": true,
            "results": [{
                "__typename": "FileMatch",
                "repository": {"name": "github.com/a/b"},
                "file": {"path": "src/x.go", "url": "/github.com/a/b/-/blob/src/x.go",
                         "content": "l1\nl2\nl3\nl4\nl5"},
                "lineMatches": [{"preview": "l3", "lineNumber": 3, "offsetAndLengths": [[0, 2]]}]
            }, {"__typename": "Repository"}]
        }}}})
    }

    #[test]
    fn results_are_laid_out_as_go_crush_lays_them_out() {
        let text = format_results(&answer(), 1, 10).unwrap();
        assert_eq!(
            text,
            "# Sourcegraph Search Results\n\nFound 2 matches across 1 results\n(Result limit \
             reached, try a more specific query)\n\n## Result 1: github.com/a/b/src/x.go\n\nURL: \
             /github.com/a/b/-/blob/src/x.go\n\n```\n2| l2\n3|  l3\n4| l4\n```\n\n"
        );
        let errors = json!({"errors": [{"message": "bad query"}]});
        assert_eq!(
            format_results(&errors, 1, 10).unwrap(),
            "## Sourcegraph API Error\n\n- bad query\n"
        );
        let empty = json!({"data": {"search": {"results": {"results": []}}}});
        assert!(
            format_results(&empty, 1, 10)
                .unwrap()
                .contains("No results found")
        );
        assert!(format_results(&json!({"data": 1}), 1, 10).is_err());
    }

    #[test]
    fn the_query_is_posted_as_go_crush_posts_it() {
        let served = serve(vec![
            Canned::new(200, answer().to_string()),
            Canned::new(500, "boom"),
        ]);
        let url = format!("{}/.api/graphql", served.url);
        let r = search(
            &url,
            "lang:go fmt",
            Duration::from_secs(5),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(r["data"]["search"]["results"]["matchCount"], 2);
        let seen = served.seen.lock().unwrap().clone();
        assert_eq!(seen[0].line, "POST /.api/graphql HTTP/1.1");
        let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
        assert_eq!(sent["variables"]["query"], "lang:go fmt");
        assert_eq!(sent["query"], QUERY);
        let err = search(&url, "x", Duration::from_secs(5), &Default::default()).unwrap_err();
        assert!(
            err.to_string().contains("500") && err.to_string().contains("boom"),
            "{err}"
        );
    }
}
