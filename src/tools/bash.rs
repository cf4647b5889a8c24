//! The `bash` tool: one `SHELL -c` per call (bash when it is on PATH, `proc::shell_path`) (no state between calls), in its own process group,
//! with a timeout, capped output and Crush's banned commands refused.
//!
//! The safety checks use a small tokenizer (quotes, escapes, `;` `&&` `||` `|` `&` newlines,
//! `$(..)`, backquotes, subshells, redirections, here-documents), not a full shell parser. Every
//! simple command found, including inside substitutions, `sh -c '..'`, `eval`, `find -exec` and
//! wrappers such as `env`, `nohup`, `timeout N`, `xargs`, `command`, `exec`, is checked.

use super::ToolError;
use super::common::{
    inside_project, opt_bool, opt_str, opt_u64, req_str, resolve_or_cwd, truncate_middle,
};
use super::jobs;
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use crate::env::Overlay;
use crate::paths::canonicalize_lenient;
use crate::proc::job::{Job, Stopped};
use crate::proc::{self, Spec};
use crate::rcshell;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub(crate) struct Bash;

/// Output limit (characters) of stdout and stderr together.
pub(crate) const MAX_OUTPUT_CHARS: usize = 30_000;
pub(crate) const MAX_TIMEOUT_SECS: u64 = 600;
/// A foreground command still running after this many seconds moves to the background (Go
/// Crush's threshold; the model may set `auto_background_after`).
pub(crate) const DEFAULT_AUTO_BACKGROUND_SECS: u64 = 60;
/// How long a command started in the background is watched for a quick failure.
const BACKGROUND_CHECK: Duration = Duration::from_secs(1);
/// The result of a command that printed nothing.
pub(crate) const NO_OUTPUT: &str = "no output";

/// Commands refused outright (Crush's list).
pub(crate) const BANNED_COMMANDS: &[&str] = &[
    // network
    "alias",
    "aria2c",
    "axel",
    "chrome",
    "curl",
    "curlie",
    "firefox",
    "http-prompt",
    "httpie",
    "links",
    "lynx",
    "nc",
    "safari",
    "scp",
    "ssh",
    "telnet",
    "w3m",
    "wget",
    "xh",
    // privilege
    "doas",
    "su",
    "sudo",
    // package managers
    "apk",
    "apt",
    "apt-cache",
    "apt-get",
    "dnf",
    "dpkg",
    "emerge",
    "home-manager",
    "makepkg",
    "opkg",
    "pacman",
    "paru",
    "pkg",
    "pkg_add",
    "pkg_delete",
    "portage",
    "rpm",
    "yay",
    "yum",
    "zypper",
    // system
    "at",
    "batch",
    "chkconfig",
    "crontab",
    "fdisk",
    "mkfs",
    "mount",
    "parted",
    "service",
    "systemctl",
    "umount",
    // network configuration
    "firewall-cmd",
    "ifconfig",
    "ip",
    "iptables",
    "netstat",
    "pfctl",
    "route",
    "ufw",
];

/// (command, leading positional arguments, flags of which one must be present).
const ARGUMENT_BLOCKERS: &[(&str, &[&str], &[&str])] = &[
    ("apk", &["add"], &[]),
    ("apt", &["install"], &[]),
    ("apt-get", &["install"], &[]),
    ("dnf", &["install"], &[]),
    ("yum", &["install"], &[]),
    ("zypper", &["install"], &[]),
    ("zypper", &["in"], &[]),
    ("pkg", &["install"], &[]),
    ("pacman", &[], &["-S"]),
    ("brew", &["install"], &[]),
    ("cargo", &["install"], &[]),
    ("gem", &["install"], &[]),
    ("go", &["install"], &[]),
    ("npm", &["install"], &["-g", "--global"]),
    ("npm", &["i"], &["-g", "--global"]),
    ("npm", &["add"], &["-g", "--global"]),
    // Python packages: an install runs the package's build code, whatever the target.
    ("pip", &["install"], &[]),
    ("pipx", &["install"], &[]),
    ("pipx", &["run"], &[]),
    ("pipenv", &["install"], &[]),
    ("poetry", &["add"], &[]),
    ("uv", &["add"], &[]),
    ("uv", &["pip", "install"], &[]),
    ("uv", &["tool", "install"], &[]),
    ("uv", &["tool", "run"], &[]),
    ("uvx", &[], &[]),
    ("conda", &["install"], &[]),
    ("pnpm", &["add"], &["-g", "--global"]),
    ("pnpm", &["install"], &["-g", "--global"]),
    ("yarn", &["global", "add"], &[]),
    ("go", &["test"], &["-exec"]),
];

/// Commands that run without asking (with the limits of `is_safe_read_only`). `env`,
/// `printenv` and `set` are not among them: they print the environment.
const SAFE_COMMANDS: &[&str] = &[
    "cal", "date", "df", "du", "echo", "free", "groups", "hostname", "id", "ls", "ps", "pwd",
    "type", "uname", "unset", "uptime", "whatis", "whereis", "which", "whoami",
];

/// Safe commands whose arguments name files: each must lie inside the project.
const PATH_COMMANDS: &[&str] = &["ls", "du", "df", "git"];

/// Long options of the path commands that read a file named by their value (checked like a
/// path argument), and those refused outright: `du --files0-from` reads a list of names, any of
/// which may lie outside. Abbreviations count as the option (`--files0`).
const FILE_OPTIONS: &[&str] = &["--exclude-from"];
const REFUSED_OPTIONS: &[&str] = &["--files0-from"];

const SAFE_GIT: &[&str] = &[
    "blame",
    "describe",
    "diff",
    "grep",
    "log",
    "ls-files",
    "rev-parse",
    "shortlog",
    "show",
    "status",
];

// ------------------------------------------------------------------------------------------
// Tokenizer

/// Stands in a word for a command substitution (`$(..)`, backquotes), whose commands are
/// listed on their own: the word's value is not known.
const SUBSTITUTION: char = '\0';

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Paren,
    Backquote,
}

struct Parser {
    chars: Vec<char>,
    i: usize,
    out: Vec<Simple>,
    /// Here-document delimiters waiting for the end of the current line: (delimiter, strip
    /// tabs, quoted, the slot of `bodies` its body goes to).
    heredocs: Vec<(String, bool, bool, usize)>,
    /// Here-document bodies, and whether the shell expands what they hold (unquoted delimiter).
    bodies: Vec<(String, bool)>,
    /// The line has a pipe somewhere.
    piped: bool,
}

/// Where a simple command's standard input comes from, as far as the line says.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Input {
    /// Whatever the enclosing command list reads (the bash tool's: /dev/null).
    Inherited,
    /// The output of the command before it in a pipeline.
    Pipe,
    /// A file named by a `<` redirection.
    File,
    /// A here-string or here-document with this literal text.
    Text(String),
    /// Here-document number N of the parser's `bodies` (resolved by `commands`).
    Heredoc(usize),
    /// Text only known when the line runs: an expanding here-string or here-document, a
    /// process substitution.
    Opaque,
}

/// One simple command of a line.
#[derive(Clone, Debug)]
struct Simple {
    words: Vec<String>,
    /// Per word: it holds a live expansion (`$`, a substitution, backquotes outside single
    /// quotes), so its value is not what the line says.
    live: Vec<bool>,
    stdin: Input,
    /// A process substitution (`<(..)`) is among its arguments.
    opaque_arg: bool,
}

#[derive(Default)]
struct Cmd {
    words: Vec<String>,
    live: Vec<bool>,
    word: String,
    in_word: bool,
    /// The word being read holds a live expansion, a quote.
    word_live: bool,
    word_quoted: bool,
    skip_next: bool,
    heredoc_next: Option<bool>,
    /// The next word is the target of `<` (`Some(false)`) or a here-string (`Some(true)`).
    input_next: Option<bool>,
    stdin: Option<Input>,
    opaque_arg: bool,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn finish_word(&mut self, c: &mut Cmd) {
        if c.in_word {
            let w = std::mem::take(&mut c.word);
            let (live, quoted) = (c.word_live, c.word_quoted);
            if let Some(strip) = c.heredoc_next.take() {
                self.bodies.push((String::new(), !quoted));
                self.heredocs
                    .push((w, strip, quoted, self.bodies.len() - 1));
                c.stdin = Some(Input::Heredoc(self.bodies.len() - 1));
                c.skip_next = false;
            } else if let Some(here_string) = c.input_next.take() {
                c.stdin = Some(match (here_string, live) {
                    (true, false) => Input::Text(w),
                    (true, true) => Input::Opaque,
                    (false, _) => Input::File,
                });
            } else if c.skip_next {
                c.skip_next = false;
            } else {
                c.words.push(w);
                c.live.push(live);
            }
            c.in_word = false;
        }
        c.word_live = false;
        c.word_quoted = false;
    }

    fn finish_cmd(&mut self, c: &mut Cmd) {
        self.finish_word(c);
        if !c.words.is_empty() {
            self.out.push(Simple {
                words: std::mem::take(&mut c.words),
                live: std::mem::take(&mut c.live),
                stdin: c.stdin.take().unwrap_or(Input::Inherited),
                opaque_arg: std::mem::take(&mut c.opaque_arg),
            });
        }
        // An empty command (`a | (sh)`, `a | { sh; }`) passes its input on to the next.
        c.skip_next = false;
        c.heredoc_next = None;
        c.input_next = None;
    }

    /// Skips pending here-document bodies (called right after a newline).
    fn skip_heredocs(&mut self) {
        for (delim, strip, _, slot) in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            loop {
                if self.i >= self.chars.len() {
                    return;
                }
                let start = self.i;
                while self.i < self.chars.len() && self.chars[self.i] != '\n' {
                    self.i += 1;
                }
                let line: String = self.chars[start..self.i].iter().collect();
                if self.i < self.chars.len() {
                    self.i += 1;
                }
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == delim {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            self.bodies[slot].0 = body;
        }
    }

    fn parse_dquote(&mut self, c: &mut Cmd) {
        while let Some(ch) = self.peek() {
            self.i += 1;
            match ch {
                '"' => return,
                '\\' => {
                    if let Some(n) = self.peek() {
                        self.i += 1;
                        if !matches!(n, '$' | '`' | '"' | '\\' | '\n') {
                            c.word.push('\\');
                        }
                        if n != '\n' {
                            c.word.push(n);
                        }
                    }
                }
                '`' => {
                    c.word_live = true;
                    c.word.push(SUBSTITUTION);
                    self.parse_seq(Stop::Backquote);
                }
                '$' if self.peek() == Some('(') => {
                    self.i += 1;
                    c.word_live = true;
                    c.word.push(SUBSTITUTION);
                    self.parse_seq(Stop::Paren);
                }
                '$' => {
                    c.word_live = true;
                    c.word.push(ch);
                }
                _ => c.word.push(ch),
            }
        }
    }

    fn parse_seq(&mut self, stop: Stop) {
        let mut c = Cmd::default();
        while let Some(ch) = self.peek() {
            self.i += 1;
            match ch {
                '\\' => match self.peek() {
                    Some('\n') => self.i += 1,
                    Some(n) => {
                        self.i += 1;
                        c.in_word = true;
                        c.word_quoted = true;
                        c.word.push(n);
                    }
                    None => {}
                },
                '\'' => {
                    c.in_word = true;
                    c.word_quoted = true;
                    while let Some(n) = self.peek() {
                        self.i += 1;
                        if n == '\'' {
                            break;
                        }
                        c.word.push(n);
                    }
                }
                '"' => {
                    c.in_word = true;
                    c.word_quoted = true;
                    self.parse_dquote(&mut c);
                }
                '`' => {
                    if stop == Stop::Backquote {
                        self.finish_cmd(&mut c);
                        return;
                    }
                    c.in_word = true;
                    c.word_live = true;
                    c.word.push(SUBSTITUTION);
                    self.parse_seq(Stop::Backquote);
                }
                '$' if self.peek() == Some('(') => {
                    self.i += 1;
                    c.in_word = true;
                    c.word_live = true;
                    c.word.push(SUBSTITUTION);
                    self.parse_seq(Stop::Paren);
                }
                '\n' => {
                    self.finish_cmd(&mut c);
                    self.skip_heredocs();
                }
                '|' => {
                    if self.peek() == Some('|') {
                        self.i += 1;
                        self.finish_cmd(&mut c);
                    } else {
                        // `|` and `|&`: the next command reads this one's output.
                        if self.peek() == Some('&') {
                            self.i += 1;
                        }
                        self.finish_cmd(&mut c);
                        self.piped = true;
                        c.stdin = Some(Input::Pipe);
                    }
                }
                ';' => self.finish_cmd(&mut c),
                '&' => {
                    if self.peek() == Some('>') {
                        // &> / &>> redirection
                        self.finish_word(&mut c);
                        while self.peek() == Some('>') {
                            self.i += 1;
                        }
                        c.skip_next = true;
                    } else {
                        self.finish_cmd(&mut c);
                    }
                }
                '(' => self.finish_cmd(&mut c),
                ')' => {
                    self.finish_cmd(&mut c);
                    if stop == Stop::Paren {
                        return;
                    }
                }
                '<' | '>' => {
                    if c.in_word && !c.word.is_empty() && c.word.chars().all(|d| d.is_ascii_digit())
                    {
                        // "2>": the digits are a file descriptor, not a word.
                        c.word.clear();
                        c.in_word = false;
                    } else {
                        self.finish_word(&mut c);
                    }
                    if self.peek() == Some('(') {
                        // process substitution <( .. ) / >( .. ): a redirection's target or
                        // an argument
                        self.i += 1;
                        self.parse_seq(Stop::Paren);
                        if c.input_next.take().is_some() {
                            c.stdin = Some(Input::Opaque);
                        } else if !std::mem::take(&mut c.skip_next) {
                            c.opaque_arg = true;
                        }
                        continue;
                    }
                    let mut op = String::from(ch);
                    while let Some(n @ ('<' | '>' | '&' | '|' | '-')) = self.peek() {
                        op.push(n);
                        self.i += 1;
                    }
                    if op.starts_with("<<<") {
                        c.input_next = Some(true);
                    } else if op.starts_with("<<") {
                        c.heredoc_next = Some(op.ends_with('-'));
                    } else if op.ends_with('&') && self.peek().is_some_and(|d| d == '-') {
                        self.i += 1; // >&- closes a descriptor
                    } else if op == "<" {
                        c.input_next = Some(false);
                    } else {
                        c.skip_next = true;
                    }
                }
                '#' if !c.in_word => {
                    while let Some(n) = self.peek() {
                        if n == '\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                ' ' | '\t' | '\r' => self.finish_word(&mut c),
                _ => {
                    c.in_word = true;
                    c.word_live |= ch == '$';
                    c.word.push(ch);
                }
            }
        }
        self.finish_cmd(&mut c);
    }
}

/// Every simple command of a shell line (words after quote removal), flattened: commands inside
/// substitutions and subshells are listed too, and a word holding a substitution holds
/// `SUBSTITUTION` in its place. Redirection targets are dropped.
pub(crate) fn simple_commands(line: &str) -> Vec<Vec<String>> {
    commands(line).0.into_iter().map(|c| c.words).collect()
}

/// The simple commands of a line, with where each reads its input (here-documents resolved),
/// and whether the line has a pipe.
fn commands(line: &str) -> (Vec<Simple>, bool) {
    let mut p = Parser {
        chars: line.chars().collect(),
        i: 0,
        out: Vec::new(),
        heredocs: Vec::new(),
        bodies: Vec::new(),
        piped: false,
    };
    p.parse_seq(Stop::End);
    let mut out = p.out;
    for c in &mut out {
        if let Input::Heredoc(slot) = c.stdin {
            let (body, expands) = p.bodies.get(slot).cloned().unwrap_or_default();
            c.stdin = if expands && body.contains(['$', '`', '\\']) {
                Input::Opaque
            } else {
                Input::Text(body)
            };
        }
    }
    (out, p.piped)
}

// ------------------------------------------------------------------------------------------
// Banned commands

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "esac", "in",
];

/// Skips options of a wrapper command. `with_arg` lists options that take a separate argument.
fn skip_opts(words: &[String], mut i: usize, with_arg: &[&str]) -> usize {
    while i < words.len() {
        let w = words[i].as_str();
        if w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        i += if with_arg.contains(&w) { 2 } else { 1 };
    }
    i
}

/// The words of a refused command as the model is told them: substitutions shown as `$(...)`,
/// cut at 200 characters.
fn refuse(words: &[String]) -> String {
    let mut s = words.join(" ").replace(SUBSTITUTION, "$(...)");
    if s.chars().count() > 200 {
        s = s.chars().take(200).collect::<String>() + "...";
    }
    s
}

/// Why the banned list refuses a command line (crush(1) SECURITY, The banned list); each holds
/// the refused command's words (`refuse`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A banned command, or one an argument blocker stops.
    Banned(String),
    /// The command name is built from an expansion.
    BuiltName(String),
    /// A script (`-c`, `eval`, `env -S`, `watch`) built from an expansion.
    BuiltScript(String),
    /// A shell or `source` reads its script from a pipe or an expansion.
    UnseenStdin(String),
    /// xargs makes the command from its input.
    XargsInput(String),
    /// The script is a process substitution.
    ProcessSubstitution(String),
    /// `-c` without its script on the line.
    NoScript(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (words, why) = match self {
            Refused::Banned(w) => (w, ""),
            Refused::BuiltName(w) => (
                w,
                ": the command name is built from an expansion; write the command's name (a plain $VARIABLE naming an installed program is fine)",
            ),
            Refused::BuiltScript(w) => (
                w,
                ": the script is built from an expansion; write it literally (in single quotes)",
            ),
            Refused::UnseenStdin(w) => (
                w,
                ": the shell reads its script from a pipe or an expansion, which no check can see; write the commands themselves",
            ),
            Refused::XargsInput(w) => (
                w,
                ": the command is built from xargs's input, which no check can see",
            ),
            Refused::ProcessSubstitution(w) => (
                w,
                ": the script is a process substitution, which no check can see",
            ),
            Refused::NoScript(w) => (w, ": the script of -c is not on the line"),
        };
        write!(
            f,
            "command is not allowed for security reasons: {words}{why}"
        )
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for ToolError {
    fn from(e: Refused) -> ToolError {
        ToolError::RespondToModel(e.to_string())
    }
}

/// Whether `w`, in the place of a command name, is built by the shell from an expansion
/// (`${c}l`, `$(..)`, a glob, `{a,b}`, `$'..'`) whose result no check can see — except a plain
/// variable (`$PYTHON`, `${PYTHON}`) that names an existing program or path in the bash tool's
/// environment (the session's variables first, crush(1) ENVIRONMENT).
fn built_from_expansion(w: &str, env: &Overlay) -> bool {
    if w.contains(SUBSTITUTION) || has_brace_expansion(w) {
        return true;
    }
    if w != "[" && w != "[[" && has_glob(w) {
        return true;
    }
    if !w.contains('$') {
        return false;
    }
    let name = w
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| w.strip_prefix('$'));
    let plain = name.filter(|n| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    let names_a_program = plain
        .filter(|n| crate::env::tool_keeps(n, &[]))
        .and_then(|n| env.var(n))
        .is_some_and(|v| {
            let v = v.trim();
            !v.is_empty()
                && if v.contains('/') {
                    Path::new(v).exists()
                } else {
                    proc::which(v).is_some()
                }
        });
    !names_a_program
}

fn blocked_by_arguments(cmd: &str, args: &[String]) -> bool {
    let positional: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let flags: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with('-'))
        .collect();
    ARGUMENT_BLOCKERS.iter().any(|(c, pos, need)| {
        *c == cmd
            && positional.len() >= pos.len()
            && positional[..pos.len()] == **pos
            && (need.is_empty()
                || flags.iter().any(|f| {
                    need.iter().any(|n| {
                        *f == *n
                            || f.starts_with(&format!("{n}="))
                            // pacman -Syu and friends
                            || (*n == "-S" && f.starts_with("-S"))
                    })
                }))
    })
}

/// Shells: each runs a script given with `-c`, named by its first operand, or read from its
/// standard input.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "rbash", "fish",
];

/// Operands that name a shell's own standard input as its script.
const STDIN_NAMES: &[&str] = &["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"];

/// Where a shell (`words[0]`) takes its script from.
enum Script<'a> {
    /// `-c SCRIPT`: the word, and whether it holds a live expansion.
    Inline(&'a str, bool),
    /// `-c` without a script on the line (`xargs sh -c` gets it from its input).
    Missing,
    /// A file named by its first operand.
    File,
    /// Its standard input.
    Stdin,
}

fn shell_script<'a>(words: &'a [String], live: &[bool]) -> Script<'a> {
    let mut command = false;
    let mut stdin = false;
    let mut j = 1;
    while let Some(w) = words.get(j) {
        let w = w.as_str();
        if w == "--" {
            j += 1;
            break;
        }
        if let Some(script) = w.strip_prefix("--command=") {
            return Script::Inline(script, live[j]);
        }
        if w == "--command" {
            command = true;
        } else if matches!(w, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            // options with a value
            j += 1;
        } else if w.len() > 1 && (w.starts_with('-') || w.starts_with('+')) && !w.starts_with("--")
        {
            command |= w.contains('c');
            stdin |= w.contains('s');
        } else if !w.starts_with("--") {
            break;
        }
        j += 1;
    }
    match words.get(j) {
        Some(script) if command => Script::Inline(script, live[j]),
        _ if command => Script::Missing,
        Some(op) if !stdin && !STDIN_NAMES.contains(&op.as_str()) => Script::File,
        _ => Script::Stdin,
    }
}

/// A shell, `source` or `.` that reads its script from `stdin`: the text is checked when the
/// line spells it out (a here-string or here-document that expands nothing); a script that
/// comes from a pipe or an expansion is refused, as no check can see it (crush(1) SECURITY, The
/// banned list).
fn check_stdin_script(
    words: &[String],
    stdin: &Input,
    depth: usize,
    env: &Overlay,
) -> Result<(), Refused> {
    match stdin {
        Input::Inherited | Input::File => Ok(()),
        Input::Text(text) => check_command(text, depth + 1, &Input::Inherited, env),
        Input::Pipe | Input::Opaque | Input::Heredoc(_) => Err(Refused::UnseenStdin(refuse(words))),
    }
}

fn built_script(words: &[String]) -> Refused {
    Refused::BuiltScript(refuse(words))
}

/// `pip3.12` is `pip3`, `pip3` is `pip`: the names of the argument blockers.
fn blocker_name(cmd: &str) -> &str {
    match cmd.strip_prefix("pip") {
        Some(v) if v.chars().all(|c| c.is_ascii_digit() || c == '.') => "pip",
        _ => cmd,
    }
}

fn check_words(c: &Simple, stdin: &Input, depth: usize, env: &Overlay) -> Result<(), Refused> {
    if depth > 8 {
        return Ok(());
    }
    let (words, live) = (c.words.as_slice(), c.live.as_slice());
    let mut stdin = stdin.clone();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        if is_assignment(w) || KEYWORDS.contains(&w) {
            i += 1;
            continue;
        }
        let cmd = basename(w);
        if matches!(cmd, "for" | "case" | "select") {
            return Ok(());
        }
        if cmd == "function" {
            i += 2; // function NAME { ...
            continue;
        }
        let rest = &words[i + 1..];
        if built_from_expansion(w, env) {
            return Err(Refused::BuiltName(refuse(&words[i..])));
        }
        if BANNED_COMMANDS.contains(&cmd) || blocked_by_arguments(blocker_name(cmd), rest) {
            return Err(Refused::Banned(refuse(&words[i..])));
        }
        match cmd {
            "env" => {
                let mut j = i + 1;
                while j < words.len() {
                    let a = words[j].as_str();
                    if a == "-S" || a == "--split-string" {
                        if let Some(script) = words.get(j + 1) {
                            if live[j + 1] {
                                return Err(built_script(&words[i..]));
                            }
                            return check_command(script, depth + 1, &stdin, env);
                        }
                        return Ok(());
                    } else if let Some(script) = a.strip_prefix("--split-string=") {
                        if live[j] {
                            return Err(built_script(&words[i..]));
                        }
                        return check_command(script, depth + 1, &stdin, env);
                    } else if matches!(a, "-u" | "--unset" | "-C" | "--chdir") {
                        j += 2;
                    } else if a.starts_with('-') || is_assignment(a) {
                        j += 1;
                    } else {
                        break;
                    }
                }
                i = j;
            }
            "nohup" | "builtin" | "setsid" | "busybox" => i += 1,
            "command" => i = skip_opts(words, i + 1, &[]),
            "exec" => i = skip_opts(words, i + 1, &["-a"]),
            "time" => i = skip_opts(words, i + 1, &[]),
            "nice" => i = skip_opts(words, i + 1, &["-n"]),
            "stdbuf" => i = skip_opts(words, i + 1, &["-i", "-o", "-e"]),
            "timeout" => {
                // options, then the duration
                i = skip_opts(words, i + 1, &["-s", "-k", "--signal", "--kill-after"]) + 1;
            }
            "xargs" => {
                let j = skip_opts(
                    words,
                    i + 1,
                    &["-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "-e", "-l"],
                );
                // The replacement string of -I / -i / --replace: where the input goes.
                let mut repl = None;
                for k in i + 1..j.min(words.len()) {
                    let a = words[k].as_str();
                    if a == "-I" {
                        repl = words.get(k + 1).map(String::as_str);
                    } else if let Some(r) = a.strip_prefix("-I").filter(|r| !r.is_empty()) {
                        repl = Some(r);
                    } else if a == "-i" || a == "--replace" {
                        repl = Some("{}");
                    } else if let Some(r) = a
                        .strip_prefix("-i")
                        .or_else(|| a.strip_prefix("--replace="))
                        .filter(|r| !r.is_empty())
                    {
                        repl = Some(r);
                    }
                }
                if let (Some(r), Some(name)) = (repl.filter(|r| !r.is_empty()), words.get(j)) {
                    let runs_input = basename(name).contains(r)
                        || ((SHELLS.contains(&basename(name))
                            || matches!(basename(name), "eval" | "source" | "."))
                            && words[j..].iter().any(|w| w.contains(r)));
                    if runs_input {
                        return Err(Refused::XargsInput(refuse(&words[i..])));
                    }
                }
                // xargs runs its command with stdin from /dev/null.
                stdin = Input::Inherited;
                i = j;
            }
            "watch" => {
                let j = skip_opts(words, i + 1, &["-n", "-d", "--interval"]);
                if live[j.min(words.len())..].contains(&true) {
                    return Err(built_script(&words[i..]));
                }
                return check_command(
                    &words[j.min(words.len())..].join(" "),
                    depth + 1,
                    &stdin,
                    env,
                );
            }
            "eval" => {
                if live[i + 1..].contains(&true) {
                    return Err(built_script(&words[i..]));
                }
                return check_command(&rest.join(" "), depth + 1, &stdin, env);
            }
            "source" | "." => {
                return match rest.first() {
                    Some(op) if !STDIN_NAMES.contains(&op.as_str()) => Ok(()),
                    None if c.opaque_arg => Err(Refused::ProcessSubstitution(refuse(&words[i..]))),
                    _ => check_stdin_script(&words[i..], &stdin, depth, env),
                };
            }
            _ if SHELLS.contains(&cmd) => {
                return match shell_script(&words[i..], &live[i..]) {
                    Script::Inline(_, true) => Err(built_script(&words[i..])),
                    Script::Inline(script, false) => check_command(script, depth + 1, &stdin, env),
                    Script::Missing => Err(Refused::NoScript(refuse(&words[i..]))),
                    Script::File => Ok(()),
                    Script::Stdin if c.opaque_arg => {
                        Err(Refused::ProcessSubstitution(refuse(&words[i..])))
                    }
                    Script::Stdin => check_stdin_script(&words[i..], &stdin, depth, env),
                };
            }
            "find" => {
                let mut j = i + 1;
                while j < words.len() {
                    if matches!(words[j].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                        let start = j + 1;
                        let mut end = start;
                        while end < words.len() && words[end] != ";" && words[end] != "+" {
                            end += 1;
                        }
                        let sub = Simple {
                            words: words[start..end].to_vec(),
                            live: live[start..end].to_vec(),
                            stdin: Input::Inherited,
                            opaque_arg: c.opaque_arg,
                        };
                        check_words(&sub, &stdin, depth + 1, env)?;
                        j = end;
                    }
                    j += 1;
                }
                return Ok(());
            }
            _ if cmd.starts_with("python") => {
                // python [options] -m MODULE ...: the module is the command (`python -m pip`).
                let mut j = i + 1;
                loop {
                    let Some(a) = words.get(j).map(String::as_str) else {
                        return Ok(());
                    };
                    if a == "-m" {
                        i = j + 1;
                        break;
                    }
                    if let Some(module) = a.strip_prefix("-m") {
                        if blocked_by_arguments(blocker_name(module), &words[j + 1..]) {
                            return Err(Refused::Banned(refuse(&words[i..])));
                        }
                        return Ok(());
                    }
                    if !a.starts_with('-') || a == "-c" || a == "-" {
                        return Ok(());
                    }
                    j += if matches!(a, "-X" | "-W") { 2 } else { 1 };
                }
            }
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// Checks every simple command of `command`, whose commands read `inherited` unless the line
/// says otherwise; on a line with a pipe, anything may read it (`a | while ..; do sh; done`).
fn check_command(
    command: &str,
    depth: usize,
    inherited: &Input,
    env: &Overlay,
) -> Result<(), Refused> {
    let (cmds, piped) = commands(command);
    for c in &cmds {
        let stdin = match &c.stdin {
            Input::Inherited if piped => Input::Pipe,
            Input::Inherited => inherited.clone(),
            other => other.clone(),
        };
        check_words(c, &stdin, depth, env)?;
    }
    Ok(())
}

/// Err (`Refused`: "command is not allowed for security reasons: ...") when any simple command
/// of the line is banned or hits an argument blocker.
pub(crate) fn check_banned(command: &str, env: &Overlay) -> Result<(), Refused> {
    check_command(command, 0, &Input::Inherited, env)
}

// ------------------------------------------------------------------------------------------
// Read-only commands that need no permission

/// Long options of the safe git subcommands that write files, run commands or read files outside
/// the project. Git accepts any unambiguous abbreviation of a long option, so an option that is a
/// prefix of one of these (at least `--x`) counts as that option.
const GIT_DENIED_LONG: &[&str] = &[
    "--output",
    "--output-directory",
    "--open-files-in-pager",
    "--ext-diff",
    "--no-index",
    "--contents",
    "--ignore-revs-file",
    "--upload-pack",
    "--receive-pack",
    "--exec",
];

/// Whether `name` lies inside the project as written (symlinks not followed): a glob's match.
fn named_inside(name: &str, place: Place) -> bool {
    let abs = crate::paths::normalize(&place.dir.join(name));
    abs.starts_with(crate::paths::normalize(place.project_root))
}

/// Whether the long option `arg` (`--name` or `--name=value`) is, or abbreviates, a denied one.
fn git_long_denied(arg: &str) -> bool {
    let name = arg.split_once('=').map_or(arg, |(n, _)| n);
    name.len() >= 3
        && GIT_DENIED_LONG
            .iter()
            .any(|d| d.starts_with(name) || name.starts_with(d))
}

/// Whether a path argument of `git diff` may point outside the project: git compares two paths
/// outside the work tree as plain files (an implicit `--no-index`).
fn leaves_project(arg: &str) -> bool {
    arg.starts_with('/') || arg.starts_with('~') || arg.split('/').any(|c| c == "..")
}

fn safe_git(args: &[String]) -> bool {
    let mut i = 0;
    while args.get(i).is_some_and(|a| a == "--no-pager") {
        i += 1;
    }
    let Some(sub) = args.get(i) else {
        return false;
    };
    let rest = args.get(i + 1..).unwrap_or_default();
    let has = |pred: &dyn Fn(&str) -> bool| rest.iter().any(|a| pred(a));
    match sub.as_str() {
        s if SAFE_GIT.contains(&s) => {
            // After `--` every word is a path, but paths that look like options are refused too.
            !has(&|a| {
                let short_group = a.starts_with('-') && !a.starts_with("--") && a.len() > 1;
                (a.starts_with("--") && git_long_denied(a))
                    || (short_group && a.starts_with("-O"))
                    // git grep -O[pager] hides in bundled flags: -iO'cmd'.
                    || (s == "grep" && short_group && a.contains('O'))
                    // git grep accepts --o as --open-files-in-pager, and --op, --ope, ...
                    || (s == "grep" && a.starts_with("--o"))
                    // git blame -S <revs-file> reads a file.
                    || (s == "blame" && short_group && a.contains('S'))
                    || (s == "diff" && leaves_project(a))
            })
        }
        "config" => {
            has(&|a| matches!(a, "--get" | "--get-all" | "--get-regexp" | "--list" | "-l"))
                && rest.iter().all(|a| {
                    !a.starts_with('-')
                        || matches!(
                            a.as_str(),
                            "--get"
                                | "--get-all"
                                | "--get-regexp"
                                | "--list"
                                | "-l"
                                | "--global"
                                | "--system"
                                | "--local"
                                | "--worktree"
                                | "--show-origin"
                                | "--show-scope"
                                | "--name-only"
                                | "--null"
                                | "-z"
                                | "--bool"
                                | "--int"
                                | "--bool-or-int"
                                | "--path"
                                | "--type"
                        )
                        || a.starts_with("--type=")
                        || a.starts_with("--default=")
                })
        }
        "branch" => rest.iter().all(|a| {
            matches!(
                a.as_str(),
                "-a" | "--all"
                    | "-r"
                    | "--remotes"
                    | "-v"
                    | "-vv"
                    | "--verbose"
                    | "--list"
                    | "-l"
                    | "--show-current"
                    | "--no-color"
                    | "--merged"
                    | "--no-merged"
            )
        }),
        "tag" => rest.iter().all(|a| {
            matches!(a.as_str(), "-l" | "--list")
                || a.strip_prefix("-n")
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        }),
        // `git remote show NAME` contacts the remote (like ls-remote), so it is not listed.
        "remote" => {
            rest.iter().all(|a| a == "-v" || a == "--verbose")
                || (rest.first().is_some_and(|a| a == "get-url")
                    && rest
                        .iter()
                        .skip(1)
                        .all(|a| !a.starts_with('-') || a == "--all" || a == "--push"))
        }
        _ => false,
    }
}

/// `date` options that only choose how the current time is printed (`-d`, `-f`, `-r`, `-s` and
/// the rest read files or set the clock).
fn safe_date_arg(a: &str) -> bool {
    a.starts_with('+')
        || matches!(a, "-u" | "--utc" | "-R" | "--rfc-email")
        || a.starts_with("-I")
        || a == "--iso-8601"
        || a.starts_with("--iso-8601=")
}

/// Whether `ps` with `args` prints no process's environment (crush's own holds the user's
/// keys): BSD-style `e` (`ps auxe`, `ps eww`), `-E`, and `-e` outside Linux (where BSD's `-e`
/// means the environment, not every process) need permission.
fn safe_ps_args(args: &[String]) -> bool {
    // Options whose value is the next word (`-o pid,user`, `-C sleep`): the value is skipped.
    const WITH_VALUE: &[&str] = &["-o", "-O", "-p", "-C", "-u", "-U", "-g", "-G", "-t", "-q"];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
            continue;
        }
        if a.starts_with("--") {
            continue;
        }
        let letters = a.strip_prefix('-').unwrap_or(a);
        let dash_e_is_every_process = a.starts_with('-') && cfg!(target_os = "linux");
        if letters.contains('E') || (letters.contains('e') && !dash_e_is_every_process) {
            return false;
        }
    }
    true
}

/// Where a read-only command runs: it may read inside `project_root` only.
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    /// The command's working directory (resolved).
    pub dir: &'a Path,
    pub project_root: &'a Path,
    /// The session's variables, which the command sees over crush's (a `~`'s `HOME`).
    pub env: &'a Overlay,
}

/// Whether the word holds an unquoted-looking glob (`*`, `?`, `[...]`).
fn has_glob(w: &str) -> bool {
    w.contains(['*', '?']) || (w.contains('[') && w.contains(']'))
}

/// Whether bash would brace-expand the word: `{a,b}` or `{1..3}` (not `@{u}`).
fn has_brace_expansion(w: &str) -> bool {
    let Some(open) = w.find('{') else {
        return false;
    };
    let rest = &w[open + 1..];
    rest.find('}')
        .is_some_and(|close| rest[..close].contains(',') || rest[..close].contains(".."))
}

/// `~` and `~/x` as bash expands them, with the command's `HOME` (the session's first).
fn expand_tilde(w: &str, env: &Overlay) -> String {
    match env.var("HOME") {
        Some(home) if w == "~" => home,
        Some(home) if w.starts_with("~/") => format!("{home}{}", &w[1..]),
        _ => w.to_string(),
    }
}

/// At most this many names come out of one glob; past it the command is not checked cheaply
/// and asks.
const MAX_GLOB_MATCHES: usize = 1000;

/// The words a glob stands for in `dir`, sorted, as bash's pathname expansion gives them (a
/// leading `.` is matched only by a pattern that starts with one). No match: the word itself,
/// as bash leaves it. None: too many to check.
fn expand_glob(word: &str, dir: &Path) -> Option<Vec<String>> {
    if !has_glob(word) {
        return Some(vec![word.to_string()]);
    }
    let absolute = word.starts_with('/');
    // (text as the command will see it, the directory it names)
    let mut found: Vec<(String, PathBuf)> = vec![(
        if absolute { "/".into() } else { String::new() },
        if absolute {
            PathBuf::from("/")
        } else {
            dir.to_path_buf()
        },
    )];
    let parts: Vec<&str> = word.split('/').filter(|c| !c.is_empty()).collect();
    for (n, part) in parts.iter().enumerate() {
        let last = n + 1 == parts.len();
        let mut next = Vec::new();
        for (text, path) in &found {
            let join = |name: &str| {
                if text.is_empty() || text.ends_with('/') {
                    format!("{text}{name}")
                } else {
                    format!("{text}/{name}")
                }
            };
            if !has_glob(part) {
                let p = path.join(part);
                if last || p.is_dir() {
                    next.push((join(part), p));
                }
                continue;
            }
            let glob = super::ignore::Glob::new(part);
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if (name.starts_with('.') && !part.starts_with('.')) || !glob.matches(&name) {
                    continue;
                }
                let p = e.path();
                if last || p.is_dir() {
                    next.push((join(&name), p));
                }
                if next.len() > MAX_GLOB_MATCHES {
                    return None;
                }
            }
        }
        found = next;
    }
    if found.is_empty() {
        return Some(vec![word.to_string()]);
    }
    let mut out: Vec<String> = found.into_iter().map(|(t, _)| t).collect();
    out.sort();
    Some(out)
}

/// Whether `word`, as a path, names something inside the project (symlinks followed).
fn path_inside(word: &str, place: Place) -> bool {
    let p = Path::new(word);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        place.dir.join(p)
    };
    canonicalize_lenient(&abs).starts_with(canonicalize_lenient(place.project_root))
}

/// Whether the long option `arg` (`--name` or `--name=value`) is, or abbreviates, one of `list`.
fn long_option_in(arg: &str, list: &[&str]) -> bool {
    let name = arg.split_once('=').map_or(arg, |(n, _)| n);
    name.len() >= 4 && list.iter().any(|d| d.starts_with(name))
}

/// Path arguments and file options of a path command (`ls`, `du`, `df`, `git ...`): every word
/// that is not an option is a path, and so is the value of a file option; all must lie inside
/// the project.
fn paths_inside(args: &[String], place: Place) -> bool {
    let mut options_done = false;
    for a in args {
        if options_done || !a.starts_with('-') || a == "-" {
            if !path_inside(a, place) {
                return false;
            }
            continue;
        }
        if a == "--" {
            options_done = true;
        } else if long_option_in(a, REFUSED_OPTIONS) {
            return false;
        } else if long_option_in(a, FILE_OPTIONS)
            && let Some((_, v)) = a.split_once('=')
            && !path_inside(v, place)
        {
            return false;
        } else if a.starts_with("--")
            && let Some((_, v)) = a.split_once('=')
            && (v.starts_with('/') || v.starts_with('~'))
            && !path_inside(&expand_tilde(v, place.env), place)
        {
            // Any other option given an absolute path (git's --git-dir=, --work-tree=, ...).
            return false;
        } else if !a.starts_with("--") && a.len() > 2 && a[1..].contains('X') {
            // du -Xfile: the exclude file glued to its option.
            let v = &a[a.find('X').map_or(a.len(), |i| i + 1)..];
            if !v.is_empty() && !path_inside(v, place) {
                return false;
            }
        }
    }
    true
}

/// Long options of `ls` and `du` that follow symbolic links (with their abbreviations).
const FOLLOWING_LINKS: &[&str] = &[
    "--dereference",
    "--dereference-args",
    "--dereference-command-line",
    "--dereference-command-line-symlink-to-dir",
];

/// Whether `ls` or `du` is told to follow symbolic links (`ls -L`, `-H`, `--dereference`,
/// `du -L`, `-H`, `-D`, `--dereference-args`, bundled or abbreviated): a link inside the
/// project may point anywhere, and the listing would go there (crush(1) PERMISSIONS).
fn follows_links(cmd: &str, args: &[String]) -> bool {
    let short: &[char] = match cmd {
        "ls" => &['L', 'H'],
        "du" => &['L', 'H', 'D'],
        _ => return false,
    };
    for a in args {
        if a == "--" {
            break;
        }
        if a.starts_with("--") {
            let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
            if name.len() > 2 && FOLLOWING_LINKS.iter().any(|f| f.starts_with(name)) {
                return true;
            }
        } else if a.len() > 1 && a.starts_with('-') && a[1..].contains(short) {
            return true;
        }
    }
    false
}

fn safe_words(words: &[String], place: Place) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    if first.contains('/') || is_assignment(first) {
        return false;
    }
    let rest = &words[1..];
    let safe = match first.as_str() {
        // A repository whose own configuration names programs runs them even here.
        "git" => safe_git(rest) && super::gitconfig::runs_programs(place.dir).is_none(),
        "date" => rest.iter().all(|a| safe_date_arg(a)),
        // hostname NAME / -F FILE / -b ... set the host name
        "hostname" => rest.is_empty(),
        "ps" => safe_ps_args(rest),
        "time" | "nohup" => return safe_words(rest, place),
        // skip_opts steps past the end when an option misses its argument (`nice -n`).
        "nice" => {
            return rest
                .get(skip_opts(rest, 0, &["-n"])..)
                .is_some_and(|w| safe_words(w, place));
        }
        "timeout" => {
            let j = skip_opts(rest, 0, &["-s", "-k", "--signal", "--kill-after"]) + 1;
            return rest.get(j..).is_some_and(|w| safe_words(w, place));
        }
        c => SAFE_COMMANDS.contains(&c),
    };
    if !safe || follows_links(first, rest) {
        return false;
    }
    if PATH_COMMANDS.contains(&first.as_str()) {
        // git's subcommand is not a path.
        let args = if first == "git" {
            let sub = rest
                .iter()
                .position(|a| !a.starts_with('-'))
                .map_or(0, |i| i + 1);
            &rest[sub.min(rest.len())..]
        } else {
            rest
        };
        return paths_inside(args, place);
    }
    true
}

/// Whether `command` is a single read-only command from the safe list with no redirection, pipe,
/// chaining, background, substitution, variable, brace expansion or newline, reading nothing
/// outside the project: such a command runs without asking. Globs are expanded first, as the
/// shell will: every name they stand for is checked as the path it is (`git log *` in a
/// directory holding `--output=Makefile` is `git log --output=Makefile`).
pub(crate) fn is_safe_read_only(command: &str, place: Place) -> bool {
    let command = command.trim();
    if command.is_empty() || command.contains(['>', '<', '|', ';', '&', '`', '$', '\n', '\r']) {
        return false;
    }
    let cmds = simple_commands(command);
    let [words] = cmds.as_slice() else {
        return false;
    };
    let mut expanded = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        if i == 0 {
            expanded.push(w.clone());
            continue;
        }
        if has_brace_expansion(w) {
            return false;
        }
        let w = expand_tilde(w, place.env);
        if !has_glob(&w) {
            expanded.push(w);
            continue;
        }
        let Some(names) = expand_glob(&w, place.dir) else {
            return false;
        };
        // What a glob matched are names of files: inside the project, whatever the command
        // (a path command then also follows their symlinks).
        if names != [w.clone()] && !names.iter().all(|n| named_inside(n, place)) {
            return false;
        }
        expanded.extend(names);
    }
    safe_words(&expanded, place)
}

// ------------------------------------------------------------------------------------------
// The tool

/// The environment added to every command: marks the agent and keeps tools non-interactive.
/// `command`, after the `export` lines of `env_file` (what SessionStart hooks wrote to
/// `CLAUDE_ENV_FILE`), as Claude Code runs its Bash commands. The checks above saw the command
/// alone.
fn with_env_file(env_file: Option<&std::path::Path>, command: &str) -> String {
    match env_file {
        Some(f) => format!(
            ". '{}'\n{command}",
            f.to_string_lossy().replace('\'', "'\\''")
        ),
        None => command.to_string(),
    }
}

pub(crate) fn agent_env() -> Vec<(String, String)> {
    [
        ("CRUSH", "1"),
        ("AGENT", "crush"),
        ("AI_AGENT", "crush"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_EDITOR", "true"),
        ("DEBIAN_FRONTEND", "noninteractive"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The `timeout` parameter: None (no limit) unless the model sets one.
fn timeout_secs(input: &Value) -> Result<Option<u64>, ToolError> {
    let Some(t) = opt_u64(input, "timeout")? else {
        return Ok(None);
    };
    // Values no number of seconds could be are read as milliseconds (a common model habit).
    let t = if t > MAX_TIMEOUT_SECS { t / 1000 } else { t };
    Ok(Some(t.clamp(1, MAX_TIMEOUT_SECS)))
}

/// The `auto_background_after` parameter, in seconds (0 or absent: the default).
fn auto_background_secs(input: &Value) -> Result<u64, ToolError> {
    Ok(match opt_u64(input, "auto_background_after")? {
        None | Some(0) => DEFAULT_AUTO_BACKGROUND_SECS,
        Some(s) => s,
    })
}

impl Tool for Bash {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Execute
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("Bash".into())
    }

    fn title(&self, input: &Value, _cwd: &Path) -> String {
        super::common::arg(input, "command")
            .map(|c| super::common::first_line(c, 120))
            .unwrap_or_else(|| "bash".into())
    }

    fn run_mode(&self) -> super::RunMode {
        super::RunMode::Command
    }

    fn preview(&self) -> super::Preview {
        super::Preview::CommandTail
    }

    fn description(&self) -> String {
        let shell = proc::shell_path();
        let kind = if proc::shell_name() == "bash" {
            "bash: bash syntax ([[ ]], arrays, {a,b}, set -o pipefail) works".to_string()
        } else {
            format!(
                "{}, which may not be bash: write portable POSIX sh ([ ] instead of [[ ]], no \
                 arrays, no {{a,b}})",
                proc::shell_name()
            )
        };
        format!(
            "Runs a shell command with {} -c and returns its output (stdout, then stderr). The \
             shell is {kind}.\n\
             \n\
             - Every call starts a fresh shell: no state (cd, variables, functions) carries over \
             between calls. Use `working_dir` instead of `cd`, and chain dependent steps with && in \
             one call.\n\
             - A command still running after {DEFAULT_AUTO_BACKGROUND_SECS} s (or \
             `auto_background_after`) moves to the background and the call returns its shell ID. \
             Set `run_in_background: true` for servers, watchers and anything that does not end \
             on its own; read their output with job_output, stop them with job_kill. Never end a \
             command with `&` to background it: use run_in_background. Background jobs die when \
             the session or crush ends.\n\
             - `timeout` (seconds, max {MAX_TIMEOUT_SECS}, default none) kills the command and \
             everything it started when it expires, in the foreground or the background.\n\
             - Output over {MAX_OUTPUT_CHARS} characters is truncated in the middle. The exit code is \
             reported when it is not 0.\n\
             - Stdin is empty and nothing is interactive: pass flags such as --yes / --no-edit, never \
             start editors, pagers or REPLs.\n\
             - Prefer the dedicated tools: view to read files, grep to search contents, glob to find \
             files, ls to list directories, edit/write to change files.\n\
             - Quote paths containing spaces.\n\
             - Banned for security (refused, also inside pipelines, substitutions, sh -c and wrappers \
             like env/nohup/xargs): network tools ({}), sudo/su/doas, package managers (apt, \
             pacman, yum, ...), system administration (mount, systemctl, crontab, ...), network \
             configuration, global installs (npm install -g, cargo/go/gem/brew install, go test \
             -exec) and Python package installs (pip/pip3/python -m pip install, uv pip install, \
             uv add, uvx, poetry add, pipx, pipenv, conda install).\n\
             - Write command names and scripts literally: a command whose name comes from an \
             expansion (${{c}}l, $(...), globs) is refused (a plain $VARIABLE naming a program is \
             fine), and so is a script a shell reads from a pipe or a process substitution \
             (`... | sh`, `bash <(...)`) or that sh -c / eval get from an expansion (`sh -c \"$X\"`); \
             `sh -c '...'` and a quoted here-document are checked like the rest.\n\
             - Variables whose names contain KEY, SECRET, TOKEN or PASSWORD are not set.\n\
             - Read-only commands such as ls, pwd, git status/log/diff run without asking the user \
             when they contain no redirection, pipe, chaining or variables and read nothing outside \
             the project; everything else needs permission.",
            shell.display(),
            "curl, wget, ssh, scp, nc, ..."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run"},
                "description": {
                    "type": "string",
                    "description": "A short description of what the command does (5-10 words)"
                },
                "working_dir": {
                    "type": "string",
                    "description": "Directory to run in (default: the session's working directory)"
                },
                "timeout": {
                    "type": "integer",
                    "description": format!(
                        "Seconds after which the command and everything it started are killed, wherever it runs (default: no limit; max {MAX_TIMEOUT_SECS})"
                    )
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Set to true (boolean) to run this command in the background. Use job_output to read the output later."
                },
                "auto_background_after": {
                    "type": "integer",
                    "description": format!("Seconds to wait before automatically moving the command to a background job (default: {DEFAULT_AUTO_BACKGROUND_SECS})")
                }
            },
            "required": ["command"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let command = req_str(input, "command")?;
        check_banned(command, ctx.env)?;
        timeout_secs(input)?;
        auto_background_secs(input)?;
        opt_bool(input, "run_in_background")?;
        let dir = resolve_or_cwd(ctx, opt_str(input, "working_dir")?)?;
        if !dir.is_dir() {
            return Err(format!("working directory {} does not exist", dir.display()).into());
        }
        // Read-only commands still read where they run: outside the project they need permission.
        let place = Place {
            dir: &dir,
            project_root: ctx.project_root,
            env: ctx.env,
        };
        if inside_project(ctx, &dir) && is_safe_read_only(command, place) {
            return Ok(None);
        }
        Ok(Some(PermissionRequest {
            tool: self.name().to_string(),
            action: "execute",
            path: dir,
            description: command.to_string(),
            diff: None,
            ..Default::default()
        }))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let command = req_str(input, "command")?;
        check_banned(command, ctx.env)?;
        let timeout = timeout_secs(input)?;
        let background = opt_bool(input, "run_in_background")?;
        let auto_background = auto_background_secs(input)?;
        let description = opt_str(input, "description")?.unwrap_or("");
        let dir = resolve_or_cwd(ctx, opt_str(input, "working_dir")?)?;
        if !dir.is_dir() {
            return Err(ToolError::from(format!(
                "working directory {} does not exist",
                dir.display()
            )));
        }
        // A job can be moved to the background only while there is room for one more.
        let room = jobs::check_room();
        if background {
            room.clone()?;
        }
        if ctx.cancel.load(Ordering::SeqCst) {
            return Ok(ToolOutput {
                content: format!(
                    "Command was not started: the turn was canceled\n\n<cwd>{}</cwd>",
                    dir.display()
                ),
                metadata: json!({"exit_code": -1, "timed_out": false, "canceled": true,
                    "working_dir": dir.display().to_string()}),
                ..Default::default()
            });
        }
        // The shell gets the configuration commands as builtins (session-only configuration,
        // crush(1) CONFIGURATION); the turn applies what they record, from the tool's metadata.
        // A command that names none of them starts without the prelude and its records file.
        let shell = proc::shell_path().to_string_lossy().into_owned();
        let script = with_env_file(ctx.env_file, command);
        let (argv, records) = if rcshell::may_call_builtin(command) {
            let records =
                rcshell::RecordsFile::create_in(ctx.sandbox.map(|s| s.policy().tmpdir.as_path()))
                    .map_err(|e| ToolError::Internal(format!("failed to start the command: {e}")))?;
            let (large, small) = ctx
                .session_models
                .map(|m| (m.large.clone(), m.small.clone()))
                .unwrap_or_default();
            let argv = vec![
                shell,
                "-c".to_string(),
                rcshell::wrap_command(),
                "sh".to_string(),
                records.path.to_string_lossy().into_owned(),
                large,
                small,
                script,
            ];
            (argv, Some(records))
        } else {
            (vec![shell, "-c".to_string(), script], None)
        };
        let mut spec = Spec::exec(argv, &dir);
        // Variables named like secrets stay out of reach of the model (crush(1) SECURITY).
        spec.env_remove = crate::env::tool_removals(ctx.shell_env_allow);
        spec.env = [ctx.env.for_tool(ctx.shell_env_allow), agent_env()].concat();
        spec.timeout = timeout.map(Duration::from_secs);
        spec.sandbox = ctx.sandbox.cloned();
        let job = Job::start(&spec)
            .map_err(|e| ToolError::Internal(format!("failed to start the command: {e}")))?;
        let started = Instant::now();
        // A background command is watched a moment for a quick failure (a typo, a missing
        // program), as Go Crush does; a foreground one until it ends or moves to the background.
        let until = if background {
            Some(started + BACKGROUND_CHECK)
        } else if room.is_ok() {
            Some(started + Duration::from_secs(auto_background))
        } else {
            None
        };
        let finished = job.wait(until, Some(&ctx.cancel));
        let canceled = !finished && ctx.cancel.load(Ordering::SeqCst);
        if canceled {
            job.stop();
            job.wait(Some(Instant::now() + Duration::from_secs(5)), None);
        } else if !finished {
            let id = jobs::add(
                ctx.session.session_id(),
                command,
                description,
                &dir.display().to_string(),
                job,
            );
            let content = if background {
                format!(
                    "Background shell started with ID: {id}\n\nUse job_output tool to view output or job_kill to terminate."
                )
            } else {
                format!(
                    "Command is taking longer than expected and has been moved to background.\n\nBackground shell ID: {id}\n\nUse job_output tool to view output or job_kill to terminate."
                )
            };
            return Ok(ToolOutput {
                content,
                metadata: json!({
                    "background": true,
                    "shell_id": id,
                    "description": description,
                    "working_dir": dir.display().to_string(),
                }),
                ..Default::default()
            });
        }
        // The command may have changed files the language servers have open.
        if let Some(d) = ctx.diagnostics {
            d.resync();
        }
        let st = job.status();
        let (stdout, out_dropped, stderr, err_dropped) = job.output();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        );
        let timed_out = st.stopped == Some(Stopped::TimedOut);
        let code = st.exit.map_or(-1, |e| e.code());
        let structured = json!({
            "stdout": truncate_middle(stdout.trim_end_matches('\n'), MAX_OUTPUT_CHARS, out_dropped),
            "stderr": truncate_middle(stderr.trim_end_matches('\n'), MAX_OUTPUT_CHARS, err_dropped),
            "interrupted": timed_out || canceled,
            "isImage": false,
        });
        let mut body = stdout.trim_end_matches('\n').to_string();
        let stderr = stderr.trim_end_matches('\n');
        if !stderr.is_empty() {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(stderr);
        }
        let mut text = truncate_middle(&body, MAX_OUTPUT_CHARS, out_dropped + err_dropped);
        let mut note = String::new();
        if timed_out {
            note = format!(
                "Command timed out after {} s and was killed",
                timeout.unwrap_or_default()
            );
        } else if canceled {
            note = "Command was aborted before completion".to_string();
        } else if code != 0 {
            note = format!("Exit code {code}");
            // One line that says the sandbox may be why (crush(1) SECURITY, sandbox).
            if let Some(hint) = ctx
                .sandbox
                .and_then(|s| crate::sandbox::refusal_hint(s.policy(), &body))
            {
                note.push('\n');
                note.push_str(&hint);
            }
        }
        if !note.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&note);
        }
        if text.is_empty() {
            text = NO_OUTPUT.to_string();
        }
        text.push_str(&format!("\n\n<cwd>{}</cwd>", dir.display()));
        let mut metadata = json!({
            "exit_code": code,
            "timed_out": timed_out,
            "canceled": canceled,
            "working_dir": dir.display().to_string(),
            "duration_ms": st.elapsed.as_millis() as u64,
            "description": description,
        });
        if let Some(Ok(recs)) = records.map(|r| r.read(None))
            && !recs.is_empty()
        {
            metadata[rcshell::METADATA_KEY] =
                json!(recs.into_iter().map(|r| r.args).collect::<Vec<_>>());
        }
        // What the command left running (`server &`) lives until the session ends.
        jobs::keep_leftovers(ctx.session.session_id(), job);
        Ok(ToolOutput {
            content: text,
            is_error: false,
            metadata,
            image: None,
            structured,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;
    use std::time::Instant;

    /// The read-only check in a project of its own (an empty temp dir), run at its root.
    fn safe(cmd: &str) -> bool {
        static PROJECT: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        let root = PROJECT
            .get_or_init(|| tempfile::tempdir().unwrap())
            .path()
            .canonicalize()
            .unwrap();
        is_safe_read_only(
            cmd,
            Place {
                dir: &root,
                project_root: &root,
                env: &Overlay::default(),
            },
        )
    }

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tokenizer_splits_and_flattens() {
        assert_eq!(
            simple_commands("a b && c 'd e' || f | g; h & i\nj"),
            vec![
                words(&["a", "b"]),
                words(&["c", "d e"]),
                words(&["f"]),
                words(&["g"]),
                words(&["h"]),
                words(&["i"]),
                words(&["j"])
            ]
        );
        let cmds = simple_commands("echo \"x $(curl a) y\" `wget b` > out 2>&1 (sub; shell)");
        assert!(cmds.contains(&words(&["curl", "a"])));
        assert!(cmds.contains(&words(&["wget", "b"])));
        assert!(cmds.contains(&words(&["sub"])));
        assert!(cmds.contains(&words(&["shell"])));
        assert!(!cmds.iter().flatten().any(|w| w == "out" || w == "2"));
        // Here-document bodies are data, comments are ignored.
        let cmds = simple_commands("cat <<'EOF' > f\ncurl x\nEOF\nls # curl");
        assert_eq!(cmds, vec![words(&["cat"]), words(&["ls"])]);
        assert_eq!(
            simple_commands("echo a\\ b \"c\\\"d\""),
            vec![words(&["echo", "a b", "c\"d"])]
        );
    }

    fn refused_because(cmd: &str, why: &str) {
        let err = check_banned(cmd, &Overlay::default()).expect_err(cmd);
        assert!(err.to_string().contains(why), "{cmd}: {err}");
    }

    #[test]
    fn banned_commands_anywhere() {
        for cmd in [
            "curl https://example.com",
            "a && curl x",
            "env FOO=1 sudo ls",
            "FOO=bar wget x",
            "/usr/bin/curl x",
            "echo $(curl x)",
            "echo \"`ssh host`\"",
            "nohup sudo rm x",
            "timeout 5 nc -l 80",
            "timeout -s KILL 5 nc -l 80",
            "xargs -n1 curl < urls",
            "command curl x",
            "exec sudo ls",
            "sh -c 'curl x'",
            "bash -lc \"apt-get update\"",
            "eval curl x",
            "find . -name x -exec curl {} \\;",
            "ls | xargs sudo rm",
            "(cd x && wget y)",
            "apt install foo",
            "npm install -g typescript",
            "npm i --global typescript",
            "pip install --user requests",
            "pip3 install --user=yes requests",
            "python3 -m pip install --user x",
            "cargo install ripgrep",
            "go install x@latest",
            "go test -exec sudo ./...",
            "yarn global add x",
            "pnpm add -g x",
            "brew install x",
            "true; systemctl restart x",
            "function f { curl x; }",
            "f() { wget x; }",
            "cat <(curl x)",
            // Python package installs, however spelled.
            "pip install requests",
            "pip3 install -r requirements.txt",
            "pip3.12 install x",
            "python -m pip install x",
            "python3 -m pip install x",
            "python3 -I -m pip install x",
            "python3 -mpip install x",
            "uv pip install x",
            "uv add x",
            "uv tool install ruff",
            "uvx ruff",
            "poetry add x",
            "pipx install x",
            "pipenv install x",
            "conda install x",
            // A banned command fed to a shell as its script.
            "sh <<< 'curl x'",
            "bash <<< \"wget x\"",
            "bash <<'EOF'\ncurl x\nEOF",
            "sh <<EOF\nls\nsudo x\nEOF",
            "bash -o pipefail -c 'curl x'",
            "bash -e -c 'curl x'",
            "fish --command='curl x'",
            "busybox wget x",
            "busybox sh -c 'curl x'",
            "bash -c 'sh' <<< 'curl x'",
        ] {
            let err = check_banned(cmd, &Overlay::default()).expect_err(cmd);
            assert!(
                err.to_string()
                    .starts_with("command is not allowed for security reasons: "),
                "{err}"
            );
        }
        let err = check_banned("ls && curl -s x", &Overlay::default()).unwrap_err();
        assert_eq!(err, Refused::Banned("curl -s x".into()));
        assert_eq!(
            err.to_string(),
            "command is not allowed for security reasons: curl -s x"
        );
        for cmd in [
            "ls -la",
            "echo curl",
            "grep -r 'sudo' .",
            "npm install",
            "pip list",
            "pip3 freeze",
            "python -m pytest -x",
            "python3 -u -m unittest",
            "uv run pytest",
            "poetry run pytest",
            "cargo build",
            "bash script.sh",
            "sh -e ./configure --prefix=/tmp/x",
            "bash < build.sh",
            "sh <<< 'ls -la'",
            "bash <<'EOF'\nmake test\nEOF",
            "bash <<EOF\nmake test\nEOF",
            "ls | wc -l",
            "bash -c 'echo $HOME'",
            "find . -name '*.sh' | xargs -n1 bash",
            "source .venv/bin/activate && pytest",
            "eval 'echo hi'",
            "go test ./...",
            "git commit -m 'use curl'",
            "cat <<EOF\nsudo x\nEOF",
            "for f in curl wget; do echo $f; done",
            "[ -f x ] && ls",
            "[[ -f x ]] && ls",
            "echo $(date) `date`",
            "x=$(date); echo \"$x\"",
            "git log @{u}..",
        ] {
            assert!(check_banned(cmd, &Overlay::default()).is_ok(), "{cmd}");
        }
        // A command name the shell builds from an expansion could be anything: refused always.
        for cmd in [
            "c=cur; ${c}l https://example.com",
            "${c}l x",
            "$(echo curl) x",
            "`echo curl` x",
            "$(echo cu)rl x",
            "cu?l x",
            "/usr/bin/cu*l x",
            "{curl,-s} x",
            "$'\\x63url' x",
            "$CRUSH_TEST_SURELY_UNSET_VARIABLE -m pytest",
            "env $CRUSH_TEST_SURELY_UNSET_VARIABLE x",
            "nohup ${c}l x",
            "sh -c \"$(cat script)\"",
            "bash -c \"$CMD\"",
            "bash -c \"echo $X\"",
            "eval \"$CMD\"",
            "eval $(echo curl x)",
            "env -S \"$CMD\"",
        ] {
            refused_because(cmd, "built from an expansion");
        }
        // A script that comes from a pipe or an expansion: no check can see it.
        for cmd in [
            "printf 'curl x' | sh",
            "echo curl x | bash",
            "echo Y3VybCB4 | base64 -d | bash -s",
            "echo ls | bash -",
            "echo curl x | bash /dev/stdin",
            "echo curl x | source /dev/stdin",
            "echo curl x | . /dev/stdin",
            "echo curl x | (sh)",
            "echo curl x | { sh; }",
            "echo curl x | while read -r l; do sh; done",
            "echo curl x | bash -c 'bash'",
            "sh <<< \"$CMD\"",
            "sh <<EOF\n$CMD\nEOF",
            "sh < <(echo curl x)",
            "bash <(echo curl x)",
            "source <(echo curl x)",
        ] {
            refused_because(cmd, "no check can see");
        }
        for cmd in [
            "echo curl | xargs sh -c",
            "echo curl | xargs -I{} sh -c '{}'",
            "echo curl | xargs -I % %",
        ] {
            assert!(check_banned(cmd, &Overlay::default()).is_err(), "{cmd}");
        }
        // A plain variable naming an existing program or path is a command name like any other.
        if std::env::var_os("HOME").is_some_and(|h| std::path::Path::new(&h).exists()) {
            assert!(check_banned("$HOME", &Overlay::default()).is_ok());
            assert!(check_banned("${HOME} x", &Overlay::default()).is_ok());
        }
        // The session's own variable counts, as the command would see it there.
        let exe = std::env::current_exe().unwrap().display().to_string();
        let session = Overlay::new([("CRUSH_SESSION_ONLY_PROG".to_string(), exe)]);
        assert!(check_banned("$CRUSH_SESSION_ONLY_PROG x", &session).is_ok());
        assert!(check_banned("$CRUSH_SESSION_ONLY_PROG x", &Overlay::default()).is_err());
    }

    #[test]
    fn safe_read_only_commands() {
        for cmd in [
            "ls -la",
            "git status",
            "git --no-pager log -n 5",
            "git diff HEAD~1",
            "pwd",
            "echo hello",
            "git config --get user.name",
            "git branch -a",
            "uname -a",
            "ls -lhR",
            "du -sh .",
            "du -ah --max-depth=1",
        ] {
            assert!(safe(cmd), "{cmd}");
        }
        for cmd in [
            "echo x > f",
            "ls | sh",
            "ls; rm x",
            "ls && rm x",
            "ls || rm x",
            "ls &",
            "echo $(rm x)",
            "echo `rm x`",
            "ls\nrm x",
            "cat < f",
            "rm -rf x",
            "git push",
            "git branch -D main",
            "git tag v1",
            "git config user.name x",
            "git diff --output=f",
            "env rm x",
            "env",
            "printenv",
            "printenv ANTHROPIC_API_KEY",
            "set",
            "PATH=. ls",
            "./ls",
            "nohup rm x",
            "timeout 5 rm x",
            "kill 1",
            // They follow the links they meet, wherever those point.
            "ls -RL",
            "ls -L",
            "ls -lH .",
            "ls --dereference -R",
            "ls --deref -R",
            "ls --dereference-command-line",
            "du -aL",
            "du -sD .",
            "du -H",
            "du --dereference-args .",
            "timeout 5 ls -RL",
        ] {
            assert!(!safe(cmd), "{cmd}");
        }
        assert!(safe("timeout 5 ls"));
    }

    #[test]
    fn read_only_shortcut_refuses_bypasses() {
        for cmd in [
            // runs the upload-pack command
            "git ls-remote --upload-pack='touch /tmp/x' .",
            "git ls-remote -u 'touch /tmp/x' .",
            // -O / --open-files-in-pager runs a pager command, also bundled or abbreviated
            "git grep -iO'touch /tmp/x' hi",
            "git grep -O'touch /tmp/x' hi",
            "git grep --open='touch /tmp/x' hi",
            "git grep --o='touch /tmp/x' hi",
            "git grep --open-files-in-pager hi",
            "git diff --outp=f",
            "git log --output f",
            "git diff --ext-diff",
            // reads files outside the project
            "git diff --no-index ~/.ssh/id_rsa /dev/null",
            "git diff --no-i /etc/passwd /dev/null",
            "git grep --no-index secret",
            "git diff ~/.ssh/id_rsa /dev/null",
            "git diff ../../secret x",
            "git blame --contents /etc/passwd x",
            "git config --file ~/.aws/credentials --list",
            "git config -f x --list",
            "git remote show origin",
            "date -f /etc/passwd",
            "date --file=/etc/passwd",
            "date -r /etc/passwd",
            // change system settings (as root)
            "date --se='2000-01-01'",
            "date -us '2000-01-01'",
            "date -s '2000-01-01'",
            "hostname --file=x",
            "hostname -Fx",
            "hostname evil",
            "hostname -b x",
        ] {
            assert!(!safe(cmd), "{cmd}");
        }
        for cmd in [
            "git status",
            "git log --oneline",
            "git log --oneline --exit-code -n 3",
            "git diff",
            "git diff --stat HEAD~1 -- src",
            "git diff main...feature",
            "git grep -n foo",
            "git blame -L 1,5 src/main.rs",
            "git config --get user.name",
            "git config --global --list",
            "git remote -v",
            "git remote get-url origin",
            "ls -la",
            "date",
            "date +%s",
            "date -u +%Y-%m-%dT%H:%M:%S",
            "date -R",
            "date -Iseconds",
            "date --iso-8601=ns",
            "hostname",
        ] {
            assert!(safe(cmd), "{cmd}");
        }
    }

    #[test]
    fn truncated_wrappers_do_not_panic() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let req = Bash.permission(&json!({ "command": "nice -n" }), &ctx);
        assert_eq!(req.unwrap().unwrap().description, "nice -n");
        // Every short sequence of wrappers, options and words goes through both checks.
        let tokens = [
            "nice",
            "-n",
            "timeout",
            "-s",
            "-k",
            "--",
            "5",
            "ls",
            "env",
            "-u",
            "-S",
            "xargs",
            "-I",
            "exec",
            "-a",
            "command",
            "watch",
            "stdbuf",
            "-o",
            "find",
            "-exec",
            ";",
            "sh",
            "-c",
            "git",
            "--no-pager",
            "remote",
            "get-url",
            "date",
            "hostname",
            "function",
            "python3",
            "-m",
            "time",
            "é",
            "'",
        ];
        for a in tokens {
            for b in tokens {
                let _ = safe(&format!("{a} {b}"));
                for c in tokens {
                    let cmd = format!("{a} {b} {c}");
                    let _ = check_banned(&cmd, &Overlay::default());
                    let _ = safe(&cmd);
                }
            }
        }
    }

    #[test]
    fn read_only_shortcut_only_inside_the_project() {
        let fx = Fixture::new();
        fx.write("proj/a.txt", "");
        let project = fx.path("proj");
        let ctx = ToolCtx {
            cwd: &project,
            project_root: &project,
            ..fx.ctx()
        };
        let p = |c: &str, dir: &str| {
            Bash.permission(&json!({ "command": c, "working_dir": dir }), &ctx)
                .unwrap()
        };
        assert_eq!(p("ls", "."), None);
        let req = p("ls", "..").expect("outside the project");
        assert_eq!(req.path, fx.root());
    }

    #[test]
    fn read_only_words_are_checked_after_glob_expansion_and_against_the_project() {
        let fx = Fixture::new();
        fx.write("proj/src/a.rs", "");
        fx.write("proj/notes.txt", "");
        fx.write("proj/pats", "");
        fx.write("outside/secret", "");
        let project = fx.path("proj");
        std::os::unix::fs::symlink(fx.path("outside"), project.join("link")).unwrap();
        let place = Place {
            dir: &project,
            project_root: &project,
            env: &Overlay::default(),
        };
        // `~` is the session's HOME when its variables set one.
        let home = Overlay::new([("HOME".to_string(), project.display().to_string())]);
        let at_home = Place {
            env: &home,
            ..place
        };
        assert!(is_safe_read_only("ls ~/src", at_home));
        if std::env::var_os("HOME").is_some() {
            assert!(!is_safe_read_only("ls ~/src", place));
        }
        let ok = |c: &str| is_safe_read_only(c, place);
        for c in [
            "ls -la",
            "ls -la src",
            "ls *.txt",
            "ls src/*.rs",
            "du -sh .",
            "du --exclude-from=pats .",
            "df -h",
            "echo *",
            "git log --oneline -- src",
            "git log @{u}..",
        ] {
            assert!(ok(c), "{c}");
        }
        let outside = fx.path("outside");
        for c in [
            "ls ~",
            "ls -la ~/",
            &format!("ls -la {}", outside.display()),
            "ls ../outside",
            "ls link",
            "ls link/",
            "ls ../*",
            "echo ../*",
            "echo ../outside/*",
            &format!("du --files0-from={}/secret", outside.display()),
            "du --files0-from=pats",
            "du --files0=pats",
            &format!("du -X {}/secret .", outside.display()),
            &format!("du -X{}/secret .", outside.display()),
            &format!("du --exclude-from={}/secret .", outside.display()),
            "df /",
            "ls {src,../outside}",
            "ls $HOME",
            "ls ${HOME}",
            "git log -- ../outside",
        ] {
            assert!(!ok(c), "{c}");
        }
        // A file named like an option turns `git log *` into `git log --output=Makefile`.
        fx.write("proj/--output=Makefile", "");
        assert!(!ok("git log *"));
        assert!(
            !ok("ls *"),
            "'ls --output=Makefile' is not a listing to trust either"
        );
        assert!(ok("git log --oneline"));
    }

    #[test]
    fn ps_that_prints_the_environment_of_processes_needs_permission() {
        for c in [
            "ps",
            "ps aux",
            "ps -ef",
            "ps -o pid,user -C sleep",
            "ps -p 1 -o comm",
        ] {
            assert!(safe(c), "{c}");
        }
        for c in [
            "ps e",
            "ps auxe",
            "ps eww",
            "ps axeww",
            "ps -E",
            "ps aux -E",
        ] {
            assert!(!safe(c), "{c}");
        }
    }

    #[test]
    fn permission_rules() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let p = |c: &str| Bash.permission(&json!({ "command": c }), &ctx);
        assert_eq!(p("ls -la").unwrap(), None);
        assert_eq!(p("git status").unwrap(), None);
        for c in ["echo x > f", "ls | sort", "ls; rm x"] {
            let req = p(c).unwrap().expect(c);
            assert_eq!(req.action, "execute");
            assert_eq!(req.description, c);
            assert_eq!(req.path, fx.root());
        }
        assert!(
            p("a && curl x")
                .unwrap_err()
                .to_string()
                .contains("security")
        );
        assert!(Bash.permission(&json!({}), &ctx).is_err());
        assert!(
            Bash.permission(&json!({"command": "ls", "working_dir": "nope"}), &ctx)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }

    #[test]
    fn runs_commands() {
        let fx = Fixture::new();
        fx.write("sub/keep.txt", "");
        let ctx = fx.ctx();
        let out = Bash
            .run(
                &json!({"command": "echo hi > made.txt && cat made.txt"}),
                &ctx,
            )
            .out();
        assert!(!out.is_error);
        assert_eq!(fx.read("made.txt"), "hi\n");
        assert_eq!(
            out.content,
            format!("hi\n\n<cwd>{}</cwd>", fx.root().display())
        );
        assert_eq!(out.metadata["exit_code"], 0);

        let out = Bash
            .run(&json!({"command": "ls", "working_dir": "sub"}), &ctx)
            .out();
        assert!(out.content.starts_with("keep.txt\n\n<cwd>"));
        assert!(out.content.contains("/sub</cwd>"));

        let out = Bash.run(&json!({"command": "true"}), &ctx).out();
        assert!(out.content.starts_with("no output\n\n<cwd>"));

        let out = Bash
            .run(&json!({"command": "echo o; echo e >&2; exit 4"}), &ctx)
            .out();
        assert!(
            out.content.starts_with("o\ne\nExit code 4\n"),
            "{}",
            out.content
        );
        assert_eq!(out.metadata["exit_code"], 4);

        let out = Bash
            .run(&json!({"command": "echo $CRUSH $AI_AGENT"}), &ctx)
            .out();
        assert!(out.content.starts_with("1 crush\n"));

        let out = Bash.run(&json!({"command": "sudo ls"}), &ctx).out();
        assert!(out.is_error);
    }

    #[test]
    fn output_is_capped() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let out = Bash.run(
            &json!({"command": "echo BEGIN; i=0; while [ $i -lt 10000 ]; do echo 0123456789; i=$((i+1)); done; echo FINISH"}),
            &ctx,
        ).out();
        assert!(out.content.starts_with("BEGIN\n"));
        assert!(out.content.contains("characters truncated ...]"));
        assert!(out.content.contains("FINISH\n\n<cwd>"));
        assert!(out.content.chars().count() < MAX_OUTPUT_CHARS + 500);
    }

    #[test]
    fn timeout_and_cancel() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let started = Instant::now();
        let out = Bash
            .run(
                &json!({"command": "sleep 30 & sleep 30", "timeout": 1}),
                &ctx,
            )
            .out();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(out.metadata["timed_out"], true);
        assert!(out.content.contains("timed out after 1 s"));

        assert_eq!(timeout_secs(&json!({"timeout": 30000})).unwrap(), Some(30));
        assert_eq!(timeout_secs(&json!({"timeout": 0})).unwrap(), Some(1));
        assert_eq!(timeout_secs(&json!({})).unwrap(), None);
        assert_eq!(timeout_secs(&json!({"timeout": 599})).unwrap(), Some(599));

        let flag = fx.cancel.clone();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let out = Bash.run(&json!({"command": "sleep 30"}), &ctx).out();
        setter.join().unwrap();
        assert!(out.content.contains("aborted"), "{}", out.content);

        let out = Bash.run(&json!({"command": "touch ran"}), &ctx).out();
        assert!(out.content.contains("not started"), "{}", out.content);
        assert!(!fx.root().join("ran").exists());
    }
}
