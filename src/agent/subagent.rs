//! The `agent` tool: a read-only sub-agent (glob, grep, ls, view, fetch, and the language-server
//! lookups lsp_definition, lsp_symbols and lsp_call_hierarchy when the parent has them) that
//! works on a task in a child session and returns its final text as the tool result.
//!
//! - The child session's id follows Go Crush: `<assistant message id>$$<tool call id>`, with
//!   `parent_session_id` set, so Crush (and any reader of its schema) links the tool call to the
//!   session. The parent's assistant message is committed before its tools run, so the id
//!   exists; if that id is taken (a provider repeating a tool call id), a UUID is used instead.
//! - Each of the child's model calls writes its own usage row against the child session; the
//!   store adds it to the parent's totals in the same transaction, so the parent includes the
//!   child exactly once (Go Crush instead adds `child.cost` to the parent afterwards,
//!   read-modify-write, and leaves readers to skip children to avoid counting twice).
//! - The child has the parent's model, permissions and cancel flag. Its read-only tools need no
//!   permission inside the project; anything else (reading outside it, fetching) is asked
//!   through the parent's sink, so a non-interactive run refuses instead of waiting.
//! - Its text is not part of the parent's answer: only usage, diagnostics and permission
//!   refusals reach the parent's sink.

use super::{Agent, AgentError, AgentEvent, Answer, SessionState, Sink, Stop, Toolkit, TurnResult};
use crate::tools::common::req_str;
use crate::tools::lsp::Lsp;
use crate::tools::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tool's name, as Crush exposes it.
pub(crate) const TOOL_NAME: &str = "agent";

/// The names of the tools the built-in sub-agent may use (`Tool::for_sub_agents`), if the
/// parent has them: what an untrusted project's agent file may name.
pub(crate) fn sub_agent_tool_names() -> Vec<String> {
    let mut names: Vec<String> = crate::tools::builtin()
        .into_iter()
        .chain(Lsp::described())
        .filter(|t| t.for_sub_agents())
        .map(|t| t.name().to_string())
        .collect();
    names.sort_unstable();
    names
}

/// What the model sees of the `agent` tool. The agent loop runs it (it needs the store and the
/// model, which tools do not get); `run` is never reached through the loop.
pub(crate) struct AgentTool;

impl Tool for AgentTool {
    fn name(&self) -> &'static str {
        TOOL_NAME
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Think
    }

    /// Its agent gets only tools the calling agent has (plan mode: read-only ones).
    fn read_only(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("Agent".into())
    }

    /// `Task` is what Claude Code called it before.
    fn claude_names(&self) -> Vec<String> {
        vec!["Agent".into(), "Task".into()]
    }

    fn title(&self, input: &Value, _cwd: &std::path::Path) -> String {
        let prompt = crate::tools::common::arg(input, "prompt").unwrap_or("");
        format!(
            "Sub-agent: {}",
            crate::tools::common::first_line(prompt, 80)
        )
        .trim_end()
        .to_string()
    }

    fn run_mode(&self) -> crate::tools::RunMode {
        crate::tools::RunMode::Loop(crate::tools::LoopTool::SubAgent)
    }

    fn description(&self) -> String {
        "Launch a sub-agent that works on a task with read-only tools (glob, grep, ls, view, \
         fetch, and the lsp_definition, lsp_symbols and lsp_call_hierarchy lookups when you have \
         them) and returns its final answer. Use it to search a codebase or gather information \
         when you are not sure where to look: it keeps that search out of your context. The \
         sub-agent cannot change files or run commands, and it sees nothing of this \
         conversation: give it a self-contained task, and say exactly what it should report \
         back. Several independent searches may be launched in one step."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "description": "The task for the sub-agent, self-contained"
                },
                "subagent_type": {
                    "type": "string",
                    "description": "The name of an agent listed in <available_agents> of the system prompt; omit it for the built-in read-only agent"
                }
            },
            "required": ["prompt"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "prompt")?;
        Ok(None)
    }

    fn run(&self, _input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        Err("the agent tool is not available here".into())
    }
}

/// `tools` with the `agent` tool added, kept sorted by name (unless it is disabled).
pub(crate) fn with_agent_tool(
    mut tools: Vec<Box<dyn Tool>>,
    disabled: &[String],
) -> Vec<Box<dyn Tool>> {
    if !disabled.iter().any(|d| d == TOOL_NAME) && !tools.iter().any(|t| t.name() == TOOL_NAME) {
        tools.push(Box::new(AgentTool));
        tools.sort_by(|a, b| a.name().cmp(b.name()));
    }
    tools
}

/// The built-in tools and, when language servers are configured or detected, the LSP tools,
/// sorted by name.
fn all_builtin(lsp: Option<&Lsp>) -> Vec<Box<dyn Tool>> {
    let mut tools = crate::tools::builtin();
    if let Some(l) = lsp {
        tools.extend(l.tools());
        tools.sort_by(|a, b| a.name().cmp(b.name()));
    }
    tools
}

/// The main agent's tools: the built-in ones (with the LSP ones), `agent` and `agentic_fetch`,
/// sorted, without the disabled ones.
pub(crate) fn main_agent_tools(disabled: &[String], lsp: Option<&Lsp>) -> Vec<Box<dyn Tool>> {
    let mut tools = with_agent_tool(all_builtin(lsp), disabled);
    tools.push(Box::new(super::fetch_agent::AgenticFetch));
    tools.push(Box::new(super::info::CrushInfo));
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    tools
        .into_iter()
        .filter(|t| !disabled.iter().any(|d| d == t.name()))
        .collect()
}

/// The task sub-agent's tools: the read-only ones its parent has.
pub(super) fn task_tools(parent: &[Box<dyn Tool>], lsp: Option<&Lsp>) -> Vec<Box<dyn Tool>> {
    all_builtin(lsp)
        .into_iter()
        .filter(|t| t.for_sub_agents() && parent.iter().any(|p| p.name() == t.name()))
        .collect()
}

/// The system prompt of a sub-agent: the parent's environment and context, another role.
const TASK_INTRO: &str = "You are a sub-agent of crush, an AI coding assistant. Another agent \
gave you a task. Work on it with your read-only tools (glob, grep, ls, view, fetch): you cannot \
change files or run commands. When you are done, answer with a concise, self-contained report \
of what you found — file paths, line numbers, names — because only your final message is \
returned to the other agent.\n";

fn task_system(parent_system: &str) -> String {
    system_as(parent_system, TASK_INTRO)
}

/// The parent's system prompt with `intro` in place of crush's default one (before it when
/// the parent's prompt was replaced).
fn system_as(parent_system: &str, intro: &str) -> String {
    if parent_system.contains(super::prompt::INTRO) {
        parent_system.replacen(super::prompt::INTRO, intro, 1)
    } else {
        format!("{intro}\n{parent_system}")
    }
}

/// The agent files of the configuration's folders (crush(1) AGENTS), those whose model cannot
/// be had under a parent on `active` (None: not checked) moved to the rejected; with the model
/// each alias stands for, by agent name.
pub(crate) fn custom_agents(
    loaded: &crate::config::Loaded,
    active: Option<&crate::config::ResolvedModel>,
) -> (crate::agents::Agents, Vec<(String, String)>) {
    let defaults = sub_agent_tool_names();
    let defaults: Vec<&str> = defaults.iter().map(String::as_str).collect();
    let mut found = crate::agents::for_config(loaded, &defaults);
    let mut models = Vec::new();
    if let Some(active) = active {
        crate::agents::check_models(&mut found, active, loaded);
        for a in &found.agents {
            if let Ok(Some(m)) = crate::agents::resolve_model(&a.model, active, loaded) {
                models.push((a.name.clone(), format!("{}/{}", m.provider.id, m.model.id)));
            }
        }
    }
    (found, models)
}

/// The usable agent files for a main agent on `active`; the others are logged with the reason.
pub(super) fn discover_agents(
    loaded: &crate::config::Loaded,
    active: &crate::config::ResolvedModel,
) -> Vec<crate::agents::AgentDef> {
    let (found, _) = custom_agents(loaded, Some(active));
    for r in &found.rejected {
        crate::log::warn(&format!(
            "{} agent file {} not used: {}",
            r.origin.label(),
            r.path.display(),
            r.reason
        ));
    }
    found.agents
}

/// The `<available_agents>` part of the system prompt: what `subagent_type` may name.
pub(super) fn agents_section(agents: &[crate::agents::AgentDef]) -> String {
    if agents.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n<available_agents>\nThe agent tool's subagent_type may name one of these agents; each line is a name and when to use it.\n",
    );
    for a in agents {
        s.push_str(&format!(
            "- {}: {}\n",
            a.name,
            a.description.replace('\n', " ")
        ));
    }
    s.push_str("</available_agents>");
    s
}

/// The tools of a custom agent: those it names (or the default sub-agent's), and only those the
/// parent has; never `agent` itself.
pub(super) fn custom_tools(
    parent: &[Box<dyn Tool>],
    lsp: Option<&Lsp>,
    named: Option<&[String]>,
) -> Vec<Box<dyn Tool>> {
    all_builtin(lsp)
        .into_iter()
        .filter(|t| {
            let wanted = match named {
                Some(list) => list.iter().any(|n| n == t.name()),
                None => t.for_sub_agents(),
            };
            wanted && t.name() != TOOL_NAME && parent.iter().any(|p| p.name() == t.name())
        })
        .collect()
}

fn short_title(prompt: &str) -> String {
    super::title::from_prompt(prompt, "Sub-agent task")
}

/// Passes to the parent's sink what concerns the user; the sub-agent's own text and tool calls
/// are not the parent's answer.
struct SubSink<'a> {
    parent: &'a mut dyn Sink,
}

impl Sink for SubSink<'_> {
    fn event(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::Usage { .. }
            | AgentEvent::PermissionRefused { .. }
            | AgentEvent::Hook { .. }
            | AgentEvent::Notice(_) => self.parent.event(ev),
            AgentEvent::Retry {
                attempt, reason, ..
            } => self.parent.event(AgentEvent::Notice(format!(
                "sub-agent model call failed ({reason}); retry {attempt}"
            ))),
            AgentEvent::TextDelta(_)
            | AgentEvent::ReasoningDelta(_)
            | AgentEvent::PromptAccepted(_)
            | AgentEvent::ToolCall { .. }
            | AgentEvent::ToolResult { .. }
            | AgentEvent::StepCommitted
            | AgentEvent::ToolPending(_)
            | AgentEvent::Todos(_) => {}
        }
    }
    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer> {
        self.parent.ask(req)
    }
    fn can_ask(&self) -> bool {
        self.parent.can_ask()
    }
}

impl Agent {
    /// The sub-agent for a task in the child session `session_id`: the parent's model,
    /// permissions, limits and cancel flag, its read-only tools, a task prompt.
    pub(super) fn child(&self, session_id: String) -> Agent {
        let session = SessionState {
            store: self.session.store.clone(),
            id: session_id,
            parent: Some(self.session.id.clone()),
            pending_context: Vec::new(),
            transcript: self.session.transcript.as_ref().map(|t| t.for_sub_agent()),
            parent_transcript: self.transcript_path(),
            prompt_id: self.session.prompt_id.clone(),
            env_file: None,
            title_from: None,
            fixed_estimate: Default::default(),
        };
        let toolkit = Toolkit {
            tools: task_tools(&self.toolkit.tools, self.toolkit.lsp.as_ref()),
            // A sub-agent is read-only: MCP tools may change things.
            mcp: None,
            lsp: self.toolkit.lsp.clone(),
            skill_files: self.toolkit.skill_files.clone(),
            // A search needs no skill; the files stay readable if the task names one.
            skills_prompt: String::new(),
            custom_agents: Arc::new(Vec::new()),
            skills_info: self.toolkit.skills_info.clone(),
        };
        Agent {
            model: self.model.clone(),
            system: task_system(&self.system),
            // Session-only configuration comes from the bash tool, which a sub-agent lacks.
            config: None,
            cancel: self.cancel.clone(),
            session,
            // Its reads see the editor's buffers as the parent's do; the same bounds, sandbox
            // and masked secrets hold.
            workspace: self.workspace.clone(),
            toolkit,
            // The parent's permissions, retries and limits. Hooks in Claude Code's shape,
            // guards (`fail_closed`) and hooks that opted in (`include_sub_agents`) see a
            // sub-agent's calls (crush(1) HOOKS); the `agent` call itself is hooked as usual.
            // Its spend is the parent session's: the same budget holds. A planning agent's
            // sub-agent plans too: no fetching.
            policy: self.policy.clone(),
        }
    }

    /// Runs the `agent` tool call `tool_call_id` of the assistant message `assistant_id`: a
    /// sub-agent turn in a child session. Returns the tool result and, when the parent's turn
    /// must stop too (a refused permission, a cancel), why.
    pub(super) fn run_sub_agent(
        &self,
        assistant_id: &str,
        tool_call_id: &str,
        input: &Value,
        sink: &mut dyn Sink,
    ) -> (ToolOutput, Option<Stop>) {
        let prompt = match req_str(input, "prompt") {
            Ok(p) => p,
            Err(e) => return (ToolOutput::error(e), None),
        };
        let title = short_title(prompt);
        let kind = input.get("subagent_type").and_then(Value::as_str);
        let spec = match self.sub_agent_spec(kind, &crate::agents::ModelChoice::Inherit) {
            Ok(s) => s,
            Err(e) => return (ToolOutput::error(e.to_string()), None),
        };
        self.run_child(assistant_id, tool_call_id, &title, prompt, sink, |a, id| {
            a.make_child(&spec, id)
        })
    }

    /// What a forked skill's sub-agent runs as (its `agent` and `model`).
    pub(crate) fn fork_spec(
        &self,
        fork: &crate::skills::fork::Fork,
    ) -> Result<ChildSpec, SubAgentError> {
        self.sub_agent_spec(fork.agent.as_deref(), &fork.model)
    }

    /// What a sub-agent of `kind` (None, or a name of Claude Code's built-in agents: crush's
    /// built-in one; else a custom agent's name) on `model` runs as. `model` Inherit keeps the
    /// custom agent's own `model`, else the parent's.
    pub(crate) fn sub_agent_spec(
        &self,
        kind: Option<&str>,
        model: &crate::agents::ModelChoice,
    ) -> Result<ChildSpec, SubAgentError> {
        let def = match kind.filter(|k| !crate::skills::fork::is_builtin_agent(k)) {
            None => None,
            Some(kind) => Some(
                self.toolkit
                    .custom_agents
                    .iter()
                    .find(|a| a.name == kind)
                    .cloned()
                    .ok_or_else(|| SubAgentError::NoAgent {
                        name: kind.to_string(),
                        known: self
                            .toolkit
                            .custom_agents
                            .iter()
                            .map(|a| a.name.clone())
                            .collect(),
                    })?,
            ),
        };
        let choice = match (model, &def) {
            (crate::agents::ModelChoice::Inherit, Some(d)) => &d.model,
            (m, _) => m,
        };
        let model =
            match self.config.as_ref() {
                Some(loaded) => crate::agents::resolve_model(choice, &self.model, loaded).map_err(
                    |problem| SubAgentError::Model {
                        agent: def.as_ref().map(|d| (d.name.clone(), d.path.clone())),
                        problem,
                    },
                )?,
                None => None,
            };
        Ok(ChildSpec { def, model })
    }

    /// The sub-agent `spec` describes, in the child session `id`.
    fn make_child(&self, spec: &ChildSpec, id: String) -> Agent {
        let mut child = self.child(id);
        if let Some(def) = &spec.def {
            child.toolkit.tools = custom_tools(
                &self.toolkit.tools,
                self.toolkit.lsp.as_ref(),
                def.tools.as_deref(),
            );
            child.system = system_as(&self.system, &def.body);
            // Added to the parent's rules; every other rule, hook and the sandbox hold as for
            // the parent (crush(1) AGENTS).
            child
                .policy
                .permissions
                .allowed_tools
                .extend(def.allowed_tools.iter().cloned());
            // An agent file may name tools that change things: every hook sees its calls, not
            // only those that opted in for the read-only built-in agent.
            for h in &mut child.policy.hooks.hooks {
                h.include_sub_agents = true;
            }
        }
        if let Some(m) = &spec.model {
            child.model = m.clone();
        }
        child
    }

    /// [`run_child_turn`](Self::run_child_turn) as a tool call's result, and the stop the
    /// parent's turn inherits.
    pub(super) fn run_child(
        &self,
        assistant_id: &str,
        tool_call_id: &str,
        title: &str,
        prompt: &str,
        sink: &mut dyn Sink,
        make: impl FnOnce(&Self, String) -> Agent,
    ) -> (ToolOutput, Option<Stop>) {
        match self.run_child_turn(assistant_id, tool_call_id, title, prompt, sink, make) {
            Ok((session_id, result)) => {
                let metadata = json!({
                    "session_id": session_id,
                    "steps": result.steps,
                    "stop": result.stop.name(),
                });
                let (content, is_error, stop) = outcome(&result);
                (
                    ToolOutput {
                        content,
                        is_error,
                        metadata,
                        image: None,
                        structured: Value::Null,
                    },
                    stop,
                )
            }
            Err(e) => (ToolOutput::error(e.to_string()), None),
        }
    }

    /// Runs `prompt` in a child session of this one titled `title`, with the agent `make`
    /// builds for it: Go Crush's id `<assistant message id>$$<tool call id>` when free, its
    /// turn reported to `sink` as far as the user is concerned. The child session's id and
    /// its turn.
    fn run_child_turn(
        &self,
        assistant_id: &str,
        tool_call_id: &str,
        title: &str,
        prompt: &str,
        sink: &mut dyn Sink,
        make: impl FnOnce(&Self, String) -> Agent,
    ) -> Result<(String, TurnResult), SubAgentError> {
        let crush_id = format!("{assistant_id}$${tool_call_id}");
        let id = match self.session.store.session(&crush_id) {
            Ok(None) if !assistant_id.is_empty() && !tool_call_id.is_empty() => crush_id,
            _ => crate::store::new_id().map_err(SubAgentError::Start)?,
        };
        let session = self
            .session
            .store
            .create_session_with_id(&id, title, Some(&self.session.id))
            .map_err(SubAgentError::Start)?;
        let mut child = make(self, session.id.clone());
        let mut sub_sink = SubSink { parent: sink };
        let result = child
            .run_turn(prompt, &mut sub_sink)
            .map_err(SubAgentError::Failed)?;
        Ok((session.id, result))
    }

    /// The turn of a skill whose frontmatter says `context: fork` (crush(1) SKILLS AND
    /// COMMANDS, Forked skills), invoked as the command `line`: the line is this session's
    /// prompt, `task` (the skill's text with the arguments in place) runs in a child session as
    /// `spec` says, and the child's final answer is this session's answer. Nothing else of the
    /// skill's work enters this session.
    pub(crate) fn run_forked(
        &mut self,
        line: &str,
        task: &str,
        spec: &ChildSpec,
        sink: &mut dyn Sink,
    ) -> Result<TurnResult, AgentError> {
        let (line, context) = match self.submit_prompt(line, &[], sink) {
            Ok(accepted) => accepted,
            Err(refused) => return Ok(refused),
        };
        self.store_prompt(&line, context, sink)?;
        let title = short_title(&line);
        let result =
            match self.run_child_turn("", "", &title, task, sink, |a, id| a.make_child(spec, id)) {
                Ok((_, r)) => r,
                Err(SubAgentError::Failed(e)) => return Err(e),
                Err(e) => {
                    let msg = e.to_string();
                    self.commit_end("error", "", msg.clone())?;
                    sink.event(AgentEvent::Notice(msg));
                    return Ok(TurnResult {
                        stop: Stop::Empty,
                        final_text: String::new(),
                        steps: 0,
                    });
                }
            };
        let text = result.final_text.trim().to_string();
        match &result.stop {
            Stop::EndTurn | Stop::MaxTokens if !text.is_empty() => {
                sink.event(AgentEvent::TextDelta(text.clone()));
                let parts = vec![
                    crate::llm::Part::Text { text: text.clone() },
                    crate::llm::Part::Finish {
                        reason: "end_turn".into(),
                        time: super::now(),
                        message: None,
                        details: None,
                    },
                ];
                self.commit_answer(parts)?;
                sink.event(AgentEvent::StepCommitted);
            }
            stop => {
                let (why, _, _) = outcome(&result);
                self.commit_end(stop.name(), &text, why)?;
            }
        }
        Ok(TurnResult {
            stop: match result.stop {
                Stop::EndTurn | Stop::MaxTokens if text.is_empty() => Stop::Empty,
                s => s,
            },
            final_text: text,
            steps: result.steps,
        })
    }
}

/// What a sub-agent runs as: a custom agent's file (None: the built-in read-only agent) and
/// the model it gets (None: the agent's parent's).
#[derive(Clone, Debug)]
pub(crate) struct ChildSpec {
    def: Option<crate::agents::AgentDef>,
    model: Option<crate::config::ResolvedModel>,
}

/// Why a sub-agent did not run.
#[derive(Debug)]
pub(crate) enum SubAgentError {
    /// No custom agent has the name (the names there are).
    NoAgent { name: String, known: Vec<String> },
    /// Its model cannot be had (the custom agent, when one was named: name and file).
    Model {
        agent: Option<(String, std::path::PathBuf)>,
        problem: crate::agents::ModelProblem,
    },
    /// Its session could not be created.
    Start(crate::store::StoreError),
    /// Its turn failed.
    Failed(AgentError),
}

impl std::fmt::Display for SubAgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubAgentError::NoAgent { name, known } => write!(
                f,
                "no agent named {name:?}; the agents are: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            SubAgentError::Model {
                agent: Some((name, path)),
                problem,
            } => write!(
                f,
                "agent {name:?} ({}) cannot run: {problem}",
                path.display()
            ),
            SubAgentError::Model {
                agent: None,
                problem,
            } => write!(f, "the sub-agent cannot run: {problem}"),
            SubAgentError::Start(e) => write!(f, "cannot start the sub-agent: {e}"),
            SubAgentError::Failed(e) => write!(f, "the sub-agent failed: {e}"),
        }
    }
}

impl std::error::Error for SubAgentError {}

/// The tool result of a sub-agent's turn (its text, whether it is an error) and, when the
/// parent's turn must stop too, why.
fn outcome(result: &TurnResult) -> (String, bool, Option<Stop>) {
    let text = result.final_text.trim();
    match &result.stop {
        Stop::EndTurn | Stop::MaxTokens if !text.is_empty() => (text.to_string(), false, None),
        Stop::EndTurn | Stop::MaxTokens | Stop::Empty => (
            "The sub-agent finished without an answer.".to_string(),
            true,
            None,
        ),
        Stop::ContentFilter => (
            format!(
                "The provider's content filter stopped the sub-agent's answer. What it wrote: {text}"
            ),
            true,
            None,
        ),
        Stop::MaxSteps(n) => (
            format!(
                "The sub-agent stopped after {n} steps without finishing. Its last words: {text}"
            ),
            true,
            None,
        ),
        Stop::Loop => (
            format!(
                "The sub-agent stopped: it kept repeating the same tool call. Its last words: {text}"
            ),
            true,
            None,
        ),
        Stop::PermissionRefused => (
            "The sub-agent stopped: one of its tool calls needed a permission that was refused."
                .to_string(),
            true,
            Some(Stop::PermissionRefused),
        ),
        Stop::Canceled => (
            "The user canceled the sub-agent.".to_string(),
            true,
            Some(Stop::Canceled),
        ),
        Stop::Error(e) => (
            format!("The sub-agent's model call failed: {e}"),
            true,
            None,
        ),
        Stop::HookDenied(r) => (
            format!("A hook blocked the sub-agent's task: {r}"),
            true,
            None,
        ),
        // A halt stops the whole turn, not only the sub-agent.
        Stop::HookHalted(r) => (
            format!("A hook halted the sub-agent: {r}"),
            true,
            Some(Stop::HookHalted(r.clone())),
        ),
        // The budget is the parent's too: its turn stops as well.
        Stop::Budget(b) => (
            format!("The sub-agent stopped: {b}"),
            true,
            Some(Stop::Budget(b.clone())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &[Box<dyn Tool>]) -> Vec<&str> {
        t.iter().map(|t| t.name()).collect()
    }

    #[test]
    fn the_sub_agent_tools_are_those_that_say_so() {
        assert_eq!(
            sub_agent_tool_names(),
            [
                "fetch",
                "glob",
                "grep",
                "ls",
                "lsp_call_hierarchy",
                "lsp_definition",
                "lsp_symbols",
                "view"
            ]
        );
    }

    #[test]
    fn agent_tool_is_added_sorted_unless_disabled() {
        let tools = with_agent_tool(crate::tools::builtin(), &[]);
        assert_eq!(names(&tools)[0], "agent");
        let mut sorted = names(&tools);
        sorted.sort();
        assert_eq!(names(&tools), sorted);
        let tools = with_agent_tool(crate::tools::builtin(), &["agent".to_string()]);
        assert!(!names(&tools).contains(&"agent"));
        let tools = main_agent_tools(&["bash".to_string()], None);
        assert_eq!(names(&tools)[0], "agent");
        assert!(!names(&tools).contains(&"bash"));
    }

    #[test]
    fn a_custom_agent_never_gets_a_tool_its_parent_lacks() {
        let parent = main_agent_tools(&["bash".to_string(), "write".to_string()], None);
        let named: Vec<String> = ["bash", "write", "edit", "view", "agent", "nonesuch"]
            .map(String::from)
            .to_vec();
        let tools = custom_tools(&parent, None, Some(&named));
        assert_eq!(names(&tools), vec!["edit", "view"]);
        let default = custom_tools(&parent, None, None);
        assert!(default.iter().all(|t| t.for_sub_agents()));
        assert_eq!(names(&default), ["fetch", "glob", "grep", "ls", "view"]);
    }

    #[test]
    fn task_prompt_replaces_the_intro_and_keeps_the_environment() {
        let parent = format!(
            "{}\n<env>\nWorking directory: /x\n</env>\n",
            super::super::prompt::INTRO
        );
        let t = task_system(&parent);
        assert!(t.starts_with("You are a sub-agent"));
        assert!(t.contains("Working directory: /x"));
        assert!(!t.contains(super::super::prompt::INTRO));
        assert!(task_system("prefix only").starts_with("You are a sub-agent"));
    }

    #[test]
    fn titles_are_short() {
        assert_eq!(short_title("  find   the\nparser "), "find the parser");
        assert_eq!(short_title(""), "Sub-agent task");
        assert_eq!(short_title(&"x".repeat(80)).chars().count(), 51);
    }

    #[test]
    fn a_sub_agent_turn_becomes_a_result_and_stops_the_parent_only_when_it_must() {
        let turn = |stop: Stop, text: &str| TurnResult {
            stop,
            final_text: text.into(),
            steps: 2,
        };
        assert_eq!(
            outcome(&turn(Stop::EndTurn, " found it \n")),
            ("found it".to_string(), false, None)
        );
        let (content, is_error, stop) = outcome(&turn(Stop::EndTurn, " "));
        assert!(is_error && stop.is_none(), "{content}");
        let (content, is_error, stop) = outcome(&turn(Stop::Loop, "again"));
        assert!(
            is_error && stop.is_none() && content.ends_with("again"),
            "{content}"
        );
        for s in [
            Stop::PermissionRefused,
            Stop::Canceled,
            Stop::HookHalted("no".into()),
        ] {
            assert_eq!(outcome(&turn(s.clone(), "x")).2, Some(s));
        }
    }
}
