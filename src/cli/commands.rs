//! The command table: each row is a command's name, its usage, help text and examples, and
//! its parse function — what it makes of the arguments and flags of its command line. A
//! command without a parse function does not compile.

use super::{CliError, Parsed};
use crate::commands::hooks::HooksTestArgs;
use crate::commands::sessions::ExportFormat;
use crate::repl::ReplArgs;
use crate::run::{InitArgs, RunArgs};
use std::mem::take;
use std::path::PathBuf;

/// The command word of a command line; `Repl` when there is none (the interactive session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Cmd {
    #[default]
    Repl,
    Run,
    Init,
    Sessions,
    Hooks,
    Mcp,
    Login,
    Logout,
    Skills,
    Agents,
    Debug,
    Lsp,
    Config,
    Sandbox,
    Trust,
    Models,
    UpdateProviders,
    Stats,
    Dirs,
    Projects,
    Logs,
    Acp,
    Help,
}

impl Cmd {
    /// Its row; None for the REPL, which has no command word.
    pub(crate) fn spec(self) -> Option<&'static CommandSpec> {
        COMMANDS.iter().find(|c| c.cmd == self)
    }

    /// How help and errors name it: `crush` or `crush NAME`.
    pub(crate) fn display_name(self) -> String {
        match self.spec() {
            Some(c) => format!("crush {}", c.name),
            None => "crush".to_string(),
        }
    }
}

pub(crate) struct CommandSpec {
    pub name: &'static str,
    pub cmd: Cmd,
    /// Other words for it (Go Crush's `r`, `session`, `s`).
    pub aliases: &'static [&'static str],
    /// Everything after its first argument is an argument, flags included (a prompt, a
    /// command line).
    pub greedy: bool,
    /// Makes the command of its arguments and flags.
    pub parse: fn(&mut Parsed) -> Result<Command, CliError>,
    /// Its forms, separated by ` | ` (a form without `crush` continues the first's words).
    pub usage: &'static str,
    /// One line for `crush --help` and the completions.
    pub brief: &'static str,
    /// What `crush help COMMAND` and the man page say about it.
    pub about: &'static str,
    /// Command lines `crush help COMMAND` ends with.
    pub examples: &'static [&'static str],
    /// Subcommands (for completions), if any.
    pub subcommands: &'static [&'static str],
}

pub(crate) static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "run",
        cmd: Cmd::Run,
        aliases: &["r"],
        greedy: true,
        parse: run,
        usage: "crush run [FLAGS] [PROMPT...]",
        brief: "Run one turn without the REPL and print the answer",
        about: "Run one non-interactive turn. A piped stdin is placed before the prompt (an \
                image piped in is attached instead); a prompt whose first word is /NAME runs \
                that custom command, skill or MCP prompt (NAME=value words after it bind its \
                named arguments). \
                stdout carries only the answer (or JSON events with --json); when it is not a \
                terminal, a model call's text is written once the call can no longer be retried, \
                so stdout equals the stored answer. The --json finish event's reason is \
                end_turn, max_tokens, content_filter, empty, max_steps, loop, \
                permission_refused, hook_denied, hook_halted, budget, canceled or error \
                (EXIT STATUS).",
        examples: &[
            "crush run \"explain the build\"",
            "git diff | crush run \"write a commit message\"",
            "crush run -C --json \"and the tests?\"",
        ],
        subcommands: &[],
    },
    CommandSpec {
        name: "init",
        cmd: Cmd::Init,
        aliases: &[],
        greedy: false,
        parse: init,
        usage: "crush init [NOTES...]",
        brief: "Have the agent write AGENTS.md for this project",
        about: "Have the agent explore the project and write the file options.initialize_as \
                names (default AGENTS.md), for the agents that will work in it; NOTES are added \
                to its instructions. It may write that file without asking; an existing one is \
                rewritten only after a yes on stdin. Exits 3 without a yes, 1 when the agent \
                did not write the file.",
        examples: &["crush init", "crush init \"we build with make, not cargo\""],
        subcommands: &[],
    },
    CommandSpec {
        name: "sessions",
        cmd: Cmd::Sessions,
        aliases: &["session", "s"],
        greedy: false,
        parse: sessions,
        usage: "crush sessions list | show ID | last | export ID [--format md|json] | diff ID | delete ID | rename ID TITLE  [--json]",
        brief: "List, show, export, diff, delete or rename sessions",
        about: "List the project's sessions, show one with its messages (last: the most recent), \
                export it as Markdown or JSON, print the changes its tools made to files as a \
                unified diff (diff), delete it, or rename it. Sessions are named by Go \
                Crush's hash ids (lists show 7 digits); a hash id, a UUID or a unique prefix of \
                either works. --json prints Go Crush's documents. 'session' and 's' are aliases.",
        examples: &[
            "crush sessions",
            "crush sessions show 3f2a1b9",
            "crush sessions export 3f2a1b9 --format json > session.json",
        ],
        subcommands: &["list", "show", "last", "export", "diff", "delete", "rename"],
    },
    CommandSpec {
        name: "hooks",
        cmd: Cmd::Hooks,
        aliases: &[],
        greedy: false,
        parse: hooks,
        usage: "crush hooks list [--tool NAME] | test EVENT [--tool NAME --input JSON] [--prompt TEXT]",
        brief: "List the hooks, or test them on a synthetic event",
        about: "List the configured hooks per event with the file each came from (with --tool, \
                which ones match that tool), or run the real hooks of EVENT on a synthetic payload \
                and print the composed decision, reasons, context, context files and rewritten \
                input or prompt. hooks test exits 0 for allow or no opinion, 3 for deny or halt.",
        examples: &[
            "crush hooks list --tool bash",
            "crush hooks test PreToolUse --tool bash --input '{\"command\":\"rm -rf build\"}'",
            "crush hooks test UserPromptSubmit --prompt \"fix the login flow\"",
        ],
        subcommands: &["list", "test"],
    },
    CommandSpec {
        name: "mcp",
        cmd: Cmd::Mcp,
        aliases: &[],
        greedy: false,
        parse: mcp,
        usage: "crush mcp list [--json] | login NAME",
        brief: "Report the MCP servers, or authorize one (OAuth)",
        about: "Start every configured MCP server as a session would and report each: transport, \
                state, protocol revision, tools, prompts and last error. login authorizes crush \
                with an HTTP server that needs OAuth: its authorization URL opens in the browser \
                and the token is kept in the global state.",
        examples: &["crush mcp list", "crush mcp login github"],
        subcommands: &["list", "login"],
    },
    CommandSpec {
        name: "login",
        cmd: Cmd::Login,
        aliases: &[],
        greedy: false,
        parse: login,
        usage: "crush login [copilot|hyper] [--token-stdin]",
        brief: "Sign in to GitHub Copilot or Charm's Hyper",
        about: "Sign in to GitHub Copilot or Charm's Hyper instead of setting an API key: the \
                code and URL of the provider's device flow are printed (and the URL opened in \
                the browser), and the token is kept in the global data directory with mode 0600. \
                --token-stdin stores the token read from standard input as given. With no name, \
                lists the providers one can sign in to and their state.",
        examples: &[
            "crush login",
            "crush login copilot",
            "gh auth token | crush login copilot --token-stdin",
        ],
        subcommands: &["copilot", "hyper"],
    },
    CommandSpec {
        name: "logout",
        cmd: Cmd::Logout,
        aliases: &[],
        greedy: false,
        parse: logout,
        usage: "crush logout copilot|hyper",
        brief: "Remove the token crush login stored",
        about: "Remove the token crush login stored for a provider.",
        examples: &["crush logout copilot"],
        subcommands: &["copilot", "hyper"],
    },
    CommandSpec {
        name: "skills",
        cmd: Cmd::Skills,
        aliases: &[],
        greedy: false,
        parse: skills,
        usage: "crush skills list [--json]",
        brief: "List the Agent Skills and custom commands",
        about: "List every Agent Skill and custom command found, where it was found, and why \
                any was rejected (with the reason), ignored (a skill of the same name came \
                first) or disabled (options.disabled_skills).",
        examples: &["crush skills list", "crush skills list --json"],
        subcommands: &["list"],
    },
    CommandSpec {
        name: "agents",
        cmd: Cmd::Agents,
        aliases: &[],
        greedy: false,
        parse: agents,
        usage: "crush agents list [--json]",
        brief: "List the custom sub-agents and the agent files not used",
        examples: &["crush agents list", "crush agents list --json"],
        about: "List every custom sub-agent file found (see AGENTS): its name, description, \
                origin (the file and which of the four folders), tools and model (an alias with \
                the model it stands for), and each file not used: shadowed by one of the same \
                name found first, or rejected with the reason.",
        subcommands: &["list"],
    },
    CommandSpec {
        name: "debug",
        cmd: Cmd::Debug,
        aliases: &[],
        greedy: false,
        parse: debug,
        usage: "crush debug prompt",
        brief: "Print the exact system prompt a new session would send",
        examples: &[
            "crush debug prompt",
            "crush debug prompt --system-prompt-file p.md",
        ],
        about: "Print the exact system prompt a new session would send (with --system-prompt, \
                --system-prompt-file and -m as a session would have them); the names of the \
                tools it offers go to stderr.",
        subcommands: &["prompt"],
    },
    CommandSpec {
        name: "lsp",
        cmd: Cmd::Lsp,
        aliases: &[],
        greedy: false,
        parse: lsp,
        usage: "crush lsp list [--json]",
        brief: "Start the language servers and report their state",
        about: "Start every language server a session in this project would have (configured, \
                or found on PATH in a trusted project), report each one's state (ready with \
                its name and version, failed and why, disabled) and stop them.",
        examples: &["crush lsp list", "crush lsp list --json"],
        subcommands: &["list"],
    },
    CommandSpec {
        name: "config",
        cmd: Cmd::Config,
        aliases: &[],
        greedy: false,
        parse: config,
        usage: "crush config show [--origin] [--json] | crush config check",
        brief: "Print the effective configuration, or check it",
        about: "Print the effective configuration. With --origin, each value names the layer and \
                file:line that set it. check prints every unknown or ignored setting with its \
                file:line and exits 1 when there is any.",
        examples: &["crush config show --origin", "crush config check"],
        subcommands: &["show", "check"],
    },
    CommandSpec {
        name: "sandbox",
        cmd: Cmd::Sandbox,
        aliases: &[],
        greedy: true,
        parse: sandbox,
        usage: "crush sandbox check | [--mode MODE] [--network] -- COMMAND [ARG...]",
        brief: "Run a command in the OS sandbox, or check the sandbox",
        about: "Run COMMAND in the OS sandbox the model's commands get (default workspace-write, \
                network off, this project and options.sandbox.writable_roots writable), to try \
                build and test commands under it; exits with COMMAND's status. check prints \
                the kernel's Landlock ABI and what the sandbox can do.",
        examples: &[
            "crush sandbox -- make test",
            "crush sandbox --mode read-only --network -- curl -I https://example.com",
            "crush sandbox check",
        ],
        subcommands: &["check"],
    },
    CommandSpec {
        name: "trust",
        cmd: Cmd::Trust,
        aliases: &[],
        greedy: false,
        parse: trust,
        usage: "crush trust [--revoke]",
        brief: "Trust this project's own settings, hooks and servers",
        about: "Trust this project's own crushrc files, hooks, MCP and LSP servers, $(...) \
                values, .env file and the settings an untrusted project may not set (see \
                SECURITY): list them and record their hash, so a change asks again.",
        examples: &["crush trust", "crush trust --revoke"],
        subcommands: &[],
    },
    CommandSpec {
        name: "models",
        cmd: Cmd::Models,
        aliases: &[],
        greedy: false,
        parse: models,
        usage: "crush models [QUERY] [--all] [--json]",
        brief: "List the models of the configured providers",
        about: "List the models of the configured providers: one PROVIDER/MODEL per line when \
                piped, a table with prices and status on a terminal. --all adds the provider \
                catalog's other providers and what they need. QUERY filters by provider, model \
                id or name.",
        examples: &[
            "crush models",
            "crush models sonnet",
            "crush models --all --json",
        ],
        subcommands: &[],
    },
    CommandSpec {
        name: "update-providers",
        cmd: Cmd::UpdateProviders,
        aliases: &[],
        greedy: false,
        parse: update_providers,
        usage: "crush update-providers [SOURCE]",
        brief: "Replace the cached provider catalog",
        about: "Replace the cached provider catalog. SOURCE: nothing (Catwalk at $CATWALK_URL \
                or https://catwalk.charm.land), an http(s) base URL (+ /v2/providers), a URL \
                ending in .json, a local file, or 'embedded' for the built-in copy.",
        examples: &[
            "crush update-providers",
            "crush update-providers ./providers.json",
            "crush update-providers embedded",
        ],
        subcommands: &[],
    },
    CommandSpec {
        name: "stats",
        cmd: Cmd::Stats,
        aliases: &[],
        greedy: false,
        parse: stats,
        usage: "crush stats [--all] [--crawl-dir DIR] [--since WHEN] [--until WHEN] [--model M] [--provider P] [--format text|json|csv] [--chart] [--html [FILE] [--open]]",
        brief: "Show model calls, tokens and cost",
        about: "Show the project's model calls, tokens by kind and cost from the usage ledger: \
                in total, per model, per UTC day and per session (a sub-agent's calls count under \
                the session that started it), with bar charts of spend per day and per model on \
                a terminal. Calls without a price are shown as unpriced, never as $0. Spend Go \
                Crush recorded without itemizing it is shown on a line of its own. --all sums \
                every project in projects.json and --crawl-dir every project below DIR, each \
                database opened read-only. --html writes the report as a page with charts \
                (--open opens it).",
        examples: &[
            "crush stats",
            "crush stats --since 7d --model sonnet",
            "crush stats --all --html --open",
        ],
        subcommands: &[],
    },
    CommandSpec {
        name: "dirs",
        cmd: Cmd::Dirs,
        aliases: &[],
        greedy: false,
        parse: dirs,
        usage: "crush dirs",
        brief: "Print where configuration and data live",
        about: "Print where configuration, state, global data and project data live, and the \
                configuration files in use.",
        examples: &["crush dirs"],
        subcommands: &[],
    },
    CommandSpec {
        name: "projects",
        cmd: Cmd::Projects,
        aliases: &[],
        greedy: false,
        parse: projects,
        usage: "crush projects [--json]",
        brief: "List the projects crush has been used in",
        about: "List the projects crush has been used in, most recent first, with their data \
                directories.",
        examples: &["crush projects", "crush projects --json"],
        subcommands: &[],
    },
    CommandSpec {
        name: "logs",
        cmd: Cmd::Logs,
        aliases: &[],
        greedy: false,
        parse: logs,
        usage: "crush logs [-f] [-t N]",
        brief: "Print the project's log",
        about: "Print the project's log (<project data>/logs/crush.log: retries, refusals, hook \
                problems; debug lines with -d).",
        examples: &["crush logs -t 50", "crush logs -f"],
        subcommands: &[],
    },
    CommandSpec {
        name: "acp",
        cmd: Cmd::Acp,
        aliases: &[],
        greedy: false,
        parse: acp,
        usage: "crush acp [--cwd DIR]",
        brief: "Run as an agent inside an editor (Agent Client Protocol)",
        about: "Run as an agent inside an editor (Zed, JetBrains IDEs, Neovim, Emacs, VS Code), \
                over the Agent Client Protocol: newline-delimited JSON-RPC on stdin and stdout. \
                Each session opens its directory as crush -c DIR would: the same configuration, \
                trust, hooks, permissions and sessions as the terminal. stdout carries protocol \
                messages only; diagnostics go to stderr and the project log. Ends when stdin \
                closes.",
        examples: &["crush acp", "crush -y acp"],
        subcommands: &[],
    },
    CommandSpec {
        name: "help",
        cmd: Cmd::Help,
        aliases: &[],
        greedy: false,
        parse: help,
        usage: "crush help [COMMAND]",
        brief: "Show help for crush or for one command",
        about: "Show help for crush or for one command.",
        examples: &["crush help run", "crush run --help"],
        subcommands: &[],
    },
];

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Command {
    Repl(ReplArgs),
    Run(RunArgs),
    /// `crush acp`: an agent for editors over the Agent Client Protocol.
    Acp,
    Init(InitArgs),
    SessionsList {
        json: bool,
    },
    SessionsShow {
        id: String,
        json: bool,
    },
    Stats(crate::commands::stats::StatsArgs),
    SessionsExport {
        id: String,
        format: crate::commands::sessions::ExportFormat,
    },
    SessionsLast {
        json: bool,
    },
    SessionsDiff {
        id: String,
    },
    SessionsDelete {
        id: String,
        json: bool,
    },
    SessionsRename {
        id: String,
        title: String,
        json: bool,
    },
    Dirs,
    Projects {
        json: bool,
    },
    Logs {
        follow: bool,
        tail: usize,
    },
    HooksList {
        tool: Option<String>,
    },
    HooksTest(HooksTestArgs),
    McpList {
        json: bool,
    },
    McpLogin {
        name: String,
    },
    /// `crush login [NAME] [--token-stdin]` (crush(1) LOGIN).
    Login {
        name: Option<String>,
        token_stdin: bool,
    },
    Logout {
        name: String,
    },
    SkillsList {
        json: bool,
    },
    AgentsList {
        json: bool,
    },
    /// `crush debug prompt`: the system prompt a session would send.
    DebugPrompt,
    LspList {
        json: bool,
    },
    ConfigShow {
        origin: bool,
        json: bool,
    },
    /// `crush config check`: the configuration's warnings; exit 1 when there is any.
    ConfigCheck,
    Trust {
        revoke: bool,
    },
    SandboxCheck,
    SandboxRun {
        mode: Option<String>,
        network: bool,
        argv: Vec<String>,
    },
    Models {
        query: Option<String>,
        /// `--all`: the whole catalog, not only the configured providers.
        all: bool,
        json: bool,
    },
    UpdateProviders {
        source: Option<String>,
    },
    /// Help for crush (None) or one command.
    Help(Option<String>),
    Version,
    /// Hidden: print a generated document (man, bash, zsh, fish).
    Generate(String),
}

/// The interactive session (no command word).
pub(super) fn repl(p: &mut Parsed) -> Command {
    Command::Repl(ReplArgs { quiet: p.run.quiet })
}

fn run(p: &mut Parsed) -> Result<Command, CliError> {
    let mut run = take(&mut p.run);
    run.prompt = take(&mut p.positionals);
    run.json = p.json;
    Ok(Command::Run(run))
}

fn init(p: &mut Parsed) -> Result<Command, CliError> {
    Ok(Command::Init(InitArgs {
        notes: take(&mut p.positionals),
        quiet: p.run.quiet,
    }))
}

/// `crush NAME` takes no arguments.
fn none(p: &Parsed, name: &'static str) -> Result<(), CliError> {
    match p.positionals.first() {
        Some(got) => Err(CliError::NoArguments {
            command: name,
            got: got.clone(),
            usage: None,
        }),
        None => Ok(()),
    }
}

fn projects(p: &mut Parsed) -> Result<Command, CliError> {
    none(p, "projects")?;
    Ok(Command::Projects { json: p.json })
}

fn logs(p: &mut Parsed) -> Result<Command, CliError> {
    none(p, "logs")?;
    Ok(Command::Logs {
        follow: p.follow,
        tail: p.tail.unwrap_or(1000),
    })
}

fn acp(p: &mut Parsed) -> Result<Command, CliError> {
    none(p, "acp")?;
    Ok(Command::Acp)
}

fn dirs(p: &mut Parsed) -> Result<Command, CliError> {
    none(p, "dirs")?;
    Ok(Command::Dirs)
}

fn help(p: &mut Parsed) -> Result<Command, CliError> {
    Ok(Command::Help(take(&mut p.positionals).into_iter().next()))
}

fn stats(p: &mut Parsed) -> Result<Command, CliError> {
    use crate::commands::stats::Format;
    let mut stats = take(&mut p.stats);
    let mut it = take(&mut p.positionals).into_iter();
    match (it.next(), stats.html.is_some()) {
        // `--html FILE`: the one argument stats takes.
        (Some(file), true) => stats.html = Some(Some(PathBuf::from(file))),
        (Some(got), false) => return Err(CliError::StatsArgument(got)),
        (None, _) => {}
    }
    if let Some(got) = it.next() {
        return Err(CliError::StatsSecondFile(got));
    }
    if stats.open && stats.html.is_none() {
        return Err(CliError::Misplaced(
            "--open opens the page of --html; add --html",
        ));
    }
    stats.format = match p.format.as_deref() {
        None if p.json => Format::Json,
        None | Some("text") => Format::Text,
        Some("json") => Format::Json,
        Some("csv") => Format::Csv,
        Some(other) => return Err(CliError::StatsFormat(other.to_string())),
    };
    stats.filter.model = p.global.model.take();
    Ok(Command::Stats(stats))
}

const HOOKS_USAGE: &str =
    "usage: crush hooks list [--tool NAME] | test EVENT [--tool NAME --input JSON] [--prompt TEXT]";

fn hooks(p: &mut Parsed) -> Result<Command, CliError> {
    let mut hooks = take(&mut p.hooks);
    let mut it = take(&mut p.positionals).into_iter();
    match (it.next().as_deref(), it.next(), it.next()) {
        (None | Some("list" | "ls"), None, None) => {
            if hooks.input.is_some() || hooks.prompt.is_some() {
                return Err(CliError::Misplaced(
                    "--input and --prompt are for 'crush hooks test'",
                ));
            }
            Ok(Command::HooksList { tool: hooks.tool })
        }
        (Some("test"), Some(event), None) => {
            hooks.event = event;
            Ok(Command::HooksTest(hooks))
        }
        (Some("test"), None, _) => Err(CliError::Needs {
            command: "hooks test",
            what: format!(
                "an EVENT ({})",
                crate::config::hook_event::Event::all_names()
            ),
            usage: HOOKS_USAGE,
        }),
        (Some(other), _, _) => Err(CliError::Unknown {
            what: "hooks command or extra argument",
            word: other.to_string(),
            usage: HOOKS_USAGE,
        }),
        _ => Err(CliError::Usage(HOOKS_USAGE)),
    }
}

fn mcp(p: &mut Parsed) -> Result<Command, CliError> {
    const USAGE: &str = "usage: crush mcp list [--json] | login NAME";
    let json = p.json;
    match p.positionals.as_slice() {
        [] => Ok(Command::McpList { json }),
        [l] if l == "list" || l == "ls" => Ok(Command::McpList { json }),
        [l, name] if l == "login" && !json => Ok(Command::McpLogin { name: name.clone() }),
        [l] if l == "login" => Err(CliError::Needs {
            command: "mcp login",
            what: "the server's NAME".into(),
            usage: USAGE,
        }),
        words => Err(CliError::Unknown {
            what: "mcp command or extra argument",
            word: words.join(" "),
            usage: USAGE,
        }),
    }
}

fn login(p: &mut Parsed) -> Result<Command, CliError> {
    let token_stdin = p.token_stdin;
    match p.positionals.as_slice() {
        [] if !token_stdin => Ok(Command::Login {
            name: None,
            token_stdin,
        }),
        [name] => Ok(Command::Login {
            name: Some(name.clone()),
            token_stdin,
        }),
        _ => Err(CliError::Usage(
            "usage: crush login [copilot|hyper] [--token-stdin]",
        )),
    }
}

fn logout(p: &mut Parsed) -> Result<Command, CliError> {
    match p.positionals.as_slice() {
        [name] => Ok(Command::Logout { name: name.clone() }),
        _ => Err(CliError::Usage("usage: crush logout copilot|hyper")),
    }
}

/// `crush NAME [list|ls] [--json]`: a listing and nothing else.
fn listing(
    p: &Parsed,
    what: &'static str,
    usage: &'static str,
    list: fn(bool) -> Command,
) -> Result<Command, CliError> {
    match p.positionals.as_slice() {
        [] => Ok(list(p.json)),
        [l] if l == "list" || l == "ls" => Ok(list(p.json)),
        words => Err(CliError::Unknown {
            what,
            word: words.join(" "),
            usage,
        }),
    }
}

fn skills(p: &mut Parsed) -> Result<Command, CliError> {
    listing(
        p,
        "skills command or extra argument",
        "usage: crush skills list [--json]",
        |json| Command::SkillsList { json },
    )
}

fn agents(p: &mut Parsed) -> Result<Command, CliError> {
    listing(
        p,
        "agents command or extra argument",
        "usage: crush agents list [--json]",
        |json| Command::AgentsList { json },
    )
}

fn lsp(p: &mut Parsed) -> Result<Command, CliError> {
    match p.positionals.as_slice() {
        [] => Ok(Command::LspList { json: p.json }),
        [s] if s == "list" || s == "ls" => Ok(Command::LspList { json: p.json }),
        [other, ..] => Err(CliError::Unknown {
            what: "lsp command",
            word: other.clone(),
            usage: "usage: crush lsp list [--json]",
        }),
    }
}

fn debug(p: &mut Parsed) -> Result<Command, CliError> {
    match p.positionals.as_slice() {
        [w] if w == "prompt" => Ok(Command::DebugPrompt),
        words => Err(CliError::Unknown {
            what: "debug command",
            word: words.join(" "),
            usage: "usage: crush debug prompt",
        }),
    }
}

fn config(p: &mut Parsed) -> Result<Command, CliError> {
    const USAGE: &str = "usage: crush config show [--origin] [--json] | crush config check";
    match p.positionals.as_slice() {
        [s] if s == "show" => Ok(Command::ConfigShow {
            origin: p.origin,
            json: p.json,
        }),
        [s] if s == "check" => Ok(Command::ConfigCheck),
        [] => Err(CliError::Usage(USAGE)),
        [other, ..] => Err(CliError::Unknown {
            what: "config command",
            word: other.clone(),
            usage: USAGE,
        }),
    }
}

fn sandbox(p: &mut Parsed) -> Result<Command, CliError> {
    match p.positionals.as_slice() {
        [c] if c == "check" => Ok(Command::SandboxCheck),
        [] => Err(CliError::Usage(
            "usage: crush sandbox check | [--mode MODE] [--network] -- COMMAND [ARG...]",
        )),
        _ => Ok(Command::SandboxRun {
            mode: p.sandbox_mode.take(),
            network: p.network,
            argv: take(&mut p.positionals),
        }),
    }
}

fn trust(p: &mut Parsed) -> Result<Command, CliError> {
    if let Some(got) = p.positionals.first() {
        return Err(CliError::NoArguments {
            command: "trust",
            got: got.clone(),
            usage: Some("usage: crush trust [--revoke]"),
        });
    }
    Ok(Command::Trust { revoke: p.revoke })
}

fn models(p: &mut Parsed) -> Result<Command, CliError> {
    if p.positionals.len() > 1 {
        return Err(CliError::Usage(
            "usage: crush models [QUERY] [--all] [--json] (one query word)",
        ));
    }
    Ok(Command::Models {
        query: take(&mut p.positionals).into_iter().next(),
        all: p.stats.all,
        json: p.json,
    })
}

fn update_providers(p: &mut Parsed) -> Result<Command, CliError> {
    if p.positionals.len() > 1 {
        return Err(CliError::Usage(
            "usage: crush update-providers [URL | FILE | embedded]",
        ));
    }
    Ok(Command::UpdateProviders {
        source: take(&mut p.positionals).into_iter().next(),
    })
}

pub(super) const SESSIONS_USAGE: &str = "usage: crush sessions list | show ID | last | export ID [--format md|json] | diff ID | delete ID | rename ID TITLE";

/// What `crush sessions` does, its first word.
#[derive(Clone, Copy, PartialEq)]
enum Sessions {
    List,
    Show,
    Last,
    Export,
    Diff,
    Delete,
    Rename,
}

impl Sessions {
    fn of(word: Option<&str>) -> Result<Sessions, CliError> {
        Ok(match word {
            None | Some("list" | "ls") => Sessions::List,
            Some("show") => Sessions::Show,
            Some("last") => Sessions::Last,
            Some("export") => Sessions::Export,
            Some("diff") => Sessions::Diff,
            Some("delete" | "rm") => Sessions::Delete,
            Some("rename") => Sessions::Rename,
            Some(other) => {
                return Err(CliError::Unknown {
                    what: "sessions command",
                    word: other.to_string(),
                    usage: SESSIONS_USAGE,
                });
            }
        })
    }

    /// Its word in the usage messages.
    fn word(self) -> &'static str {
        match self {
            Sessions::List => "list",
            Sessions::Show => "show",
            Sessions::Last => "last",
            Sessions::Export => "export",
            Sessions::Diff => "diff",
            Sessions::Delete => "delete",
            Sessions::Rename => "rename",
        }
    }
}

fn unexpected(extra: Option<&String>) -> Result<(), CliError> {
    match extra {
        Some(word) => Err(CliError::Unexpected {
            word: word.clone(),
            usage: SESSIONS_USAGE,
        }),
        None => Ok(()),
    }
}

fn sessions(p: &mut Parsed) -> Result<Command, CliError> {
    let json = p.json;
    let mut it = take(&mut p.positionals).into_iter();
    let sub = Sessions::of(it.next().as_deref())?;
    let id = it.next();
    let rest: Vec<String> = it.collect();
    if p.format.is_some() && sub != Sessions::Export {
        return Err(CliError::OnlyFor {
            flag: "format",
            command: "sessions export",
            usage: SESSIONS_USAGE,
        });
    }
    let need = |id: Option<String>| id.ok_or(CliError::NeedsId(sub.word()));
    Ok(match sub {
        Sessions::List => {
            unexpected(id.as_ref())?;
            Command::SessionsList { json }
        }
        Sessions::Last => {
            unexpected(id.as_ref())?;
            Command::SessionsLast { json }
        }
        Sessions::Show => {
            unexpected(rest.first())?;
            Command::SessionsShow {
                id: need(id)?,
                json,
            }
        }
        Sessions::Export => {
            unexpected(rest.first())?;
            let format = match (p.format.as_deref(), json) {
                (Some(f), _) => {
                    ExportFormat::parse(f).ok_or_else(|| CliError::ExportFormat(f.to_string()))?
                }
                (None, true) => ExportFormat::Json,
                (None, false) => ExportFormat::Markdown,
            };
            Command::SessionsExport {
                id: need(id)?,
                format,
            }
        }
        Sessions::Diff => {
            unexpected(rest.first())?;
            Command::SessionsDiff { id: need(id)? }
        }
        Sessions::Delete => {
            unexpected(rest.first())?;
            Command::SessionsDelete {
                id: need(id)?,
                json,
            }
        }
        Sessions::Rename => {
            let id = need(id)?;
            if rest.is_empty() {
                return Err(CliError::Usage(
                    "usage: crush sessions rename ID TITLE (the new title is missing)",
                ));
            }
            Command::SessionsRename {
                id,
                title: rest.join(" "),
                json,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::lex;
    use super::*;

    /// The words after `crush` of an example (the command after a pipe, before a redirection),
    /// quotes removed as the shell would.
    fn words(example: &str) -> Vec<String> {
        let line = example.rsplit(" | ").next().unwrap_or(example);
        let line = line.split(" > ").next().unwrap_or(line);
        let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (None, ' ') => {
                    if any {
                        out.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, '\'' | '"') => (quote, any) = (Some(c), true),
                (Some(q), _) if c == q => quote = None,
                (Some('"'), '\\') => word.extend(chars.next()),
                _ => (word, any) = (word + &c.to_string(), true),
            }
        }
        if any {
            out.push(word);
        }
        assert_eq!(out.first().map(String::as_str), Some("crush"), "{example}");
        out.remove(0);
        out
    }

    #[test]
    fn every_command_row_parses_its_own_examples() {
        for row in COMMANDS {
            assert!(!row.examples.is_empty(), "{} has no examples", row.name);
            for example in row.examples {
                let args = words(example);
                let (p, seen) = lex(&args).unwrap_or_else(|e| panic!("{example}: {e}"));
                let word = p.command;
                let cli = p.finish(&seen).unwrap_or_else(|e| panic!("{example}: {e}"));
                let help = matches!(cli.command, Command::Help(Some(_)));
                assert!(
                    word == row.cmd || row.cmd == Cmd::Help && help,
                    "{example}: {word:?}"
                );
                assert!(
                    !help || row.cmd == Cmd::Help,
                    "{example}: {:?}",
                    cli.command
                );
            }
        }
    }

    #[test]
    fn each_command_word_and_alias_names_one_row() {
        let mut names: Vec<&str> = COMMANDS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a command word names two rows");
        for row in COMMANDS {
            assert!(row.cmd.spec().is_some_and(|c| std::ptr::eq(c, row)));
            for word in std::iter::once(&row.name).chain(row.aliases) {
                let (p, _) = lex([*word]).unwrap_or_else(|e| panic!("{word}: {e}"));
                assert_eq!(p.command, row.cmd, "{word}");
            }
        }
        assert!(Cmd::Repl.spec().is_none());
    }

    #[test]
    fn the_words_of_an_example_are_the_shell_s() {
        assert_eq!(
            words("gh auth token | crush login copilot --token-stdin"),
            ["login", "copilot", "--token-stdin"]
        );
        assert_eq!(
            words(r#"crush hooks test E --input '{"a":"b c"}' --prompt "say \"hi\"" > f"#),
            [
                "hooks",
                "test",
                "E",
                "--input",
                r#"{"a":"b c"}"#,
                "--prompt",
                r#"say "hi""#
            ]
        );
        assert_eq!(words("crush run ''"), ["run", ""]);
    }
}
