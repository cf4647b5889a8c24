//! One ACP session on a thread of its own: it opens the session as `crush -c DIR` would (the
//! configuration, trust record, hooks and store of its directory, the configured MCP servers and
//! the editor's), then runs the prompts it is given, one at a time, until it is closed.

use super::content;
use super::files::{EditorFiles, FsCaps};
use super::rpc::{AUTH_REQUIRED, NOT_FOUND, Peer, RpcError};
use super::sink::AcpSink;
use crate::agent::{Agent, McpTools, Setup, Stop, title};
use crate::app::{self, AppError, Global};
use crate::config::{ConfigError, Loaded, ResolvedModel};
use crate::hooks::HookConfig;
use crate::mcp::ServerSpec;
use crate::store::Store;
use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a closing session waits for a title still being generated (its call is paid).
const TITLE_WAIT: Duration = Duration::from_secs(5);

/// How the session comes to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    New,
    /// A stored session, replayed to the editor.
    Load,
    /// A stored session, not replayed.
    Resume,
}

/// What a session's thread opens, and the request to answer once it has.
pub(super) struct Open {
    pub kind: Kind,
    pub request: Value,
    pub id: String,
    pub cwd: PathBuf,
    /// The editor's MCP servers.
    pub servers: Vec<ServerSpec>,
    pub fs: FsCaps,
}

/// What the connection's thread and the session's thread share.
pub(super) struct Shared {
    pub cancel: Arc<AtomicBool>,
    /// A prompt is queued or running.
    pub busy: AtomicBool,
    /// The session's mode: every tool call allowed without asking.
    pub yolo: AtomicBool,
    /// The session's mode: planning (crush(1) PLAN MODE).
    pub plan: AtomicBool,
    /// The id of the running prompt's request (`$/cancel_request` names it).
    pub prompt_request: Mutex<Option<Value>>,
}

impl Shared {
    pub(super) fn new(yolo: bool) -> Shared {
        Shared {
            cancel: Arc::new(AtomicBool::new(false)),
            busy: AtomicBool::new(false),
            yolo: AtomicBool::new(yolo),
            plan: AtomicBool::new(false),
            prompt_request: Mutex::new(None),
        }
    }
}

/// Work for a session's thread.
pub(super) enum Job {
    Prompt {
        request: Value,
        prompt: Value,
    },
    /// Ends the session (answering `request` when given).
    Close {
        request: Option<Value>,
    },
}

/// The modes a session offers (`session/set_mode`).
pub(super) fn modes(yolo: bool) -> Value {
    json!({
        "currentModeId": if yolo { "yolo" } else { "default" },
        "availableModes": [
            {"id": "plan", "name": "Plan",
             "description": "Investigate with read-only tools only and end with a plan; nothing is changed"},
            {"id": "default", "name": "Ask",
             "description": "Ask before a tool call that writes, runs a command or fetches, unless the configuration allows it"},
            {"id": "yolo", "name": "Yolo",
             "description": "Allow every tool call without asking (banned commands stay banned)"}
        ]
    })
}

/// An open error as the editor is told it: a missing provider is the authentication ACP knows.
fn open_error(e: AppError) -> RpcError {
    RpcError::internal(e.to_string())
}

fn config_error(e: ConfigError) -> RpcError {
    match e {
        ConfigError::NoProvider(m) => RpcError::new(AUTH_REQUIRED, m),
        e => RpcError::internal(e.to_string()),
    }
}

/// The session's configuration, hooks, model and store, as `crush -c DIR` opens them.
struct Opened {
    loaded: Loaded,
    hooks: HookConfig,
    model: ResolvedModel,
    store: Store,
    /// The stored session (load, resume).
    stored: Option<crate::store::Session>,
    /// The sandbox of its commands and the auto approval mode (crush(1) SECURITY, sandbox).
    sandbox: (Option<Arc<crate::sandbox::Sandbox>>, bool),
}

fn open(global: &Global, o: &Open) -> Result<Opened, RpcError> {
    if !o.cwd.is_absolute() || !o.cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "cwd {}: not an absolute path of a directory",
            o.cwd.display()
        )));
    }
    let mut global = global.clone();
    global.cwd = Some(o.cwd.clone());
    let loaded = app::load_config(&global).map_err(open_error)?;
    // A project's guard hooks never vanish silently: as `crush run`, refuse untrusted ones.
    app::refuse_untrusted_hooks(&loaded, &global).map_err(open_error)?;
    let hooks = app::load_hooks(&loaded).map_err(open_error)?;
    // A sandbox that was asked for and cannot be had refuses the session.
    let sandbox = app::session_sandbox(&loaded, &global).map_err(open_error)?;
    let model = loaded
        .resolve_model(global.model.as_deref(), false)
        .map_err(config_error)?;
    let stored = match o.kind {
        Kind::New => None,
        Kind::Load | Kind::Resume => {
            let Some(store) = app::open_existing_store(&loaded).map_err(open_error)? else {
                return Err(RpcError::new(
                    NOT_FOUND,
                    format!("no session '{}' in {}", o.id, o.cwd.display()),
                ));
            };
            let s = store
                .session(&o.id)
                .map_err(|e| RpcError::internal(e.to_string()))?
                .ok_or_else(|| {
                    RpcError::new(
                        NOT_FOUND,
                        format!("no session '{}' in {}", o.id, o.cwd.display()),
                    )
                })?;
            Some(app::top_level(s).map_err(open_error)?)
        }
    };
    let store = app::open_store(&loaded).map_err(open_error)?;
    Ok(Opened {
        loaded,
        hooks,
        model,
        store,
        stored,
        sandbox,
    })
}

/// A session's thread.
pub(super) struct Worker {
    pub peer: Arc<Peer>,
    pub global: Global,
    pub open: Open,
    pub shared: Arc<Shared>,
    pub jobs: Receiver<Job>,
    /// Told (with `generation`) when the thread ends.
    pub ended: Sender<(String, u64)>,
    pub generation: u64,
}

impl Worker {
    pub(super) fn spawn(self) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(format!("acp-session-{}", self.generation))
            .spawn(move || {
                let (id, generation, ended) =
                    (self.open.id.clone(), self.generation, self.ended.clone());
                self.run();
                let _ = ended.send((id, generation));
            })
    }

    fn run(self) {
        let opened = open(&self.global, &self.open);
        let o = match opened {
            Ok(o) => o,
            Err(e) => {
                crate::log::warn(&format!("acp: session {}: {}", self.open.id, e.message));
                crate::ewriteln!("crush: acp: cannot open the session: {}", e.message);
                self.peer.respond(&self.open.request, Err(e.clone()));
                // Prompts sent before the answer arrived get the same answer.
                for job in self.jobs.iter() {
                    if let Job::Prompt { request, .. }
                    | Job::Close {
                        request: Some(request),
                    } = job
                    {
                        self.peer.respond(&request, Err(e.clone()));
                    }
                }
                return;
            }
        };
        let Opened {
            loaded,
            hooks,
            model,
            store,
            stored,
            sandbox,
        } = o;
        let mut mcp = McpTools::new(app::start_mcp(&loaded), Some(app::mcp_wait()));
        if !self.open.servers.is_empty() {
            mcp.add_servers(self.open.servers.clone(), &loaded);
        }
        let small = small_model(&self.global, &loaded, &model);
        let (skills, custom) = app::load_skills(&loaded);
        let (skills, custom) = (Arc::new(skills), Arc::new(custom));
        let files = Arc::new(EditorFiles::new(
            self.peer.clone(),
            self.open.id.clone(),
            self.open.fs,
            self.shared.cancel.clone(),
        ));
        let policy = app::retry_policy_for(&loaded, &model);
        let lsp = app::language_servers(&loaded);
        let store = std::rc::Rc::new(store);
        let mut agent = Agent::new(Setup {
            store: store.clone(),
            mcp: Some(mcp),
            session_id: stored.as_ref().map(|s| s.id.clone()).unwrap_or_default(),
            model,
            config: loaded,
            hooks,
            policy,
            cancel: self.shared.cancel.clone(),
            yolo: self.shared.yolo.load(Ordering::SeqCst),
            lsp,
            skills: skills.clone(),
        });
        agent.workspace.files = Some(files.clone());
        if sandbox.1 {
            agent.policy.permissions.auto = Some(agent.workspace.project_root.clone());
        }
        agent.workspace.sandbox = sandbox.0;
        crate::log::info(&format!(
            "acp: session {} ({:?}) in {}, model {}/{}",
            self.open.id,
            self.open.kind,
            self.open.cwd.display(),
            agent.model.provider.id,
            agent.model.model.id
        ));
        let yolo = self.shared.yolo.load(Ordering::SeqCst);
        let answer = match self.open.kind {
            Kind::New => json!({"sessionId": self.open.id, "modes": modes(yolo)}),
            Kind::Load => {
                let messages = store.messages(&self.open.id).unwrap_or_else(|e| {
                    crate::log::warn(&format!("acp: cannot replay {}: {e}", self.open.id));
                    Vec::new()
                });
                for u in content::replay(&messages, &self.open.cwd, &agent.tool_list()) {
                    self.peer.notify(
                        "session/update",
                        json!({"sessionId": self.open.id, "update": u}),
                    );
                }
                json!({"modes": modes(yolo)})
            }
            Kind::Resume => json!({"modes": modes(yolo)}),
        };
        self.peer.respond(&self.open.request, Ok(answer));
        let manager = agent.toolkit.mcp.as_ref().map(|m| m.manager().clone());
        // The agent files, listed by /agents when there are any (crush(1) ACP).
        let agents_list = agent.config.as_ref().and_then(|loaded| {
            let (found, models) = crate::agent::subagent::custom_agents(loaded, Some(&agent.model));
            (!found.agents.is_empty() || !found.rejected.is_empty())
                .then(|| found.list_text(&models))
        });
        let commands = Commands {
            peer: self.peer.clone(),
            session_id: self.open.id.clone(),
            custom: custom.clone(),
            skills: skills.clone(),
            agents: agents_list.is_some(),
        };
        commands.send(manager.as_ref());
        // The MCP servers' prompts join the list once their servers have started, without
        // holding up the session (nothing is sent once it is closed).
        if let Some(m) = manager.filter(|m| m.has_servers()) {
            let (commands, open) = (commands.clone(), Arc::downgrade(&self.shared));
            let _ = std::thread::Builder::new()
                .name("acp-commands".into())
                .spawn(move || {
                    m.wait_ready(None);
                    if !m.prompts().is_empty() && open.upgrade().is_some() {
                        commands.send(Some(&m));
                    }
                });
        }
        let mut s = Session {
            w: &self,
            agent,
            files: &files,
            small,
            session_start: Some(if stored.is_some() {
                "resume"
            } else {
                "startup"
            }),
            untitled: stored.is_none(),
            titles: Vec::new(),
            skills,
            custom,
            agents_list,
        };
        let mut reply = None;
        for job in self.jobs.iter() {
            match job {
                Job::Prompt { request, prompt } => s.prompt(&request, &prompt),
                Job::Close { request } => {
                    reply = request;
                    break;
                }
            }
        }
        s.close();
        // Left as a closed database is, as `crush run` leaves it (crush(1) SESSION STORE): a
        // reader that opens it later makes no -wal or -shm beside it. While another session of
        // the project still has it open, it stays as it is.
        store.close_wal();
        if let Some(r) = reply {
            self.peer.respond(&r, Ok(json!({})));
        }
    }
}

/// What the editor offers after `/`: the custom commands, skills and MCP prompts.
#[derive(Clone)]
struct Commands {
    peer: Arc<Peer>,
    session_id: String,
    custom: Arc<crate::skills::commands::Commands>,
    skills: Arc<crate::skills::Skills>,
    /// Agent files were found: `/agents` lists them.
    agents: bool,
}

impl Commands {
    /// Sends `available_commands_update` with the prompts of the servers ready now (nothing
    /// when there is no command at all).
    fn send(&self, mcp: Option<&crate::mcp::Manager>) {
        let prompts = mcp.map(|m| m.prompts()).unwrap_or_default();
        let cat = crate::skills::catalog::Catalog::new(&self.custom, &self.skills, prompts);
        let commands = content::available_commands(&cat, self.agents);
        if !commands.is_empty() {
            self.peer.notify(
                "session/update",
                json!({"sessionId": self.session_id, "update":
                    {"sessionUpdate": "available_commands_update", "availableCommands": commands}}),
            );
        }
    }
}

/// The model that titles a new session: `--small-model`, else the configured small one (the
/// chosen model when only `-m` was given).
fn small_model(global: &Global, loaded: &Loaded, large: &ResolvedModel) -> Option<ResolvedModel> {
    if let Some(m) = &global.small_model {
        return loaded.resolve_model(Some(m), true).ok();
    }
    if loaded.config.models.small.is_none() && global.model.is_some() {
        return Some(large.clone());
    }
    loaded.resolve_model(None, true).ok()
}

/// An open session on its thread.
struct Session<'w> {
    w: &'w Worker,
    agent: Agent,
    files: &'w EditorFiles,
    small: Option<ResolvedModel>,
    /// SessionStart hooks to fire before the next prompt.
    session_start: Option<&'static str>,
    /// A new session whose first accepted prompt has not been titled yet.
    untitled: bool,
    titles: Vec<JoinHandle<()>>,
    /// For prompts that start with a command's name.
    skills: Arc<crate::skills::Skills>,
    custom: Arc<crate::skills::commands::Commands>,
    /// What `/agents` answers (None: no agent file was found).
    agents_list: Option<String>,
}

impl Session<'_> {
    fn prompt(&mut self, request: &Value, prompt: &Value) {
        let result = self.turn(prompt);
        let sh = &self.w.shared;
        *sh.prompt_request.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Free before the answer: the editor may send the next prompt as soon as it has it.
        sh.busy.store(false, Ordering::SeqCst);
        self.w.peer.respond(request, result);
    }

    fn turn(&mut self, prompt: &Value) -> Result<Value, RpcError> {
        let cwd = self.w.open.cwd.clone();
        let (text, attachments) =
            content::prompt(prompt, &cwd).map_err(|e| RpcError::invalid_params(e.to_string()))?;
        let mcp = self.agent.toolkit.mcp.as_ref().map(|m| m.manager());
        let prompts = mcp.map(|m| m.prompts()).unwrap_or_default();
        let cat = crate::skills::catalog::Catalog::new(&self.custom, &self.skills, prompts);
        // `/agents` is answered by crush, without the model, unless a command has that name.
        if text.trim() == format!("/{}", content::AGENTS_COMMAND)
            && !cat
                .entries
                .iter()
                .any(|e| e.name == content::AGENTS_COMMAND)
            && let Some(list) = &self.agents_list
        {
            self.w.peer.notify(
                "session/update",
                json!({"sessionId": self.w.open.id, "update": {"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": format!("```\n{list}```\n")}}}),
            );
            return Ok(json!({"stopReason": "end_turn"}));
        }
        let (expanded, fork) = content::expand_command(&text, &cat, mcp)
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        // A forked skill's agent and model, checked before anything runs.
        let fork = match fork {
            Some(f) => Some(
                self.agent
                    .fork_spec(&f)
                    .map_err(|e| RpcError::invalid_params(e.to_string()))?,
            ),
            None => None,
        };
        let line = text.trim().to_string();
        let store = self.agent.session.store.clone();
        // The session is stored with its first prompt: a session the editor opens and never
        // uses leaves nothing behind.
        if self.agent.session.id.is_empty() {
            store
                .create_session_with_id(&self.w.open.id, title::PLACEHOLDER, None)
                .map_err(|e| RpcError::internal(format!("cannot store the session: {e}")))?;
            self.agent.session.id = self.w.open.id.clone();
        }
        self.agent.policy.permissions.yolo = self.w.shared.yolo.load(Ordering::SeqCst);
        self.agent.policy.plan_mode = self.w.shared.plan.load(Ordering::SeqCst);
        let cancel = self.w.shared.cancel.clone();
        let mut sink = AcpSink::new(
            &self.w.peer,
            &self.w.open.id,
            &cwd,
            self.files,
            &store,
            &cancel,
            self.agent.model.model.context_window,
        );
        // A title that may not run with the turn waits for its end (crush(1) CONFIGURATION,
        // side_requests).
        let held = std::rc::Rc::new(std::cell::RefCell::new(None::<String>));
        let mut held_start = None;
        let spawned = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        if self.untitled
            && let Some(model) = self.small.clone()
        {
            let setting = self
                .agent
                .config
                .as_ref()
                .and_then(|c| c.config.options.side_requests.clone());
            let when = title::timing(&self.agent.model, &model, setting.as_deref());
            let start = TitleStart {
                model,
                policy: self.agent.policy.retry.clone(),
                db: store.path().to_path_buf(),
                session_id: self.w.open.id.clone(),
                peer: self.w.peer.clone(),
            };
            if when == title::SideTiming::Now {
                let spawned = spawned.clone();
                sink.on_accepted = Some(Box::new(move |p: String| {
                    if let Some(h) = start.spawn(p) {
                        spawned.borrow_mut().push(h);
                    }
                }));
            } else {
                let held = held.clone();
                sink.on_accepted = Some(Box::new(move |p: String| {
                    *held.borrow_mut() = Some(p);
                }));
                held_start = Some(start);
            }
        }
        if let Some(source) = self.session_start.take() {
            self.agent.session_start(source, &mut sink);
        }
        let text = match expanded {
            content::Expanded::Text(t) => t,
            // Each `!`cmd`` runs as the bash tool runs a command, asked in the editor where the
            // permission rules say so; a refused one sends nothing (crush(1) SKILLS AND COMMANDS).
            content::Expanded::Shell { name, segments } => {
                let agent = &mut self.agent;
                let made = crate::skills::catalog::join_segments(&segments, &mut |cmd| {
                    agent.run_command_shell(cmd, &mut sink)
                });
                match made {
                    Ok(t) => t,
                    Err(_) if cancel.load(Ordering::SeqCst) => {
                        return Ok(json!({"stopReason": "cancelled"}));
                    }
                    Err(e) => {
                        sink.note(&format!("/{name} was not sent to the model: {e}"));
                        return Ok(json!({"stopReason": "refusal"}));
                    }
                }
            }
        };
        let result = match &fork {
            // The session keeps the line as typed and the sub-agent's answer.
            Some(spec) => self.agent.run_forked(&line, &text, spec, &mut sink),
            None => self.agent.run_turn_with(&text, attachments, &mut sink),
        };
        if let Ok(r) = &result
            && let Err(e) = self.agent.keep_plan(r)
        {
            crate::log::warn(&format!("acp: {e}"));
        }
        // A prompt the hooks refused leaves the session untitled for the next one.
        if sink.on_accepted.is_none() {
            self.untitled = false;
        }
        self.titles.append(&mut spawned.borrow_mut());
        if let (Some(start), Some(p)) = (held_start, held.borrow_mut().take())
            && let Some(h) = start.spawn(p)
        {
            self.titles.push(h);
        }
        for w in self
            .agent
            .toolkit
            .mcp
            .iter()
            .flat_map(|m| m.manager().take_warnings())
        {
            crate::ewriteln!("crush: {w}");
        }
        // A canceled turn is answered as such, whatever the cancel made of it.
        if cancel.load(Ordering::SeqCst) {
            return Ok(json!({"stopReason": "cancelled"}));
        }
        let r = result.map_err(|e| {
            RpcError::internal(format!(
                "the session store failed: {e}; the turn may be incomplete"
            ))
        })?;
        let reason = match &r.stop {
            Stop::EndTurn | Stop::PermissionRefused => "end_turn",
            Stop::MaxTokens => "max_tokens",
            Stop::ContentFilter | Stop::Empty => {
                if let Some(p) = r.stop.problem() {
                    sink.note(&format!("Stopped: {p}."));
                }
                if r.stop == Stop::ContentFilter {
                    "refusal"
                } else {
                    "end_turn"
                }
            }
            Stop::MaxSteps(n) => {
                sink.note(&format!(
                    "Stopped after {n} steps without finishing; say \"continue\" to go on."
                ));
                "max_turn_requests"
            }
            Stop::Loop => {
                sink.note(
                    "Stopped: the model kept repeating the same tool call with the same result.",
                );
                "end_turn"
            }
            Stop::HookDenied(reason) => {
                sink.note(&format!(
                    "A hook blocked the prompt; nothing was sent to the model: {reason}"
                ));
                "refusal"
            }
            Stop::HookHalted(reason) => {
                sink.note(&format!("A hook halted the turn: {reason}"));
                "end_turn"
            }
            Stop::Canceled => "cancelled",
            Stop::Budget(b) => {
                sink.note(&format!("Stopped: {b}."));
                "end_turn"
            }
            Stop::Error(e) => {
                return Err(RpcError::internal(format!(
                    "{e}; the session was saved, and the next prompt continues it"
                )));
            }
        };
        crate::log::info(&format!(
            "acp: session {}: {} after {} step(s)",
            self.w.open.id,
            r.stop.name(),
            r.steps
        ));
        Ok(json!({"stopReason": reason}))
    }

    /// Ends the session: SessionEnd hooks (when it ran a turn), the MCP servers, the titles
    /// still being generated.
    fn close(&mut self) {
        if self.session_start.is_none() {
            let store = self.agent.session.store.clone();
            let mut sink = AcpSink::new(
                &self.w.peer,
                &self.w.open.id,
                &self.w.open.cwd,
                self.files,
                &store,
                &self.w.shared.cancel,
                0,
            );
            self.agent.session_end("other", &mut sink);
        }
        if let Some(m) = &self.agent.toolkit.mcp {
            m.manager().shutdown();
        }
        let deadline = Instant::now() + TITLE_WAIT;
        for h in self.titles.drain(..) {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

/// What titling a new session needs, but its prompt.
struct TitleStart {
    model: ResolvedModel,
    policy: crate::llm::RetryPolicy,
    db: PathBuf,
    session_id: String,
    peer: Arc<Peer>,
}

impl TitleStart {
    /// Titles the session on a thread of its own: the small model's title, the call's usage
    /// row (paid either way), and the editor told.
    fn spawn(self, prompt: String) -> Option<JoinHandle<()>> {
        let mut policy = self.policy.clone();
        policy.max_attempts = policy.max_attempts.min(2);
        policy.response_timeout = policy.response_timeout.min(Duration::from_secs(30));
        policy.idle_timeout = policy.idle_timeout.min(Duration::from_secs(30));
        std::thread::Builder::new()
            .name("acp-title".into())
            .spawn(move || {
                let g = title::generate(&self.model, &prompt, &policy);
                let store = match Store::open(&self.db) {
                    Ok(s) => s,
                    Err(e) => {
                        crate::log::warn(&format!("acp: cannot record the title: {e}"));
                        return;
                    }
                };
                if let Some(u) = &g.usage
                    && let Err(e) = store.record_usage(&self.session_id, u)
                {
                    crate::log::warn(&format!("acp: cannot record the title call's usage: {e}"));
                }
                match (&g.title, &g.error) {
                    (Some(t), _) => {
                        if store.set_title(&self.session_id, t).is_ok() {
                            self.peer.notify(
                                "session/update",
                                json!({"sessionId": self.session_id, "update":
                                    {"sessionUpdate": "session_info_update", "title": t}}),
                            );
                        }
                    }
                    (None, Some(e)) => crate::log::debug(&format!("acp: title: {e}")),
                    (None, None) => {}
                }
            })
            .ok()
    }
}
