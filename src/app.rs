//! Start-up shared by the commands: working directory, configuration, data dir, store, session
//! and agent. Errors carry the exit code class of crush(1) EXIT STATUS.

use crate::agent::{Agent, Setup};
use crate::config::{self, ConfigError, Loaded, ResolvedModel};
use crate::exit::ExitCode;
use crate::llm::RetryPolicy;
use crate::mcp::McpError;
use crate::skills::SkillError;
use crate::store::{self, Store};
use crate::tools::lsp::Lsp;
use serde_json::json;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The global flags (crush(1) OPTIONS), as every command receives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Global {
    pub cwd: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub debug: bool,
    pub yolo: bool,
    pub model: Option<String>,
    pub small_model: Option<String>,
    pub session: Option<String>,
    pub continue_last: bool,
    /// `--trust`: trust the project for this invocation.
    pub trust: bool,
    /// `--no-project-hooks` (crush run): leave the project's own hooks out, trusted or not.
    pub no_project_hooks: bool,
    /// `--sandbox MODE` (crush(1) SECURITY, sandbox).
    pub sandbox: Option<String>,
    /// `--auto`: the auto approval mode, sandboxed.
    pub auto: bool,
    /// `--system-prompt TEXT` and `--system-prompt-file FILE` (crush(1) CONFIGURATION, System
    /// prompt): the runtime layer's options.system_prompt and options.system_prompt_file.
    pub system_prompt: Option<String>,
    pub system_prompt_file: Option<String>,
    /// `--plan`: start in plan mode (crush(1) PLAN MODE).
    pub plan: bool,
}

#[derive(Debug)]
pub(crate) enum AppError {
    /// Bad flag, bad arguments: exit 2.
    Usage(String),
    /// Invalid configuration or no provider: exit 2.
    Config(String),
    /// Provider unreachable, I/O: exit 1.
    Runtime(String),
    /// The configuration cannot be loaded or names no usable model: exit 2.
    Configuration(Box<ConfigError>),
    /// A skill or command that cannot be used as typed: exit 2.
    Skill(Box<SkillError>),
    /// An MCP server that cannot be used or did not answer: exit 1.
    Mcp(Box<McpError>),
    /// `crush update-providers` could not update the catalog: exit 2 for a bad source, 1 for
    /// network or disk trouble.
    Update(Box<crate::catalog::UpdateError>),
}

impl AppError {
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            AppError::Usage(_) | AppError::Config(_) | AppError::Configuration(_) => {
                ExitCode::Usage
            }
            AppError::Skill(e) if e.is_usage() => ExitCode::Usage,
            AppError::Update(e) if e.is_usage() => ExitCode::Usage,
            AppError::Runtime(_) | AppError::Skill(_) | AppError::Mcp(_) | AppError::Update(_) => {
                ExitCode::Failure
            }
        }
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Usage(m) | AppError::Config(m) | AppError::Runtime(m) => f.write_str(m),
            AppError::Configuration(e) => e.fmt(f),
            AppError::Skill(e) => e.fmt(f),
            AppError::Mcp(e) => e.fmt(f),
            AppError::Update(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AppError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AppError::Configuration(e) => Some(e.as_ref()),
            AppError::Skill(e) => Some(e.as_ref()),
            AppError::Mcp(e) => Some(e.as_ref()),
            AppError::Update(e) => Some(e.as_ref()),
            AppError::Usage(_) | AppError::Config(_) | AppError::Runtime(_) => None,
        }
    }
}

impl From<crate::catalog::UpdateError> for AppError {
    fn from(e: crate::catalog::UpdateError) -> Self {
        AppError::Update(Box::new(e))
    }
}

impl From<ConfigError> for AppError {
    fn from(e: ConfigError) -> Self {
        AppError::Configuration(Box::new(e))
    }
}

impl From<SkillError> for AppError {
    fn from(e: SkillError) -> Self {
        AppError::Skill(Box::new(e))
    }
}

impl From<McpError> for AppError {
    fn from(e: McpError) -> Self {
        AppError::Mcp(Box::new(e))
    }
}

impl From<store::StoreError> for AppError {
    fn from(e: store::StoreError) -> Self {
        match e {
            store::StoreError::NotFound(_) | store::StoreError::Ambiguous { .. } => {
                AppError::Usage(e.to_string())
            }
            _ => AppError::Runtime(e.to_string()),
        }
    }
}

/// A turn's store failure exits as the same store failure elsewhere would.
impl From<crate::agent::AgentError> for AppError {
    fn from(e: crate::agent::AgentError) -> Self {
        match e {
            crate::agent::AgentError::Store(e) => e.into(),
            e => AppError::Runtime(e.to_string()),
        }
    }
}

/// The working directory: `-c DIR` or the process's.
pub(crate) fn working_dir(global: &Global) -> Result<PathBuf, AppError> {
    let cwd = match &global.cwd {
        Some(d) => {
            let abs = std::env::current_dir()
                .map(|c| c.join(d))
                .unwrap_or_else(|_| d.clone());
            if !abs.is_dir() {
                return Err(AppError::Usage(format!(
                    "--cwd {}: not a directory",
                    d.display()
                )));
            }
            abs
        }
        None => std::env::current_dir()
            .map_err(|e| AppError::Runtime(format!("cannot read the current directory: {e}")))?,
    };
    Ok(cwd.canonicalize().unwrap_or(cwd))
}

/// Loads the configuration with the command-line layer, prints warnings, what crushrc scripts
/// printed and the trust notice to stderr. The configuration's `.env` and `env` map stay in
/// `loaded.env`, out of the process environment (see `env::Overlay`).
pub(crate) fn load_config(global: &Global) -> Result<Loaded, AppError> {
    load_config_with(global, true)
}

/// `load_config` without printing the configuration's warnings: for `crush config check`,
/// whose report lists them.
pub(crate) fn load_config_quietly(global: &Global) -> Result<Loaded, AppError> {
    load_config_with(global, false)
}

fn load_config_with(global: &Global, warn: bool) -> Result<Loaded, AppError> {
    let cwd = working_dir(global)?;
    let mut runtime = json!({});
    if global.debug {
        runtime["options"]["debug"] = json!(true);
    }
    // A flag replaces whichever of the two a file set: the other one is cleared.
    if let Some(t) = &global.system_prompt {
        runtime["options"]["system_prompt"] = json!(t);
        runtime["options"]["system_prompt_file"] = json!(null);
    }
    if let Some(f) = &global.system_prompt_file {
        runtime["options"]["system_prompt_file"] = json!(f);
        runtime["options"]["system_prompt"] = json!(null);
    }
    let mut loaded = config::load_with(&config::layers::LoadOptions {
        cwd,
        data_dir: global.data_dir.clone(),
        runtime,
        trust: global.trust,
        no_project_hooks: global.no_project_hooks,
    })?;
    // `-m` and `--small-model` belong to the runtime layer too, so `config show --origin` and
    // the shell builtin `model large` report them. An unknown model is reported by the command
    // that needs it, not here.
    for (flag, which, name) in [
        (&global.model, "large", "--model"),
        (&global.small_model, "small", "--small-model"),
    ] {
        if let Some(f) = flag
            && let Ok(m) = loaded.resolve_model(Some(f), which == "small")
        {
            let args = [
                "model".to_string(),
                which.to_string(),
                format!("{}/{}", m.provider.id, m.model.id),
            ];
            let _ = config::layers::apply_runtime(
                &mut loaded,
                &args,
                format!("command line: {name} {f}"),
            );
        }
    }
    for w in loaded.warnings.iter().filter(|_| warn) {
        crate::ewriteln!("crush: warning: {}", crate::visible::text(w));
    }
    for out in &loaded.script_output {
        crate::ewrite!("{out}");
        if !out.ends_with('\n') {
            crate::ewriteln!();
        }
    }
    if let Some(n) = loaded.trust.notice() {
        crate::ewriteln!("crush: {}", crate::visible::text(&n));
    }
    crate::agent::prompt::replacement(&loaded).map_err(|e| AppError::Config(e.to_string()))?;
    if loaded.config.options.debug {
        for l in &loaded.layers {
            if let Some(p) = &l.path {
                crate::ewriteln!("crush: debug: config layer {:?}: {}", l.kind, p.display());
            }
        }
        crate::ewriteln!("crush: debug: data dir {}", loaded.data_dir.display());
    }
    Ok(loaded)
}

/// A data directory that cannot be made private: refused (exit 2) when it is not the user's
/// own, else an I/O failure.
fn data_dir_error(what: &str, dir: &std::path::Path, e: std::io::Error) -> AppError {
    if e.kind() == std::io::ErrorKind::PermissionDenied && e.get_ref().is_some() {
        AppError::Config(format!("the {what} {e}"))
    } else {
        AppError::Runtime(format!("cannot create the {what} {}: {e}", dir.display()))
    }
}

/// Creates (or tightens) the project data dir and the global data dir (0700), registers the
/// project and opens the store, its database and log readable by the user only (0600).
pub(crate) fn open_store(loaded: &Loaded) -> Result<Store, AppError> {
    store::ensure_data_dir(&loaded.data_dir)
        .map_err(|e| data_dir_error("data directory", &loaded.data_dir, e))?;
    let global = crate::paths::global_data_dir();
    crate::fsutil::private_dir(&global)
        .map_err(|e| data_dir_error("global data directory", &global, e))?;
    let db = loaded.data_dir.join("crush.db");
    for (f, create) in [
        (db.clone(), true),
        (loaded.data_dir.join("crush.db-wal"), false),
        (loaded.data_dir.join("crush.db-shm"), false),
    ] {
        crate::fsutil::private_file(&f, create)
            .map_err(|e| AppError::Runtime(format!("cannot protect {}: {e}", f.display())))?;
    }
    crate::log::init(&loaded.data_dir, loaded.config.options.debug);
    if let Err(e) = store::projects::touch(&global, &loaded.project_root, &loaded.data_dir) {
        crate::ewriteln!("crush: warning: cannot update projects.json: {e}");
    }
    Ok(Store::open(&db)?)
}

/// Opens the store read-only, without creating, migrating or writing anything (read-only
/// commands).
pub(crate) fn open_existing_store(loaded: &Loaded) -> Result<Option<Store>, AppError> {
    let db = loaded.data_dir.join("crush.db");
    if !db.exists() {
        return Ok(None);
    }
    Ok(Some(Store::open_read_only(&db)?))
}

pub(crate) struct OpenSession {
    pub agent: Agent,
    pub title: String,
    pub resumed: bool,
    /// What slash names can name (crush(1) SKILLS AND COMMANDS).
    pub skills: std::sync::Arc<crate::skills::Skills>,
    pub commands: std::sync::Arc<crate::skills::commands::Commands>,
    /// `options.progress` is not false: the activity line may be drawn.
    pub progress: bool,
    /// Lines of a tool result's preview (`options.tool_preview_lines`).
    pub preview_lines: usize,
}

thread_local! {
    /// The stores this thread opened for its sessions, closed cleanly by `close_stores` when
    /// crush ends normally.
    static OPEN_STORES: std::cell::RefCell<Vec<Rc<Store>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Leaves the databases this thread opened as a closed one is left: checkpointed, with no
/// `-wal` or `-shm` file beside it, so a reader that snapshots the files finds them still
/// (crush(1) SESSION STORE). Where another process has the database open, it stays as it is.
pub(crate) fn close_stores() {
    OPEN_STORES.with(|s| {
        for store in s.borrow_mut().drain(..) {
            store.close_wal();
        }
    });
}

/// Configuration and the open store: what every session of a process shares.
pub(crate) struct Context {
    pub loaded: Loaded,
    /// The project's store, shared with the agents of the context's sessions.
    pub store: Rc<Store>,
    /// The configured hooks (crush(1) HOOKS).
    pub hooks: crate::hooks::HookConfig,
    /// The MCP servers, started with the context.
    pub mcp: crate::tools::mcp::Mcp,
    /// The Agent Skills and custom commands (crush(1) SKILLS AND COMMANDS).
    pub skills: std::sync::Arc<crate::skills::Skills>,
    pub commands: std::sync::Arc<crate::skills::commands::Commands>,
    /// The language servers (crush(1) LANGUAGE SERVERS); they stop when the last user drops.
    pub lsp: Option<Lsp>,
    /// The OS sandbox of the model's commands (None: off).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
    /// The auto approval mode (`--auto`, `options.approval`).
    pub auto: bool,
}

/// The language servers of the configuration (configured, and detected on PATH in a trusted
/// project): none runs until a tool touches a file of its type. None when there are none.
/// Entries that cannot be used are reported on stderr.
pub(crate) fn language_servers(loaded: &Loaded) -> Option<Lsp> {
    let setup = config::lsp::servers(loaded);
    for w in &setup.warnings {
        crate::ewriteln!("crush: warning: {}", crate::visible::text(w));
    }
    if setup.specs.is_empty() {
        return None;
    }
    let options = &loaded.config.options;
    let manager = crate::lsp::Manager::new(
        &loaded.project_root,
        setup.specs,
        config::lsp::timing(),
        options.debug_lsp || options.debug,
    );
    Some(Lsp::new(std::sync::Arc::new(manager)))
}

/// Loads the configuration and opens (creating if needed) the project's store.
pub(crate) fn open_context(global: &Global) -> Result<Context, AppError> {
    open_context_with(global, |_| Ok(()))
}

/// [`open_context`] with a check of the configuration before anything is created.
fn open_context_with(
    global: &Global,
    check: impl Fn(&Loaded) -> Result<(), AppError>,
) -> Result<Context, AppError> {
    let loaded = load_config(global)?;
    check(&loaded)?;
    // A sandbox that was asked for and cannot be had stops crush here: nothing runs unconfined.
    let (sandbox, auto) = session_sandbox(&loaded, global)?;
    // Invalid hooks fail before anything is created on disk.
    let hooks = load_hooks(&loaded)?;
    let store = Rc::new(open_store(&loaded)?);
    OPEN_STORES.with(|s| s.borrow_mut().push(store.clone()));
    let lsp = language_servers(&loaded);
    let mcp = start_mcp(&loaded);
    let (skills, commands) = load_skills(&loaded);
    Ok(Context {
        loaded,
        store,
        hooks,
        lsp,
        mcp,
        skills: std::sync::Arc::new(skills),
        commands: std::sync::Arc::new(commands),
        sandbox,
        auto,
    })
}

/// The session's sandbox and whether the auto approval mode is on, from the configuration
/// and the flags (crush(1) SECURITY, sandbox). Errors are configuration errors (exit 2).
pub(crate) fn session_sandbox(
    loaded: &Loaded,
    global: &Global,
) -> Result<(Option<std::sync::Arc<crate::sandbox::Sandbox>>, bool), AppError> {
    use crate::config::sandbox as settings;
    let flags = sandbox_flags(global);
    let err = |e: settings::SettingsError| AppError::Config(e.to_string());
    let auto = settings::auto_approval(loaded, &flags).map_err(err)?;
    Ok((settings::session(loaded, &flags).map_err(err)?, auto))
}

/// What the flags of `global` ask of the sandbox.
pub(crate) fn sandbox_flags(global: &Global) -> crate::config::sandbox::Flags {
    crate::config::sandbox::Flags {
        mode: global.sandbox.clone(),
        network: false,
        auto: global.auto,
    }
}

/// Discovers the skills and custom commands; name clashes are a warning on stderr (the rest
/// is listed by `crush skills list`).
pub(crate) fn load_skills(
    loaded: &Loaded,
) -> (crate::skills::Skills, crate::skills::commands::Commands) {
    let started = std::time::Instant::now();
    let mut skills = crate::skills::discover(loaded);
    let commands = crate::skills::commands::load(loaded);
    if skills
        .found
        .iter()
        .any(|f| f.skill.as_ref().is_some_and(|s| s.fork.is_some()))
    {
        let (agents, _) = crate::agent::subagent::custom_agents(loaded, None);
        let names: Vec<&str> = agents.agents.iter().map(|a| a.name.as_str()).collect();
        skills.check_agents(&names);
    }
    let elapsed = started.elapsed();
    for w in skills.warnings.iter().chain(&commands.warnings) {
        crate::log::warn(w);
        crate::ewriteln!("crush: warning: {}", crate::visible::text(w));
    }
    if loaded.config.options.debug {
        crate::ewriteln!(
            "crush: debug: {} skill folder(s) and {} command file(s) found in {:.3} ms",
            skills.found.len(),
            commands.commands.len() + commands.rejected.len(),
            elapsed.as_secs_f64() * 1000.0
        );
    }
    (skills, commands)
}

/// The file `/init` and `crush init` write: `options.initialize_as` (default AGENTS.md).
pub(crate) fn init_file_name(loaded: &Loaded) -> String {
    loaded
        .config
        .options
        .initialize_as
        .clone()
        .filter(|f| !f.trim().is_empty())
        .unwrap_or_else(|| "AGENTS.md".to_string())
}

/// Where `/init` writes, as the file tools name it (absolute, links resolved): relative names
/// are relative to the working directory.
pub(crate) fn init_target(loaded: &Loaded) -> PathBuf {
    let p = crate::paths::resolve(&loaded.cwd, &init_file_name(loaded));
    crate::paths::canonicalize_lenient(&p)
}

/// The flag Go Crush keeps too: the project was initialized, or told about `/init` once.
fn init_flag(loaded: &Loaded) -> PathBuf {
    loaded.data_dir.join("init")
}

/// Whether the first start in this project should mention `/init`: never told before, no
/// context file in the working directory, and something there to describe.
pub(crate) fn needs_init(loaded: &Loaded) -> bool {
    if init_flag(loaded).exists()
        || crate::agent::prompt::has_context_file(&loaded.cwd, &loaded.config.options.context_paths)
    {
        return false;
    }
    std::fs::read_dir(&loaded.cwd).is_ok_and(|mut rd| {
        rd.any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.')))
    })
}

/// Records that `/init` was mentioned or run (a failure only means it is mentioned again).
pub(crate) fn mark_initialized(loaded: &Loaded) {
    let _ = std::fs::write(init_flag(loaded), "");
}

/// Starts the configured MCP servers (crush(1) MCP SERVERS), each on a thread of its own; a
/// server configured wrongly is a warning on stderr.
pub(crate) fn start_mcp(loaded: &Loaded) -> crate::tools::mcp::Mcp {
    let manager = crate::mcp::Manager::new(
        loaded.project_root.clone(),
        std::sync::Arc::new(config::mcp::StateTokens),
        loaded.env.clone(),
    );
    let (specs, warnings) = config::mcp::servers(loaded);
    for w in warnings {
        crate::ewriteln!("crush: warning: {}", crate::visible::text(&w));
    }
    manager.set_servers(specs);
    crate::tools::mcp::Mcp::new(manager)
}

/// How long the first request of an interactive session waits for MCP servers still starting
/// (`CRUSH_MCP_WAIT_MS`, default 1000): a server not ready by then joins at a later step.
pub(crate) fn mcp_wait() -> Duration {
    let ms = std::env::var("CRUSH_MCP_WAIT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1000);
    Duration::from_millis(ms)
}

/// A session to continue: `-s ID` (id or unique prefix, never a sub-agent's) or `-C` (the most
/// recent top-level session). None: start a new one.
pub(crate) fn session_to_continue(
    store: &Store,
    global: &Global,
) -> Result<Option<store::Session>, AppError> {
    if let Some(id) = &global.session {
        return Ok(Some(top_level(store.resolve_session(id)?)?));
    }
    if global.continue_last {
        return Ok(store.latest_session()?);
    }
    Ok(None)
}

/// Refuses a sub-agent's session, which only its parent may continue.
pub(crate) fn top_level(s: store::Session) -> Result<store::Session, AppError> {
    match &s.parent_session_id {
        Some(parent) => Err(AppError::Usage(format!(
            "session {} is a sub-agent's session; continue its parent {} instead",
            crate::store::hashid::short_id(&s.id),
            crate::store::hashid::short_id(parent)
        ))),
        None => Ok(s),
    }
}

/// A project's guard hooks never silently vanish in CI (crush(1) SECURITY): a non-interactive
/// run in a project whose own hooks are not trusted stops before the first model call, unless
/// `--no-project-hooks` says to run without them.
pub(crate) fn refuse_untrusted_hooks(loaded: &Loaded, global: &Global) -> Result<(), AppError> {
    let review = &loaded.trust;
    if global.no_project_hooks || review.allowed() || review.hooks.is_empty() {
        return Ok(());
    }
    let mut msg = format!(
        "project {} {} and defines hooks, so this run stops before calling the model:\n",
        review.project_root.display(),
        review.why()
    );
    for h in &review.hooks {
        msg.push_str(&format!("  {h}\n"));
    }
    msg.push_str(
        "decide: 'crush trust' to trust the project (or --trust or CRUSH_TRUST_PROJECT=1 for one run) to run with them, or --no-project-hooks to run without them",
    );
    Err(AppError::Config(msg))
}

/// Everything a turn needs: config, model, store, session (new, `-s` or `-C`), agent.
pub(crate) fn open_session(global: &Global) -> Result<OpenSession, AppError> {
    start_session(open_run_context(global)?, global)
}

/// The context of a non-interactive turn (which refuses a project's untrusted hooks).
pub(crate) fn open_run_context(global: &Global) -> Result<Context, AppError> {
    open_context_with(global, |l| refuse_untrusted_hooks(l, global))
}

/// The session of a non-interactive turn in `ctx`: new, `-s` or `-C`, with its agent.
pub(crate) fn start_session(ctx: Context, global: &Global) -> Result<OpenSession, AppError> {
    let model = ctx.loaded.resolve_model(global.model.as_deref(), false)?;
    let (session, resumed) = match session_to_continue(&ctx.store, global)? {
        Some(s) => (s, true),
        None => {
            let s = ctx
                .store
                .create_session(crate::agent::title::PLACEHOLDER, None)?;
            forget_if_left_empty(ctx.store.path(), &s.id);
            (s, false)
        }
    };
    let title = session.title.clone();
    let progress = ctx.loaded.config.options.progress != Some(false);
    let preview_lines = crate::tools::preview_lines(ctx.loaded.config.options.tool_preview_lines);
    // A non-interactive turn waits for every server to start or fail: runs are repeatable.
    let mut agent = build_agent(&ctx, model, session.id, global.yolo, None);
    agent.policy.plan_mode = global.plan;
    Ok(OpenSession {
        agent,
        title,
        resumed,
        skills: ctx.skills.clone(),
        commands: ctx.commands.clone(),
        progress,
        preview_lines,
    })
}

/// At exit, however the run ends (a closed stdout, a signal, an error before the prompt was
/// stored), the new session `id` is deleted if nothing was stored in it: a run never leaves an
/// empty "Untitled Session" behind (crush(1) EXIT STATUS).
/// A run that returns normally checks on the connection it has ([`OpenSession`]'s drop) and
/// clears [`LEFT_EMPTY_CHECK`]; only an exit by signal or a closed pipe opens the file again.
fn forget_if_left_empty(db: &std::path::Path, id: &str) {
    let (db, id) = (db.to_path_buf(), id.to_string());
    LEFT_EMPTY_CHECK.store(true, Ordering::SeqCst);
    crate::signal::on_exit(move || {
        if !LEFT_EMPTY_CHECK.swap(false, Ordering::SeqCst) {
            return;
        }
        if let Ok(s) = Store::open(&db) {
            delete_if_left_empty(&s, &id);
        }
    });
}

/// Whether the exit hook of [`forget_if_left_empty`] still has to check.
static LEFT_EMPTY_CHECK: AtomicBool = AtomicBool::new(false);

fn delete_if_left_empty(store: &Store, id: &str) {
    if let Ok(true) = store.delete_if_empty(id) {
        crate::log::info(&format!("run: session {id} was left empty: deleted"));
    }
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        if !self.resumed && LEFT_EMPTY_CHECK.swap(false, Ordering::SeqCst) {
            delete_if_left_empty(&self.agent.session.store, &self.agent.session.id);
        }
    }
}

/// Retries, timeouts and the reply size limit for model calls (`CRUSH_RETRY_BASE_MS`,
/// `options.request_idle_timeout`, `CRUSH_MAX_REPLY_BYTES`).
pub(crate) fn retry_policy(loaded: &Loaded) -> RetryPolicy {
    let mut policy = RetryPolicy::default();
    if let Some(ms) = std::env::var("CRUSH_RETRY_BASE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        policy.base_backoff = Duration::from_millis(ms);
    }
    if let Some(s) = loaded.config.options.request_idle_timeout {
        policy.idle_timeout = Duration::from_secs(s.max(1));
    }
    if let Some(n) = std::env::var("CRUSH_MAX_REPLY_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        policy.max_reply_bytes = n;
    }
    policy
}

/// How long a local server may take to its first token unless `options.request_idle_timeout`
/// says otherwise: a CPU reading a long prompt takes minutes (crush(1) CONFIGURATION).
pub(crate) const LOCAL_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(600);

/// [`retry_policy`] for calls to `model`: a server on this machine or a private network gets
/// [`LOCAL_FIRST_TOKEN_TIMEOUT`] for the response and the silences of its stream.
pub(crate) fn retry_policy_for(loaded: &Loaded, model: &ResolvedModel) -> RetryPolicy {
    let set = loaded.config.options.request_idle_timeout.is_some();
    for_server(retry_policy(loaded), &model.provider.endpoint.base_url, set)
}

/// `policy` for a server at `base_url`; `idle_set`: the user chose the idle timeout.
fn for_server(mut policy: RetryPolicy, base_url: &str, idle_set: bool) -> RetryPolicy {
    if crate::net::is_local_url(base_url) && !idle_set {
        policy.response_timeout = policy.response_timeout.max(LOCAL_FIRST_TOKEN_TIMEOUT);
        policy.idle_timeout = policy.idle_timeout.max(LOCAL_FIRST_TOKEN_TIMEOUT);
    }
    policy
}

/// The agent for one session (`session_id` may be empty while the REPL has not created it yet).
/// Its first model call waits `mcp_wait` for MCP servers still starting (None: until each has
/// started or failed).
pub(crate) fn build_agent(
    ctx: &Context,
    model: ResolvedModel,
    session_id: String,
    yolo: bool,
    mcp_wait: Option<Duration>,
) -> Agent {
    let policy = retry_policy_for(&ctx.loaded, &model);
    let mut agent = Agent::new(Setup {
        store: ctx.store.clone(),
        mcp: Some(crate::agent::McpTools::new(ctx.mcp.clone(), mcp_wait)),
        session_id,
        model,
        config: ctx.loaded.clone(),
        hooks: ctx.hooks.clone(),
        policy,
        cancel: crate::signal::interrupt_flag(),
        yolo,
        skills: ctx.skills.clone(),
        lsp: ctx.lsp.clone(),
    });
    agent.workspace.sandbox = ctx.sandbox.clone();
    let review = &ctx.loaded.trust;
    if !review.allowed()
        && review
            .items
            .iter()
            .any(|i| i.key.starts_with("permissions"))
    {
        agent.policy.permissions.untrusted_note = Some(format!(
            "project {} {}, so its own \"permissions\" setting is skipped: 'crush trust' (or --trust for one run) applies it",
            review.project_root.display(),
            review.why()
        ));
    }
    if ctx.auto {
        agent.policy.permissions.auto = Some(ctx.loaded.project_root.clone());
    }
    agent
}

/// The configured hooks, each named after the file it came from. Warnings (unknown events,
/// unsupported handler types) go to stderr; an invalid hook (bad matcher, no command) is a
/// configuration error.
pub(crate) fn load_hooks(loaded: &Loaded) -> Result<crate::hooks::HookConfig, AppError> {
    match crate::hooks::HookConfig::from_loaded(loaded) {
        Ok((hooks, warnings)) => {
            for w in warnings {
                crate::ewriteln!("crush: warning: {}", crate::visible::text(&w));
            }
            Ok(hooks)
        }
        Err(p) => {
            for w in p.warnings {
                crate::ewriteln!("crush: warning: {}", crate::visible::text(&w));
            }
            Err(AppError::Config(format!(
                "invalid hook configuration:\n  {}\nfix the hook (see 'man crush', HOOKS) or remove it",
                p.errors.join("\n  ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentError;

    #[test]
    fn a_local_server_waits_longer_for_its_first_token_unless_told_otherwise() {
        let p = || RetryPolicy::default();
        let local = for_server(p(), "http://127.0.0.1:8080/v1", false);
        assert_eq!(local.response_timeout, LOCAL_FIRST_TOKEN_TIMEOUT);
        assert_eq!(local.idle_timeout, LOCAL_FIRST_TOKEN_TIMEOUT);
        let lan = for_server(p(), "http://192.168.1.5:11434/v1", false);
        assert_eq!(lan.response_timeout, LOCAL_FIRST_TOKEN_TIMEOUT);
        let remote = for_server(p(), "https://api.openai.com/v1", false);
        assert_eq!(remote.response_timeout, p().response_timeout);
        let told = for_server(p(), "http://127.0.0.1:8080/v1", true);
        assert_eq!(told.response_timeout, p().response_timeout);
        assert_eq!(told.idle_timeout, p().idle_timeout);
    }

    #[test]
    fn a_turn_that_loses_its_session_exits_2_and_other_failures_1() {
        let gone = AppError::from(AgentError::Store(store::StoreError::NotFound("abc".into())));
        assert_eq!(gone.exit_code(), ExitCode::Usage);
        assert_eq!(gone.to_string(), "no session matches 'abc'");
        let sql = AppError::from(AgentError::Store(store::StoreError::Sql(
            "disk full".into(),
        )));
        assert_eq!(sql.exit_code(), ExitCode::Failure);
        assert_eq!(sql.to_string(), "session store error: disk full");
        let empty = AppError::from(AgentError::EmptySummary);
        assert_eq!(empty.exit_code(), ExitCode::Failure);
        assert_eq!(empty.to_string(), "the model returned an empty summary");
    }

    #[test]
    fn a_catalog_update_failure_keeps_its_message_exit_class_and_source() {
        use crate::catalog::UpdateError;
        use std::error::Error;
        let bad = AppError::from(UpdateError::Input("p.json: cannot read: gone".into()));
        assert_eq!(bad.exit_code(), ExitCode::Usage);
        assert_eq!(bad.to_string(), "p.json: cannot read: gone");
        let src = bad.source().expect("the catalog error is the source");
        assert!(matches!(
            src.downcast_ref::<UpdateError>(),
            Some(UpdateError::Input(_))
        ));
        let net = AppError::from(UpdateError::Runtime(
            "refused; the cache was left unchanged".into(),
        ));
        assert_eq!(net.exit_code(), ExitCode::Failure);
        assert_eq!(net.to_string(), "refused; the cache was left unchanged");
        assert!(net.source().is_some_and(|s| s.is::<UpdateError>()));
    }
}
