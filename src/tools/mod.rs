//! The agent's tools, one file per tool behind the small `Tool` trait.
//!
//! Tools do not print and do not touch the store: they take parsed input and a context and return
//! a `ToolOutput`. Whether a call needs the user's permission is decided by `Tool::permission`;
//! the agent asks (or refuses) before calling `run`.
//!
//! `builtin()` returns every tool, sorted by name. Child processes go through `crate::proc`.

pub(crate) mod attach;
pub(crate) mod bash;
pub(crate) mod common;
pub(crate) mod confine;
pub(crate) mod crush_logs;
pub(crate) mod diff;
pub(crate) mod download;
pub(crate) mod edit;
pub(crate) mod fetch;
pub(crate) mod gitconfig;
pub(crate) mod glob;
pub(crate) mod grep;
pub(crate) mod ignore;
pub(crate) mod image;
pub(crate) mod jobs;
pub(crate) mod ls;
pub(crate) mod lsp;
pub(crate) mod mcp;
pub(crate) mod multiedit;
pub(crate) mod question;
pub(crate) mod sourcegraph;
pub(crate) mod todos;
pub(crate) mod view;
pub(crate) mod web;
pub(crate) mod whitespace;
pub(crate) mod write;

#[cfg(test)]
pub(crate) mod testutil;

pub(crate) use crate::store::Content;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Records which files the session has read, so edits can require a prior view and refuse a file
/// that changed since. Implemented by the agent over the session store.
pub(crate) trait ReadTracker {
    /// Remember that `path` (absolute) was read while its modification time was `mtime_ns`.
    fn record_read(&self, path: &Path, mtime_ns: i64);
    /// The modification time recorded at the last read of `path`, if it was read in this session.
    fn last_read(&self, path: &Path) -> Option<i64>;
}

/// The session a call belongs to, as the tools may see and change it. Implemented by the agent
/// over the session store (tools never touch the store themselves).
pub(crate) trait SessionState {
    /// The session's id ("" when there is none, as in some tests).
    fn session_id(&self) -> &str;
    /// The session's task list (`todos`).
    fn todos(&self) -> Result<Vec<todos::Todo>, ToolError>;
    fn set_todos(&self, todos: &[todos::Todo]) -> Result<(), ToolError>;
    /// This call changed `path` from `before` to `after`, for the session's file history
    /// (undo).
    fn file_changed(&self, path: &Path, before: Content, after: Content);
}

/// The language servers as the file tools see them (crush(1) LANGUAGE SERVERS).
pub(crate) trait Diagnostics: Sync {
    /// `path` (absolute) was read: the servers for its type start and open it. The problems
    /// already known in it, formatted for the model ("" when none).
    fn opened(&self, path: &Path) -> String;
    /// `path` was written: the servers get its text and their diagnostics are waited for
    /// (bounded by their timeout, and by `cancel`); the errors and warnings, formatted ("" when
    /// none, or when no server handles the file, which waits for nothing).
    fn changed(&self, path: &Path, cancel: &AtomicBool) -> String;
    /// Files may have changed behind the servers' back (a shell command ran): the open ones
    /// that did are sent again.
    fn resync(&self);
}

/// The files as the editor crush runs inside sees them (crush(1) ACP): reads see its unsaved
/// buffers, writes land in them. The tools' own checks (regular file, size, stale read,
/// permission, hooks) run first, on the disk and on the content crush computed.
pub(crate) trait Files: Sync {
    /// The text of `path` (absolute; an existing regular file) as the editor has it. None: the
    /// editor does not read files, read the disk.
    fn read(&self, path: &Path) -> Option<Result<String, ToolError>>;
    /// Writes `change` through the editor (its parent directories exist). None: the editor does
    /// not write files, write the disk.
    fn write(&self, change: &write::FileChange) -> Option<Result<(), ToolError>>;
}

/// Everything a tool may use while it runs.
pub(crate) struct ToolCtx<'a> {
    /// The session's working directory (relative paths resolve against it).
    pub cwd: &'a Path,
    /// The project root (git worktree root, else `cwd`). Reading inside it needs no permission.
    pub project_root: &'a Path,
    pub reads: &'a dyn ReadTracker,
    pub session: &'a dyn SessionState,
    /// The model takes images: `view` returns an image itself, else a line describing it.
    pub images: bool,
    /// Set when the user cancels the turn: long-running tools stop and kill their processes.
    pub cancel: Arc<AtomicBool>,
    /// The session's current large/small models, which the bash tool's `model large|small`
    /// builtin prints (None: printed as empty).
    pub session_models: Option<&'a crate::rcshell::Models>,
    /// The session's language servers (None: no server could handle anything here).
    pub diagnostics: Option<&'a dyn Diagnostics>,
    /// Variables the bash tool keeps although their names look secret
    /// (`options.shell_env_allow`; see `crate::env`).
    pub shell_env_allow: &'a [String],
    /// The session's variables (its `.env` and `env` map, `env::Overlay`): the bash tool's
    /// commands get those `shell_env_allow` keeps on top of crush's environment.
    pub env: &'a crate::env::Overlay,
    /// A file of `export` lines the bash tool runs before each command (what SessionStart hooks
    /// wrote to `CLAUDE_ENV_FILE`, crush(1) HOOKS).
    pub env_file: Option<&'a Path>,
    /// The editor's files when crush runs inside one (None: the disk).
    pub files: Option<&'a dyn Files>,
    /// The Agent Skills the model may read without asking (crush(1) SKILLS AND COMMANDS).
    pub skills: &'a SkillFiles,
    /// Where the file tools may go and what is guarded (`confine`): every path a tool reads
    /// or writes is admitted through it.
    pub bounds: &'a confine::Bounds,
    /// The OS sandbox the bash tool's commands run in (None: off; crush(1) SECURITY, sandbox).
    pub sandbox: Option<&'a std::sync::Arc<crate::sandbox::Sandbox>>,
}

/// The files of the session's Agent Skills, which the view tool reads without a permission
/// question: the skills' folders (canonical: a symbolic link inside one that leads out of it
/// is read as the file it leads to, with the usual question), and the built-in skills' texts
/// by their `crush://skills/...` location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SkillFiles {
    pub dirs: Vec<PathBuf>,
    pub builtin: Vec<(String, &'static str)>,
}

impl SkillFiles {
    /// Whether `path` (resolved, canonical) lies in a skill's folder.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.dirs.iter().any(|d| path.starts_with(d))
    }

    /// The text of a built-in skill file, by its location.
    pub(crate) fn builtin(&self, location: &str) -> Option<&'static str> {
        self.builtin
            .iter()
            .find(|(l, _)| l == location)
            .map(|(_, t)| *t)
    }
}

/// A file a call concerns (absolute), with the line it starts at when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub path: PathBuf,
    pub line: Option<u64>,
}

impl Location {
    /// The file `raw` (as the model gave it, resolved against `cwd`), when `input` has a
    /// non-blank `key`.
    pub(crate) fn of(input: &Value, key: &str, cwd: &Path) -> Option<Location> {
        let raw = input
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())?;
        Some(Location {
            path: crate::paths::resolve_real(cwd, raw),
            line: None,
        })
    }
}

/// A permission a call needs before it may run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PermissionRequest {
    pub tool: String,
    /// Crush's action names: execute (bash), write (edit, multiedit, write), read (view), list (ls,
    /// glob, grep), fetch (fetch).
    pub action: &'static str,
    /// The file or directory concerned (absolute); for bash, the working directory.
    pub path: PathBuf,
    /// One line for the user: the command, the file, the URL.
    pub description: String,
    /// Optional diff to show (edit, multiedit, write).
    pub diff: Option<String>,
    /// Where the file a write concerns lies (`confine::Zone`); the agent places `path` itself
    /// for writes, a tool that changes several files sets the highest of theirs.
    pub zone: confine::Zone,
    /// What the asking tool is and how it runs (the agent sets them from `Tool::kind` and
    /// `Tool::run_mode`): a command's grant covers that exact command.
    pub kind: ToolKind,
    pub runs: RunMode,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ToolOutput {
    /// What the model sees.
    pub content: String,
    pub is_error: bool,
    /// Tool-specific metadata stored with the result (JSON object or Null).
    pub metadata: Value,
    /// The result as structured data in Claude Code's `tool_response` shape (Bash: stdout,
    /// stderr, interrupted; Write and Edit: filePath, structuredPatch...), for PostToolUse hooks
    /// declared in Claude Code's shape (crush(1) HOOKS). Not stored; Null when the tool has none.
    pub structured: Value,
    /// An image that goes with the content (stored in the result's `data` and `mime_type`, as
    /// Go Crush stores one); a model that takes no images gets a placeholder instead.
    pub image: Option<Image>,
}

/// An image, its bytes in standard base64.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Image {
    pub mime_type: String,
    pub data: String,
}

impl ToolOutput {
    pub(crate) fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: true,
            ..Default::default()
        }
    }
}

/// Why a tool call has no result of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// The call cannot be done as asked (bad arguments, a missing file, a refused path): the
    /// model is told, and may try again differently.
    RespondToModel(String),
    /// crush itself failed (a temp file, a child process that cannot start): the model is told,
    /// and the user and the log too, since it is not the model's doing.
    Internal(String),
}

impl From<String> for ToolError {
    fn from(msg: String) -> ToolError {
        ToolError::RespondToModel(msg)
    }
}

impl From<&str> for ToolError {
    fn from(msg: &str) -> ToolError {
        ToolError::RespondToModel(msg.to_string())
    }
}

impl From<ToolError> for String {
    fn from(e: ToolError) -> String {
        e.to_string()
    }
}

impl std::error::Error for ToolError {}

/// A web request that failed is the model's to hear (a URL it gave, a server that did not
/// answer), unless crush could not start it.
impl From<crate::net::WebError> for ToolError {
    fn from(e: crate::net::WebError) -> ToolError {
        match e {
            crate::net::WebError::Thread(_) => ToolError::Internal(e.to_string()),
            e => ToolError::RespondToModel(e.to_string()),
        }
    }
}

impl From<crate::net::NotWeb> for ToolError {
    fn from(e: crate::net::NotWeb) -> ToolError {
        ToolError::RespondToModel(e.to_string())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::RespondToModel(m) | ToolError::Internal(m) => f.write_str(m),
        }
    }
}

/// What a tool does, as editors group tools (ACP's tool kinds, for the icon of a call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ToolKind {
    /// Reads a file or what a language server knows of one.
    Read,
    /// Changes files.
    Edit,
    /// Runs a command.
    Execute,
    /// Gets something from the network.
    Fetch,
    /// Looks for files or text.
    Search,
    /// Works things out without touching anything: sub-agents, the task list.
    Think,
    #[default]
    Other,
}

impl ToolKind {
    /// The kind's name in ACP (`tool_call.kind`).
    pub(crate) fn acp_name(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Execute => "execute",
            ToolKind::Fetch => "fetch",
            ToolKind::Search => "search",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

/// How a call of a tool is carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RunMode {
    /// `Tool::run` does the work in crush's process.
    #[default]
    InProcess,
    /// `Tool::run` runs a shell command line (it may leave a background job): a permission
    /// granted "always" covers that exact command, not the tool.
    Command,
    /// The agent loop runs the call itself, since it needs the model, the store or the user,
    /// which tools do not get; `Tool::run` is not reached through the loop.
    Loop(LoopTool),
}

/// The calls the agent loop runs itself (`RunMode::Loop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoopTool {
    /// A task for a sub-agent in a child session.
    SubAgent,
    /// A web page read by a sub-agent (`agentic_fetch`).
    FetchAgent,
    /// Questions for the user.
    Question,
    /// What crush knows about itself.
    Info,
}

/// A tool: what the model sees of it (name, description, schema), what it is to the other
/// layers (kind, read-only, Claude Code's name, title and locations, how it runs), and the call
/// itself. Editors, hooks, permissions and plan mode ask these, never the tool's name.
pub(crate) trait Tool: Send + Sync {
    /// The name the model sees (Crush's names, so permissions and hook matchers carry over).
    fn name(&self) -> &str;
    fn description(&self) -> String;
    /// JSON Schema of the parameters.
    fn schema(&self) -> Value;
    /// What the tool does, for editors.
    fn kind(&self) -> ToolKind;
    /// Whether a call changes nothing and reaches nothing outside the machine: no writes, no
    /// commands, no network. Plan mode offers only these (crush(1) PLAN MODE).
    fn read_only(&self) -> bool;
    /// Whether the built-in sub-agent, and an agent file that names no tools, get this tool:
    /// the tools that look around without changing anything.
    fn for_sub_agents(&self) -> bool {
        false
    }
    /// Claude Code's name for the tool (hooks in Claude Code's shape match and see it), if it
    /// has one.
    fn claude_name(&self) -> Option<String> {
        None
    }
    /// Every name a Claude Code matcher may use for the tool: its current one and any it had
    /// before.
    fn claude_names(&self) -> Vec<String> {
        self.claude_name().into_iter().collect()
    }
    /// The one line that names a call in editors.
    fn title(&self, _input: &Value, _cwd: &Path) -> String {
        self.name().to_string()
    }
    /// The files a call reads or changes, for editors to follow.
    fn locations(&self, _input: &Value, _cwd: &Path) -> Vec<Location> {
        Vec::new()
    }
    /// How a call is carried out.
    fn run_mode(&self) -> RunMode {
        RunMode::InProcess
    }
    /// How the REPL previews a result under the call's line.
    fn preview(&self) -> Preview {
        Preview::Head
    }
    /// The permission this call needs, or None. Err: the input is invalid (the message goes to the
    /// model as an error result and the tool does not run).
    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError>;
    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError>;
}

/// Every built-in tool, sorted by name (Crush sends the tool list sorted).
pub(crate) fn builtin() -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = vec![
        Box::new(bash::Bash),
        Box::new(crush_logs::CrushLogs),
        Box::new(download::Download),
        Box::new(edit::Edit),
        Box::new(fetch::Fetch),
        Box::new(glob::Glob),
        Box::new(grep::Grep),
        Box::new(jobs::JobKill),
        Box::new(jobs::JobOutput),
        Box::new(ls::Ls),
        Box::new(multiedit::MultiEdit),
        Box::new(question::QuestionTool),
        Box::new(sourcegraph::Sourcegraph),
        Box::new(todos::Todos),
        Box::new(view::View),
        Box::new(write::Write),
    ];
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    tools
}

/// The title of an edit or multiedit call.
fn edit_title(input: &Value, cwd: &Path) -> String {
    let p = common::shown_arg(input, "file_path", cwd).unwrap_or_default();
    format!("Edit {p}").trim_end().to_string()
}

/// `tool` among `tools`, by name.
pub(crate) fn find<'a>(tools: &[&'a dyn Tool], name: &str) -> Option<&'a dyn Tool> {
    tools.iter().copied().find(|t| t.name() == name)
}

/// What editors and the REPL show of a call: its kind, title and files, how it runs, how its
/// result is previewed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallView {
    pub kind: ToolKind,
    pub title: String,
    pub locations: Vec<Location>,
    pub runs: RunMode,
    pub preview: Preview,
}

impl CallView {
    /// A call of `tool` with `input`, paths resolved against `cwd`.
    pub(crate) fn of(tool: &dyn Tool, input: &Value, cwd: &Path) -> CallView {
        CallView {
            kind: tool.kind(),
            title: tool.title(input, cwd),
            locations: tool.locations(input, cwd),
            runs: tool.run_mode(),
            preview: tool.preview(),
        }
    }

    /// A call of a tool that is not there (an unknown name, a tool no longer offered).
    pub(crate) fn unknown(name: &str) -> CallView {
        CallView {
            kind: ToolKind::Other,
            title: name.to_string(),
            locations: Vec::new(),
            runs: RunMode::InProcess,
            preview: Preview::Head,
        }
    }
}

/// The key argument of a tool call, for one-line display.
pub(crate) fn key_argument(input: &Value) -> String {
    for k in [
        "command",
        "file_path",
        "pattern",
        "url",
        "symbol",
        "query",
        "path",
        "prompt",
    ] {
        if let Some(s) = input.get(k).and_then(Value::as_str) {
            let line = s.lines().next().unwrap_or("");
            let mut short: String = line.chars().take(100).collect();
            if short.len() < s.len() {
                short.push('…');
            }
            return short;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_argument_names_what_a_call_is_about() {
        let arg = |v: Value| key_argument(&v);
        assert_eq!(arg(serde_json::json!({"command": "ls\nrm x"})), "ls…");
        assert_eq!(
            arg(serde_json::json!({"symbol": "add", "path": "src"})),
            "add"
        );
        assert_eq!(
            arg(serde_json::json!({"file_path": "a.py", "query": "x"})),
            "a.py"
        );
        assert_eq!(arg(serde_json::json!({"query": "fn main"})), "fn main");
        assert_eq!(arg(serde_json::json!({"name": "gopls"})), "");
    }

    #[test]
    fn builtin_sorted_and_schemas_are_objects() {
        let tools = builtin();
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "bash",
                "crush_logs",
                "download",
                "edit",
                "fetch",
                "glob",
                "grep",
                "job_kill",
                "job_output",
                "ls",
                "multiedit",
                "question",
                "sourcegraph",
                "todos",
                "view",
                "write"
            ]
        );
        for t in &tools {
            let schema = t.schema();
            assert_eq!(schema["type"], "object", "{}", t.name());
            assert!(schema["properties"].is_object(), "{}", t.name());
            assert!(!t.description().is_empty());
        }
    }
}

/// Lines of a tool result shown under its tool line by default (crush(1) INTERACTIVE SESSION).
pub(crate) const PREVIEW_LINES: usize = 5;

/// Lines of a tool result's preview as `options.tool_preview_lines` says (0 shows none).
pub(crate) fn preview_lines<N: TryInto<usize>>(configured: Option<N>) -> usize {
    configured.map_or(PREVIEW_LINES, |n| n.try_into().unwrap_or(usize::MAX))
}

/// How a result is previewed (`preview`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Preview {
    /// Its first non-blank lines (grep's and glob's count and first hits).
    #[default]
    Head,
    /// A command's last lines and its exit status.
    CommandTail,
    /// The range of numbered lines a file read returned.
    LineRange,
}

/// A short preview of what the model got from a call, at most `max` lines, as the tool's
/// `style` says: bash's last lines and its exit status, the range `view` read, the first lines
/// of anything else; nothing when `max` is 0.
pub(crate) fn preview(style: Preview, content: &str, max: usize) -> Vec<String> {
    if max == 0 {
        return Vec::new();
    }
    let lines: Vec<&str> = content.lines().collect();
    match style {
        Preview::CommandTail => {
            // The working directory the model is told about is no output.
            let body = match content.rfind("\n\n<cwd>") {
                Some(i) => &content[..i],
                None => content,
            };
            let lines: Vec<&str> = body.lines().collect();
            let status = lines.iter().any(|l| {
                l.starts_with("Exit code ")
                    || l.starts_with("Command timed out")
                    || l.starts_with("Command was aborted")
            });
            let keep = if status {
                max
            } else {
                max.saturating_sub(1).max(1)
            };
            let mut out: Vec<String> = lines[lines.len().saturating_sub(keep)..]
                .iter()
                .map(|l| l.to_string())
                .collect();
            if !status {
                out.push("exit 0".to_string());
            }
            out
        }
        Preview::LineRange => {
            let numbers: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.split_once('|').map(|(n, _)| n.trim()))
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .collect();
            match (numbers.first(), numbers.last()) {
                (Some(a), Some(b)) => vec![format!("lines {a}-{b}")],
                _ => lines.iter().take(1).map(|l| l.to_string()).collect(),
            }
        }
        Preview::Head => lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .take(max)
            .map(|l| l.to_string())
            .collect(),
    }
}

#[cfg(test)]
mod preview_tests {
    use super::preview;

    #[test]
    fn previews_show_what_the_model_got() {
        let bash = "1\n2\n3\n4\n5\n6\n\n<cwd>/p</cwd>";
        let bash_tool = super::bash::Bash;
        let tail = super::Tool::preview(&bash_tool);
        assert_eq!(preview(tail, bash, 5), ["3", "4", "5", "6", "exit 0"]);
        let failed = "oops\nExit code 2\n\n<cwd>/p</cwd>";
        assert_eq!(preview(tail, failed, 5), ["oops", "Exit code 2"]);
        let grep = "Found 3 matches\na.rs:\n  Line 1: x\n  Line 2: x\n\nb.rs:\n  Line 9: x";
        assert_eq!(
            preview(super::Tool::preview(&super::grep::Grep), grep, 3),
            ["Found 3 matches", "a.rs:", "  Line 1: x"]
        );
        let view = "<file>\n    10|a\n    11|b\n    12|c\n</file>";
        assert_eq!(
            preview(super::Tool::preview(&super::view::View), view, 5),
            ["lines 10-12"]
        );
    }
}
