//! What the user typed, as values: lines assembled into one input (blocks `{` … `}`, a trailing
//! backslash), then parsed into a prompt, a `!command`, a slash command, or a message for the
//! user. Pure: no terminal, no process, no store.

use crate::skills::catalog::{self, Name, Resolution};

/// The slash commands, in the order `/help` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slash {
    Help,
    New,
    Sessions,
    Resume,
    Model,
    Option,
    Permissions,
    Sandbox,
    Mcp,
    Agents,
    Cost,
    Compact,
    Export,
    History,
    Init,
    Plan,
    Todos,
    Expand,
    Jobs,
    Undo,
    Versions,
    Attach,
    Detach,
    Quit,
}

/// A built-in slash command: its name, arguments and what it does, for parsing, `/help`,
/// completion and the man page (crush(1) INTERACTIVE SESSION is generated from this table).
pub(crate) struct SlashCommand {
    pub cmd: Slash,
    pub name: &'static str,
    pub args: &'static str,
    /// What it does, as `/help` and completion say it.
    pub about: &'static str,
    /// What the man page says of it (empty: `about`).
    pub man: &'static str,
}

impl SlashCommand {
    /// The man page's text of the command.
    pub(crate) fn man_text(&self) -> &'static str {
        if self.man.is_empty() {
            self.about
        } else {
            self.man
        }
    }
}

/// The slash commands, in the order `/help` lists them.
pub(crate) const SLASH_COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        cmd: Slash::Help,
        name: "help",
        args: "",
        about: "show this help",
        man: "",
    },
    SlashCommand {
        cmd: Slash::New,
        name: "new",
        args: "",
        about: "start a new session (created with the next prompt)",
        man: "a new session, created with the next prompt",
    },
    SlashCommand {
        cmd: Slash::Sessions,
        name: "sessions",
        args: "",
        about: "list this project's sessions",
        man: "list this project's sessions by short id, the current one marked; on a terminal a pick list: Up and Down or the number, Enter resumes the session picked, Esc keeps the current one",
    },
    SlashCommand {
        cmd: Slash::Resume,
        name: "resume",
        args: "ID",
        about: "switch to a session (id or unique prefix)",
        man: "switch to a session (an id or unique prefix)",
    },
    SlashCommand {
        cmd: Slash::Model,
        name: "model",
        args: "[large|small] [PROVIDER/MODEL]",
        about: "show the models, or switch one for this run",
        man: "show the models, or switch one for this run (never in a file); with no argument on a terminal, the models of the configured providers as a pick list, the one picked becoming the large model",
    },
    SlashCommand {
        cmd: Slash::Option,
        name: "option",
        args: "[KEY [VALUE]]",
        about: "show or set an option for this run (e.g. progress false)",
        man: "show or set an option for this run, never in a file (progress)",
    },
    SlashCommand {
        cmd: Slash::Permissions,
        name: "permissions",
        args: "[allow|deny TOOL[:ACTION]...]",
        about: "show or change what runs without asking, for this run",
        man: "show or change what runs without asking, for this run, never in a file",
    },
    SlashCommand {
        cmd: Slash::Sandbox,
        name: "sandbox",
        args: "[off|read-only|workspace-write]",
        about: "show or change the OS sandbox of the model's commands, for this session",
        man: "show or change the sandbox of the model's commands for the session; off ends --auto's approval mode (see SECURITY, Sandbox)",
    },
    SlashCommand {
        cmd: Slash::Mcp,
        name: "mcp",
        args: "[add|rm NAME ...|login NAME]",
        about: "show the MCP servers, add or remove one for this run, or authorize one",
        man: "the MCP servers; add and rm change them for this run, login authorizes one (see MCP SERVERS)",
    },
    SlashCommand {
        cmd: Slash::Agents,
        name: "agents",
        args: "",
        about: "list the custom sub-agents, where each was found, and the files not used",
        man: "the custom sub-agents, as crush agents list prints them (see AGENTS)",
    },
    SlashCommand {
        cmd: Slash::Cost,
        name: "cost",
        args: "",
        about: "tokens and cost of this session",
        man: "",
    },
    SlashCommand {
        cmd: Slash::Compact,
        name: "compact",
        args: "",
        about: "summarize this session; later turns start from the summary",
        man: "summarize the session with the large model; later turns start from the summary, as after an auto-summarize",
    },
    SlashCommand {
        cmd: Slash::Export,
        name: "export",
        args: "[md|json] [FILE]",
        about: "print this session (or write it to FILE)",
        man: "print the session as Markdown or JSON, or write it to FILE",
    },
    SlashCommand {
        cmd: Slash::History,
        name: "history",
        args: "[N]",
        about: "list the last N prompts of this project (default 20)",
        man: "",
    },
    SlashCommand {
        cmd: Slash::Init,
        name: "init",
        args: "[NOTES]",
        about: "have the agent explore the project and write AGENTS.md (options.initialize_as)",
        man: "the agent explores the project and writes AGENTS.md, or the file options.initialize_as names (see SKILLS AND COMMANDS)",
    },
    SlashCommand {
        cmd: Slash::Plan,
        name: "plan",
        args: "[off]",
        about: "plan first with read-only tools, then choose how to go on",
        man: "plan mode on, or off (see PLAN MODE)",
    },
    SlashCommand {
        cmd: Slash::Todos,
        name: "todos",
        args: "",
        about: "show this session's task list",
        man: "",
    },
    SlashCommand {
        cmd: Slash::Expand,
        name: "expand",
        args: "",
        about: "print the whole result of the last tool call",
        man: "",
    },
    SlashCommand {
        cmd: Slash::Jobs,
        name: "jobs",
        args: "",
        about: "list this session's background jobs",
        man: "the session's background jobs: id, state, seconds, command",
    },
    SlashCommand {
        cmd: Slash::Undo,
        name: "undo",
        args: "",
        about: "revert the files of the last change a tool made in this session",
        man: "revert the files of the last change a tool made in this session: each gets its content back, byte for byte, and a file the call created is removed; refused, with nothing touched, when one of them changed outside crush since, or when a directory on the way to one became a symbolic link since; the session records the undo so the model learns it",
    },
    SlashCommand {
        cmd: Slash::Versions,
        name: "versions",
        args: "FILE",
        about: "list the versions of FILE kept in this session",
        man: "",
    },
    SlashCommand {
        cmd: Slash::Attach,
        name: "attach",
        args: "[FILE]",
        about: "attach FILE to your next prompt (text inline, images as images); list attachments",
        man: "attach FILE to the next prompt, or list what is attached (see Attachments below)",
    },
    SlashCommand {
        cmd: Slash::Detach,
        name: "detach",
        args: "[FILE]",
        about: "drop an attached file, or all of them",
        man: "drop one attached file, or all",
    },
    SlashCommand {
        cmd: Slash::Quit,
        name: "quit",
        args: "",
        about: "leave (also Ctrl-D)",
        man: "leave (also Ctrl-D, or exit or quit alone on a line)",
    },
];

/// Names accepted only when typed in full.
/// `s` stays /sessions (as `crush s` is `crush sessions`) although /sandbox shares the letter.
const ALIASES: &[(&str, Slash)] = &[
    ("exit", Slash::Quit),
    ("?", Slash::Help),
    ("s", Slash::Sessions),
    // Before /plan came, /p was /permissions: it stays so.
    ("p", Slash::Permissions),
];

/// The other names of `cmd`, accepted only when typed in full.
pub(crate) fn aliases(cmd: Slash) -> impl Iterator<Item = &'static str> {
    ALIASES
        .iter()
        .filter(move |(_, c)| *c == cmd)
        .map(|(n, _)| *n)
}

/// One complete input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// Nothing to do (an empty line or block).
    Empty,
    /// Text for the model.
    Prompt(String),
    /// `!command`: run it in the shell and record it in the session.
    Shell(String),
    Command {
        cmd: Slash,
        args: String,
    },
    /// `/mcp:SERVER:PROMPT ARGS`: a prompt of an MCP server, expanded and sent.
    McpPrompt {
        server: String,
        prompt: String,
        args: String,
    },
    /// A custom command or a user-invocable skill (its full name) and the rest of the line.
    Custom {
        name: String,
        args: String,
    },
    /// Not understood: tell the user (never sent to the model).
    Invalid(String),
}

/// Parses one complete input (a line, or lines joined by a trailing backslash).
#[cfg(test)]
pub(crate) fn parse(text: &str) -> Input {
    parse_with(text, &[])
}

/// [`parse`], with the names of the custom commands, skills and MCP prompts (crush(1) SKILLS
/// AND COMMANDS).
pub(crate) fn parse_with(text: &str, names: &[Name]) -> Input {
    let t = text.trim();
    if t.is_empty() {
        return Input::Empty;
    }
    if let Some(rest) = t.strip_prefix("//") {
        // An escaped slash: a prompt that starts with '/'.
        return Input::Prompt(format!("/{rest}"));
    }
    if let Some(rest) = t.strip_prefix('/') {
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], rest[i..].trim()),
            None => (rest, ""),
        };
        if catalog::is_path(name) {
            return Input::Prompt(t.to_string());
        }
        let name = match resolve_with(name, names) {
            Ok(Target::Builtin(cmd)) => {
                return Input::Command {
                    cmd,
                    args: args.to_string(),
                };
            }
            Ok(Target::Custom(full)) => full,
            Err(e) if !name.starts_with("mcp:") => return Input::Invalid(e.to_string()),
            // A server still starting: the REPL waits for it.
            Err(_) => name.to_string(),
        };
        if let Some(sp) = name.strip_prefix("mcp:") {
            return match sp.split_once(':') {
                Some((server, prompt)) if !server.is_empty() && !prompt.is_empty() => {
                    Input::McpPrompt {
                        server: server.to_string(),
                        prompt: prompt.to_string(),
                        args: args.to_string(),
                    }
                }
                _ => Input::Invalid(format!(
                    "/{name}: an MCP prompt is /mcp:SERVER:PROMPT (/mcp lists them)"
                )),
            };
        }
        return Input::Custom {
            name,
            args: args.to_string(),
        };
    }
    if let Some(rest) = t.strip_prefix('!') {
        let cmd = rest.trim();
        if cmd.is_empty() {
            return Input::Invalid("'!' needs a command, e.g. !git status".into());
        }
        return Input::Shell(cmd.to_string());
    }
    if t == "exit" || t == "quit" {
        return Input::Command {
            cmd: Slash::Quit,
            args: String::new(),
        };
    }
    Input::Prompt(t.to_string())
}

/// A built-in slash command by full name, alias, or unique prefix. Err: a message naming the
/// candidates (ambiguous) or the close matches (unknown).
#[cfg(test)]
pub(crate) fn resolve(name: &str) -> Result<Slash, String> {
    match resolve_with(name, &[]).map_err(|e| e.to_string())? {
        Target::Builtin(cmd) => Ok(cmd),
        Target::Custom(full) => Err(full),
    }
}

/// What a slash name means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Builtin(Slash),
    /// A custom command, skill or MCP prompt, by its full name.
    Custom(String),
}

/// A slash name among the built-in commands (their aliases typed in full) and `names`: exact
/// names first (built-ins, then full names, then bare names by level), else a unique prefix of
/// any. Err: a message naming the candidates (ambiguous) or the close matches (unknown).
pub(crate) fn resolve_with(name: &str, names: &[Name]) -> Result<Target, SlashError> {
    let lower = name.to_ascii_lowercase();
    if lower.is_empty() {
        return Err(SlashError::NoName);
    }
    if let Some((_, cmd)) = ALIASES.iter().find(|(n, _)| *n == lower) {
        return Ok(Target::Builtin(*cmd));
    }
    let builtins: Vec<&str> = SLASH_COMMANDS.iter().map(|c| c.name).collect();
    match catalog::resolve(name, names, &builtins, true) {
        Resolution::Builtin(b) => SLASH_COMMANDS
            .iter()
            .find(|c| c.name == b)
            .map(|c| Target::Builtin(c.cmd))
            .ok_or_else(|| SlashError::NotBuiltin(name.to_string())),
        Resolution::Entry(full) => Ok(Target::Custom(full)),
        Resolution::Ambiguous(list) => Err(SlashError::Ambiguous {
            name: name.to_string(),
            candidates: list,
        }),
        Resolution::Unknown => Err(SlashError::Unknown {
            name: name.to_string(),
            close: suggestions(&lower, names)
                .iter()
                .map(|c| format!("/{c}"))
                .collect(),
        }),
    }
}

/// Why a slash name names nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SlashError {
    /// A bare `/`.
    NoName,
    /// The name could be any of these.
    Ambiguous {
        name: String,
        candidates: Vec<String>,
    },
    /// No command has the name; `close` are the near ones, as `/NAME`.
    Unknown { name: String, close: Vec<String> },
    /// The catalog named a built-in command the table lacks.
    NotBuiltin(String),
}

impl std::fmt::Display for SlashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlashError::NoName => f.write_str("a slash command needs a name; /help lists them"),
            SlashError::Ambiguous { name, candidates } => write!(
                f,
                "/{name} is ambiguous: it could be {}",
                or_list(candidates)
            ),
            SlashError::Unknown { name, close } => {
                write!(f, "unknown command /{name}")?;
                if !close.is_empty() {
                    write!(f, "; did you mean {}?", or_list(close))?;
                }
                f.write_str(
                    " (/help lists the commands; start a prompt with // to send a leading /)",
                )
            }
            SlashError::NotBuiltin(name) => write!(f, "unknown command /{name}"),
        }
    }
}

impl std::error::Error for SlashError {}

fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Command names close to `typed` (see `catalog::near`), closest first: the built-ins, their
/// aliases and `names`.
pub(crate) fn suggestions(typed: &str, names: &[Name]) -> Vec<String> {
    let builtins = SLASH_COMMANDS
        .iter()
        .map(|c| c.name)
        .chain(ALIASES.iter().map(|(n, _)| *n).filter(|n| n.len() > 1));
    catalog::near(typed, builtins.chain(names.iter().map(|n| n.full.as_str())))
}

/// Assembles lines into complete inputs.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// Inside a block: its closing line (`}` or `tag}`) and the lines so far.
    block: Option<(String, Vec<String>)>,
    /// Lines continued with a trailing backslash, joined by newlines.
    continued: Option<String>,
    /// The text of the input being assembled, as the history keeps it: a block with its braces,
    /// continued lines joined.
    entry: String,
    /// The custom commands, skills and MCP prompts slash names may name.
    names: Vec<Name>,
}

/// What feeding one line produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// The input is complete.
    Done(Input),
    /// More lines are needed (a block or a continued line is open).
    More,
}

/// A line that opens a block: `{` or `{tag` (tag: letters, digits, `_`, `-`).
fn block_opening(line: &str) -> Option<String> {
    let tag = line.trim().strip_prefix('{')?;
    if tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Some(format!("{tag}}}"))
    } else {
        None
    }
}

impl Assembler {
    pub(crate) fn new() -> Assembler {
        Assembler::default()
    }

    /// The custom commands, skills and MCP prompts slash names may name from now on.
    pub(crate) fn set_names(&mut self, names: Vec<Name>) {
        self.names = names;
    }

    /// True while a block or a continued line is open (the prompt shows a continuation mark).
    pub(crate) fn pending(&self) -> bool {
        self.block.is_some() || self.continued.is_some()
    }

    /// Drops an open block or continued line; true if there was one.
    pub(crate) fn discard(&mut self) -> bool {
        let had = self.pending();
        self.block = None;
        self.continued = None;
        had
    }

    /// The last complete input as the history keeps it (recalled, it gives the same input).
    pub(crate) fn entry(&self) -> &str {
        &self.entry
    }

    /// Feeds what the line editor returned: one line, or several (a paste, Alt-Enter, a recalled
    /// entry). Several lines are one input, unless they open a block or one is open.
    pub(crate) fn feed_text(&mut self, text: &str) -> Fed {
        if !text.contains('\n') || self.pending() || block_opening(first_line(text)).is_some() {
            let mut fed = Fed::More;
            for line in text.split('\n') {
                fed = self.feed(line);
            }
            return fed;
        }
        self.entry = text.to_string();
        Fed::Done(parse_with(text, &self.names))
    }

    /// Feeds one line (without its newline).
    pub(crate) fn feed(&mut self, line: &str) -> Fed {
        if let Some((close, mut lines)) = self.block.take() {
            self.entry.push('\n');
            self.entry.push_str(line);
            if line.trim() == close {
                let text = lines.join("\n");
                return Fed::Done(if text.trim().is_empty() {
                    Input::Empty
                } else {
                    // A block is a prompt, verbatim: no slash command, no shell escape.
                    Input::Prompt(text)
                });
            }
            lines.push(line.to_string());
            self.block = Some((close, lines));
            return Fed::More;
        }
        if self.continued.is_none()
            && let Some(close) = block_opening(line)
        {
            self.block = Some((close, Vec::new()));
            self.entry = line.to_string();
            return Fed::More;
        }
        let (body, more) = match line.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        let text = match self.continued.take() {
            Some(mut prev) => {
                prev.push('\n');
                prev.push_str(body);
                prev
            }
            None => body.to_string(),
        };
        if more {
            self.continued = Some(text);
            return Fed::More;
        }
        let input = parse_with(&text, &self.names);
        self.entry = text;
        Fed::Done(input)
    }
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(lines: &[&str]) -> Vec<Input> {
        let mut a = Assembler::new();
        lines
            .iter()
            .filter_map(|l| match a.feed(l) {
                Fed::Done(i) => Some(i),
                Fed::More => None,
            })
            .collect()
    }

    fn prompt(s: &str) -> Input {
        Input::Prompt(s.into())
    }

    fn cmd(cmd: Slash, args: &str) -> Input {
        Input::Command {
            cmd,
            args: args.into(),
        }
    }

    #[test]
    fn plain_lines_are_prompts_trimmed() {
        assert_eq!(parse("  fix the bug  "), prompt("fix the bug"));
        assert_eq!(parse(""), Input::Empty);
        assert_eq!(parse("   \t "), Input::Empty);
    }

    #[test]
    fn a_block_is_one_verbatim_prompt() {
        let got = feed_all(&["{", "  first line", "/not a command", "!nor a shell", "}"]);
        assert_eq!(
            got,
            vec![prompt("  first line\n/not a command\n!nor a shell")]
        );
    }

    #[test]
    fn a_tagged_block_may_contain_a_closing_brace() {
        let got = feed_all(&["{py", "def f():", "}", "py}", "next"]);
        assert_eq!(got, vec![prompt("def f():\n}"), prompt("next")]);
    }

    #[test]
    fn an_empty_block_is_empty() {
        assert_eq!(feed_all(&["{", "", "  ", "}"]), vec![Input::Empty]);
    }

    #[test]
    fn an_open_brace_with_text_is_not_a_block() {
        assert_eq!(feed_all(&["{ \"a\": 1 }"]), vec![prompt("{ \"a\": 1 }")]);
    }

    #[test]
    fn trailing_backslash_continues_the_line() {
        let mut a = Assembler::new();
        assert_eq!(a.feed("first \\"), Fed::More);
        assert!(a.pending());
        assert_eq!(a.feed("second\\"), Fed::More);
        assert_eq!(a.feed("third"), Fed::Done(prompt("first \nsecond\nthird")));
        assert!(!a.pending());
    }

    #[test]
    fn editor_text_of_several_lines_is_one_input_and_the_entry_recalls_it() {
        let mut a = Assembler::new();
        assert_eq!(a.feed_text("one\n/two\n"), Fed::Done(prompt("one\n/two")));
        assert_eq!(a.entry(), "one\n/two\n");
        // A block typed line by line is kept whole, braces and all, and recalled the same.
        assert_eq!(a.feed_text("{"), Fed::More);
        assert_eq!(a.feed_text("in"), Fed::More);
        assert_eq!(a.feed_text("}"), Fed::Done(prompt("in")));
        assert_eq!(a.entry(), "{\nin\n}");
        assert_eq!(a.feed_text("{\nin\n}"), Fed::Done(prompt("in")));
        // Continued lines are kept joined.
        assert_eq!(a.feed_text("first \\"), Fed::More);
        assert_eq!(a.feed_text("second"), Fed::Done(prompt("first \nsecond")));
        assert_eq!(a.entry(), "first \nsecond");
        assert_eq!(a.feed_text("/he"), Fed::Done(cmd(Slash::Help, "")));
        assert_eq!(a.entry(), "/he");
    }

    #[test]
    fn discard_drops_an_open_block() {
        let mut a = Assembler::new();
        assert_eq!(a.feed("{"), Fed::More);
        assert_eq!(a.feed("half"), Fed::More);
        assert!(a.discard());
        assert!(!a.discard());
        assert_eq!(a.feed("hello"), Fed::Done(prompt("hello")));
    }

    #[test]
    fn slash_commands_by_name_and_unique_prefix() {
        assert_eq!(parse("/help"), cmd(Slash::Help, ""));
        assert_eq!(parse("/he"), cmd(Slash::Help, ""));
        assert_eq!(parse("/hi 5"), cmd(Slash::History, "5"));
        assert_eq!(parse("/res abc123"), cmd(Slash::Resume, "abc123"));
        assert_eq!(parse("/RESUME  abc  "), cmd(Slash::Resume, "abc"));
        assert_eq!(parse("/s"), cmd(Slash::Sessions, ""));
        assert_eq!(parse("/cos"), cmd(Slash::Cost, ""));
        assert_eq!(parse("/comp"), cmd(Slash::Compact, ""));
        assert_eq!(
            parse("/expo json out.json"),
            cmd(Slash::Export, "json out.json")
        );
        assert_eq!(
            parse("/model small fake/m"),
            cmd(Slash::Model, "small fake/m")
        );
        assert_eq!(
            parse("/p allow grep"),
            cmd(Slash::Permissions, "allow grep")
        );
        assert_eq!(parse("/q"), cmd(Slash::Quit, ""));
        assert_eq!(parse("/agents"), cmd(Slash::Agents, ""));
        assert_eq!(parse("/ag"), cmd(Slash::Agents, ""));
        assert_eq!(
            parse("/mcp:fs:review file=a.rs  b"),
            Input::McpPrompt {
                server: "fs".into(),
                prompt: "review".into(),
                args: "file=a.rs  b".into()
            }
        );
        assert!(matches!(parse("/mcp:fs"), Input::Invalid(m) if m.contains("/mcp:SERVER:PROMPT")));
        assert_eq!(
            parse("/mcp add x --command y"),
            cmd(Slash::Mcp, "add x --command y")
        );
        assert_eq!(parse("/exit"), cmd(Slash::Quit, ""));
        assert_eq!(parse("exit"), cmd(Slash::Quit, ""));
        assert_eq!(parse("quit"), cmd(Slash::Quit, ""));
    }

    #[test]
    fn custom_commands_skills_and_mcp_prompts_by_name() {
        use crate::skills::catalog::Tier;
        let n = |full: &str, bare: &str, tier| Name {
            full: full.into(),
            bare: bare.into(),
            tier,
        };
        let names = vec![
            n("project:review", "review", Tier::ProjectCommand),
            n("project:help", "help", Tier::ProjectCommand),
            n("user:pdf", "pdf", Tier::Skill),
            n("mcp:fs:summarize", "summarize", Tier::McpPrompt),
        ];
        let custom = |name: &str, args: &str| Input::Custom {
            name: name.into(),
            args: args.into(),
        };
        assert_eq!(
            parse_with("/review FILE=a.rs now", &names),
            custom("project:review", "FILE=a.rs now")
        );
        assert_eq!(parse_with("/rev", &names), custom("project:review", ""));
        // A built-in command comes first; the project's is reachable by its full name.
        assert_eq!(parse_with("/help", &names), cmd(Slash::Help, ""));
        assert_eq!(
            parse_with("/project:help", &names),
            custom("project:help", "")
        );
        assert_eq!(parse_with("/pdf x", &names), custom("user:pdf", "x"));
        assert_eq!(
            parse_with("/summ a.md", &names),
            Input::McpPrompt {
                server: "fs".into(),
                prompt: "summarize".into(),
                args: "a.md".into()
            }
        );
        let Input::Invalid(msg) = parse_with("/re", &names) else {
            panic!("not ambiguous")
        };
        assert!(
            msg.contains("/project:review") && msg.contains("/resume"),
            "{msg}"
        );
        // A path, not a name: sent as text.
        assert_eq!(parse_with("/etc/hosts", &names), prompt("/etc/hosts"));
    }

    #[test]
    fn every_command_is_reachable_by_its_full_name() {
        for c in SLASH_COMMANDS {
            assert_eq!(resolve(c.name), Ok(c.cmd), "{}", c.name);
        }
    }

    #[test]
    fn an_ambiguous_prefix_names_the_candidates() {
        let Input::Invalid(msg) = parse("/co") else {
            panic!("not invalid")
        };
        assert!(msg.contains("ambiguous"), "{msg}");
        assert!(msg.contains("/compact") && msg.contains("/cost"), "{msg}");
        assert!(!msg.contains("/sessions"), "{msg}");
    }

    #[test]
    fn an_unknown_command_suggests_close_ones() {
        let Input::Invalid(msg) = parse("/hlep") else {
            panic!("not invalid")
        };
        assert!(msg.contains("unknown command /hlep"), "{msg}");
        assert!(msg.contains("did you mean /help?"), "{msg}");
        let Input::Invalid(msg) = parse("/sesions") else {
            panic!()
        };
        assert!(msg.contains("/sessions"), "{msg}");
        let Input::Invalid(msg) = parse("/exprot md") else {
            panic!()
        };
        assert!(msg.contains("/export"), "{msg}");
        let Input::Invalid(msg) = parse("/zzzzzz") else {
            panic!()
        };
        assert!(!msg.contains("did you mean"), "{msg}");
        assert!(msg.contains("/help"), "{msg}");
    }

    #[test]
    fn a_path_is_a_prompt_and_double_slash_escapes() {
        // A first word with a second '/' names no command: a path, sent as written.
        assert_eq!(
            parse("/usr/bin/foo is broken"),
            prompt("/usr/bin/foo is broken")
        );
        assert!(matches!(parse("/etc what is it"), Input::Invalid(_)));
        assert_eq!(
            parse("//etc/passwd what is it"),
            prompt("/etc/passwd what is it")
        );
        assert!(matches!(parse("/"), Input::Invalid(_)));
    }

    #[test]
    fn bang_runs_a_shell_command() {
        assert_eq!(
            parse("!git status --short"),
            Input::Shell("git status --short".into())
        );
        assert_eq!(parse("! ls"), Input::Shell("ls".into()));
        assert!(matches!(parse("!"), Input::Invalid(_)));
        assert!(matches!(parse("!   "), Input::Invalid(_)));
    }

    #[test]
    fn suggestions_for_a_command_with_extra_letters() {
        assert_eq!(suggestions("sessionsx", &[]), vec!["sessions"]);
        assert_eq!(suggestions("quti", &[]), vec!["quit"]);
    }

    #[test]
    fn an_unknown_name_suggests_custom_commands_too() {
        let names = [Name {
            full: "git:commit-all".into(),
            bare: "commit-all".into(),
            tier: catalog::Tier::UserCommand,
        }];
        let Input::Invalid(msg) = parse_with("/git:comit", &names) else {
            panic!("not refused")
        };
        assert!(msg.contains("did you mean /git:commit-all?"), "{msg}");
        let Input::Invalid(msg) = parse_with("/comit-all now", &names) else {
            panic!("not refused")
        };
        assert!(msg.contains("/git:commit-all"), "{msg}");
    }
}
