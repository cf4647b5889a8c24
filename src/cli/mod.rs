//! Command-line parsing with lexopt. One table of flags (`flags.rs`) and one table of commands
//! (`commands.rs`) drive parsing, `--help`, `help COMMAND`, the man page and the shell
//! completions (see `docs.rs`): each flag row carries its setter and each command row its parse
//! function, so the parser is the table.

mod commands;
mod flags;

pub(crate) use crate::app::Global;
use crate::commands::hooks::HooksTestArgs;
use crate::run::RunArgs;
pub(crate) use commands::{COMMANDS, Cmd, Command, CommandSpec};
pub(crate) use flags::{FLAGS, Flag, Scope, Takes};
use std::ffi::OsString;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cli {
    pub global: Global,
    pub command: Command,
}

/// What the flags and arguments of a command line set, before its command's row makes the
/// `Command` of them.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub command: Cmd,
    pub global: Global,
    pub run: RunArgs,
    pub stats: crate::commands::stats::StatsArgs,
    pub hooks: HooksTestArgs,
    pub token_stdin: bool,
    pub json: bool,
    pub follow: bool,
    pub tail: Option<usize>,
    pub format: Option<String>,
    pub origin: bool,
    pub revoke: bool,
    pub sandbox_mode: Option<String>,
    pub network: bool,
    pub help: bool,
    pub version: bool,
    pub generate: Option<String>,
    /// The words after the command word.
    pub positionals: Vec<String>,
}

/// A command line crush cannot run; each says what is wrong and where (exit 2).
#[derive(Debug)]
pub(crate) enum CliError {
    /// lexopt's own: a flag's value missing, a switch given one.
    Syntax(lexopt::Error),
    NotUtf8Argument,
    NotUtf8Value(&'static str),
    /// As typed: `-x` or `--xyz`.
    UnknownFlag(String),
    UnknownCommand(String),
    /// `crush help NAME` of a command there is not.
    NoHelpFor(String),
    NotFor {
        flag: &'static str,
        command: Cmd,
    },
    Conflict(&'static str, &'static str),
    BadValue {
        flag: &'static str,
        takes: &'static str,
        value: String,
    },
    StatsFormat(String),
    ExportFormat(String),
    /// `crush stats WORD` without `--html`.
    StatsArgument(String),
    /// `crush stats --html FILE WORD`.
    StatsSecondFile(String),
    /// A flag that needs another command or flag (the text says which).
    Misplaced(&'static str),
    OnlyFor {
        flag: &'static str,
        command: &'static str,
        usage: &'static str,
    },
    /// The command's usage line, the arguments being wrong.
    Usage(&'static str),
    /// An unknown subcommand or an extra argument (`what`), then the usage line.
    Unknown {
        what: &'static str,
        word: String,
        usage: &'static str,
    },
    Unexpected {
        word: String,
        usage: &'static str,
    },
    NoArguments {
        command: &'static str,
        got: String,
        usage: Option<&'static str>,
    },
    Needs {
        command: &'static str,
        what: String,
        usage: &'static str,
    },
    /// `crush sessions SUB` without its ID.
    NeedsId(&'static str),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Syntax(e) => write!(f, "{e}"),
            CliError::NotUtf8Argument => f.write_str("an argument is not valid UTF-8"),
            CliError::NotUtf8Value(flag) => write!(f, "the value of --{flag} is not valid UTF-8"),
            CliError::UnknownFlag(flag) => write!(f, "unknown flag {flag}; see 'crush --help'"),
            CliError::UnknownCommand(v) => write!(
                f,
                "unknown command '{v}'; see 'crush --help' (to send a prompt, use: crush run \"{v} ...\")"
            ),
            CliError::NoHelpFor(name) => {
                write!(f, "unknown command '{name}'; see 'crush --help'")
            }
            CliError::NotFor { flag, command } => {
                let name = command.display_name();
                write!(
                    f,
                    "flag --{flag} is not valid for '{name}'; see '{name} --help'"
                )
            }
            CliError::Conflict(a, b) => write!(f, "--{a} and --{b} cannot be used together"),
            CliError::BadValue { flag, takes, value } => {
                write!(f, "--{flag} takes {takes}, not '{value}'")
            }
            CliError::StatsFormat(v) => {
                write!(f, "--format for stats is text, json or csv, not '{v}'")
            }
            CliError::ExportFormat(v) => write!(f, "--format {v}: use md or json"),
            CliError::StatsArgument(v) => write!(
                f,
                "crush stats takes no arguments (got '{v}'; the file of --html follows it)"
            ),
            CliError::StatsSecondFile(v) => write!(
                f,
                "crush stats takes one file after --html (got another: '{v}')"
            ),
            CliError::Misplaced(text) | CliError::Usage(text) => f.write_str(text),
            CliError::OnlyFor {
                flag,
                command,
                usage,
            } => write!(f, "--{flag} is only for 'crush {command}'; {usage}"),
            CliError::Unknown { what, word, usage } => {
                write!(f, "unknown {what} '{word}'; {usage}")
            }
            CliError::Unexpected { word, usage } => {
                write!(f, "unexpected argument '{word}'; {usage}")
            }
            CliError::NoArguments {
                command,
                got,
                usage,
            } => {
                write!(f, "crush {command} takes no arguments (got '{got}')")?;
                match usage {
                    Some(u) => write!(f, "; {u}"),
                    None => Ok(()),
                }
            }
            CliError::Needs {
                command,
                what,
                usage,
            } => write!(f, "crush {command} needs {what}; {usage}"),
            CliError::NeedsId(sub) => write!(
                f,
                "usage: crush sessions {sub} ID ... (see 'crush sessions list')"
            ),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Syntax(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lexopt::Error> for CliError {
    fn from(e: lexopt::Error) -> Self {
        CliError::Syntax(e)
    }
}

/// The flag spelled `-short` or `--long`. A short letter two flags share is the one that
/// applies to `command`.
fn find_flag(short: Option<char>, long: Option<&str>, command: Cmd) -> Option<&'static Flag> {
    let mut found = FLAGS
        .iter()
        .chain(std::iter::once(&flags::GENERATE))
        .filter(|f| match (short, long) {
            (Some(c), _) => f.short == Some(c),
            (_, Some(l)) => f.long == l,
            _ => false,
        });
    let first = found.next()?;
    Some(
        std::iter::once(first)
            .chain(found)
            .find(|f| f.applies(command))
            .unwrap_or(first),
    )
}

pub(crate) fn parse_from<I>(args: I) -> Result<Cli, CliError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let (parsed, seen) = lex(args)?;
    parsed.finish(&seen)
}

/// Runs each flag's setter and takes the command word and its arguments: what the line says,
/// and the flags it named (in order).
fn lex<I>(args: I) -> Result<(Parsed, Vec<&'static Flag>), CliError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut p = Parsed::default();
    let mut seen: Vec<&'static Flag> = Vec::new();
    while let Some(arg) = parser.next()? {
        let flag = match arg {
            Short(c) => find_flag(Some(c), None, p.command)
                .ok_or_else(|| CliError::UnknownFlag(format!("-{c}")))?,
            Long(l) => find_flag(None, Some(l), p.command)
                .ok_or_else(|| CliError::UnknownFlag(format!("--{l}")))?,
            Value(v) => {
                p.word(v, &mut parser)?;
                continue;
            }
        };
        seen.push(flag);
        let mut value = || -> Result<String, CliError> {
            let v = parser.value()?;
            v.string().map_err(|_| CliError::NotUtf8Value(flag.long))
        };
        match flag.takes {
            Takes::Switch(set) => set(&mut p),
            Takes::Value(_, set) => set(&mut p, value()?),
            Takes::Checked(_, set) => set(&mut p, value()?)?,
        }
    }
    Ok((p, seen))
}

impl Parsed {
    /// A word that is no flag: the command word, or an argument of the command.
    fn word(&mut self, v: OsString, parser: &mut lexopt::Parser) -> Result<(), CliError> {
        let v = v.into_string().map_err(|_| CliError::NotUtf8Argument)?;
        let Some(spec) = self.command.spec() else {
            let spec = COMMANDS
                .iter()
                .find(|c| c.name == v || c.aliases.contains(&v.as_str()))
                .ok_or(CliError::UnknownCommand(v))?;
            self.command = spec.cmd;
            return Ok(());
        };
        self.positionals.push(v);
        if spec.greedy {
            for rest in parser.raw_args()? {
                self.positionals.push(rest.to_string_lossy().into_owned());
            }
        }
        Ok(())
    }

    /// The checks that need the whole line, then the command its row makes.
    fn finish(mut self, seen: &[&'static Flag]) -> Result<Cli, CliError> {
        // --version is a top-level flag: after a command it is an error, never a silent no-op.
        if !self.help
            && let Some(flag) = seen.iter().find(|f| !f.applies(self.command))
        {
            return Err(CliError::NotFor {
                flag: flag.long,
                command: self.command,
            });
        }
        if self.global.system_prompt.is_some() && self.global.system_prompt_file.is_some() {
            return Err(CliError::Conflict("system-prompt", "system-prompt-file"));
        }
        if self.global.session.is_some() && self.global.continue_last {
            return Err(CliError::Conflict("session", "continue"));
        }
        let spec = self.command.spec();
        let command = if let Some(kind) = self.generate.take() {
            Command::Generate(kind)
        } else if self.version {
            Command::Version
        } else if self.help {
            Command::Help(spec.map(|c| c.name.to_string()))
        } else {
            match spec {
                Some(c) => (c.parse)(&mut self)?,
                None => commands::repl(&mut self),
            }
        };
        Ok(Cli {
            global: self.global,
            command,
        })
    }
}

fn flag_synopsis(f: &Flag) -> String {
    let mut s = match f.short {
        Some(c) => format!("-{c}, --{}", f.long),
        None => format!("    --{}", f.long),
    };
    if let Some(v) = f.value() {
        s.push(' ');
        s.push_str(v);
    }
    s
}

/// Help lines fit this many columns.
pub(crate) const HELP_COLUMNS: usize = 80;
/// Where the text beside a flag or command starts.
const HELP_GAP: usize = 32;

fn help_row(out: &mut String, head: &str, text: &str, at: usize) {
    crate::text::wrap::row(out, head, text, at, HELP_COLUMNS);
}

fn flags_block(out: &mut String, flags: &[&Flag]) {
    for f in flags {
        help_row(out, &flag_synopsis(f), f.help, HELP_GAP);
    }
}

/// A command's forms, one per line (see `CommandSpec::usage`).
pub(crate) fn usage_lines(c: &CommandSpec) -> Vec<String> {
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
pub(crate) fn help_text(command: Option<&str>) -> Result<String, CliError> {
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
            let flags: Vec<&Flag> = FLAGS.iter().filter(|f| f.applies(Cmd::Repl)).collect();
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
            let c = COMMANDS
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| CliError::NoHelpFor(name.to_string()))?;
            for (i, form) in usage_lines(c).iter().enumerate() {
                let head = if i == 0 { "Usage: " } else { "       " };
                let hang = " ".repeat(head.len() + c.name.len() + 7);
                out.push_str(&crate::text::wrap::fill(form, HELP_COLUMNS, head, &hang));
                out.push('\n');
            }
            out.push('\n');
            out.push_str(&crate::text::wrap::fill(c.about, HELP_COLUMNS, "", ""));
            out.push('\n');
            let flags: Vec<&Flag> = FLAGS.iter().filter(|f| f.applies(c.cmd)).collect();
            if !flags.is_empty() {
                out.push_str("\nFlags:\n");
                flags_block(&mut out, &flags);
            }
            out.push_str("\nExamples:\n");
            for e in c.examples {
                out.push_str(&crate::text::wrap::fill(e, HELP_COLUMNS, "  ", "      "));
                out.push('\n');
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl::ReplArgs;
    use std::path::PathBuf;

    fn parse(args: &[&str]) -> Result<Cli, CliError> {
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
            e.to_string()
                .contains("--output is not valid for 'crush sessions'"),
            "{e}"
        );
        assert!(
            parse(&["--bogus"])
                .unwrap_err()
                .to_string()
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
            let cmd = COMMANDS
                .iter()
                .find(|c| c.name == name)
                .map_or(Cmd::Repl, |c| c.cmd);
            for f in FLAGS.iter().filter(|f| f.applies(cmd)) {
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
                .to_string()
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
        assert!(e.to_string().contains("crush run"), "{e}");
    }
}
