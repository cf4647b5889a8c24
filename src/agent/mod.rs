//! The agent loop: one user turn = model calls and tool runs until the model stops.
//!
//! Each finished step (assistant message, its tool results and its usage row) is committed to the
//! store in one transaction before the next model call, so a killed process leaves a session that
//! reloads. The loop renders nothing: it reports `AgentEvent`s to a `Sink`.

pub(crate) mod budget;
mod build;
mod call;
mod error;
mod fetch_agent;
mod info;
pub(crate) mod permissions;
pub(crate) mod plan;
pub(crate) mod prompt;
pub(crate) mod session_config;
pub(crate) mod subagent;
pub(crate) mod summarize;
pub(crate) mod title;
mod transcript;
mod turn;

use crate::config::ResolvedModel;
use crate::hooks::{self, HookConfig, Outcome};
use crate::llm::{LlmError, Message, Part, RetryPolicy, Usage};
use crate::store::Store;
use crate::time::unix_now as now;
use crate::tools::confine::Bounds;
use crate::tools::{PermissionRequest, Tool};
use build::with_listing;
pub(crate) use build::{Setup, prompt_of_session};
pub(crate) use error::AgentError;
use permissions::Permissions;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use turn::CallEnd;

/// What the loop reports while it works.
#[derive(Debug, Clone)]
pub(crate) enum AgentEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// The current model call failed and is retried: text streamed since the call began is void.
    Retry {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
    ToolCall {
        id: String,
        name: String,
        input: Value,
        /// What the tool says of the call (kind, title, files), for editors.
        view: crate::tools::CallView,
    },
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
        /// The unified diff of the file the call changed (edit, multiedit, write).
        diff: Option<String>,
    },
    PermissionRefused {
        request: PermissionRequest,
        hint: String,
    },
    Usage {
        usage: Option<Usage>,
        /// The estimate when the server reported no usage (never priced).
        estimate: Option<Usage>,
        cost: Option<f64>,
        model: String,
    },
    /// A step was committed to the store.
    StepCommitted,
    /// The model is writing a call of this tool (progress only).
    ToolPending(String),
    /// The session's task list changed (the `todos` tool).
    Todos(Vec<crate::tools::todos::Todo>),
    /// A diagnostic for stderr or the log (rejected usage, auto-summarize, a sub-agent's retry),
    /// never part of the answer.
    Notice(String),
    /// The prompt passed the UserPromptSubmit hooks (as they left it) and goes to the model.
    /// Nothing derived from a prompt (a title) may leave the process before this.
    PromptAccepted(String),
    /// A hook ran (one event per hook, in config order, after the batch finished).
    Hook {
        report: hooks::HookReport,
        /// The tool call a tool event was about.
        tool_call_id: Option<String>,
    },
}

/// The line that tells the user a model call is retried (its reason shown safely).
pub(crate) fn retry_line(attempt: u32, wait: Duration, reason: &str) -> String {
    format!(
        "model call failed ({}); retry {attempt} in {:.1} s",
        crate::visible::line(reason),
        wait.as_secs_f64()
    )
}

/// The user's answer to a permission question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Yes,
    Always,
    No,
}

pub(crate) trait Sink {
    fn event(&mut self, ev: AgentEvent);
    /// Asks the user; None when nobody can be asked (non-interactive run).
    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer>;
    /// Whether `ask` can reach anyone (a non-interactive run cannot).
    fn can_ask(&self) -> bool {
        true
    }
    /// The budget would stop the turn before a model call (`stop` says why): whether the user
    /// lets it go on, past the limit for the rest of the turn or calling an unpriced model for
    /// the session. Only the REPL asks; nobody else can.
    fn go_over_budget(&mut self, _stop: &budget::BudgetStop) -> bool {
        false
    }
    /// Puts the `question` tool's questions to the user: their answers, or None when the user
    /// canceled (or nobody can answer).
    fn questions(
        &mut self,
        _questions: &[crate::tools::question::Question],
    ) -> Option<Vec<crate::tools::question::Answer>> {
        None
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    /// The model finished.
    EndTurn,
    /// The model hit its output limit.
    MaxTokens,
    /// The provider's content filter stopped the answer (what was written is kept, but is not
    /// the whole answer).
    ContentFilter,
    /// The call finished with no text and no tool call.
    Empty,
    MaxSteps(usize),
    /// The same tool call with the same result kept repeating.
    Loop,
    /// A permission was refused (or could not be asked for).
    PermissionRefused,
    /// A UserPromptSubmit hook denied the prompt: nothing reached the model. The reason.
    HookDenied(String),
    /// A hook halted the turn (before the model was called, or after a blocked tool call).
    HookHalted(String),
    Canceled,
    Error(LlmError),
    /// The budget stopped the turn before a model call (crush(1) USAGE AND COST, Budget).
    Budget(budget::BudgetStop),
}

impl Stop {
    /// The reason as `--json` and the sub-agent's metadata name it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Stop::EndTurn => "end_turn",
            Stop::MaxTokens => "max_tokens",
            Stop::ContentFilter | Stop::Error(LlmError::Blocked(_)) => "content_filter",
            Stop::Empty => "empty",
            Stop::MaxSteps(_) => "max_steps",
            Stop::Loop => "loop",
            Stop::PermissionRefused => "permission_refused",
            Stop::HookDenied(_) => "hook_denied",
            Stop::HookHalted(_) => "hook_halted",
            Stop::Canceled => "canceled",
            Stop::Error(_) => "error",
            Stop::Budget(_) => "budget",
        }
    }

    /// What the user is told of a turn that looked finished but is not a whole answer
    /// (crush(1) EXIT STATUS).
    pub(crate) fn problem(&self) -> Option<&'static str> {
        match self {
            Stop::ContentFilter => Some(
                "the provider's content filter stopped the answer: what was shown is incomplete",
            ),
            Stop::Empty => Some("the model returned an empty answer (no text and no tool call)"),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TurnResult {
    pub stop: Stop,
    /// The text of the last assistant message of the turn.
    pub final_text: String,
    pub steps: usize,
}

/// One agent working in one session: what it runs with, in four groups.
pub(crate) struct Agent {
    pub model: ResolvedModel,
    pub system: String,
    /// The session's configuration: session-only commands from the bash tool change its runtime
    /// layer (None: they are reported as ignored, as in a sub-agent).
    pub config: Option<crate::config::Loaded>,
    pub cancel: Arc<AtomicBool>,
    pub session: SessionState,
    pub workspace: Workspace,
    pub toolkit: Toolkit,
    pub policy: Policy,
}

/// The session the agent works in and what travels with its prompts.
pub(crate) struct SessionState {
    /// The project's store, shared with whoever opened it (the REPL, a run, an editor session).
    pub store: Rc<Store>,
    pub id: String,
    /// This agent runs the `agent` tool's task for this session, in a child session (hooks
    /// report it).
    pub parent: Option<String>,
    /// Context waiting to travel with the next prompt (from SessionStart hooks).
    pub pending_context: Vec<String>,
    /// The session as a Claude Code transcript, for hooks in Claude Code's shape (None: no data
    /// directory is known).
    pub transcript: Option<transcript::Transcript>,
    /// The parent's transcript file, in a sub-agent (Claude Code's `transcript_path` there).
    pub parent_transcript: Option<PathBuf>,
    /// The current prompt's id (Claude Code's `prompt_id`; empty before the first turn).
    pub prompt_id: String,
    /// A file of `export` lines SessionStart hooks wrote (`CLAUDE_ENV_FILE`), which the bash
    /// tool runs before each command.
    pub env_file: Option<PathBuf>,
    /// What a new session is titled from instead of its next prompt, unless a hook rewrites
    /// that prompt: `crush run` titles from its arguments, not from text piped in before them.
    pub title_from: Option<String>,
    /// The estimated tokens of the system prompt and tools (0: not yet worked out): summarizing
    /// cannot shrink them, so the trigger leaves them out
    /// ([`summarize::history_worth_summarizing`]).
    pub fixed_estimate: std::cell::Cell<u64>,
}

/// Where the tools work and what they may touch.
#[derive(Clone)]
pub(crate) struct Workspace {
    pub cwd: PathBuf,
    pub project_root: PathBuf,
    /// Where the file tools may go and what they may not write without asking
    /// (`tools::confine`).
    pub bounds: Arc<Bounds>,
    /// The editor's files when crush runs inside one (None: the disk).
    pub files: Option<Arc<dyn crate::tools::Files>>,
    /// The OS sandbox the bash tool's commands run in (crush(1) SECURITY, sandbox).
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// Variables the bash tool keeps although their names look secret (`options.shell_env_allow`).
    pub shell_env_allow: Vec<String>,
    /// The session's variables (`Loaded::env`).
    pub env: crate::env::Overlay,
    /// (name, value) of the providers' API keys: masked in every tool output (crush(1) SECURITY).
    pub secrets: Arc<Vec<(String, String)>>,
}

/// What the agent offers the model: its tools and what they draw on.
pub(crate) struct Toolkit {
    pub tools: Vec<Box<dyn Tool>>,
    /// The MCP servers' tools (None: no MCP at all, as in a sub-agent).
    pub mcp: Option<McpTools>,
    /// The language servers (None: none is configured or detected for the project).
    pub lsp: Option<crate::tools::lsp::Lsp>,
    /// The skills' files, which the view tool reads without asking.
    pub skill_files: Arc<crate::tools::SkillFiles>,
    /// The skills part of the system prompt (`prompt::skills_section`; empty in a sub-agent).
    pub skills_prompt: String,
    /// The custom sub-agents the `agent` tool's `subagent_type` selects (crush(1) AGENTS;
    /// empty in a sub-agent).
    pub custom_agents: Arc<Vec<crate::agents::AgentDef>>,
    /// The skills as `crush_info` lists them.
    pub skills_info: Arc<Vec<crate::skills::InfoEntry>>,
}

/// What the agent may do, how long it goes on, and who watches it.
#[derive(Clone)]
pub(crate) struct Policy {
    pub permissions: Permissions,
    pub retry: RetryPolicy,
    pub max_steps: usize,
    /// How many times in a row Stop hooks may make the agent go on (`options.max_stop_blocks`).
    pub max_stop_blocks: usize,
    /// Summarize the session when its context nears the model's window
    /// (`options.disable_auto_summarize` turns it off).
    pub auto_summarize: bool,
    pub hooks: HookConfig,
    /// The spending limits (None: none; a sub-agent shares its parent's).
    pub budget: Option<budget::Budget>,
    /// Plan mode (crush(1) PLAN MODE): only the read-only tools, and the planning prompt.
    pub plan_mode: bool,
}

/// The tools of the session's MCP servers as the agent offers them: rebuilt before a model call
/// when the servers changed (one that was still starting joins at the next step).
pub(crate) struct McpTools {
    pub source: crate::tools::mcp::Mcp,
    tools: Vec<Box<dyn Tool>>,
    /// The manager generation `tools` was built at; None: rebuild.
    seen: Option<u64>,
    /// How long the first model call waits for servers still starting (None: until each has
    /// started or failed, bounded by its timeout).
    first_wait: Option<Duration>,
    waited: bool,
    /// Servers from outside the configuration (an editor's, crush(1) ACP): they join the
    /// configured ones, replacing any of the same name, and stay when the configuration changes.
    extra: Vec<crate::mcp::ServerSpec>,
}

impl McpTools {
    pub(crate) fn new(source: crate::tools::mcp::Mcp, first_wait: Option<Duration>) -> McpTools {
        McpTools {
            source,
            tools: Vec::new(),
            seen: None,
            first_wait,
            waited: false,
            extra: Vec::new(),
        }
    }

    /// The manager of the servers.
    pub(crate) fn manager(&self) -> &crate::mcp::Manager {
        self.source.manager()
    }

    /// Adds servers from outside the configuration `cfg` (see `extra`); they start at once.
    /// Returns the configuration's warnings.
    pub(crate) fn add_servers(
        &mut self,
        extra: Vec<crate::mcp::ServerSpec>,
        cfg: &crate::config::Loaded,
    ) -> Vec<String> {
        self.extra = extra;
        self.reconfigure(cfg)
    }

    /// The servers of `cfg` start (new or changed ones), stop (removed ones); the tools follow
    /// at the next step. Returns the configuration's warnings.
    pub(crate) fn reconfigure(&mut self, cfg: &crate::config::Loaded) -> Vec<String> {
        let (mut specs, warnings) = crate::config::mcp::servers(cfg);
        specs.retain(|s| !self.extra.iter().any(|e| e.name == s.name));
        specs.extend(self.extra.iter().cloned());
        self.manager().set_servers(specs);
        self.seen = None;
        // The next model call waits for new servers as the first one did.
        self.waited = false;
        warnings
    }
}

/// Messages a provider can be sent: parts it understands (attachments as text). The request
/// builders pair tool calls
/// with their results (`llm::history`), answering interrupted calls.
pub(crate) fn history_for_model(stored: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for m in stored {
        let parts: Vec<Part> = crate::llm::attachments_as_text(m.parts)
            .into_iter()
            .filter(|p| match p {
                Part::Finish { .. } => false,
                Part::Text { text } => !text.trim().is_empty(),
                _ => true,
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        out.push(Message {
            role: m.role,
            parts,
        });
    }
    out
}

impl Agent {
    /// Before a model call: waits once for servers still starting, reports their warnings, and
    /// rebuilds the MCP tools when the servers changed.
    fn sync_mcp(&mut self, sink: &mut dyn Sink) {
        let disabled = self
            .config
            .as_ref()
            .map(|c| c.config.options.disabled_tools.clone())
            .unwrap_or_default();
        let Some(m) = self.toolkit.mcp.as_mut() else {
            return;
        };
        if !m.waited {
            m.waited = true;
            if m.first_wait != Some(Duration::ZERO) {
                m.manager().wait_ready(m.first_wait);
            }
        }
        for w in m.manager().take_warnings() {
            sink.event(AgentEvent::Notice(w));
        }
        let g = m.manager().generation();
        if m.seen != Some(g) {
            m.tools = m
                .source
                .tools()
                .into_iter()
                .filter(|t| !disabled.iter().any(|d| d == t.name()))
                .collect();
            m.seen = Some(g);
        }
    }

    /// Every tool offered: the built-in ones, then the MCP ones.
    fn all_tools(&self) -> impl Iterator<Item = &dyn Tool> {
        self.toolkit
            .tools
            .iter()
            .chain(self.toolkit.mcp.iter().flat_map(|m| m.tools.iter()))
            .map(|t| t.as_ref())
    }

    /// Claude Code's names for the tool `name` as crush offers it, where no session's tools are
    /// at hand (`crush hooks list --tool`, `crush hooks test`): a built-in tool's (the LSP ones
    /// and the fetch sub-agent's included), else an MCP tool's.
    pub(crate) fn claude_names_of(name: &str) -> Vec<String> {
        let known = subagent::main_agent_tools(&[], None)
            .into_iter()
            .chain(crate::tools::lsp::Lsp::described())
            .chain(fetch_agent::fetch_tools())
            .find(|t| t.name() == name);
        match known {
            Some(t) => t.claude_names(),
            None => crate::tools::mcp::claude_name_of(name)
                .into_iter()
                .collect(),
        }
    }

    /// Every tool the session has, by name (the editor's replay of a stored session asks them).
    pub(crate) fn tool_list(&self) -> Vec<&dyn Tool> {
        self.all_tools().collect()
    }

    /// What the tool `name` says of a call with `input` (an unknown tool: its name).
    fn call_view(&self, name: &str, input: &Value) -> crate::tools::CallView {
        match self.all_tools().find(|t| t.name() == name) {
            Some(t) => crate::tools::CallView::of(t, input, &self.workspace.cwd),
            None => crate::tools::CallView::unknown(name),
        }
    }

    /// The system prompt of a model call: the skills and the MCP servers' instructions
    /// added, as Go Crush adds them.
    fn system_with_mcp(&self) -> String {
        let mut system = self.system.clone();
        if self.policy.plan_mode {
            system.push_str(plan::PLAN_PROMPT);
        }
        let system = with_listing(&system, &self.toolkit.skills_prompt);
        let Some(m) = &self.toolkit.mcp else {
            return system;
        };
        let instructions = m.manager().instructions();
        if instructions.is_empty() {
            return system;
        }
        let text: Vec<String> = instructions.into_iter().map(|(_, t)| t).collect();
        format!(
            "{system}\n\n<mcp-instructions>\n{}\n</mcp-instructions>",
            text.join("\n\n")
        )
    }

    /// Whether this agent is a sub-agent (runs the `agent` tool's task).
    pub(crate) fn is_sub_agent(&self) -> bool {
        self.session.parent.is_some()
    }

    /// The transcript file of this agent's session, when hooks in Claude Code's shape are
    /// configured (they are sent its path).
    fn transcript_path(&self) -> Option<std::path::PathBuf> {
        let t = self.session.transcript.as_ref()?;
        (self.policy.hooks.has_claude_hooks() && !self.session.id.is_empty())
            .then(|| t.path(&self.session.id))
    }

    /// Brings the transcript up to date (after a step, before hooks).
    fn sync_transcript(&self) {
        if let Some(t) = &self.session.transcript
            && self.policy.hooks.has_claude_hooks()
        {
            t.sync(
                &self.session.store,
                &self.session.id,
                &self.workspace.cwd,
                &self.tool_list(),
            );
        }
    }

    /// A firing of `event` by this agent: its session, directories and sub-agent, and the
    /// fields Claude Code sends with every event (`transcript_path`, `permission_mode`,
    /// `prompt_id`).
    fn hook_request(&self, event: hooks::Event) -> hooks::Request<'_> {
        let mut req = hooks::Request::new(
            event,
            &self.session.id,
            &self.workspace.cwd,
            &self.workspace.project_root,
        );
        req.cancel = Some(self.cancel.clone());
        req.sub_agent = self.session.parent.as_deref().map(|p| hooks::SubAgent {
            id: &self.session.id,
            parent_session_id: p,
        });
        let transcript = match &self.session.parent_transcript {
            Some(p) => Some(p.clone()),
            None => self.transcript_path(),
        };
        if let Some(p) = transcript {
            req.claude_fields
                .insert("transcript_path".into(), json!(p.display().to_string()));
        }
        req.claude_fields.insert(
            "permission_mode".into(),
            json!(self.policy.permissions.mode()),
        );
        if !self.session.prompt_id.is_empty() {
            req.claude_fields
                .insert("prompt_id".into(), json!(self.session.prompt_id));
        }
        req
    }

    /// Fires a hook event and reports each hook that ran, and the messages hooks left for the
    /// user (`systemMessage`). In a sub-agent only its tool calls, its stop and its questions
    /// fire hooks.
    fn fire_request(&self, req: &hooks::Request, sink: &mut dyn Sink) -> Outcome {
        use hooks::Event as E;
        if self.policy.hooks.is_empty()
            || (self.is_sub_agent()
                && !matches!(
                    req.event,
                    E::PreToolUse | E::PostToolUse | E::SubagentStop | E::Notification
                ))
        {
            return Outcome::none(req.event);
        }
        self.sync_transcript();
        let out = self.policy.hooks.run(req);
        for r in &out.reports {
            sink.event(AgentEvent::Hook {
                report: r.clone(),
                tool_call_id: req.tool.map(|t| t.id.to_string()),
            });
            if let Some(w) = r.could_not_run_warning() {
                crate::log::warn(&w);
                sink.event(AgentEvent::Notice(w));
            }
        }
        for (r, msg) in out
            .reports
            .iter()
            .filter(|r| !r.system_message.is_empty())
            .map(|r| (r, &r.system_message))
        {
            sink.event(AgentEvent::Notice(format!(
                "{} hook {}: {msg}",
                r.event, r.name
            )));
        }
        out
    }

    /// Fires a hook event with `tool` and `fields`.
    fn fire(
        &self,
        event: hooks::Event,
        tool: Option<hooks::ToolCall>,
        fields: Map<String, Value>,
        sink: &mut dyn Sink,
    ) -> Outcome {
        let mut req = self.hook_request(event);
        req.tool = tool;
        req.fields = fields;
        self.fire_request(&req, sink)
    }

    /// Fires SessionStart (`source`: "startup" for a new session, "resume" for a continued one).
    /// The hooks' context travels with the next prompt; `export` lines they write to
    /// `CLAUDE_ENV_FILE` reach the bash tool's commands.
    pub(crate) fn session_start(&mut self, source: &str, sink: &mut dyn Sink) {
        let mut req = self.hook_request(hooks::Event::SessionStart);
        req.fields.insert("source".into(), json!(source));
        req.fields
            .insert("model".into(), json!(self.model.model.id));
        let env_file = self.new_env_file();
        if let Some(f) = &env_file {
            req.extra_env
                .push(("CLAUDE_ENV_FILE".into(), f.display().to_string()));
        }
        let out = self.fire_request(&req, sink);
        let text = out.context_text(&self.workspace.cwd);
        if !text.is_empty() {
            self.session.pending_context.push(text);
        }
        self.session.env_file =
            env_file.filter(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 0));
    }

    /// Fires SessionEnd (`reason`: Claude Code's `clear`, `resume`, `prompt_input_exit` or
    /// `other`). Hooks only observe it.
    pub(crate) fn session_end(&mut self, reason: &str, sink: &mut dyn Sink) {
        let mut fields = Map::new();
        fields.insert("reason".into(), json!(reason));
        self.fire(hooks::Event::SessionEnd, None, fields, sink);
    }

    /// An empty `CLAUDE_ENV_FILE` for this session's SessionStart hooks, in the data directory
    /// (None when no SessionStart hook is configured or the file cannot be made).
    fn new_env_file(&self) -> Option<std::path::PathBuf> {
        if self.session.id.is_empty()
            || self
                .policy
                .hooks
                .for_event(hooks::Event::SessionStart)
                .next()
                .is_none()
        {
            return None;
        }
        let dir = self.config.as_ref()?.data_dir.join("session-env");
        let path = dir.join(format!("{}.sh", self.session.id));
        let made = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, ""));
        match made {
            Ok(()) => Some(path),
            Err(e) => {
                crate::log::warn(&format!("cannot create {}: {e}", path.display()));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;

    /// Every tool a session may offer: the built-in ones, the LSP ones, the sub-agent tools
    /// (`agent`, `agentic_fetch` and the fetch sub-agent's own), `crush_info`, and the MCP
    /// ones (the resource tools and a server tool's wrapper).
    fn every_tool() -> Vec<Box<dyn Tool>> {
        let mut all = subagent::main_agent_tools(&[], None);
        all.extend(crate::tools::lsp::Lsp::described());
        all.extend(fetch_agent::fetch_tools());
        all.extend(crate::tools::mcp::described(crate::mcp::Tool::sample(
            "fs", "read",
        )));
        all
    }

    #[test]
    fn every_tool_describes_itself() {
        use crate::tools::ToolKind::*;
        // name, kind, read-only: a new tool fails here until it is described.
        let expected = [
            ("agent", Think, true),
            ("agentic_fetch", Fetch, false),
            ("bash", Execute, false),
            ("crush_info", Read, true),
            ("crush_logs", Read, true),
            ("download", Fetch, false),
            ("edit", Edit, false),
            ("fetch", Fetch, false),
            ("glob", Search, true),
            ("grep", Search, true),
            ("job_kill", Execute, false),
            ("job_output", Read, true),
            ("list_mcp_resources", Search, false),
            ("ls", Search, true),
            ("lsp_call_hierarchy", Search, true),
            ("lsp_definition", Search, true),
            ("lsp_diagnostics", Read, true),
            ("lsp_references", Search, true),
            ("lsp_rename", Edit, false),
            ("lsp_replace_symbol", Edit, false),
            ("lsp_restart", Execute, false),
            ("lsp_symbols", Search, true),
            ("mcp_fs_read", Other, false),
            ("multiedit", Edit, false),
            ("question", Other, true),
            ("read_mcp_resource", Read, false),
            ("sourcegraph", Search, false),
            ("todos", Think, true),
            ("view", Read, true),
            ("web_fetch", Fetch, false),
            ("web_search", Search, false),
            ("write", Edit, false),
        ];
        let tools = every_tool();
        let mut got: Vec<(String, crate::tools::ToolKind, bool)> = tools
            .iter()
            .map(|t| (t.name().to_string(), t.kind(), t.read_only()))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        // The fetch sub-agent has some of the main agent's tools.
        got.dedup();
        let want: Vec<(String, crate::tools::ToolKind, bool)> = expected
            .iter()
            .map(|(n, k, r)| (n.to_string(), *k, *r))
            .collect();
        assert_eq!(got, want);
        let cwd = std::path::Path::new("/p");
        for t in &tools {
            let n = t.name();
            assert!(!t.description().trim().is_empty(), "{n}: no description");
            let schema = t.schema();
            assert_eq!(schema["type"], "object", "{n}: schema");
            assert!(schema["properties"].is_object(), "{n}: schema properties");
            assert!(!t.title(&json!({}), cwd).is_empty(), "{n}: title");
            // Writing, running and the network are never read-only, so plan mode cannot offer
            // them.
            if matches!(t.kind(), Edit | Execute | Fetch) {
                assert!(!t.read_only(), "{n} is read-only but a {:?}", t.kind());
            }
            // The sub-agent only reads (fetching a page is reading).
            if t.for_sub_agents() {
                assert!(t.read_only() || t.kind() == Fetch, "{n}");
            }
        }
        let claude = |n: &str| {
            let t = tools.iter().find(|t| t.name() == n).unwrap();
            t.claude_names()
        };
        assert_eq!(claude("bash"), ["Bash"]);
        assert_eq!(claude("agent"), ["Agent", "Task"]);
        assert_eq!(claude("mcp_fs_read"), ["mcp__fs__read"]);
        assert!(claude("download").is_empty());
    }

    #[test]
    fn finish_parts_and_blank_texts_are_dropped_and_interrupted_calls_answered() {
        let hist = vec![
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text { text: "  ".into() },
                    Part::ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: "{}".into(),
                        provider_executed: false,
                        finished: true,
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                parts: vec![Part::Finish {
                    reason: "error".into(),
                    time: 0,
                    message: None,
                    details: None,
                }],
            },
        ];
        let h = history_for_model(hist);
        assert_eq!(h.len(), 2, "finish-only message dropped: {h:?}");
        // What the request builders send: the interrupted call answered.
        let h = crate::llm::history::pair_tool_results(&h);
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!(h[1].parts.len(), 1, "blank text dropped");
        assert_eq!(h[2].role, Role::Tool);
        assert!(
            matches!(&h[2].parts[0], Part::ToolResult { tool_call_id, is_error: true, .. } if tool_call_id == "c1")
        );
    }
}
