//! `agentic_fetch`: Go Crush's web sub-agent. The call asks permission once (action `fetch`);
//! then a sub-agent on the small model works in a child session with `web_fetch` (a page as
//! Markdown), `web_search` (DuckDuckGo Lite, `CRUSH_WEB_SEARCH_URL`), `sourcegraph`, and `glob`,
//! `grep` and `view` over a temporary directory holding the pages too large to read at once.
//! Its own calls ask nothing (its session is approved, as in Go Crush) and fire no hooks; the
//! directory is removed when it is done.

use super::permissions::Permissions;
use super::{Agent, Sink, Stop};
use crate::tools::common::{opt_str, req_str};
use crate::tools::web::{LARGE_CONTENT, fetch_as_markdown, save_page};
use crate::tools::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub(super) const TOOL_NAME: &str = "agentic_fetch";

/// What the model sees of the tool; the agent loop runs it.
pub(super) struct AgenticFetch;

/// Why an `agentic_fetch` call cannot get the directory for the pages it reads.
#[derive(Debug)]
enum FetchError {
    /// No directory could be made in this one.
    TempDir(PathBuf),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::TempDir(p) => write!(
                f,
                "Failed to create a temporary directory in {}",
                p.display()
            ),
        }
    }
}

impl std::error::Error for FetchError {}

fn check(input: &Value) -> Result<(&str, Option<&str>), ToolError> {
    let prompt = req_str(input, "prompt")?;
    let url = opt_str(input, "url")?;
    if let Some(u) = url {
        crate::net::check_web_url(u)?;
    }
    Ok((prompt, url))
}

impl Tool for AgenticFetch {
    fn name(&self) -> &'static str {
        TOOL_NAME
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Fetch
    }

    fn read_only(&self) -> bool {
        false
    }

    fn title(&self, input: &Value, _cwd: &Path) -> String {
        format!(
            "Fetch {}",
            crate::tools::common::arg(input, "url").unwrap_or("")
        )
        .trim_end()
        .to_string()
    }

    fn run_mode(&self) -> crate::tools::RunMode {
        crate::tools::RunMode::Loop(crate::tools::LoopTool::FetchAgent)
    }

    fn description(&self) -> String {
        "Fetch a URL or search the web using an AI sub-agent that can extract, summarize, and \
         answer questions. Slower and costlier than fetch; use fetch for raw content or API \
         responses. Give a prompt saying what to find; with a url the sub-agent starts from \
         that page, without one it searches the web."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "The URL to fetch content from (optional - if not provided, the agent will search the web)"
                },
                "prompt": {
                    "type": "string",
                    "description": "The prompt describing what information to find or extract"
                }
            },
            "required": ["prompt"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let (prompt, url) = check(input)?;
        // What the sub-agent may send out (its searches, the pages it follows) comes from this
        // prompt and the pages: the question shows it.
        let task = crate::tools::common::truncate_line(prompt.trim(), 200);
        Ok(Some(PermissionRequest {
            tool: TOOL_NAME.to_string(),
            action: "fetch",
            path: crate::paths::canonicalize_lenient(ctx.cwd),
            description: match url {
                Some(u) => format!("Fetch and analyze content from URL: {u} (task: {task})"),
                None => format!("Search the web and analyze results (task: {task})"),
            },
            diff: None,
            ..Default::default()
        }))
    }

    fn run(&self, _input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        Err("the agentic_fetch tool is not available here".into())
    }
}

/// The sub-agent's system prompt (Go Crush's), for its working directory.
fn system_prompt(dir: &Path) -> String {
    format!(
        "You are a web content analysis agent for crush. Your task is to analyze web content, \
search results, or web pages to extract the information requested by the user.

<rules>
1. Be concise and direct in your responses
2. Focus only on the information requested in the user's prompt
3. If the content is provided in a file path, use the grep and view tools to efficiently search through it
4. When relevant, quote specific sections from the content to support your answer
5. If the requested information is not found, clearly state that
6. Any file paths you use MUST be absolute
7. **IMPORTANT**: If you need information from a linked page or search result, use the web_fetch tool to get that content
8. **IMPORTANT**: If you need to search for more information, use the web_search tool
9. After fetching a link, analyze the content yourself to extract what's needed
10. Don't hesitate to follow multiple links or perform multiple searches if necessary to get complete information
11. **CRITICAL**: At the end of your response, include a \"Sources\" section listing ALL URLs that were useful in answering the question
</rules>

<search_strategy>
Break complex questions into several short, specific searches (3-6 words each), refine the terms \
when results are not relevant, and fetch the most relevant results with web_fetch.
</search_strategy>

<response_format>
Your response should be structured as follows:

[Your answer to the user's question]

## Sources
- [URL 1 that was useful]
- [URL 2 that was useful]
</response_format>

<env>
Working directory: {}
Platform: {}
Today's date: {}
</env>
",
        dir.display(),
        std::env::consts::OS,
        crate::time::today()
    )
}

/// A directory removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(parent: &Path) -> Result<TempDir, FetchError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let _ = std::fs::create_dir_all(parent);
        for _ in 0..100 {
            let p = parent.join(format!(
                "crush-fetch-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        Err(FetchError::TempDir(parent.to_path_buf()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The web sub-agent's tools, sorted by name.
pub(super) fn fetch_tools() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(crate::tools::glob::Glob),
        Box::new(crate::tools::grep::Grep),
        Box::new(crate::tools::sourcegraph::Sourcegraph),
        Box::new(crate::tools::view::View),
        Box::new(crate::tools::web::WebFetch),
        Box::new(crate::tools::web::WebSearch),
    ]
}

impl Agent {
    /// The web sub-agent for the child session `session_id`, working in `dir`.
    fn fetch_child(&self, session_id: String, dir: &Path) -> Agent {
        let model = self
            .config
            .as_ref()
            .and_then(|c| c.resolve_model(None, true).ok())
            .unwrap_or_else(|| self.model.clone());
        let tools = fetch_tools();
        // The task sub-agent's settings, then what differs: no hooks (the agentic_fetch call
        // itself was hooked), the pages it reads are on disk in its own directory.
        let mut a = self.child(session_id);
        a.model = model;
        a.toolkit.tools = tools;
        // Go Crush approves the sub-agent's session: the call itself asked.
        a.policy.permissions = Permissions::new(true, Vec::new());
        a.system = system_prompt(dir);
        a.workspace.cwd = dir.to_path_buf();
        a.workspace.project_root = dir.to_path_buf();
        // Its file tools see its own directory and nothing else, whatever its permissions
        // (crush(1) TOOLS, agentic_fetch).
        a.workspace.bounds = std::sync::Arc::new(crate::tools::confine::Bounds::jailed(dir));
        a.policy.hooks = Default::default();
        a.toolkit.lsp = None;
        a.workspace.files = None;
        a.toolkit.skill_files = Default::default();
        a.session.transcript = None;
        a.session.parent_transcript = None;
        a
    }

    /// Runs the `agentic_fetch` call `tool_call_id`: the page first (when a URL is given),
    /// then the sub-agent's turn. The tool result, and the stop the parent's turn inherits.
    pub(super) fn run_agentic_fetch(
        &self,
        assistant_id: &str,
        tool_call_id: &str,
        input: &Value,
        sink: &mut dyn Sink,
    ) -> (ToolOutput, Option<Stop>) {
        let (prompt, url) = match check(input) {
            Ok(v) => v,
            Err(e) => return (ToolOutput::error(e.to_string()), None),
        };
        let parent = self
            .config
            .as_ref()
            .map(|c| c.data_dir.clone())
            .unwrap_or_else(std::env::temp_dir);
        let dir = match TempDir::new(&parent) {
            Ok(d) => d,
            Err(e) => return (ToolOutput::error(e.to_string()), None),
        };
        let full_prompt = match url {
            Some(url) => {
                let u = url.to_string();
                let env = self.workspace.env.clone();
                let content = match crate::net::cancellable(&self.cancel, move || {
                    fetch_as_markdown(&u, &env)
                }) {
                    Ok(c) => c,
                    Err(e) => {
                        return (ToolOutput::error(format!("Failed to fetch URL: {e}")), None);
                    }
                };
                if content.len() > LARGE_CONTENT {
                    match save_page(&dir.0, &content) {
                        Ok(p) => format!(
                            "{prompt}\n\nThe web page from {url} has been saved to: {}\n\nUse the view and grep tools to analyze this file and extract the requested information.",
                            p.display()
                        ),
                        Err(e) => return (ToolOutput::error(e), None),
                    }
                } else {
                    format!(
                        "{prompt}\n\nWeb page URL: {url}\n\n<webpage_content>\n{content}\n</webpage_content>"
                    )
                }
            }
            None => format!(
                "{prompt}\n\nUse the web_search tool to find relevant information. Break down the \
                 question into smaller, focused searches if needed. After searching, use \
                 web_fetch to get detailed content from the most relevant results."
            ),
        };
        let path = dir.0.clone();
        self.run_child(
            assistant_id,
            tool_call_id,
            "Fetch Analysis",
            &full_prompt,
            sink,
            |a, id| a.fetch_child(id, &path),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_asks_to_fetch_and_checks_its_url() {
        let d = tempfile::tempdir().unwrap();
        let fx = crate::tools::testutil::Fixture::new();
        let ctx = ToolCtx {
            cwd: d.path(),
            project_root: d.path(),
            ..fx.ctx()
        };
        let req = AgenticFetch
            .permission(&json!({"prompt": "p", "url": "https://e.x"}), &ctx)
            .unwrap()
            .unwrap();
        assert_eq!(req.action, "fetch");
        assert_eq!(
            req.description,
            "Fetch and analyze content from URL: https://e.x (task: p)"
        );
        let req = AgenticFetch
            .permission(&json!({"prompt": "p"}), &ctx)
            .unwrap()
            .unwrap();
        assert_eq!(
            req.description,
            "Search the web and analyze results (task: p)"
        );
        assert!(
            AgenticFetch
                .permission(&json!({"prompt": "p", "url": "file:///etc"}), &ctx)
                .is_err()
        );
        assert!(AgenticFetch.permission(&json!({}), &ctx).is_err());
    }

    #[test]
    fn the_working_directory_goes_with_the_sub_agent() {
        let parent = tempfile::tempdir().unwrap();
        let path = {
            let d = TempDir::new(parent.path()).unwrap();
            std::fs::write(d.0.join("page-0.md"), "x").unwrap();
            assert!(system_prompt(&d.0).contains(&format!("Working directory: {}", d.0.display())));
            d.0.clone()
        };
        assert!(!path.exists());
    }
}

/// Every file tool of every agent kind goes through the one confinement check
/// (`tools::confine`): each path parameter of each tool, given a path outside, is refused in
/// the confined agent and asked for (or refused) in the others — never read or written as is.
#[cfg(test)]
mod confinement {
    use super::super::subagent::{custom_tools, main_agent_tools, task_tools};
    use super::fetch_tools;
    use crate::tools::confine::Bounds;
    use crate::tools::{Tool, ToolCtx};
    use serde_json::{Map, Value, json};

    /// An agent kind: its name, tools, bounds and project.
    type Kind<'a> = (&'a str, Vec<Box<dyn Tool>>, Bounds, &'a std::path::Path);

    /// The tool's input with every required string filled and `param` set to `path`.
    fn input_with(tool: &dyn Tool, param: &str, path: &str) -> Value {
        let schema = tool.schema();
        let mut m = Map::new();
        for r in schema["required"].as_array().into_iter().flatten() {
            let name = r.as_str().unwrap_or_default();
            let v = match schema["properties"][name]["type"].as_str() {
                Some("array") => json!([]),
                Some("integer") | Some("number") => json!(1),
                _ => json!("x"),
            };
            m.insert(name.into(), v);
        }
        m.insert(param.into(), json!(path));
        Value::Object(m)
    }

    /// The parameters of `tool` that name a file or directory.
    fn path_params(tool: &dyn Tool) -> Vec<String> {
        let schema = tool.schema();
        schema["properties"]
            .as_object()
            .map(|p| {
                p.keys()
                    .filter(|k| k.contains("path") || k.contains("file") || k.ends_with("dir"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn every_file_tool_of_every_agent_refuses_or_asks_for_an_outside_path() {
        let fx = crate::tools::testutil::Fixture::new();
        let project = fx.path("project");
        let jail = fx.path("jail");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&jail).unwrap();
        let outside = fx.write("secret/id_ed25519", "KEY");
        let outside = outside.display().to_string();
        let main = main_agent_tools(&[], None);
        // A custom agent (crush(1) AGENTS) that names every tool there is.
        let every: Vec<String> = main.iter().map(|t| t.name().to_string()).collect();
        let kinds: [Kind; 4] = [
            ("fetch", fetch_tools(), Bounds::jailed(&jail), &jail),
            ("task", task_tools(&main, None), Bounds::default(), &project),
            (
                "custom",
                custom_tools(&main, None, Some(&every)),
                Bounds::default(),
                &project,
            ),
            (
                "main",
                main_agent_tools(&[], None),
                Bounds::default(),
                &project,
            ),
        ];
        let mut checked = 0;
        for (kind, tools, bounds, root) in &kinds {
            let ctx = ToolCtx {
                cwd: root,
                project_root: root,
                bounds,
                ..fx.ctx()
            };
            for t in tools {
                for param in path_params(t.as_ref()) {
                    for raw in [outside.as_str(), "../secret/id_ed25519"] {
                        let input = input_with(t.as_ref(), &param, raw);
                        let what = format!("{kind}: {} {param}={raw}", t.name());
                        checked += 1;
                        match (t.permission(&input, &ctx), *kind) {
                            (Err(e), "fetch") => {
                                assert!(
                                    e.to_string().contains("outside this agent's directory"),
                                    "{what}: {e}"
                                )
                            }
                            (Ok(_), "fetch") => {
                                let out = t.run(&input, &ctx);
                                let e = out.map(|o| o.content).unwrap_err().to_string();
                                assert!(
                                    e.contains("outside this agent's directory"),
                                    "{what}: {e}"
                                );
                            }
                            (Err(_), _) => {}
                            (Ok(req), _) => assert!(req.is_some(), "{what}: no question"),
                        }
                    }
                }
            }
        }
        assert!(checked >= 30, "only {checked} tool parameters were tried");
    }
}
