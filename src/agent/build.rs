//! How a main agent is put together from the configuration: its tools, system prompt,
//! permissions, limits and the secrets its tools' output is masked for.

use super::permissions::Permissions;
use super::{
    Agent, McpTools, Policy, SessionState, Toolkit, Workspace, prompt, subagent, transcript, turn,
};
use crate::config::ResolvedModel;
use crate::hooks::HookConfig;
use crate::llm::RetryPolicy;
use crate::store::Store;
use crate::tools::confine::Bounds;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What a main agent is built from; the rest follows from the configuration.
pub(crate) struct Setup {
    /// The project's store (the agent keeps a handle to it).
    pub store: Rc<Store>,
    /// The MCP servers, already starting.
    pub mcp: Option<McpTools>,
    /// Empty while the REPL has not created the session yet.
    pub session_id: String,
    pub model: ResolvedModel,
    pub config: crate::config::Loaded,
    pub hooks: HookConfig,
    pub policy: RetryPolicy,
    pub cancel: Arc<AtomicBool>,
    /// `--yolo`: every permission is granted.
    pub yolo: bool,
    /// The session's Agent Skills.
    pub skills: Arc<crate::skills::Skills>,
    /// The language servers (their tools are offered, the file tools report their diagnostics).
    pub lsp: Option<crate::tools::lsp::Lsp>,
}

impl Agent {
    /// The main agent: the configured tools (with `agent`), system prompt, permissions and
    /// limits.
    pub(crate) fn new(s: Setup) -> Agent {
        let options = &s.config.config.options;
        let allowed = s.config.config.permissions.allowed_tools.clone();
        let (system, skills_prompt, custom_agents) = prompt_parts(&s.config, &s.model, &s.skills);
        let session = SessionState {
            store: s.store,
            id: s.session_id,
            parent: None,
            pending_context: Vec::new(),
            transcript: Some(transcript::Transcript::new(&s.config.data_dir, false)),
            parent_transcript: None,
            prompt_id: String::new(),
            env_file: None,
            title_from: None,
            fixed_estimate: Default::default(),
        };
        let workspace = Workspace {
            cwd: s.config.cwd.clone(),
            project_root: s.config.project_root.clone(),
            bounds: Arc::new(session_bounds(&s.config, &s.hooks)),
            files: None,
            sandbox: None,
            shell_env_allow: options.shell_env_allow.clone(),
            env: s.config.env.clone(),
            secrets: Arc::new(provider_secrets(&s.config)),
        };
        let toolkit = Toolkit {
            tools: subagent::main_agent_tools(&options.disabled_tools, s.lsp.as_ref()),
            mcp: s.mcp,
            lsp: s.lsp,
            skill_files: Arc::new(s.skills.files()),
            skills_prompt,
            custom_agents: Arc::new(custom_agents),
            skills_info: Arc::new(s.skills.info()),
        };
        let policy = Policy {
            permissions: Permissions::new(s.yolo, allowed)
                .with_claude(Arc::new(s.config.claude_rules.clone())),
            retry: s.policy,
            max_steps: options.max_steps.unwrap_or(100) as usize,
            max_stop_blocks: options
                .max_stop_blocks
                .map_or(turn::MAX_STOP_BLOCKS, |n| n as usize),
            auto_summarize: !options.disable_auto_summarize,
            hooks: s.hooks,
            budget: None,
            plan_mode: false,
        };
        Agent {
            model: s.model,
            system,
            config: Some(s.config),
            cancel: s.cancel,
            session,
            workspace,
            toolkit,
            policy,
        }
    }
}

/// A main agent's system prompt, its skills and agents listing, and its custom agents.
fn prompt_parts(
    loaded: &crate::config::Loaded,
    model: &ResolvedModel,
    skills: &crate::skills::Skills,
) -> (String, String, Vec<crate::agents::AgentDef>) {
    let custom_agents = subagent::discover_agents(loaded, model);
    let listing = if prompt::with_environment(loaded) {
        prompt::skills_section(&skills.prompt_listing()) + &subagent::agents_section(&custom_agents)
    } else {
        String::new()
    };
    (prompt::for_config(loaded, model), listing, custom_agents)
}

/// The system prompt with the skills and agents listing after it.
pub(super) fn with_listing(system: &str, listing: &str) -> String {
    let mut out = system.to_string();
    if !listing.is_empty() {
        out.push('\n');
        out.push_str(listing);
        out.push('\n');
    }
    out
}

/// The system prompt a new session on `model` sends (before any MCP server's instructions) and
/// the names of the tools it offers, as `crush debug prompt` prints them.
pub(crate) fn prompt_of_session(
    loaded: &crate::config::Loaded,
    model: &ResolvedModel,
    skills: &crate::skills::Skills,
    lsp: Option<&crate::tools::lsp::Lsp>,
) -> (String, Vec<String>) {
    let (system, listing, _) = prompt_parts(loaded, model, skills);
    let tools = subagent::main_agent_tools(&loaded.config.options.disabled_tools, lsp)
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    (with_listing(&system, &listing), tools)
}

/// The bounds of a main agent's file tools: crush's data directories, the scripts its hooks,
/// MCP and language servers run (crush(1) PERMISSIONS), and what Read deny rules cover.
fn session_bounds(loaded: &crate::config::Loaded, hooks: &HookConfig) -> Bounds {
    let mut commands: Vec<String> = hooks.hooks.iter().map(|h| h.command.clone()).collect();
    for servers in [&loaded.config.mcp, &loaded.config.lsp] {
        for server in servers.as_object().into_iter().flat_map(|m| m.values()) {
            let mut line = server["command"].as_str().unwrap_or("").to_string();
            for a in server["args"].as_array().into_iter().flatten() {
                line.push(' ');
                line.push_str(a.as_str().unwrap_or(""));
            }
            commands.push(line);
        }
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    Bounds::for_session(&loaded.data_dir, &loaded.cwd, &commands)
        .deny_reads(loaded.claude_rules.read_denied())
}

/// The API keys of the providers crush can call, named after their provider (in the catalog's
/// case, the variable they come from), and the AWS secrets of the environment when a Bedrock
/// provider can be called, for masking in tool output.
fn provider_secrets(loaded: &crate::config::Loaded) -> Vec<(String, String)> {
    let catalog = loaded.catalog.get();
    let mut out: Vec<(String, String)> = Vec::new();
    for p in loaded.providers_with(&catalog.providers).ready {
        if p.endpoint.kind == crate::llm::ApiKind::Bedrock {
            // The AWS secrets a Bedrock provider signs with.
            for var in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] {
                if let Some(v) = loaded.env.var(var)
                    && !v.trim().is_empty()
                    && !out.iter().any(|(_, x)| *x == v)
                {
                    out.push((var.to_string(), v));
                }
            }
        }
        let Some(key) = p.endpoint.api_key else {
            continue;
        };
        let name = catalog
            .providers
            .iter()
            .find(|c| c.id.as_str() == p.id)
            .and_then(|c| c.api_key.strip_prefix('$'))
            .map(|v| v.trim_matches(['{', '}']).to_string())
            .unwrap_or_else(|| format!("{} API key", p.id));
        if !out.iter().any(|(_, v)| *v == key) {
            out.push((name, key));
        }
    }
    out
}
