//! The man page and shell completions, generated from the flag and command tables of `cli.rs`
//! (`crush --generate man|bash|zsh|fish`). The committed copies in `man/` and `completions/`
//! are checked against this output by a test, so they cannot fall out of step with the flags.

use crate::cli::{COMMANDS, FLAGS, Flag, Scope};

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}

fn scope_text(f: &Flag) -> String {
    match f.scope {
        Scope::Global => String::new(),
        Scope::Only(cmds) => {
            let names: Vec<String> = cmds
                .iter()
                .map(|c| {
                    if c.is_empty() {
                        "crush".to_string()
                    } else {
                        format!("crush {c}")
                    }
                })
                .collect();
            format!(" (for {})", names.join(", "))
        }
    }
}

/// Usage accounting and the store's schema, placed before FILES.
const STORE_BODY: &str = r#".SH USAGE AND COST
Every model call \(em each step of a turn, a sub\-agent's steps, summaries and titles \(em writes
one row to the usage ledger in the same transaction as the message it produced, so a killed
process never leaves a paid call unrecorded.
.B crush stats
sums the ledger per session, per model and in total; a call without a price is counted as
unpriced, never as $0.
.PP
The
.B agent
tool starts a read\-only sub\-agent (glob, grep, ls, view, fetch) in a child session with the same
model and permissions. Its calls are recorded against the child session and counted once in the
parent's totals. Inside the project it needs no permission; anything else it would need is asked
like any other call (refused in
.BR "crush run" ).
.PP
When the context of a session (the last call's input and output) leaves no more than 20% of the
model's context window free, the session is summarized: the model writes a summary, stored as a
summary message, and the history sent from then on starts at it; a turn interrupted for it goes on
with the user's request carried over. The margin is proportional to the window (Go Crush keeps a
flat 20 000 tokens, which waits until 98% of a 1M\-token window). When the provider refuses a
request as longer than the window (one step can jump past the margin), the session is summarized
from a copy whose long texts and tool results are cut to their head and tail, and the request is
carried on, once per turn. Turn it off with
.B options.disable_auto_summarize
(crushrc:
.BR "option auto\-summarize false" ).
.SH SESSION STORE
.I <project>/.crush/crush.db
is a SQLite database in WAL mode, shared with Go Crush: its tables sessions, messages, files and
read_files, their indexes and triggers, and the
.B goose_db_version
rows (Go Crush's migration record: id, version_id, is_applied, tstamp) are exactly what Go Crush's
migrations leave, so Go Crush and crush can take turns in one project. crush only adds columns,
each with a default Go Crush's writes satisfy, and tables of its own; its additions have the
schema version
.B PRAGMA user_version
(2). crush refuses, before writing anything, a database whose version is newer than it knows. A
database a newer Go Crush migrated is read; crush writes to it only if each of its writes fits
the new tables, and otherwise stops with an error naming the migrations. The read\-only commands
(sessions list, show, export; stats) never migrate or write the file. Another program may read it
while crush runs (open it read\-only). Timestamps are Unix seconds.
.SS sessions \(em one row per conversation
.TP
.B id
A UUID; a sub\-agent's session is
.I <assistant message id>$$<tool call id>
(Go Crush's convention), naming the message and the
.B agent
tool call that started it.
.TP
.B parent_session_id
The session whose agent tool call started this one; NULL for a top\-level session.
.TP
.B title
The session's title.
.TP
.B message_count
Number of messages (kept by triggers).
.TP
.B prompt_tokens, completion_tokens
Go Crush's meaning, which its context meter reads: the input + cache read tokens, and the output
tokens, of the session's last model call (0 and the summary's size after a summary).
.TP
.B total_prompt_tokens
Running total of input tokens (input + cache read + cache write) over every call of this session
and of its sub\-agent sessions: the sum of those usage rows.
.TP
.B total_completion_tokens
Running total of output tokens, same scope.
.TP
.B cost
Running total in USD of the priced calls, same scope, added in SQL (never read, changed and written
back). Unpriced calls add nothing, so 0 does not mean free: look for NULL costs in usage. A
sub\-agent's cost is already in its parent's: to total a project sum usage.cost, or sessions.cost
over top\-level sessions only.
.TP
.B context_tokens
Tokens in the context at the session's last call (input + cache read + cache write + output);
after a summary, the summary's size. Drives the context meter and auto\-summarize; not a total.
.TP
.B summary_message_id
The latest summary message (NULL if never summarized); the model is sent the history from it on.
.TP
.B todos
Go Crush's todo list (JSON), kept as is.
.TP
.B created_at, updated_at
Creation and last change.
.SS messages \(em the conversation
.TP
.B id, session_id
A UUID and the session it belongs to.
.TP
.B seq
Order within the session (unique per session). Sort by it: created_at has one\-second ties. An
insert that leaves it at 0 (Go Crush's) is numbered after the session's last message by a trigger.
.TP
.B role
user, assistant, tool (tool results) or system.
.TP
.B parts
JSON array of {type, data} in Go Crush's part types and field names: text, reasoning,
tool_call, tool_result, finish, shell_command, image_url, binary (an attachment: Path, MIMEType,
Data in base64). A model is sent a text attachment's content, and a line naming each image or
other file.
.TP
.B model, provider
The model and provider of an assistant message.
.TP
.B is_summary_message
1 for a summary written by summarization.
.TP
.B created_at, updated_at, finished_at
finished_at is the time of the message's finish part.
.SS files, read_files
.B files
holds Go Crush's file history snapshots (id, session_id, path, content, version, created_at,
updated_at).
.B read_files
records which files a session viewed (session_id, path, read_at) and
.BR mtime_ns ,
the file's modification time then (nanoseconds), so an edit can refuse a file changed since.
.SS usage \(em one row per model call
.TP
.B id
Increasing; a reader can keep the last id it saw as a watermark. Rows are never updated.
.TP
.B session_id
The session that made the call (a sub\-agent's calls are on its own session).
.TP
.B message_id
The assistant message the call produced (the summary message for a summary); NULL for a call that
produced none (a title, an empty summary).
.TP
.B provider, model
As configured.
.TP
.B input_tokens
Uncached input tokens (OpenAI's prompt_tokens minus cached and cache\-write tokens).
.TP
.B output_tokens
Output tokens, reasoning included.
.TP
.B cache_read_tokens, cache_write_tokens
Input tokens read from and written to the provider's prompt cache.
.IP
All four token columns are NULL when the provider reported no usage, or numbers that were
rejected (negative, not integers, over a billion; a warning says so): unknown, never zero.
.TP
.B cost
USD for the call: input, output, cache\-write and cache\-read tokens times the model's prices per
million. NULL when the model has no price (or its provider is flat\-rate) or the usage is unknown.
.TP
.B price_source
Where the prices came from: catalog, config; or why there is no cost: unpriced, unknown_usage.
.TP
.B created_at
When the call finished.
.PP
For every session, total_prompt_tokens, total_completion_tokens and cost equal the sums of the
usage rows of the session and its sub\-agent sessions (NULL counting as 0), at every commit,
whatever crush process wrote them (Go Crush adds its own spend to cost, and writes no usage
rows). Deleting a session deletes its usage rows and its sub\-agent sessions;
.B crush sessions delete
refuses a sub\-agent's session on its own, since its spend is part of its parent's totals.
"#;

const MAN_BODY: &str = r#".SH INTERACTIVE SESSION
.B crush
with no command reads prompts line by line, from a terminal or from a pipe (one prompt per line
or block, so it can be scripted), streams each answer to stdout, and prints one line per tool call
on stderr. On a terminal a status line shows while the model is working (silenced by
.B \-q
or
.BR "/option progress false" );
colour is used only on a terminal and never when NO_COLOR is set; piped output holds no escape
codes.
.PP
A tool call that needs permission asks inline:
.B "Allow bash: COMMAND? [y]es / [a]lways this session / [n]o"
(with the diff for edit and write). The answer is read from the same input, so a script answers
with a line. "Always" covers that exact command for bash, and that tool in that directory for file
tools, until the session changes. "No" ends the turn and the model is told. From a pipe, an answer
other than y, a or n counts as no.
.PP
Multi-line input: a line
.B {
starts a block that ends at a line
.B }
(or
.BI { tag
\&...
.IB tag }
for text containing a lone brace); a line ending in a backslash continues on the next line.
.BI ! COMMAND
runs a shell command, prints its output and records it in the session as a shell_command part.
A prompt starting with
.B //
sends a leading slash.
.PP
Slash commands, any unique prefix accepted (an unknown one suggests the close ones):
.B /help
.B /new
(a new session, created with the next prompt),
.B /sessions
(short ids; the current one marked),
.BI /resume " ID"
(an id or unique prefix),
.B /model
.RB [ large | small ]
.IR PROVIDER/MODEL ,
.BI /option " KEY VALUE"
(progress),
.B /permissions
.RB [ allow | deny
.IR TOOL ...]
(these three change this run only, never a file),
.B /cost
(tokens and cost of the session),
.B /compact
(summarize the session with the large model; later turns start from the summary, as after an
auto-summarize),
.B /export
.RB [ md | json ]
.RI [ FILE ],
.B /quit
(also
.BR exit ).
.PP
Ctrl-C during a turn cancels it: the stream is abandoned, running commands are killed, the
partial answer is kept and marked canceled, and the session stays consistent. Ctrl-C at the
prompt twice exits with status 130; Ctrl-D exits with 0.
.B \-s
.I ID
and
.B \-C
continue a session (\-C: the most recent top-level session, never a sub-agent's).
.PP
A new session is titled by the small model after its first prompt (one short call, recorded in the
usage ledger); if that fails, by the first words of the prompt.
.B crush run
titles sessions by the first words of the prompt and makes no extra call.
.SH CONFIGURATION
Ten layers, lowest priority first: 1 built-in defaults; 2 global state
.RI ( $CRUSH_GLOBAL_DATA/crush.json
as written by Go Crush, then
.IR $CRUSH_GLOBAL_DATA/state.json );
3 workspace state
.RI ( <project data>/state.json );
4 global
.I crush.json
and 5 global
.I crushrc
in
.I $CRUSH_GLOBAL_CONFIG
(default
.IR ~/.config/crush );
6 project
.IR crush.json ,
7 project
.IR crushrc ,
8 project
.I .crush.json
and 9 project
.IR .crushrc ,
found from the project root (the git worktree root) down to the working directory; 10 runtime
(flags, CRUSH_* variables, session-only commands). JSON layers merge: objects recursively, arrays
concatenate, later scalars win. State is written by crush (atomically) and never mixed into your
files; crush never writes a configuration file. Unknown keys give a warning naming file:line;
invalid JSON is an error naming file:line:column (exit 2).
.B crush config show \-\-origin
names the layer and file:line of every value.
.PP
A
.I crushrc
is a POSIX shell script run by /bin/sh in its own directory, with CRUSH_VERSION set and these
builtins: option KEY [VALUE], option reset KEY, option ui KEY VALUE,
model large|small [PROVIDER/MODEL] [\-\-max\-tokens N \-\-temperature F \-\-reasoning\-effort E ...]
(without a model it prints the current one), model add PROVIDER/ID [\-\-context\-window N
\-\-price\-input F \-\-price\-output F \-\-price\-cache\-create F \-\-price\-cache\-hit F ...],
model remove PROVIDER/ID, permissions allow TOOL[:ACTION]..., permissions deny TOOL...,
provider add ID [\-\-type T \-\-base\-url U \-\-api\-key K \-\-extra\-header K V ...], provider remove ID,
hook add EVENT \-\-command C [\-\-name N \-\-matcher RE \-\-timeout S \-\-fail\-closed],
hook remove EVENT [\-\-name N], mcp add NAME \-\-command C [\-\-args A]... [\-\-env K V]...,
mcp remove NAME, lsp add NAME ..., lsp remove NAME (MCP and LSP entries are kept and gated by
trust; this version does not start the servers yet). Each applies, in order, to the configuration
accumulated below the file, so a project file can remove or reset what a global one set. An
invalid command, a script that exits non-zero, or one still running after 30 s (its process group
is killed; CRUSH_CONFIG_TIMEOUT changes the limit) fails the load with file:line (exit 2).
\-\-price\-cache\-create is the cache write price and \-\-price\-cache\-hit the cache read price
(Go Crush swaps them).
.PP
A project's own crushrc files, hooks, MCP and LSP servers and $(command) values run only once the
project is trusted:
.B crush trust
lists them and records a SHA\-256 of their definitions in the global state; a change untrusts the
project again.
.B \-\-trust
or CRUSH_TRUST_PROJECT=1 trusts for one invocation. An untrusted project's other settings load,
and one line says what was skipped.
.PP
The same commands run by the agent in its bash tool change the running session only; the tool
result reports them. permissions allow, and any hook, mcp, lsp or provider command, from the bash
tool needs the user's yes, and is refused in crush run unless \-\-yolo; an agreed hook change
applies at once.
.PP
A provider needs a
.B type
(anthropic, openai or openai-compat), a
.B base_url
(optional for anthropic and openai) and, for cloud APIs, an
.BR api_key ;
values of api_key, base_url, extra_headers and MCP fields expand $VAR, ${VAR}, ${VAR:-default}
and $(command) (a variable CRUSH_NAME wins over NAME; $$ is a literal $; $(command) only in
trusted files, and never in catalog values, which come from the network). An error names the file
and field, never the value. The top\-level env map is expanded and exported at start\-up.
Providers of the catalog (see PROVIDER CATALOG) need no configuration: setting the API key
variable the catalog names (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY, ...) enables
one, with its models, prices and default models. A provider configured under a catalog id
overrides its base_url and api_key, puts its own models first and adds extra_headers over the
catalog's headers. A provider whose key resolves empty is skipped, except your own
openai-compat servers: a local server (ollama, llama.cpp, vLLM, LM Studio) needs only base_url:
.PP
.nf
{
  "providers": {
    "local": {
      "type": "openai-compat",
      "base_url": "http://127.0.0.1:11434/v1",
      "models": [{"id": "qwen2.5-coder", "context_window": 32768}]
    }
  },
  "models": {"large": {"provider": "local", "model": "qwen2.5-coder"}},
  "permissions": {"allowed_tools": ["bash", "edit"]}
}
.fi
.PP
Model prices (cost_per_1m_in, cost_per_1m_out, cost_per_1m_in_cached for cache writes,
cost_per_1m_out_cached for cache reads) are USD per million tokens; a model without prices, a
catalog model whose input and output prices are both 0, and every model of a provider with
"flat_rate": true are recorded as unpriced, never as $0. A model you list under a catalog
provider without prices takes the catalog's.
.PP
Model selection: \-m, \-\-small\-model and models.large/small take PROVIDER/MODEL or a model
id offered by exactly one configured provider; an id offered by several is an error listing
them. Without a choice, the large and small models are the catalog defaults of the first
configured provider (catalog order, then your own providers by id); with only models.large set,
the small model is its provider's default small model, else the large model.
.PP
Other keys: options.context_paths (extra context files or directories for the system prompt),
options.data_directory, options.disabled_tools, options.debug, options.max_steps (default 100),
options.request_idle_timeout (seconds of silence before a model stream is abandoned, default 120).
.SH PROVIDER CATALOG
The list of providers and models comes from Charm's Catwalk. A snapshot is compiled into the
binary, so an air-gapped machine works with no network. With auto-update on (the default), a
start that needs a provider or a model, when the cached copy is older than 24 hours (1 hour
after a failed attempt) or missing, sends
.I GET $CATWALK_URL/v2/providers
(default https://catwalk.charm.land) with If\-None\-Match set to the ETag the server sent
last time; 304 keeps the cache, 200 replaces it atomically. The request is abandoned after 2
seconds; any failure prints one warning line and uses the cache, else the embedded copy. Other
starts read the cache without any network, and commands that need no model (dirs, sessions,
help) do not even decode it.
.PP
.B option provider-auto-update false
in a crushrc, "options": {"disable_provider_auto_update": true} or
CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1 turn auto-update off: no connection at all, and the cache
is used when present (unlike Go Crush, which then ignores it), else the embedded copy.
.PP
.B crush update-providers
refreshes the cache on demand: from Catwalk, from an http(s) base URL (+ /v2/providers), from a
URL ending in .json, from a local file, or from the embedded copy
.RB ( embedded ).
The input must be a non-empty JSON array of providers; anything else is an error and the cache
is left as it was. The cache then counts as checked for 24 hours; to keep a custom catalog for
good, turn auto-update off.
.SH PERMISSIONS
Reading and listing inside the project need no permission. Running commands, writing files,
fetching URLs and reading outside the project do. In
.B crush run
such a call is refused unless
.B \-\-yolo
is given or
.B permissions.allowed_tools
lists the tool ("bash") or the tool and action ("edit:write", "bash:execute", "fetch:fetch",
"view:read"); the model is told, stderr says how to allow it, and the run exits 3. The
interactive session asks instead (see INTERACTIVE SESSION).
A read-only shell command (ls, git status, ...) needs no permission when it has no redirection,
pipe, command chaining or substitution. Banned commands (curl, sudo, package installs, ...) are
refused even with \-\-yolo.
.SH HOOKS
Hooks are commands crush runs at points of a turn. They can allow, deny or halt, add context, and
rewrite a tool's input or the user's prompt. Configure them under
.B hooks
in any crush.json, keyed by event (case-insensitive, snake_case accepted):
.PP
.nf
{
  "hooks": {
    "PreToolUse": [
      {"name": "no-rm", "matcher": "^bash$", "command": "./hooks/no-rm.sh",
       "timeout": 10, "fail_closed": true}
    ],
    "UserPromptSubmit": [{"command": "./hooks/add-branch.sh"}]
  }
}
.fi
.PP
Claude Code's nested shape is accepted too:
{"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "check.sh", "timeout": 30}]}.
Such a hook lives in Claude Code's world: its matcher follows Claude Code's rules (* or empty: all;
plain names separated by | or , match exactly; anything else is a regex) and is also tested
against Claude Code's tool names (Bash, Edit, MultiEdit, Write, Read, Glob, Grep, LS, WebFetch,
Task, mcp__server__tool); its payload carries that name as tool_name; for UserPromptSubmit and
SessionStart its plain (non-JSON) stdout is context.
.TP
.B Events
PreToolUse (before the permission check; deny blocks the call, allow skips the permission prompt),
PostToolUse (after the tool ran; payload tool_response; context and a block's reason are appended
to the result the model sees), UserPromptSubmit (before the prompt reaches the model; deny sends
nothing; updated_prompt replaces the prompt), SessionStart (source startup or resume; context goes
with the first prompt), Stop (when the model finishes; decision block with a reason makes the
agent continue, at most 3 times in a row).
.TP
.B Fields
matcher: a regex tested against the tool name, empty matches all; an invalid regex or a hook
without command is a configuration error naming the hook and its file (exit 2).
timeout: seconds, default 30. fail_closed: a crash, timeout or unparseable output of this hook
counts as a deny naming it (by default such a hook has no opinion). include_sub_agents: the hook
also runs for the tool calls of the agent tool's sub-agent (PreToolUse and PostToolUse only),
whose payload then carries is_sub_agent: true; other hooks never see them.
.TP
.B Running
Matching hooks run in parallel, identical commands once, each in its own process group with the
session's working directory as cwd. A command whose first word is a file with a #! line runs that
interpreter (a missing absolute interpreter is looked up on PATH by its base name; /usr/bin/env is
unwrapped); a file without #! runs as a sh script; anything else runs with /bin/sh \-c. Past its
timeout a hook's process group gets SIGTERM, then SIGKILL a second later; a hook whose background
children keep its output open is abandoned after a second. Output is capped at 1 MiB per stream.
.TP
.B Input
stdin is JSON: event, hook_event_name, session_id, cwd, plus tool_name, tool_input, tool_use_id
(tool events), prompt and attachments (UserPromptSubmit), tool_response (PostToolUse), source
(SessionStart), stop_hook_active and last_assistant_message (Stop). Environment: CRUSH=1,
AGENT=crush, AI_AGENT=crush, CRUSH_EVENT, CRUSH_SESSION_ID, CRUSH_CWD, CRUSH_PROJECT_DIR,
CLAUDE_PROJECT_DIR, and on tool events CRUSH_TOOL_NAME, CRUSH_TOOL_INPUT_COMMAND,
CRUSH_TOOL_INPUT_FILE_PATH (left out when longer than 64 KiB: read tool_input from stdin).
.TP
.B Output
Exit 0: stdout is a JSON envelope (empty or not JSON: no opinion). Exit 2: deny, the reason is
stderr. Exit 49: halt the turn, the reason is stderr. Other codes: a warning, but a JSON object
on stdout still counts. The envelope: decision (allow, deny or null), halt, reason, context
(string or array), updated_input (a shallow patch over the tool input), updated_prompt,
context_files (paths relative to CRUSH_CWD, listed to the model). Claude Code's
hookSpecificOutput (permissionDecision, permissionDecisionReason, updatedInput,
additionalContext), continue:false with stopReason, and decision approve or block are understood.
.TP
.B Composition
In config order, whatever order the hooks finish in: any deny blocks (reasons joined); halt is
sticky; otherwise any allow pre-approves; contexts concatenate; input patches merge in order, later
keys win; the last updated_prompt wins. A deny or halt drops everything but the reason.
.TP
.B Seeing them
crush run prints one line per hook on stderr (unless \-q) and a {"type":"hook"} event per hook
with \-\-json; the per-hook results are stored in the tool result's metadata.
.B crush hooks list
shows every hook per event with its file;
.B crush hooks test PreToolUse \-\-tool bash \-\-input '{"command":"rm \-rf /"}'
runs the real hooks on that call and prints the composed result (exit 0 allow or none, 3 deny or
halt).
.SH FILES
.TP
.I <project>/.crush/crush.db
The session store (SQLite). Tables sessions, messages, files, read_files as in Crush, plus usage
(one row per model call).
.TP
.I <project>/.crush/logs/crush.log
The log: one JSON object per line (time, level, msg): runs, retries, failed model calls, refused
permissions; debug lines with \-d. Read it with crush logs. Moved to crush.log.1 past 10 MB.
.TP
.I $CRUSH_GLOBAL_DATA/projects.json
Known projects, most recent first (crush projects). Rewritten at most once a minute per project.
.TP
.I $CRUSH_GLOBAL_DATA/state.json, <project>/.crush/state.json
Machine\-written state: last chosen and recent models, UI preferences, trust records (global).
.TP
.I $CRUSH_GLOBAL_DATA/providers.json
The cached provider catalog, as the server sent it.
.TP
.I $CRUSH_GLOBAL_DATA/providers.meta.json
The server's ETag for the cache, the URL it came from, and when it was last checked.
.SH ENVIRONMENT
.TP
.B CRUSH_GLOBAL_CONFIG, CRUSH_GLOBAL_DATA
Override the global config and data directories (else XDG_CONFIG_HOME/crush and
XDG_DATA_HOME/crush).
.TP
.B ANTHROPIC_API_KEY, OPENAI_API_KEY, ...
API keys of catalog providers (the catalog names the variable); also the key of an anthropic
or openai provider configured without one.
.TP
.B CATWALK_URL
Base URL of the provider catalog (default https://catwalk.charm.land).
.TP
.B CRUSH_DISABLE_PROVIDER_AUTO_UPDATE
1 (or true, yes, on) turns catalog auto-update off.
.TP
.B CRUSH_CATALOG_TIMEOUT_MS
How long a catalog download may take, in milliseconds (default 2000 at start-up, 30000 for
update\-providers).
.TP
.B CRUSH_CATALOG_TTL
Seconds a checked catalog is trusted before the next check (default 86400; 0 checks on every
start, as Go Crush does).
.TP
.B CRUSH_TRUST_PROJECT
1 trusts the project for this invocation (like \-\-trust).
.TP
.B CRUSH_CONFIG_TIMEOUT
Seconds a crushrc or a $(command) value may run (default 30).
.TP
.B CRUSH_DISABLE_PROVIDER_AUTO_UPDATE, CRUSH_DISABLE_DEFAULT_PROVIDERS, CRUSH_DISABLE_METRICS
Set the matching options in the runtime layer.
.TP
.B CRUSH_RETRY_BASE_MS
First retry delay for model calls in milliseconds (default 500; doubles per attempt up to 8 s).
.TP
.B HTTPS_PROXY, HTTP_PROXY, NO_PROXY
Proxies for model calls (loopback addresses are never proxied).
.SH EXIT STATUS
0 success; 1 runtime failure (provider unreachable after retries, I/O); 2 usage or configuration
error; 3 stopped by policy (a hook denied the prompt or halted the turn; a needed permission was
refused in a non-interactive run);
130 interrupted. A closed stdout exits quietly with 0.
"#;

pub fn man() -> String {
    let mut s = String::new();
    s.push_str(&format!(
        ".TH CRUSH 1 \"\" \"crush {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    s.push_str(".SH NAME\ncrush \\- a terminal AI coding assistant\n");
    s.push_str(".SH SYNOPSIS\n.B crush\n[\\fIFLAGS\\fR]\n");
    for c in COMMANDS {
        s.push_str(&format!(".br\n.B {}\n", roff_escape(c.usage)));
    }
    s.push_str(".SH DESCRIPTION\ncrush reads your code, runs tools and answers in the terminal, streaming from Anthropic or any OpenAI-compatible server.\n");
    s.push_str(".SH COMMANDS\n");
    for c in COMMANDS {
        s.push_str(&format!(
            ".TP\n.B {}\n{}\n",
            roff_escape(c.usage),
            roff_escape(c.about)
        ));
    }
    s.push_str(".SH FLAGS\n");
    for f in FLAGS {
        let mut head = match f.short {
            Some(c) => format!("\\-{c}, \\-\\-{}", f.long),
            None => format!("\\-\\-{}", f.long),
        };
        if let Some(v) = f.value {
            head.push_str(&format!(" \\fI{}\\fR", roff_escape(v)));
        }
        s.push_str(&format!(
            ".TP\n.B {head}\n{}{}\n",
            roff_escape(f.help),
            roff_escape(&scope_text(f))
        ));
    }
    s.push_str(&MAN_BODY.replacen(".SH FILES\n", &format!("{STORE_BODY}.SH FILES\n"), 1));
    s
}

fn flags_for(cmd: &str) -> Vec<&'static Flag> {
    FLAGS
        .iter()
        .filter(|f| match f.scope {
            Scope::Global => true,
            Scope::Only(c) => c.contains(&cmd),
        })
        .collect()
}

fn words(cmd: &str) -> String {
    let mut w: Vec<String> = Vec::new();
    for f in flags_for(cmd) {
        if let Some(c) = f.short {
            w.push(format!("-{c}"));
        }
        w.push(format!("--{}", f.long));
    }
    w.join(" ")
}

pub fn bash() -> String {
    let mut s = String::from(
        "# bash completion for crush (generated by crush --generate bash)\n_crush() {\n    local cur cmd i\n    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n    cmd=\"\"\n    for ((i = 1; i < COMP_CWORD; i++)); do\n        case \"${COMP_WORDS[i]}\" in\n",
    );
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    s.push_str(&format!(
        "            {}) cmd=\"${{COMP_WORDS[i]}}\"; break ;;\n",
        names.join("|")
    ));
    s.push_str("        esac\n    done\n    case \"$cmd\" in\n");
    for c in COMMANDS {
        let subs = c.subcommands.join(" ");
        s.push_str(&format!(
            "        {}) COMPREPLY=($(compgen -W \"{} {}\" -- \"$cur\")) ;;\n",
            c.name,
            words(c.name),
            subs
        ));
    }
    s.push_str(&format!(
        "        *) COMPREPLY=($(compgen -W \"{} {}\" -- \"$cur\")) ;;\n",
        words(""),
        names.join(" ")
    ));
    s.push_str("    esac\n}\ncomplete -o default -F _crush crush\n");
    s
}

fn zsh_escape(s: &str) -> String {
    s.replace('\'', "'\\''")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
}

pub fn zsh() -> String {
    let mut s = String::from(
        "#compdef crush\n# zsh completion for crush (generated by crush --generate zsh)\n\n_crush() {\n    local -a commands\n    commands=(\n",
    );
    for c in COMMANDS {
        s.push_str(&format!(
            "        '{}:{}'\n",
            c.name,
            zsh_escape(c.about.split(". ").next().unwrap_or(""))
        ));
    }
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    s.push_str(&format!(
        "    )\n    local cmd=${{words[(i)({})]}}\n",
        names.join("|")
    ));
    s.push_str("    if (( cmd <= $#words )); then\n        case ${words[cmd]} in\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "            {})\n                _arguments \\\n",
            c.name
        ));
        for f in flags_for(c.name) {
            s.push_str(&zsh_flag(f));
        }
        if c.subcommands.is_empty() {
            s.push_str("                    '*::argument:_files'\n                ;;\n");
        } else {
            s.push_str(&format!(
                "                    '1:subcommand:({})' '*::argument:_files'\n                ;;\n",
                c.subcommands.join(" ")
            ));
        }
    }
    s.push_str("        esac\n    else\n        _arguments \\\n");
    for f in flags_for("") {
        s.push_str(&zsh_flag(f));
    }
    s.push_str("            '1:command:->cmds'\n        _describe 'command' commands\n    fi\n}\n\n_crush \"$@\"\n");
    s
}

fn zsh_flag(f: &Flag) -> String {
    let value = match f.value {
        Some("DIR") => ":dir:_files -/".to_string(),
        Some("FILE") => ":file:_files".to_string(),
        Some(v) => format!(":{}:", zsh_escape(&v.to_lowercase())),
        None => String::new(),
    };
    let help = zsh_escape(f.help);
    match f.short {
        Some(c) => format!(
            "                    '(-{c} --{l})'{{-{c},--{l}}}'[{help}]{value}' \\\n",
            l = f.long
        ),
        None => format!("                    '--{}[{help}]{value}' \\\n", f.long),
    }
}

pub fn fish() -> String {
    let mut s = String::from("# fish completion for crush (generated by crush --generate fish)\n");
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let none = format!("not __fish_seen_subcommand_from {}", names.join(" "));
    for c in COMMANDS {
        s.push_str(&format!(
            "complete -c crush -f -n '{none}' -a {} -d '{}'\n",
            c.name,
            c.about
                .split(". ")
                .next()
                .unwrap_or("")
                .replace('\'', "\\'")
        ));
        for sub in c.subcommands {
            s.push_str(&format!(
                "complete -c crush -f -n '__fish_seen_subcommand_from {}' -a {sub}\n",
                c.name
            ));
        }
    }
    for f in FLAGS {
        let cond = match f.scope {
            Scope::Global => String::new(),
            Scope::Only(cmds) => {
                let mut conds: Vec<String> = Vec::new();
                for c in cmds.iter() {
                    if c.is_empty() {
                        conds.push(none.clone());
                    } else {
                        conds.push(format!("__fish_seen_subcommand_from {c}"));
                    }
                }
                format!(" -n '{}'", conds.join("; or "))
            }
        };
        let short = f.short.map(|c| format!(" -s {c}")).unwrap_or_default();
        let req = if f.value.is_some() { " -r" } else { "" };
        s.push_str(&format!(
            "complete -c crush{cond}{short} -l {}{req} -d '{}'\n",
            f.long,
            f.help.replace('\'', "\\'")
        ));
    }
    s
}

pub fn generate(kind: &str) -> Result<String, String> {
    match kind {
        "man" => Ok(man()),
        "bash" => Ok(bash()),
        "zsh" => Ok(zsh()),
        "fish" => Ok(fish()),
        other => Err(format!(
            "--generate {other}: expected man, bash, zsh or fish"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_and_command_is_documented() {
        let (m, b, z, f) = (man(), bash(), zsh(), fish());
        for flag in FLAGS {
            let long = format!("--{}", flag.long);
            assert!(
                m.contains(&format!("\\-\\-{}", flag.long)),
                "man lacks {long}"
            );
            assert!(b.contains(&long), "bash lacks {long}");
            assert!(z.contains(&long), "zsh lacks {long}");
            assert!(
                f.contains(&format!("-l {}", flag.long)),
                "fish lacks {long}"
            );
        }
        for c in COMMANDS {
            assert!(b.contains(c.name) && z.contains(c.name) && f.contains(c.name));
        }
    }
}

#[cfg(test)]
mod committed {
    /// `make docs` regenerates these files; this test fails when they fall out of step.
    #[test]
    fn man_page_and_completions_match_the_flag_table() {
        let root = env!("CARGO_MANIFEST_DIR");
        for (file, kind) in [
            ("man/crush.1", "man"),
            ("completions/crush.bash", "bash"),
            ("completions/_crush", "zsh"),
            ("completions/crush.fish", "fish"),
        ] {
            let committed = std::fs::read_to_string(format!("{root}/{file}"))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(
                committed == super::generate(kind).unwrap(),
                "{file} is out of date: run `make docs`"
            );
        }
    }
}
