//! Command-line parsing with lexopt. One table of flags and one table of commands drive parsing,
//! `--help`, `help COMMAND`, the man page and the shell completions (see `docs.rs`).

pub use crate::app::Global;
pub use crate::commands::hooks::HooksTestArgs;
pub use crate::repl::ReplArgs;
pub use crate::run::{InitArgs, RunArgs};
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// Which commands a flag applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every command.
    Global,
    /// Only the listed commands (names from `COMMANDS`).
    Only(&'static [&'static str]),
}

pub struct Flag {
    pub short: Option<char>,
    pub long: &'static str,
    /// Name of the value (`DIR`, `FILE`...) or None for a switch.
    pub value: Option<&'static str>,
    /// One short line for `--help` (it must fit 80 columns beside the flag).
    pub help: &'static str,
    /// The man page's longer text; empty: `help` says it all.
    pub detail: &'static str,
    pub scope: Scope,
}

pub static FLAGS: &[Flag] = &[
    Flag {
        short: Some('c'),
        long: "cwd",
        value: Some("DIR"),
        help: "Run as if started in DIR",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: Some('D'),
        long: "data-dir",
        value: Some("DIR"),
        help: "Project data directory (default .crush)",
        detail: "Use DIR as the project data directory (default <project>/.crush)",
        scope: Scope::Global,
    },
    Flag {
        short: Some('d'),
        long: "debug",
        value: None,
        help: "Write debug logs to stderr and the log file",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: Some('y'),
        long: "yolo",
        value: None,
        help: "Allow every tool call without asking",
        detail: "Allow every tool call without asking (banned commands stay banned); in acp, sessions start in the yolo mode.",
        scope: Scope::Only(&["", "run", "init", "acp"]),
    },
    Flag {
        short: Some('m'),
        long: "model",
        value: Some("[PROVIDER/]MODEL"),
        help: "The large model (stats: count only its calls)",
        detail: "Use this model as the large model; stats: count only this model's calls",
        scope: Scope::Only(&[
            "", "run", "init", "config", "acp", "stats", "agents", "debug",
        ]),
    },
    Flag {
        short: None,
        long: "small-model",
        value: Some("[PROVIDER/]MODEL"),
        help: "The small model (titles, summaries)",
        detail: "",
        scope: Scope::Only(&["", "run", "init", "config", "acp"]),
    },
    Flag {
        short: Some('s'),
        long: "session",
        value: Some("ID"),
        help: "Continue session ID (or a unique prefix)",
        detail: "Continue the session with this id (or unique prefix)",
        scope: Scope::Only(&["", "run"]),
    },
    Flag {
        short: Some('C'),
        long: "continue",
        value: None,
        help: "Continue the most recent session",
        detail: "",
        scope: Scope::Only(&["", "run"]),
    },
    Flag {
        short: Some('q'),
        long: "quiet",
        value: None,
        help: "Hide progress (and run's tool lines)",
        detail: "Hide the progress indicator (and, for run, the tool lines on stderr)",
        scope: Scope::Only(&["", "run", "init"]),
    },
    Flag {
        short: None,
        long: "json",
        value: None,
        help: "Print JSON (run: one event per line)",
        detail: "Print JSON: one event per line for run, a document for listings",
        scope: Scope::Only(&[
            "run", "sessions", "models", "config", "stats", "projects", "mcp", "lsp", "skills",
            "agents",
        ]),
    },
    Flag {
        short: None,
        long: "system-prompt",
        value: Some("TEXT"),
        help: "Use TEXT as the system prompt",
        detail: "Use TEXT as the system prompt instead of crush's default (options.system_prompt)",
        scope: Scope::Only(&["", "run", "debug"]),
    },
    Flag {
        short: None,
        long: "system-prompt-file",
        value: Some("FILE"),
        help: "Use the text of FILE as the system prompt",
        detail: "Use the text of FILE as the system prompt (options.system_prompt_file)",
        scope: Scope::Only(&["", "run", "debug"]),
    },
    Flag {
        short: None,
        long: "token-stdin",
        value: None,
        help: "Read the token from stdin (no device flow)",
        detail: "Read the token from standard input instead of running the device flow",
        scope: Scope::Only(&["login"]),
    },
    Flag {
        short: Some('f'),
        long: "follow",
        value: None,
        help: "Keep printing lines as they are written",
        detail: "",
        scope: Scope::Only(&["logs"]),
    },
    Flag {
        short: Some('t'),
        long: "tail",
        value: Some("N"),
        help: "Print the last N lines (default 1000; 0: all)",
        detail: "",
        scope: Scope::Only(&["logs"]),
    },
    Flag {
        short: None,
        long: "sandbox",
        value: Some("MODE"),
        help: "off, read-only or workspace-write",
        detail: "Run the model's commands in the OS sandbox: off, read-only or workspace-write (see SECURITY).",
        scope: Scope::Only(&["", "run", "acp"]),
    },
    Flag {
        short: None,
        long: "auto",
        value: None,
        help: "Run bash and project writes unasked, sandboxed",
        detail: "Run bash and in-project writes without asking, in the workspace-write sandbox (see SECURITY)",
        scope: Scope::Only(&["", "run", "acp"]),
    },
    Flag {
        short: None,
        long: "plan",
        value: None,
        help: "Plan first: only the read-only tools",
        detail: "Plan first: only read-only tools, and the model ends with a plan (see PLAN MODE)",
        scope: Scope::Only(&["", "run"]),
    },
    Flag {
        short: None,
        long: "mode",
        value: Some("MODE"),
        help: "read-only or workspace-write (default)",
        detail: "sandbox: the mode to run in (read-only or workspace-write; default workspace-write)",
        scope: Scope::Only(&["sandbox"]),
    },
    Flag {
        short: None,
        long: "network",
        value: None,
        help: "Let the command reach the network",
        detail: "",
        scope: Scope::Only(&["sandbox"]),
    },
    Flag {
        short: None,
        long: "origin",
        value: None,
        help: "Name the layer and file:line that set each value",
        detail: "",
        scope: Scope::Only(&["config"]),
    },
    Flag {
        short: None,
        long: "revoke",
        value: None,
        help: "Withdraw the project's trust",
        detail: "",
        scope: Scope::Only(&["trust"]),
    },
    Flag {
        short: None,
        long: "trust",
        value: None,
        help: "Trust the project for this invocation only",
        detail: "Trust the project for this invocation: its crushrc, hooks, MCP servers, $(...) values, .env and settings outside the allow-list",
        scope: Scope::Global,
    },
    Flag {
        short: None,
        long: "no-project-hooks",
        value: None,
        help: "Run without the project's own hooks",
        detail: "Run without the project's own hooks; without it, a project whose hooks are not trusted stops the run (exit 2), or refuses the session in acp",
        scope: Scope::Only(&["run", "acp"]),
    },
    Flag {
        short: None,
        long: "format",
        value: Some("FORMAT"),
        help: "export: md or json; stats: text, json or csv",
        detail: "Format of sessions export (md or json, default md) or of stats (text, json or csv, default text)",
        scope: Scope::Only(&["sessions", "stats"]),
    },
    Flag {
        short: None,
        long: "all",
        value: None,
        help: "stats: every project in projects.json; models: the whole catalog",
        detail: "",
        scope: Scope::Only(&["stats", "models"]),
    },
    Flag {
        short: None,
        long: "since",
        value: Some("WHEN"),
        help: "Calls from WHEN on: 7d or 2026-11-01",
        detail: "stats: calls from WHEN on: 7d (days ago) or a UTC date 2026-11-01",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "until",
        value: Some("WHEN"),
        help: "Calls before WHEN: 7d or 2026-11-01",
        detail: "stats: calls before WHEN (7d or 2026-11-01)",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "provider",
        value: Some("ID"),
        help: "Count only this provider's calls",
        detail: "",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "crawl-dir",
        value: Some("DIR"),
        help: "Every project with a .crush/crush.db below DIR",
        detail: "stats: every project with a .crush/crush.db below DIR (up to 8 levels deep, 1000 databases)",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "html",
        value: None,
        help: "Write the report as one self-contained HTML page",
        detail: "stats: write the report as one self-contained HTML page, to the FILE that follows or <data>/stats/index.html",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "open",
        value: None,
        help: "Open the --html page in the browser",
        detail: "",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "chart",
        value: None,
        help: "Draw the bar charts even when stdout is not a terminal",
        detail: "",
        scope: Scope::Only(&["stats"]),
    },
    Flag {
        short: None,
        long: "attach",
        value: Some("FILE"),
        help: "Attach FILE to the prompt (repeatable)",
        detail: "Attach FILE to the prompt (repeatable): text is sent inline with its name, a PNG, JPEG, GIF or WebP image as an image",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: None,
        long: "max-cost",
        value: Some("USD"),
        help: "Stop once this run has spent USD (exit 4)",
        detail: "Stop before a model call once this run has spent USD (exit 4; see USAGE AND COST, Budget)",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: None,
        long: "max-cost-unpriced",
        value: Some("allow|refuse"),
        help: "Under a budget, may unpriced models run?",
        detail: "Under a budget, call a model that has no price (default refuse)",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: None,
        long: "compact",
        value: None,
        help: "With -s ID or -C: summarize the session first, as /compact does",
        detail: "With -s ID or -C: summarize the session first (as /compact does), then run the prompt if one is given",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: Some('o'),
        long: "output",
        value: Some("FILE"),
        help: "Also write the final message to FILE",
        detail: "",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: None,
        long: "tool",
        value: Some("NAME"),
        help: "The tool of the event (e.g. bash)",
        detail: "The tool a hook event is about (e.g. bash): which hooks match, or the test call's tool",
        scope: Scope::Only(&["hooks"]),
    },
    Flag {
        short: None,
        long: "input",
        value: Some("JSON"),
        help: "The test call's tool input (default {})",
        detail: "The tool input of a hooks test, a JSON object (default {})",
        scope: Scope::Only(&["hooks"]),
    },
    Flag {
        short: None,
        long: "prompt",
        value: Some("TEXT"),
        help: "The test's UserPromptSubmit prompt",
        detail: "The prompt of a hooks test for UserPromptSubmit",
        scope: Scope::Only(&["hooks"]),
    },
    Flag {
        short: Some('h'),
        long: "help",
        value: None,
        help: "Show help",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: None,
        long: "verbose",
        value: None,
        help: "Same as --debug (Go Crush's run -v)",
        detail: "Write debug logs to stderr, as --debug does. Go Crush spells it -v after run; here -v is --version everywhere",
        scope: Scope::Only(&["run"]),
    },
    Flag {
        short: Some('v'),
        long: "version",
        value: None,
        help: "Show the version",
        detail: "",
        scope: Scope::Global,
    },
];

pub struct CommandSpec {
    pub name: &'static str,
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

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "run",
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
        usage: "crush logout copilot|hyper",
        brief: "Remove the token crush login stored",
        about: "Remove the token crush login stored for a provider.",
        examples: &["crush logout copilot"],
        subcommands: &["copilot", "hyper"],
    },
    CommandSpec {
        name: "skills",
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
        usage: "crush dirs",
        brief: "Print where configuration and data live",
        about: "Print where configuration, state, global data and project data live, and the \
                configuration files in use.",
        examples: &["crush dirs"],
        subcommands: &[],
    },
    CommandSpec {
        name: "projects",
        usage: "crush projects [--json]",
        brief: "List the projects crush has been used in",
        about: "List the projects crush has been used in, most recent first, with their data \
                directories.",
        examples: &["crush projects", "crush projects --json"],
        subcommands: &[],
    },
    CommandSpec {
        name: "logs",
        usage: "crush logs [-f] [-t N]",
        brief: "Print the project's log",
        about: "Print the project's log (<project data>/logs/crush.log: retries, refusals, hook \
                problems; debug lines with -d).",
        examples: &["crush logs -t 50", "crush logs -f"],
        subcommands: &[],
    },
    CommandSpec {
        name: "acp",
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
        usage: "crush help [COMMAND]",
        brief: "Show help for crush or for one command",
        about: "Show help for crush or for one command.",
        examples: &["crush help run", "crush run --help"],
        subcommands: &[],
    },
];

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
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

#[derive(Clone, Debug, PartialEq)]
pub struct Cli {
    pub global: Global,
    pub command: Command,
}

#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The flag spelled `-short` or `--long`. A short letter two flags share (`-v`: `--verbose`
/// after `run`, `--version` before any command) is the one that applies to `command`.
fn find_flag(short: Option<char>, long: Option<&str>, command: &str) -> Option<&'static Flag> {
    let mut found = FLAGS.iter().filter(|f| match (short, long) {
        (Some(c), _) => f.short == Some(c),
        (_, Some(l)) => f.long == l,
        _ => false,
    });
    let first = found.next()?;
    Some(
        std::iter::once(first)
            .chain(found)
            .find(|f| applies(f, command))
            .unwrap_or(first),
    )
}

fn applies(flag: &Flag, command: &str) -> bool {
    match flag.scope {
        Scope::Global => true,
        Scope::Only(cmds) => cmds.contains(&command),
    }
}

fn display_name(cmd: &str) -> String {
    if cmd.is_empty() {
        "crush".to_string()
    } else {
        format!("crush {cmd}")
    }
}

pub fn parse_from<I>(args: I) -> Result<Cli, UsageError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut global = Global::default();
    let mut run = RunArgs::default();
    let mut stats = crate::commands::stats::StatsArgs::default();
    let mut hooks = HooksTestArgs::default();
    let mut token_stdin = false;
    let mut json = false;
    let mut follow = false;
    let mut tail: Option<usize> = None;
    let mut format: Option<String> = None;
    let mut origin = false;
    let mut revoke = false;
    let mut sandbox_mode: Option<String> = None;
    let mut network = false;
    let mut help = false;
    let mut version = false;
    let mut generate: Option<String> = None;
    let mut command = String::new();
    let mut positionals: Vec<String> = Vec::new();
    let mut seen: Vec<&'static Flag> = Vec::new();
    let err = |e: lexopt::Error| UsageError(e.to_string());

    while let Some(arg) = parser.next().map_err(err)? {
        let flag = match &arg {
            Short(c) => find_flag(Some(*c), None, &command)
                .ok_or_else(|| UsageError(format!("unknown flag -{c}; see 'crush --help'")))?,
            Long("generate") => {
                generate = Some(parser.value().map_err(err)?.string().map_err(err)?);
                continue;
            }
            Long(l) => find_flag(None, Some(l), &command)
                .ok_or_else(|| UsageError(format!("unknown flag --{l}; see 'crush --help'")))?,
            Value(v) => {
                let v = v
                    .clone()
                    .string()
                    .map_err(|_| UsageError("an argument is not valid UTF-8".into()))?;
                if command.is_empty() && positionals.is_empty() {
                    if COMMANDS.iter().any(|c| c.name == v) {
                        command = v;
                        continue;
                    }
                    if v == "r" {
                        command = "run".into();
                        continue;
                    }
                    if v == "session" || v == "s" {
                        command = "sessions".into();
                        continue;
                    }
                    return Err(UsageError(format!(
                        "unknown command '{v}'; see 'crush --help' (to send a prompt, use: crush run \"{v} ...\")"
                    )));
                }
                positionals.push(v);
                if command == "run" || command == "sandbox" {
                    // Everything after the first prompt word is prompt, flags included.
                    for rest in parser.raw_args().map_err(err)? {
                        positionals.push(rest.to_string_lossy().into_owned());
                    }
                }
                continue;
            }
        };
        seen.push(flag);
        let mut value = || -> Result<String, UsageError> {
            let v = parser.value().map_err(err)?;
            v.string()
                .map_err(|_| UsageError(format!("the value of --{} is not valid UTF-8", flag.long)))
        };
        match flag.long {
            "cwd" => global.cwd = Some(PathBuf::from(value()?)),
            "data-dir" => global.data_dir = Some(PathBuf::from(value()?)),
            "debug" | "verbose" => global.debug = true,
            "yolo" => global.yolo = true,
            "sandbox" => global.sandbox = Some(value()?),
            "auto" => global.auto = true,
            "plan" => global.plan = true,
            "mode" => sandbox_mode = Some(value()?),
            "network" => network = true,
            "model" => global.model = Some(value()?),
            "small-model" => global.small_model = Some(value()?),
            "system-prompt" => global.system_prompt = Some(value()?),
            "system-prompt-file" => global.system_prompt_file = Some(value()?),
            "session" => global.session = Some(value()?),
            "continue" => global.continue_last = true,
            "quiet" => run.quiet = true,
            "json" => json = true,
            "token-stdin" => token_stdin = true,
            "follow" => follow = true,
            "tail" => {
                let v = value()?;
                tail = Some(v.parse().map_err(|_| {
                    UsageError(format!("--tail takes a number of lines, not '{v}'"))
                })?);
            }
            "format" => format = Some(value()?),
            "all" => stats.all = true,
            "since" | "until" => {
                let v = value()?;
                let t = crate::commands::stats::parse_when(&v, crate::time::unix_now())
                    .ok_or_else(|| {
                        UsageError(format!(
                            "--{} takes a number of days (7d) or a UTC date (2026-11-01), not '{v}'",
                            flag.long
                        ))
                    })?;
                if flag.long == "since" {
                    stats.filter.since = Some(t);
                } else {
                    stats.filter.until = Some(t);
                }
            }
            "provider" => stats.filter.provider = Some(value()?),
            "crawl-dir" => stats.crawl_dir = Some(PathBuf::from(value()?)),
            "html" => stats.html = Some(None),
            "open" => stats.open = true,
            "chart" => stats.chart = true,
            "origin" => origin = true,
            "revoke" => revoke = true,
            "trust" => global.trust = true,
            "no-project-hooks" => global.no_project_hooks = true,
            "output" => run.output = Some(PathBuf::from(value()?)),
            "max-cost" => {
                let v = value()?;
                run.max_cost = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|&c| crate::agent::budget::valid_limit(c))
                        .ok_or_else(|| {
                            UsageError(format!(
                                "--max-cost takes a number of US dollars, 0 or more (e.g. 0.50), not '{v}'"
                            ))
                        })?,
                );
            }
            "max-cost-unpriced" => {
                run.allow_unpriced = match value()?.as_str() {
                    "allow" => true,
                    "refuse" => false,
                    other => {
                        return Err(UsageError(format!(
                            "--max-cost-unpriced takes allow or refuse, not '{other}'"
                        )));
                    }
                }
            }
            "attach" => run.attach.push(PathBuf::from(value()?)),
            "compact" => run.compact = true,
            "tool" => hooks.tool = Some(value()?),
            "input" => hooks.input = Some(value()?),
            "prompt" => hooks.prompt = Some(value()?),
            "help" => help = true,
            "version" => version = true,
            other => unreachable!("flag --{other} is in the table but not handled"),
        }
    }

    // --version is a top-level flag: after a command it is an error, never a silent no-op.
    if !help && let Some(flag) = seen.iter().find(|f| !applies(f, &command)) {
        return Err(UsageError(format!(
            "flag --{} is not valid for '{}'; see '{} --help'",
            flag.long,
            display_name(&command),
            display_name(&command)
        )));
    }
    if global.system_prompt.is_some() && global.system_prompt_file.is_some() {
        return Err(UsageError(
            "--system-prompt and --system-prompt-file cannot be used together".into(),
        ));
    }
    if global.session.is_some() && global.continue_last {
        return Err(UsageError(
            "--session and --continue cannot be used together".into(),
        ));
    }
    let command = if let Some(kind) = generate {
        Command::Generate(kind)
    } else if version {
        Command::Version
    } else if help {
        Command::Help(if command.is_empty() {
            None
        } else {
            Some(command)
        })
    } else {
        match command.as_str() {
            "" => Command::Repl(ReplArgs { quiet: run.quiet }),
            "run" => {
                run.prompt = positionals;
                run.json = json;
                Command::Run(run)
            }
            "init" => Command::Init(InitArgs {
                notes: positionals,
                quiet: run.quiet,
            }),
            "sessions" => sessions_command(positionals, json, format)?,
            "stats" => {
                let mut it = positionals.into_iter();
                match (it.next(), stats.html.is_some()) {
                    // `--html FILE`: the one argument stats takes.
                    (Some(file), true) => stats.html = Some(Some(PathBuf::from(file))),
                    (Some(p), false) => {
                        return Err(UsageError(format!(
                            "crush stats takes no arguments (got '{p}'; the file of --html follows it)"
                        )));
                    }
                    (None, _) => {}
                }
                if let Some(p) = it.next() {
                    return Err(UsageError(format!(
                        "crush stats takes one file after --html (got another: '{p}')"
                    )));
                }
                if stats.open && stats.html.is_none() {
                    return Err(UsageError(
                        "--open opens the page of --html; add --html".into(),
                    ));
                }
                use crate::commands::stats::Format;
                stats.format = match format.as_deref() {
                    None if json => Format::Json,
                    None | Some("text") => Format::Text,
                    Some("json") => Format::Json,
                    Some("csv") => Format::Csv,
                    Some(other) => {
                        return Err(UsageError(format!(
                            "--format for stats is text, json or csv, not '{other}'"
                        )));
                    }
                };
                stats.filter.model = global.model.take();
                Command::Stats(stats)
            }
            "hooks" => {
                const USAGE: &str = "usage: crush hooks list [--tool NAME] | test EVENT [--tool NAME --input JSON] [--prompt TEXT]";
                let mut it = positionals.into_iter();
                match (it.next().as_deref(), it.next(), it.next()) {
                    (None | Some("list" | "ls"), None, None) => {
                        if hooks.input.is_some() || hooks.prompt.is_some() {
                            return Err(UsageError(
                                "--input and --prompt are for 'crush hooks test'".into(),
                            ));
                        }
                        Command::HooksList { tool: hooks.tool }
                    }
                    (Some("test"), Some(event), None) => {
                        hooks.event = event;
                        Command::HooksTest(hooks)
                    }
                    (Some("test"), None, _) => {
                        return Err(UsageError(format!(
                            "crush hooks test needs an EVENT ({}); {USAGE}",
                            crate::config::commands::HOOK_EVENTS.join(", ")
                        )));
                    }
                    (Some(other), _, _) => {
                        return Err(UsageError(format!(
                            "unknown hooks command or extra argument '{other}'; {USAGE}"
                        )));
                    }
                    _ => return Err(UsageError(USAGE.into())),
                }
            }
            "mcp" => {
                const USAGE: &str = "usage: crush mcp list [--json] | login NAME";
                match positionals.as_slice() {
                    [] => Command::McpList { json },
                    [l] if l == "list" || l == "ls" => Command::McpList { json },
                    [l, name] if l == "login" && !json => Command::McpLogin { name: name.clone() },
                    [l] if l == "login" => {
                        return Err(UsageError(format!(
                            "crush mcp login needs the server's NAME; {USAGE}"
                        )));
                    }
                    _ => {
                        return Err(UsageError(format!(
                            "unknown mcp command or extra argument '{}'; {USAGE}",
                            positionals.join(" ")
                        )));
                    }
                }
            }
            "login" => match positionals.as_slice() {
                [] if !token_stdin => Command::Login {
                    name: None,
                    token_stdin,
                },
                [name] => Command::Login {
                    name: Some(name.clone()),
                    token_stdin,
                },
                _ => {
                    return Err(UsageError(
                        "usage: crush login [copilot|hyper] [--token-stdin]".into(),
                    ));
                }
            },
            "logout" => match positionals.as_slice() {
                [name] => Command::Logout { name: name.clone() },
                _ => return Err(UsageError("usage: crush logout copilot|hyper".into())),
            },
            "skills" => match positionals.as_slice() {
                [] => Command::SkillsList { json },
                [l] if l == "list" || l == "ls" => Command::SkillsList { json },
                _ => {
                    return Err(UsageError(format!(
                        "unknown skills command or extra argument '{}'; usage: crush skills list [--json]",
                        positionals.join(" ")
                    )));
                }
            },
            "agents" => match positionals.as_slice() {
                [] => Command::AgentsList { json },
                [l] if l == "list" || l == "ls" => Command::AgentsList { json },
                _ => {
                    return Err(UsageError(format!(
                        "unknown agents command or extra argument '{}'; usage: crush agents list [--json]",
                        positionals.join(" ")
                    )));
                }
            },
            "debug" => match positionals.as_slice() {
                [p] if p == "prompt" => Command::DebugPrompt,
                _ => {
                    return Err(UsageError(format!(
                        "unknown debug command '{}'; usage: crush debug prompt",
                        positionals.join(" ")
                    )));
                }
            },
            "lsp" => match positionals.as_slice() {
                [] => Command::LspList { json },
                [s] if s == "list" || s == "ls" => Command::LspList { json },
                [other, ..] => {
                    return Err(UsageError(format!(
                        "unknown lsp command '{other}'; usage: crush lsp list [--json]"
                    )));
                }
            },
            "projects" | "logs" | "acp" => {
                if let Some(p) = positionals.first() {
                    return Err(UsageError(format!(
                        "crush {command} takes no arguments (got '{p}')"
                    )));
                }
                if command == "projects" {
                    Command::Projects { json }
                } else if command == "acp" {
                    Command::Acp
                } else {
                    Command::Logs {
                        follow,
                        tail: tail.unwrap_or(1000),
                    }
                }
            }
            "dirs" => {
                if let Some(p) = positionals.first() {
                    return Err(UsageError(format!(
                        "crush dirs takes no arguments (got '{p}')"
                    )));
                }
                Command::Dirs
            }
            "config" => match positionals.as_slice() {
                [s] if s == "show" => Command::ConfigShow { origin, json },
                [s] if s == "check" => Command::ConfigCheck,
                [] => {
                    return Err(UsageError(
                        "usage: crush config show [--origin] [--json] | crush config check".into(),
                    ));
                }
                [other, ..] => {
                    return Err(UsageError(format!(
                        "unknown config command '{other}'; usage: crush config show [--origin] [--json] | crush config check"
                    )));
                }
            },
            "sandbox" => match positionals.as_slice() {
                [c] if c == "check" => Command::SandboxCheck,
                [] => {
                    return Err(UsageError(
                        "usage: crush sandbox check | [--mode MODE] [--network] -- COMMAND [ARG...]"
                            .into(),
                    ));
                }
                argv => Command::SandboxRun {
                    mode: sandbox_mode,
                    network,
                    argv: argv.to_vec(),
                },
            },
            "trust" => {
                if let Some(p) = positionals.first() {
                    return Err(UsageError(format!(
                        "crush trust takes no arguments (got '{p}'); usage: crush trust [--revoke]"
                    )));
                }
                Command::Trust { revoke }
            }
            "models" => {
                if positionals.len() > 1 {
                    return Err(UsageError(
                        "usage: crush models [QUERY] [--all] [--json] (one query word)".into(),
                    ));
                }
                Command::Models {
                    query: positionals.into_iter().next(),
                    all: stats.all,
                    json,
                }
            }
            "update-providers" => {
                if positionals.len() > 1 {
                    return Err(UsageError(
                        "usage: crush update-providers [URL | FILE | embedded]".into(),
                    ));
                }
                Command::UpdateProviders {
                    source: positionals.into_iter().next(),
                }
            }
            "help" => Command::Help(positionals.into_iter().next()),
            _ => unreachable!("command {command} is in the table but not handled"),
        }
    };
    Ok(Cli { global, command })
}

const SESSIONS_USAGE: &str = "usage: crush sessions list | show ID | last | export ID [--format md|json] | diff ID | delete ID | rename ID TITLE";

fn sessions_command(
    positionals: Vec<String>,
    json: bool,
    format: Option<String>,
) -> Result<Command, UsageError> {
    use crate::commands::sessions::ExportFormat;
    let mut it = positionals.into_iter();
    let sub = it.next();
    let id = it.next();
    let rest: Vec<String> = it.collect();
    let sub = match sub.as_deref() {
        None | Some("list" | "ls") => "list",
        Some("show") => "show",
        Some("last") => "last",
        Some("export") => "export",
        Some("diff") => "diff",
        Some("delete" | "rm") => "delete",
        Some("rename") => "rename",
        Some(other) => {
            return Err(UsageError(format!(
                "unknown sessions command '{other}'; {SESSIONS_USAGE}"
            )));
        }
    };
    if format.is_some() && sub != "export" {
        return Err(UsageError(format!(
            "--format is only for 'crush sessions export'; {SESSIONS_USAGE}"
        )));
    }
    let need_id = |id: Option<String>| {
        id.ok_or_else(|| {
            UsageError(format!(
                "usage: crush sessions {sub} ID ... (see 'crush sessions list')"
            ))
        })
    };
    let no_more = |rest: &[String]| match rest.first() {
        Some(extra) => Err(UsageError(format!(
            "unexpected argument '{extra}'; {SESSIONS_USAGE}"
        ))),
        None => Ok(()),
    };
    Ok(match sub {
        "list" => {
            if let Some(extra) = id {
                return Err(UsageError(format!(
                    "unexpected argument '{extra}'; {SESSIONS_USAGE}"
                )));
            }
            Command::SessionsList { json }
        }
        "last" => {
            if let Some(extra) = id {
                return Err(UsageError(format!(
                    "unexpected argument '{extra}'; {SESSIONS_USAGE}"
                )));
            }
            Command::SessionsLast { json }
        }
        "show" => {
            no_more(&rest)?;
            Command::SessionsShow {
                id: need_id(id)?,
                json,
            }
        }
        "export" => {
            no_more(&rest)?;
            let format = match (format.as_deref(), json) {
                (Some(f), _) => ExportFormat::parse(f)
                    .ok_or_else(|| UsageError(format!("--format {f}: use md or json")))?,
                (None, true) => ExportFormat::Json,
                (None, false) => ExportFormat::Markdown,
            };
            Command::SessionsExport {
                id: need_id(id)?,
                format,
            }
        }
        "diff" => {
            no_more(&rest)?;
            Command::SessionsDiff { id: need_id(id)? }
        }
        "delete" => {
            no_more(&rest)?;
            Command::SessionsDelete {
                id: need_id(id)?,
                json,
            }
        }
        _ => {
            let id = need_id(id)?;
            if rest.is_empty() {
                return Err(UsageError(
                    "usage: crush sessions rename ID TITLE (the new title is missing)".into(),
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

fn flag_synopsis(f: &Flag) -> String {
    let mut s = match f.short {
        Some(c) => format!("-{c}, --{}", f.long),
        None => format!("    --{}", f.long),
    };
    if let Some(v) = f.value {
        s.push(' ');
        s.push_str(v);
    }
    s
}

/// Help lines fit this many columns.
pub const HELP_COLUMNS: usize = 80;
/// Where the text beside a flag or command starts.
const HELP_GAP: usize = 32;

fn help_row(out: &mut String, head: &str, text: &str, at: usize) {
    crate::repl::wrap::row(out, head, text, at, HELP_COLUMNS);
}

fn flags_block(out: &mut String, flags: &[&Flag]) {
    for f in flags {
        help_row(out, &flag_synopsis(f), f.help, HELP_GAP);
    }
}

/// A command's forms, one per line (see `CommandSpec::usage`).
pub fn usage_lines(c: &CommandSpec) -> Vec<String> {
    let lead = format!("crush {} ", c.name);
    c.usage
        .split(" | ")
        .map(|form| {
            if form.starts_with("crush") {
                form.to_string()
            } else {
                format!("{lead}{form}")
            }
        })
        .collect()
}

/// The text of `crush --help` (None) or `crush help COMMAND`; every line fits 80 columns.
pub fn help_text(command: Option<&str>) -> Result<String, UsageError> {
    let mut out = String::new();
    match command {
        None => {
            out.push_str(&format!(
                "crush {} \u{2014} a terminal AI coding assistant\n\n\
                 Usage: crush [FLAGS]               start an interactive session\n       \
                 crush COMMAND [ARGS...]\n\nCommands:\n",
                env!("CARGO_PKG_VERSION")
            ));
            for c in COMMANDS {
                help_row(&mut out, c.name, c.brief, 20);
            }
            out.push_str("\nFlags:\n");
            let flags: Vec<&Flag> = FLAGS.iter().filter(|f| applies(f, "")).collect();
            flags_block(&mut out, &flags);
            out.push_str(
                "\nExit codes: 0 success, 1 runtime failure, 2 usage or configuration error,\n\
                 3 stopped by policy (a hook denied or halted, a permission was refused),\n\
                 4 over budget, 130 interrupted.\n\nExamples:\n  crush\n  crush run \"explain the build\"\n  \
                 git diff | crush run \"write a commit message\"\n\n\
                 Run 'crush help COMMAND' for a command's flags; 'man crush' for everything.\n",
            );
        }
        Some(name) => {
            let c = COMMANDS.iter().find(|c| c.name == name).ok_or_else(|| {
                UsageError(format!("unknown command '{name}'; see 'crush --help'"))
            })?;
            for (i, form) in usage_lines(c).iter().enumerate() {
                let head = if i == 0 { "Usage: " } else { "       " };
                let hang = " ".repeat(head.len() + c.name.len() + 7);
                out.push_str(&crate::repl::wrap::fill(form, HELP_COLUMNS, head, &hang));
                out.push('\n');
            }
            out.push('\n');
            out.push_str(&crate::repl::wrap::fill(c.about, HELP_COLUMNS, "", ""));
            out.push('\n');
            let flags: Vec<&Flag> = FLAGS.iter().filter(|f| applies(f, c.name)).collect();
            if !flags.is_empty() {
                out.push_str("\nFlags:\n");
                flags_block(&mut out, &flags);
            }
            out.push_str("\nExamples:\n");
            for e in c.examples {
                out.push_str(&crate::repl::wrap::fill(e, HELP_COLUMNS, "  ", "      "));
                out.push('\n');
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, UsageError> {
        parse_from(args.iter().copied())
    }

    #[test]
    fn run_with_flags_and_prompt() {
        let cli = parse(&[
            "run", "-q", "--json", "-y", "-m", "fake/m", "fix", "the", "bug",
        ])
        .unwrap();
        assert!(cli.global.yolo);
        assert_eq!(cli.global.model.as_deref(), Some("fake/m"));
        match cli.command {
            Command::Run(r) => {
                assert!(r.quiet && r.json);
                assert_eq!(r.prompt, vec!["fix", "the", "bug"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn global_flags_before_the_command() {
        let cli = parse(&["-c", "/tmp", "-D", "/tmp/d", "run", "hi"]).unwrap();
        assert_eq!(cli.global.cwd, Some(PathBuf::from("/tmp")));
        assert_eq!(cli.global.data_dir, Some(PathBuf::from("/tmp/d")));
    }

    #[test]
    fn prompt_words_after_the_first_are_not_flags() {
        let cli = parse(&["run", "explain", "-q", "please"]).unwrap();
        match cli.command {
            Command::Run(r) => {
                assert_eq!(r.prompt, vec!["explain", "-q", "please"]);
                assert!(!r.quiet);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_outside_their_scope_are_refused() {
        let e = parse(&["sessions", "list", "-o", "x"]).unwrap_err();
        assert!(
            e.0.contains("--output is not valid for 'crush sessions'"),
            "{e}"
        );
        assert!(
            parse(&["--bogus"])
                .unwrap_err()
                .0
                .contains("unknown flag --bogus")
        );
    }

    #[test]
    fn session_and_continue_conflict() {
        assert!(parse(&["run", "-s", "abc", "-C", "x"]).is_err());
    }

    #[test]
    fn sessions_subcommands() {
        assert_eq!(
            parse(&["sessions", "show", "ab12", "--json"])
                .unwrap()
                .command,
            Command::SessionsShow {
                id: "ab12".into(),
                json: true
            }
        );
        assert_eq!(
            parse(&["sessions"]).unwrap().command,
            Command::SessionsList { json: false }
        );
        assert!(parse(&["sessions", "frob"]).is_err());
        assert_eq!(
            parse(&["sessions", "export", "ab", "--format", "json"])
                .unwrap()
                .command,
            Command::SessionsExport {
                id: "ab".into(),
                format: crate::commands::sessions::ExportFormat::Json
            }
        );
        assert_eq!(
            parse(&["sessions", "export", "ab"]).unwrap().command,
            Command::SessionsExport {
                id: "ab".into(),
                format: crate::commands::sessions::ExportFormat::Markdown
            }
        );
        assert!(parse(&["sessions", "export", "ab", "--format", "pdf"]).is_err());
        assert!(parse(&["sessions", "show", "ab", "--format", "md"]).is_err());
        assert!(parse(&["sessions", "export"]).is_err());
        assert_eq!(
            parse(&["sessions", "rm", "ab"]).unwrap().command,
            Command::SessionsDelete {
                id: "ab".into(),
                json: false
            }
        );
        assert_eq!(
            parse(&["sessions", "rename", "ab", "New", "title"])
                .unwrap()
                .command,
            Command::SessionsRename {
                id: "ab".into(),
                title: "New title".into(),
                json: false
            }
        );
        assert!(parse(&["sessions", "rename", "ab"]).is_err());
        // Go Crush's commands and spellings.
        assert_eq!(
            parse(&["session", "delete", "ab", "--json"])
                .unwrap()
                .command,
            Command::SessionsDelete {
                id: "ab".into(),
                json: true
            }
        );
        assert_eq!(
            parse(&["s", "last", "--json"]).unwrap().command,
            Command::SessionsLast { json: true }
        );
        assert!(parse(&["session", "last", "x"]).is_err());
    }

    #[test]
    fn the_repl_takes_session_flags_and_quiet() {
        let cli = parse(&["-C", "-q", "-y", "-m", "p/m"]).unwrap();
        assert_eq!(cli.command, Command::Repl(ReplArgs { quiet: true }));
        assert!(cli.global.continue_last && cli.global.yolo);
        let cli = parse(&["-s", "abc"]).unwrap();
        assert_eq!(cli.global.session.as_deref(), Some("abc"));
        assert!(parse(&["-s", "abc", "-C"]).is_err());
    }

    #[test]
    fn catalog_commands() {
        assert_eq!(
            parse(&["models", "sonnet", "--json"]).unwrap().command,
            Command::Models {
                query: Some("sonnet".into()),
                all: false,
                json: true
            }
        );
        assert_eq!(
            parse(&["update-providers"]).unwrap().command,
            Command::UpdateProviders { source: None }
        );
        assert_eq!(
            parse(&["update-providers", "embedded"]).unwrap().command,
            Command::UpdateProviders {
                source: Some("embedded".into())
            }
        );
        assert!(parse(&["update-providers", "a", "b"]).is_err());
        assert!(parse(&["update-providers", "--json"]).is_err());
    }

    #[test]
    fn help_and_version() {
        // -v is --version before or after any command (Go Crush's run -v is --verbose here).
        for args in [
            &["--version"][..],
            &["-v"],
            &["run", "-v", "hello"],
            &["sessions", "-v"],
        ] {
            assert_eq!(parse(args).unwrap().command, Command::Version, "{args:?}");
        }
        let c = parse(&["run", "--verbose", "hi"]).unwrap();
        assert!(matches!(&c.command, Command::Run(r) if r.prompt == ["hi"]));
        assert!(c.global.debug);
        assert!(parse(&["-d", "run", "hi"]).unwrap().global.debug);
        assert!(parse(&["--verbose", "sessions"]).is_err());
        assert_eq!(
            parse(&["help", "run"]).unwrap().command,
            Command::Help(Some("run".into()))
        );
        assert_eq!(
            parse(&["run", "--help"]).unwrap().command,
            Command::Help(Some("run".into()))
        );
        let h = help_text(Some("run")).unwrap();
        assert!(h.contains("--output FILE"), "{h}");
        assert!(help_text(Some("nope")).is_err());
    }

    /// `crush --help` and every `crush help COMMAND`: no line over 80 columns, every command
    /// and flag on it, and examples at the end of each command's help.
    #[test]
    fn every_help_fits_80_columns_and_ends_with_examples() {
        let mut texts = vec![(String::new(), help_text(None).unwrap())];
        for c in COMMANDS {
            texts.push((c.name.to_string(), help_text(Some(c.name)).unwrap()));
        }
        for (name, text) in &texts {
            for line in text.lines() {
                assert!(
                    line.chars().count() <= HELP_COLUMNS,
                    "crush help {name}: {} columns: {line:?}",
                    line.chars().count()
                );
            }
            for f in FLAGS.iter().filter(|f| applies(f, name)) {
                assert!(
                    text.contains(&format!("--{}", f.long)),
                    "{name}: --{}",
                    f.long
                );
                assert!(!f.help.contains("acp:"), "--{}: {}", f.long, f.help);
            }
            let examples = text.split("\nExamples:\n").nth(1).unwrap_or("");
            let n = examples.lines().filter(|l| l.starts_with("  ")).count();
            assert!(n >= 1, "crush help {name} has no examples:\n{text}");
        }
        let top = &texts[0].1;
        for c in COMMANDS {
            assert!(top.contains(&format!("  {} ", c.name)), "{}", c.name);
            assert!(
                (2..=3).contains(&c.examples.len())
                    || c.examples.len() == 1 && matches!(c.name, "dirs" | "logout"),
                "{} examples",
                c.name
            );
        }
        // One meaning per short flag.
        let mut shorts: Vec<char> = FLAGS.iter().filter_map(|f| f.short).collect();
        shorts.sort();
        let n = shorts.len();
        shorts.dedup();
        assert_eq!(shorts.len(), n, "a short flag has two meanings");
        assert!(top.lines().count() < 60, "{top}");
    }

    #[test]
    fn stats_takes_json_only() {
        assert_eq!(
            parse(&["stats", "--json"]).unwrap().command,
            Command::Stats(crate::commands::stats::StatsArgs {
                format: crate::commands::stats::Format::Json,
                ..Default::default()
            })
        );
        assert!(parse(&["stats", "x"]).is_err());
        assert!(parse(&["stats", "-o", "f"]).is_err());
    }

    #[test]
    fn hooks_subcommands() {
        assert_eq!(
            parse(&["hooks", "list", "--tool", "bash"]).unwrap().command,
            Command::HooksList {
                tool: Some("bash".into())
            }
        );
        assert_eq!(
            parse(&["hooks"]).unwrap().command,
            Command::HooksList { tool: None }
        );
        assert_eq!(
            parse(&[
                "hooks",
                "test",
                "pre_tool_use",
                "--tool",
                "bash",
                "--input",
                "{}"
            ])
            .unwrap()
            .command,
            Command::HooksTest(HooksTestArgs {
                event: "pre_tool_use".into(),
                tool: Some("bash".into()),
                input: Some("{}".into()),
                prompt: None
            })
        );
        assert!(parse(&["hooks", "test"]).is_err());
        assert!(parse(&["hooks", "list", "--prompt", "x"]).is_err());
        assert!(parse(&["run", "--tool", "bash", "x"]).is_err());
    }

    #[test]
    fn lsp_list() {
        for args in [&["lsp"][..], &["lsp", "list"], &["lsp", "ls"]] {
            assert_eq!(
                parse(args).unwrap().command,
                Command::LspList { json: false }
            );
        }
        assert_eq!(
            parse(&["lsp", "list", "--json"]).unwrap().command,
            Command::LspList { json: true }
        );
        assert!(
            parse(&["lsp", "start"])
                .unwrap_err()
                .0
                .contains("unknown lsp command")
        );
        assert!(parse(&["lsp", "list", "--tool", "x"]).is_err());
    }

    #[test]
    fn config_and_trust_commands() {
        assert_eq!(
            parse(&["config", "show", "--origin", "--json"])
                .unwrap()
                .command,
            Command::ConfigShow {
                origin: true,
                json: true
            }
        );
        assert!(parse(&["config"]).is_err());
        assert!(parse(&["config", "edit"]).is_err());
        assert_eq!(
            parse(&["trust", "--revoke"]).unwrap().command,
            Command::Trust { revoke: true }
        );
        assert!(parse(&["trust", "x"]).is_err());
        assert!(parse(&["run", "--origin", "x"]).is_err());
        assert!(parse(&["--trust", "run", "x"]).unwrap().global.trust);
        assert!(
            parse(&["run", "--no-project-hooks", "x"])
                .unwrap()
                .global
                .no_project_hooks
        );
        assert!(parse(&["sessions", "list", "--no-project-hooks"]).is_err());
    }

    #[test]
    fn unknown_command_suggests_run() {
        let e = parse(&["fix", "it"]).unwrap_err();
        assert!(e.0.contains("crush run"), "{e}");
    }
}
