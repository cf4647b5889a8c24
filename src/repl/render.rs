//! Terminal output of the REPL. stdout carries what the user asked for (answers, command
//! output); stderr carries the prompt, tool lines, questions, notices and errors. Colour and
//! the status line appear only on a terminal and never with `NO_COLOR`; piped output holds no
//! escape codes at all. Every text but a `!command`'s own output goes through
//! `crate::visible` first: what a model, a tool or a hook wrote cannot act on the terminal. On a
//! terminal, answers are then rendered as light Markdown while they stream (`markdown.rs`), under
//! the same conditions as colour but for stdout.

use super::markdown::Markdown;
use crate::activity::Activity;
use crate::visible;
use std::ffi::OsStr;
use std::io::{IsTerminal, Write};

/// Colour for a stream: a terminal, `NO_COLOR` unset or empty, and a `TERM` other than `dumb`.
pub(crate) fn use_color(is_terminal: bool, no_color: Option<&OsStr>, term: Option<&OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty()) && term.is_none_or(|t| t != "dumb")
}

const RESET: &str = "\x1b[0m";
const DIM: &str = "\x1b[2m";
pub(crate) const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
pub(crate) const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";

pub(crate) struct Term {
    /// Colour on stderr.
    color: bool,
    /// stderr is a terminal: the status line may be drawn (and cleared with escapes), and
    /// notices are word-wrapped to its width.
    stderr_tty: bool,
    /// stdout is a terminal: command output is word-wrapped to its width.
    stdout_tty: bool,
    /// The user has not silenced progress (`-q`, `/option progress false`).
    pub progress: bool,
    /// The activity line (crush(1) REPL), drawn and animated on stderr.
    activity: Activity,
    /// stdout is at the start of a line.
    out_at_line_start: bool,
    /// Text was printed to stdout in the current answer.
    answered: bool,
    /// Answers are rendered as Markdown (stdout is a terminal, colour allowed).
    markdown: Option<Markdown>,
    /// The Markdown layout without its styles (a terminal without colour).
    markdown_plain: bool,
    /// The task list the model last set, as printed (a list sent again unchanged is not
    /// printed again).
    todos_shown: String,
    /// Lines of a tool result's preview (`options.tool_preview_lines`).
    pub preview_lines: usize,
    /// The last tool result (tool, content), whole, for `/expand`.
    pub last_result: Option<(String, String)>,
}

/// Writes to stdout; a closed stdout (broken pipe) ends the process quietly with 0.
fn write_stdout(bytes: &[u8]) {
    crate::signal::write_stdout(bytes);
}

/// Columns to wrap stdout to (`COLUMNS`, else the terminal's, else 80).
fn stdout_columns() -> usize {
    crate::text::columns(1)
}

fn write_stderr(s: &str) {
    let mut err = std::io::stderr().lock();
    // Nowhere left to report a failing stderr.
    let _ = err.write_all(s.as_bytes()).and_then(|_| err.flush());
}

impl Term {
    pub(crate) fn detect(progress: bool) -> Term {
        let stderr_tty = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR");
        let term = std::env::var_os("TERM");
        let stdout_tty = std::io::stdout().is_terminal();
        let stdout_color = use_color(stdout_tty, no_color.as_deref(), term.as_deref());
        let color = use_color(stderr_tty, no_color.as_deref(), term.as_deref());
        Term {
            color,
            activity: Activity::new(color),
            // Without colour (NO_COLOR, TERM=dumb) answers are still laid out and word-wrapped,
            // without colours.
            markdown: stdout_tty.then(|| Markdown::new(stdout_columns())),
            markdown_plain: !stdout_color,
            stderr_tty,
            stdout_tty,
            progress,
            out_at_line_start: true,
            answered: false,
            todos_shown: String::new(),
            preview_lines: crate::tools::PREVIEW_LINES,
            last_result: None,
        }
    }

    /// stderr is a terminal.
    pub(crate) fn stderr_tty(&self) -> bool {
        self.stderr_tty
    }

    /// Colour is on (stderr).
    pub(crate) fn color(&self) -> bool {
        self.color
    }

    /// `s` in `style` when colour is on.
    pub(crate) fn paint(&self, style: &str, s: &str) -> String {
        if self.color {
            format!("{style}{s}{RESET}")
        } else {
            s.to_string()
        }
    }

    /// The activity line on stderr while waiting (terminal only, unless silenced).
    pub(crate) fn status(&mut self, s: &str) {
        self.status_until(s, None);
    }

    /// The activity line, counting down to `until` (a retry).
    pub(crate) fn status_until(&mut self, s: &str, until: Option<std::time::Instant>) {
        if !(self.stderr_tty && self.progress) {
            return;
        }
        self.clear_status();
        // The line sits on its own row: never after half a line of answer.
        if !self.out_at_line_start {
            return;
        }
        self.activity.show(&visible::line(s), until);
    }

    /// A turn begins: the activity line counts seconds and tokens from now.
    pub(crate) fn start_activity(&mut self) {
        self.activity.start();
    }

    /// `n` characters of answer or reasoning arrived (the activity line's token estimate).
    pub(crate) fn received(&mut self, n: usize) {
        self.activity.received(n);
    }

    pub(crate) fn clear_status(&mut self) {
        self.activity.hide();
    }

    /// Streams answer text to stdout.
    pub(crate) fn text(&mut self, t: &str) {
        let t = if self.answered {
            t
        } else {
            t.trim_start_matches(['\n', '\r'])
        };
        let t = visible::text(t);
        if t.is_empty() {
            return;
        }
        self.clear_status();
        self.answered = true;
        match self.markdown.as_mut() {
            Some(md) => {
                let shown = md.feed(&t);
                let shown = self.unstyled(shown);
                self.write_answer(&shown);
            }
            None => self.write_answer(&t),
        }
    }

    /// `shown` without the Markdown's colours when colour is off: bold, italic and dim are
    /// not colours and stay (NO_COLOR asks for no colour, not for raw Markdown).
    fn unstyled(&self, shown: String) -> String {
        if self.markdown_plain {
            super::markdown::uncoloured(&shown)
        } else {
            shown
        }
    }

    fn write_answer(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        write_stdout(s.as_bytes());
        self.out_at_line_start = s.ends_with('\n');
    }

    /// Raw bytes of a shell command's output, to stdout.
    pub(crate) fn raw(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.clear_status();
        write_stdout(b);
        self.out_at_line_start = b.ends_with(b"\n");
    }

    /// Ends the current line of stdout, if one is open.
    pub(crate) fn end_line(&mut self) {
        self.clear_status();
        if let Some(md) = self.markdown.as_mut() {
            let rest = md.finish();
            let rest = self.unstyled(rest);
            self.write_answer(&rest);
        }
        if !self.out_at_line_start {
            write_stdout(b"\n");
            self.out_at_line_start = true;
        }
    }

    /// A new answer begins (leading newlines of its first text are dropped).
    pub(crate) fn begin_answer(&mut self) {
        if let Some(md) = self.markdown.as_mut() {
            md.width = stdout_columns();
        }
        self.answered = false;
    }

    /// Command output (e.g. `/sessions`), to stdout; on a terminal, long lines wrap at words.
    pub(crate) fn print(&mut self, s: &str) {
        self.end_line();
        let mut s = visible::text(s).into_owned();
        if self.stdout_tty {
            s = crate::text::wrap::wrap_lines(&s, stdout_columns());
        }
        write_stdout(s.as_bytes());
        self.out_at_line_start = s.is_empty() || s.ends_with('\n');
    }

    /// A line of crush's own on stderr; on a terminal, wrapped at words to its width.
    fn line(&mut self, s: &str) {
        self.end_line();
        if self.stderr_tty {
            let s = crate::text::wrap::wrap_lines(s, crate::text::columns(2));
            write_stderr(&format!("{s}\n"));
        } else {
            write_stderr(&format!("{s}\n"));
        }
    }

    /// A notice on stderr.
    pub(crate) fn note(&mut self, s: &str) {
        let l = self.paint(DIM, &visible::text(s));
        self.line(&l);
    }

    /// An error on stderr; the REPL goes on.
    pub(crate) fn error(&mut self, s: &str) {
        let l = format!("{} {}", self.paint(RED, "error:"), visible::text(s));
        self.line(&l);
    }

    /// One line per tool call: the tool and its key argument.
    pub(crate) fn tool_call(&mut self, name: &str, arg: &str) {
        let (name, arg) = (visible::line(name), visible::line(arg));
        let l = if self.color {
            format!(
                "{} {} {}",
                self.paint(CYAN, "●"),
                self.paint(BOLD, &name),
                arg
            )
        } else {
            format!("[{name}] {arg}")
        };
        self.line(&l);
    }

    /// A dimmed preview of a tool's result under its tool line.
    pub(crate) fn preview(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let cols = super::tty::width().unwrap_or(crate::text::DEFAULT_COLUMNS);
        let mut s = String::new();
        for (i, l) in lines.iter().enumerate() {
            let l = format!(
                "{}{}",
                if i == 0 { "  ⎿ " } else { "    " },
                visible::line(l)
            );
            let l = crate::text::width::truncate(&l, cols.saturating_sub(1)).to_string();
            s.push_str(&self.paint(DIM, &l));
            s.push('\n');
        }
        self.line(s.trim_end_matches('\n'));
    }

    /// A failed tool call's first line.
    pub(crate) fn tool_error(&mut self, name: &str, first_line: &str) {
        let (name, first_line) = (visible::line(name), visible::line(first_line));
        let l = if self.color {
            format!(
                "  {} {}",
                self.paint(RED, "✗"),
                self.paint(DIM, &format!("{name}: {first_line}"))
            )
        } else {
            format!("[{name}] error: {first_line}")
        };
        self.line(&l);
    }

    /// A file change's diff (before its permission question, or after an allowed change):
    /// additions green, removals red.
    pub(crate) fn diff(&mut self, diff: &str) {
        self.end_line();
        write_stderr(&crate::tools::diff::painted(diff, self.color));
    }

    /// A block of lines shown before a question (a multi-line command), each behind a bar so
    /// none can pass for a line of crush's own.
    pub(crate) fn block(&mut self, text: &str) {
        self.end_line();
        let mut s = String::new();
        for l in text.lines() {
            s.push_str(&format!(
                "  {} {}\n",
                self.paint(DIM, "│"),
                visible::line(l)
            ));
        }
        write_stderr(&s);
    }

    /// The model set the task list: printed when it differs from the one printed last.
    pub(crate) fn todos_changed(&mut self, list: &str) {
        if list != self.todos_shown {
            self.checklist(list);
            self.todos_shown = list.to_string();
        }
    }

    /// A new or resumed session: its task list has not been printed.
    pub(crate) fn forget_todos(&mut self) {
        self.todos_shown.clear();
    }

    /// A task list (`[x]`, `[>]`, `[ ]` lines) on stderr: done tasks dim, the current one bold.
    pub(crate) fn checklist(&mut self, list: &str) {
        self.end_line();
        let mut s = String::new();
        for l in list.lines() {
            let l = visible::line(l);
            let styled = if l.starts_with("[x]") {
                self.paint(DIM, &l)
            } else if l.starts_with("[>]") {
                self.paint(BOLD, &l)
            } else {
                l.to_string()
            };
            s.push_str(&format!("  {styled}\n"));
        }
        write_stderr(&s);
    }

    /// A question on stderr, without a newline: the answer is typed after it. Nothing in `q`
    /// can act on the terminal, so the question's own words stay last and as written.
    pub(crate) fn question(&mut self, q: &str) {
        self.end_line();
        write_stderr(&format!("{} ", self.paint(YELLOW, &visible::line(q))));
    }

    /// The input prompt on stderr (`>` or, inside a block or continued line, `.`).
    pub(crate) fn prompt(&mut self, continuation: bool) {
        self.end_line();
        let p = if continuation { ". " } else { "> " };
        write_stderr(&self.paint(BOLD, p));
    }

    /// Moves past a line the terminal left open (after ^C at the prompt).
    pub(crate) fn newline_on_terminal(&mut self) {
        if self.stderr_tty {
            write_stderr("\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::use_color;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let s = |v: &'static str| Some(OsStr::new(v));
        assert!(use_color(true, None, s("xterm-256color")));
        assert!(use_color(true, s(""), None), "an empty NO_COLOR is unset");
        assert!(!use_color(true, s("1"), s("xterm")));
        assert!(!use_color(false, None, s("xterm")));
        assert!(!use_color(true, None, s("dumb")));
    }
}
