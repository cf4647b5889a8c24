//! `crush` with no command: a line-oriented interactive session that works the same on a
//! terminal and from a pipe (one prompt per line or block, permission answers from the same
//! input), so it can be scripted.
//!
//! Input and Ctrl-C: a reader thread reads stdin line by line and sends the lines on a channel;
//! the main thread waits on that channel and polls the SIGINT flag (`signal::interrupt_flag`)
//! between short timeouts. The handler keeps restart semantics, so the reader's `read` is never
//! interrupted and nothing typed is lost; the main thread alone decides what a Ctrl-C means:
//! cancel the running turn (the agent polls the same flag), discard an open block, or, the
//! second time at an empty prompt, exit 130. The alternative, a handler without `SA_RESTART` and
//! a raw `read` on the main thread, would deliver EINTR to whichever thread the kernel picks
//! (stream workers, tool waiters) and needs a hand-written line reader; the thread is simpler.
//!
//! On a terminal (stdin and stderr, `TERM` not `dumb`) the line editor (`editor.rs`) reads
//! instead, on the main thread, in raw mode only while a line is being edited: Ctrl-C is then a
//! key, and during a turn the terminal is back in its own mode, so Ctrl-C is the signal again.

mod complete;
mod custom;
mod editor;
mod history;
mod init;
pub mod input;
mod keys;
mod markdown;
mod notify;
mod pick;
pub mod render;
mod shell;
mod tty;
mod width;
pub mod wrap;
#[rustfmt::skip]
mod width_table;

use crate::agent::permissions::Permissions;
use crate::agent::{Agent, AgentEvent, Answer, Sink, Stop, TurnResult, title};
use crate::app::Global;
use crate::app::{self, AppError, Context};
use crate::commands::sessions::{self, ExportFormat, short_id};
use crate::config::ResolvedModel;
use crate::exit::ExitCode;
use crate::llm::{Part, Role};
use crate::store::{NewMessage, Session};
use crate::tools::PermissionRequest;
use complete::{Candidate, Source};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use editor::{Editor, Mode, Prompt, Read};
use history::History;
use input::{Assembler, Fed, Input, SLASH_COMMANDS, Slash};
use render::Term;
use std::io::{BufRead, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The interactive session's own flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplArgs {
    pub quiet: bool,
}

/// How long after a turn the REPL waits for a title still being generated.
const TITLE_WAIT: Duration = Duration::from_secs(5);
/// The longest a turn waits for the title of the one before it to come back from a local
/// server (the title call's own timeouts are 30 s per attempt).
const SERIAL_TITLE_WAIT: Duration = Duration::from_secs(65);

const WAITING: &str = "waiting for the model";

/// What the line reader delivered.
enum Got {
    Line(String),
    Eof,
    Interrupt,
}

/// Lines from stdin, read on their own thread, with the SIGINT flag polled while waiting.
struct Lines {
    rx: Receiver<Option<String>>,
    cancel: Arc<AtomicBool>,
    eof: bool,
}

impl Lines {
    fn spawn(cancel: Arc<AtomicBool>) -> Result<Lines, AppError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                let mut lock = stdin.lock();
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match lock.read_until(b'\n', &mut buf) {
                        Ok(0) => break,
                        Ok(_) => {
                            if buf.ends_with(b"\n") {
                                buf.pop();
                                if buf.ends_with(b"\r") {
                                    buf.pop();
                                }
                            }
                            let line = String::from_utf8_lossy(&buf).into_owned();
                            if tx.send(Some(line)).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = tx.send(None);
            })
            .map_err(|e| AppError::Runtime(format!("cannot start the input reader: {e}")))?;
        Ok(Lines {
            rx,
            cancel,
            eof: false,
        })
    }

    /// The next line, the end of input, or a Ctrl-C (which is consumed). Once a SIGTERM or
    /// SIGHUP arrived, always an interrupt.
    fn next(&mut self) -> Got {
        loop {
            if self.cancel.swap(false, Ordering::SeqCst) || crate::signal::terminating().is_some() {
                return Got::Interrupt;
            }
            if self.eof {
                return Got::Eof;
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Some(l)) => return Got::Line(l),
                Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                    self.eof = true;
                    return Got::Eof;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// Where input comes from: the line editor on a terminal, else lines of stdin.
enum Reader {
    Lines(Lines),
    Editor {
        editor: Box<Editor>,
        cancel: Arc<AtomicBool>,
    },
}

impl From<Read> for Got {
    fn from(r: Read) -> Got {
        match r {
            Read::Line(l) => Got::Line(l),
            Read::Eof => Got::Eof,
            Read::Interrupt => Got::Interrupt,
        }
    }
}

impl Reader {
    /// A line at the session's prompt (`. ` inside a block or continued line).
    fn prompt(
        &mut self,
        term: &mut Term,
        interactive: bool,
        continuation: bool,
        source: &dyn Source,
    ) -> Got {
        match self {
            Reader::Lines(l) => {
                if interactive {
                    term.prompt(continuation);
                }
                l.next()
            }
            Reader::Editor { editor, cancel } => {
                term.end_line();
                let p = Prompt {
                    text: if continuation { ". " } else { "> " },
                    style: render::BOLD,
                };
                editor.read(&p, Mode::Prompt, source, cancel).into()
            }
        }
    }

    /// The answer to a question.
    fn answer(&mut self, term: &mut Term, question: &str) -> Got {
        match self {
            Reader::Lines(l) => {
                term.question(question);
                l.next()
            }
            Reader::Editor { editor, cancel } => {
                term.end_line();
                let text = format!("{} ", crate::visible::line(question));
                let p = Prompt {
                    text: &text,
                    style: render::YELLOW,
                };
                let source = editor::NoCompletion;
                editor.read(&p, Mode::Answer, &source, cancel).into()
            }
        }
    }

    /// The answer to a question of a few one-key answers (`keys`): on the terminal one key,
    /// Enter an empty line (the default); from a pipe a line.
    fn choose(&mut self, term: &mut Term, question: &str, keys: &[char]) -> Got {
        let Reader::Editor { editor, cancel } = self else {
            return self.answer(term, question);
        };
        term.end_line();
        let text = wrap::wrap_lines(&crate::visible::line(question), wrap::columns(2));
        let prompt = format!("{} ", term.paint(render::YELLOW, &text));
        match pick::key(editor.decoder(), &prompt, keys, cancel) {
            Some(pick::KeyAnswer::Key(c)) => Got::Line(c.to_string()),
            Some(pick::KeyAnswer::Enter) => Got::Line(String::new()),
            Some(pick::KeyAnswer::Eof) => Got::Eof,
            Some(pick::KeyAnswer::Interrupt) => Got::Interrupt,
            None => self.answer(term, question),
        }
    }

    /// A pick from `items` on the terminal (None from a pipe, or without raw mode): Some(None)
    /// when the user kept things as they are.
    fn pick(
        &mut self,
        term: &mut Term,
        items: Vec<String>,
        selected: usize,
    ) -> Option<Option<usize>> {
        let Reader::Editor { editor, cancel } = self else {
            return None;
        };
        term.end_line();
        let color = editor.color();
        pick::pick(editor.decoder(), items, selected, color, cancel).ok()
    }

    /// Input comes from the line editor on a terminal.
    fn on_terminal(&self) -> bool {
        matches!(self, Reader::Editor { .. })
    }

    fn editor(&mut self) -> Option<&mut Editor> {
        match self {
            Reader::Editor { editor, .. } => Some(editor),
            Reader::Lines(_) => None,
        }
    }
}

/// Renders a turn and asks permission questions on the REPL's input.
struct ReplSink<'a> {
    term: &'a mut Term,
    lines: &'a mut Reader,
    interactive: bool,
    /// Ctrl-C while a question was open.
    interrupted: bool,
    /// The user just refused a call: its error result needs no second line.
    refused: bool,
    /// How the current call's result is previewed (its tool says).
    preview: crate::tools::Preview,
    /// A new session's title, generated once its first prompt has passed the hooks.
    title: Option<TitleStart>,
    /// The accepted prompt's title, held back until the turn's first call or its end
    /// (crush(1) CONFIGURATION, side_requests).
    held_title: Option<(TitleStart, String)>,
    titles: &'a mut Vec<TitleJob>,
    /// Sent when a question waits after a long turn.
    notice: Option<notify::Notice>,
    /// Model, context and cost, in front of the status line.
    meter: Option<Meter>,
    /// Diffs shown before a permission question, not shown again with the call's result.
    diffs_shown: Vec<String>,
}

/// What the status line shows in front of what is going on: the model, the context used (of
/// its window) and the session's cost so far.
struct Meter {
    model: String,
    window: u64,
    context: u64,
    cost: f64,
    /// The session's spend at which the budget stops (or asks), when one is set.
    budget: Option<f64>,
}

/// `850`, `1.2k`, `128k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..10_000 => format!("{:.1}k", n as f64 / 1e3),
        10_000..1_000_000 => format!("{}k", (n + 500) / 1000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

impl Meter {
    /// A model call's usage: the context is what the session's own model last held.
    fn add(&mut self, model: &str, usage: Option<&crate::llm::Usage>, cost: Option<f64>) {
        if let Some(u) = usage
            && model == self.model
        {
            self.context = u.input + u.cache_read + u.cache_write + u.output;
        }
        self.cost += cost.unwrap_or(0.0);
    }

    fn line(&self) -> String {
        let mut s = self.model.clone();
        if self.context > 0 && self.window > 0 {
            s.push_str(&format!(
                " · {}/{} context",
                tokens(self.context),
                tokens(self.window)
            ));
        } else if self.context > 0 {
            s.push_str(&format!(" · {} context", tokens(self.context)));
        }
        match self.budget {
            Some(max) => s.push_str(&format!(" · ${:.4} of ${max:.4} budget", self.cost)),
            None if self.cost > 0.0 => s.push_str(&format!(" · ${:.4}", self.cost)),
            None => {}
        }
        s
    }
}

impl<'a> ReplSink<'a> {
    fn new(
        term: &'a mut Term,
        lines: &'a mut Reader,
        titles: &'a mut Vec<TitleJob>,
        interactive: bool,
        title: Option<TitleStart>,
    ) -> ReplSink<'a> {
        ReplSink {
            term,
            lines,
            interactive,
            interrupted: false,
            refused: false,
            preview: Default::default(),
            title,
            held_title: None,
            titles,
            notice: None,
            meter: None,
            diffs_shown: Vec::new(),
        }
    }

    /// Starts the title call on its thread.
    fn start_title(&mut self, t: TitleStart, prompt: String) {
        match spawn_title(t, prompt) {
            Ok(job) => self.titles.push(job),
            Err(e) => self
                .term
                .error(&format!("cannot start the title thread: {e}")),
        }
    }

    /// Starts a held-back title: the turn has ended.
    fn release_title(&mut self) {
        if let Some((t, prompt)) = self.held_title.take() {
            self.start_title(t, prompt);
        }
    }

    /// The activity line, behind the meter.
    fn status(&mut self, what: &str) {
        self.status_until(what, None);
    }

    fn status_until(&mut self, what: &str, until: Option<std::time::Instant>) {
        match &self.meter {
            Some(m) => self
                .term
                .status_until(&format!("{} · {what}", m.line()), until),
            None => self.term.status_until(what, until),
        }
    }
}

/// What a title generation needs, but the prompt.
struct TitleStart {
    model: ResolvedModel,
    policy: crate::llm::RetryPolicy,
    session_id: String,
    when: title::SideTiming,
}

impl Sink for ReplSink<'_> {
    fn event(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::TextDelta(t) => {
                self.term.received(t.len());
                self.term.text(&t);
            }
            AgentEvent::PromptAccepted(prompt) => {
                if let Some(t) = self.title.take() {
                    if t.when == title::SideTiming::Now {
                        self.start_title(t, prompt);
                    } else {
                        self.held_title = Some((t, prompt));
                    }
                }
            }
            AgentEvent::ReasoningDelta(t) => {
                self.term.received(t.len());
                self.status("thinking");
            }
            AgentEvent::Retry {
                attempt,
                wait,
                reason,
            } => {
                self.term.note(&format!(
                    "model call failed ({reason}); retry {attempt} in {:.1} s",
                    wait.as_secs_f64()
                ));
                self.term.begin_answer();
                self.status_until(
                    &format!("retry {attempt}"),
                    Some(std::time::Instant::now() + wait),
                );
            }
            AgentEvent::ToolCall {
                name, input, view, ..
            } => {
                self.preview = view.preview;
                self.term
                    .tool_call(&name, &crate::tools::key_argument(&input));
                self.term.begin_answer();
            }
            AgentEvent::ToolResult {
                name,
                content,
                is_error,
                diff,
                ..
            } => {
                if is_error && !std::mem::take(&mut self.refused) {
                    self.term
                        .tool_error(&name, content.lines().next().unwrap_or(""));
                } else if let Some(d) = diff.filter(|_| !is_error) {
                    // A change allowed without asking shows its diff now; an asked one showed it.
                    match self.diffs_shown.iter().position(|s| *s == d) {
                        Some(i) => {
                            self.diffs_shown.remove(i);
                        }
                        None => self.term.diff(&d),
                    }
                } else if !is_error {
                    let lines =
                        crate::tools::preview(self.preview, &content, self.term.preview_lines);
                    self.term.preview(&lines);
                }
                self.term.last_result = Some((name, content));
            }
            AgentEvent::PermissionRefused { request, hint } => self.term.error(&format!(
                "refused {} ({}): to allow it, {hint}",
                request.tool, request.description
            )),
            AgentEvent::Hook { report, .. } => {
                self.term.note(&report.line());
                self.term.begin_answer();
            }
            AgentEvent::Usage {
                usage,
                estimate,
                cost,
                model,
            } => {
                if let Some(m) = self.meter.as_mut() {
                    m.add(&model, usage.or(estimate).as_ref(), cost);
                }
                if self
                    .held_title
                    .as_ref()
                    .is_some_and(|(t, _)| t.when == title::SideTiming::AfterFirstCall)
                {
                    self.release_title();
                }
            }
            AgentEvent::Notice(text) => self.term.note(&text),
            AgentEvent::StepCommitted => self.status(WAITING),
            AgentEvent::ToolPending(name) => self.status(&format!("preparing {name}…")),
            AgentEvent::Todos(todos) => {
                self.term
                    .todos_changed(&crate::tools::todos::checklist(&todos));
                self.term.begin_answer();
            }
        }
    }

    fn questions(
        &mut self,
        questions: &[crate::tools::question::Question],
    ) -> Option<Vec<crate::tools::question::Answer>> {
        use crate::tools::question::Answer as Reply;
        if let Some(n) = &self.notice {
            n.send_if_long("crush has a question for you");
        }
        let mut answers = Vec::new();
        let n = questions.len();
        for (i, q) in questions.iter().enumerate() {
            let mut text = if n > 1 {
                format!("Question {}/{n}: {}", i + 1, q.question)
            } else {
                q.question.clone()
            };
            if !q.description.trim().is_empty() {
                text.push_str(&format!("\n{}", q.description.trim()));
            }
            for (k, c) in q.choices.iter().enumerate() {
                text.push_str(&format!("\n{}) {}", k + 1, c.label));
                if !c.description.is_empty() {
                    text.push_str(&format!(" \u{2014} {}", c.description));
                }
            }
            self.term.block(&text);
            let how = match q.kind.as_str() {
                "yes_no" => "[y]es / [n]o (Enter skips)",
                "single_choice" => "a number, or your own answer (Enter skips)",
                "multi_choice" => {
                    "numbers separated by spaces or commas, or your own answer (Enter skips)"
                }
                _ => "your answer (Enter skips)",
            };
            let line = match self.lines.answer(self.term, how) {
                Got::Line(l) => l,
                Got::Eof => String::new(),
                Got::Interrupt => {
                    self.term.newline_on_terminal();
                    self.interrupted = true;
                    return None;
                }
            };
            if !self.interactive {
                self.term.note(line.trim());
            }
            let line = line.trim();
            let mut a = Reply::default();
            match q.kind.as_str() {
                _ if line.is_empty() => {}
                "yes_no" => match line.to_ascii_lowercase().as_str() {
                    "y" | "yes" => a.yes = Some(true),
                    "n" | "no" => a.yes = Some(false),
                    _ => a.text = line.to_string(),
                },
                "single_choice" | "multi_choice" => {
                    let picked: Option<Vec<String>> = line
                        .split([',', ' '])
                        .filter(|w| !w.is_empty())
                        .map(|w| {
                            w.parse::<usize>()
                                .ok()
                                .and_then(|k| q.choices.get(k.wrapping_sub(1)))
                                .or_else(|| q.choices.iter().find(|c| c.id.eq_ignore_ascii_case(w)))
                                .map(|c| c.id.clone())
                        })
                        .collect();
                    match picked {
                        Some(ids) if q.kind == "multi_choice" || ids.len() == 1 => a.selected = ids,
                        _ => a.text = line.to_string(),
                    }
                }
                _ => a.text = line.to_string(),
            }
            answers.push(a);
        }
        Some(answers)
    }

    fn go_over_budget(&mut self, stop: &crate::agent::budget::BudgetStop) -> bool {
        use crate::agent::budget::BudgetStop;
        if let Some(n) = &self.notice {
            n.send_if_long("the budget needs your answer");
        }
        let question = match stop {
            BudgetStop::Reached {
                limit, spent, max, ..
            } => format!(
                "Budget reached: {} has spent ${spent:.4} of its ${max:.4}. Go over it for the rest of this turn? [y]es / [n]o",
                match limit {
                    crate::agent::budget::Limit::Run => "this REPL's run (options.max_cost)",
                    crate::agent::budget::Limit::Session =>
                        "this session (options.max_session_cost)",
                }
            ),
            BudgetStop::Unpriced { model } => format!(
                "The model {model} has no price, so the budget cannot count its calls. Call it anyway in this session? [y]es / [n]o"
            ),
        };
        loop {
            let line = match self.lines.answer(self.term, &question) {
                Got::Line(l) => l,
                Got::Eof => return false,
                Got::Interrupt => {
                    self.term.newline_on_terminal();
                    self.interrupted = true;
                    return false;
                }
            };
            if !self.interactive {
                self.term.note(line.trim());
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return true,
                "n" | "no" | "" => return false,
                _ if !self.interactive => return false,
                _ => self.term.note("answer y or n"),
            }
        }
    }

    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer> {
        if let Some(d) = req.diff.as_deref().filter(|d| !d.trim().is_empty()) {
            self.term.diff(d);
            self.diffs_shown.push(d.to_string());
        }
        if let Some(n) = &self.notice {
            n.send_if_long(&format!("{} needs your permission", req.tool));
        }
        // A command of several lines is shown above the question, which then names it.
        let what = if req.description.contains('\n') {
            self.term.block(&req.description);
            format!("the {} lines above", req.description.lines().count())
        } else {
            req.description.clone()
        };
        loop {
            let question = format!(
                "Allow {}: {what}? [y]es / [a]lways this session / [N]o",
                req.tool
            );
            let line = match self.lines.choose(self.term, &question, &['y', 'a', 'n']) {
                Got::Line(l) => l,
                Got::Eof => {
                    self.term.note("no answer (end of input): refused");
                    return Some(Answer::No);
                }
                Got::Interrupt => {
                    self.term.newline_on_terminal();
                    self.interrupted = true;
                    return Some(Answer::No);
                }
            };
            if !self.interactive {
                // Keep a piped transcript readable: the answer after its question.
                self.term.note(line.trim());
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Some(Answer::Yes),
                "a" | "always" => return Some(Answer::Always),
                // On a terminal, Enter is the default: no.
                a if matches!(a, "n" | "no") || (a.is_empty() && self.interactive) => {
                    self.refused = true;
                    return Some(Answer::No);
                }
                other if !self.interactive => {
                    // A script that did not expect the question must not lose every line after.
                    self.term
                        .note(&format!("'{other}' is not y, a or n: refused"));
                    self.refused = true;
                    return Some(Answer::No);
                }
                _ => self
                    .term
                    .note("answer y (yes), a (always this session) or n (no)"),
            }
        }
    }
}

/// A title being generated on a worker thread: the session and the result.
type TitleJob = Receiver<(String, title::Generated)>;

struct Repl {
    ctx: Context,
    global: Global,
    agent: Agent<'static>,
    /// `/model small ...` or `--small-model`; else resolved from the configuration when needed.
    small: Option<ResolvedModel>,
    term: Term,
    lines: Reader,
    interactive: bool,
    /// The current session has had no prompt yet: the first one gets a generated title.
    fresh: bool,
    titles: Vec<TitleJob>,
    /// A title went to a server that must not get the next turn before it has answered.
    serial_title: bool,
    cancel: Arc<AtomicBool>,
    /// SessionStart hooks to fire before the next prompt: "startup" or "resume".
    session_start: Option<&'static str>,
    /// `-q`: no progress line, whatever `/option progress` says.
    quiet: bool,
    /// Files `/attach` added, sent with the next prompt.
    attachments: Vec<crate::tools::attach::Attachment>,
    /// The session the budget was set for (its id, "" for one not yet created).
    budget_session: Option<String>,
}

enum Flow {
    Continue,
    Quit,
}

pub fn run(global: &Global, args: &ReplArgs) -> Result<ExitCode, AppError> {
    // The trust question runs with the default Ctrl-C (it ends crush with 130); from then on a
    // Ctrl-C is ours to interpret.
    if std::io::stdin().is_terminal() {
        ask_trust(global)?;
    }
    let cancel = crate::signal::interrupt_flag();
    let ctx = app::open_context(global)?;
    let model = ctx.loaded.resolve_model(global.model.as_deref(), false)?;
    let small = match &global.small_model {
        Some(m) => Some(ctx.loaded.resolve_model(Some(m), true)?),
        None => None,
    };
    let resumed = app::session_to_continue(ctx.store, global)?;
    let sid = resumed.as_ref().map(|s| s.id.clone()).unwrap_or_default();
    let mut agent = app::build_agent(&ctx, model, sid, global.yolo, Some(app::mcp_wait()));
    agent.plan_mode = global.plan;
    // A Ctrl-C while the configuration loaded (a slow crushrc or `$(...)`) means: stop.
    if cancel.swap(false, Ordering::SeqCst) {
        return Ok(crate::signal::interrupted());
    }
    let progress = !args.quiet && ctx.loaded.config.options.progress != Some(false);
    let interactive = std::io::stdin().is_terminal();
    let mut term = Term::detect(progress);
    term.preview_lines = crate::tools::preview_lines(&ctx.loaded.config.options);
    let lines = if tty::editor_usable(
        interactive,
        std::io::stderr().is_terminal(),
        std::env::var_os("TERM").as_deref(),
    ) {
        let (history, warning) = History::load(&history_path(&ctx), history::CAP);
        if let Some(w) = warning {
            term.note(&w);
        }
        Reader::Editor {
            editor: Box::new(Editor::new(history, term.color())),
            cancel: cancel.clone(),
        }
    } else {
        Reader::Lines(Lines::spawn(cancel.clone())?)
    };
    let mut repl = Repl {
        ctx,
        global: global.clone(),
        agent,
        small,
        term,
        lines,
        interactive,
        fresh: false,
        titles: Vec::new(),
        serial_title: false,
        cancel,
        session_start: Some(if resumed.is_some() {
            "resume"
        } else {
            "startup"
        }),
        quiet: args.quiet,
        attachments: Vec::new(),
        budget_session: None,
    };
    repl.banner(resumed.as_ref());
    repl.suggest_init();
    Ok(repl.main_loop())
}

/// The project's prompt history (crush(1) FILES).
fn history_path(ctx: &Context) -> std::path::PathBuf {
    ctx.loaded.data_dir.join("history")
}

/// What Tab completes at the session's prompt: the slash commands and their arguments, and the
/// project's files.
struct Completions<'a> {
    store: &'a crate::store::Store,
    config: &'a crate::config::Loaded,
    tools: Vec<&'a str>,
    cwd: &'a std::path::Path,
    mcp: Option<&'a crate::mcp::Manager>,
    commands: &'a crate::skills::commands::Commands,
    skills: &'a crate::skills::Skills,
}

impl Source for Completions<'_> {
    fn commands(&self) -> Vec<Candidate> {
        let mut all: Vec<Candidate> = SLASH_COMMANDS
            .iter()
            .map(|(_, name, _, about)| Candidate::new(*name, *about))
            .collect();
        // Custom commands, skills and MCP prompts: by full name, and by bare name where that
        // names the same one.
        let prompts = self.mcp.map(|m| m.prompts()).unwrap_or_default();
        let cat = crate::skills::catalog::Catalog::new(self.commands, self.skills, prompts);
        let names = cat.names();
        for e in &cat.entries {
            all.push(Candidate::new(e.name.clone(), e.description()));
            let bare = input::resolve_with(&e.bare, &names);
            if bare == Ok(input::Target::Custom(e.name.clone())) {
                all.push(Candidate::new(e.bare.clone(), e.description()));
            }
        }
        all
    }

    fn arguments(&self, command: &str, before: &[&str]) -> Vec<Candidate> {
        let words = |w: &[&str]| w.iter().map(|w| Candidate::plain(*w)).collect();
        match (command, before) {
            ("model", []) => {
                let mut c: Vec<Candidate> = words(&["large", "small"]);
                c.extend(self.models());
                c
            }
            ("model", ["large" | "small"]) => self.models(),
            ("resume", []) => self
                .store
                .list_sessions()
                .unwrap_or_default()
                .into_iter()
                .map(|s| Candidate::new(short_id(&s.id), s.title))
                .collect(),
            ("option", []) => words(&crate::config::commands::option_keys()),
            ("option", [key]) => words(&crate::config::commands::option_values(key)),
            ("permissions", []) => words(&["allow", "deny"]),
            ("permissions", [_, ..]) => words(&self.tools),
            ("export", _) => words(&["md", "json"]),
            ("mcp", []) => words(&["add", "rm", "login"]),
            ("mcp", ["rm" | "login"]) => self
                .mcp
                .map(|m| {
                    m.statuses()
                        .into_iter()
                        .map(|s| Candidate::new(s.name, s.state))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn root(&self) -> Option<&std::path::Path> {
        Some(self.cwd)
    }

    fn takes_path(&self, command: &str, before: &[&str]) -> bool {
        matches!((command, before), ("attach" | "versions", []))
    }
}

impl Completions<'_> {
    fn models(&self) -> Vec<Candidate> {
        ready_models(self.config, false)
            .into_iter()
            .map(|(id, name)| Candidate::new(id, name))
            .collect()
    }
}

/// `PROVIDER/MODEL` and the model's name, for every model of a provider ready to use.
/// With `discover`, a provider that lists its models on its server (a local one) is asked
/// (once per process); completion does not wait on a server.
fn ready_models(config: &crate::config::Loaded, discover: bool) -> Vec<(String, String)> {
    let catalog = config.catalog.get();
    config
        .providers_with(&catalog.providers)
        .ready
        .iter()
        .map(|p| {
            if discover && p.discover {
                p.discovered()
            } else {
                p.clone()
            }
        })
        .flat_map(|p| {
            let id = p.id.clone();
            p.models
                .into_iter()
                .map(move |m| (format!("{id}/{}", m.id), m.name.clone().unwrap_or_default()))
        })
        .collect()
}

/// The first start in a project that would run code of its own (crushrc, hooks, MCP or LSP servers,
/// `$(...)` values): list exactly what, and ask once (crush(1) CONFIGURATION). A changed definition
/// asks again. Only on a terminal: from a pipe, the one-line notice of the loader stands.
fn ask_trust(global: &Global) -> Result<(), AppError> {
    use crate::config::{layers, state, trust};
    if global.trust || trust::env_trusts() {
        return Ok(());
    }
    let cwd = app::working_dir(global)?;
    let review = layers::review_project(&cwd)?;
    if review.allowed() {
        return Ok(());
    }
    let mut msg = format!(
        "This project ({}) {} and would run or set, on this machine:\n",
        review.project_root.display(),
        if review.changed {
            "changed since you trusted it"
        } else {
            "is not trusted yet"
        }
    );
    for it in &review.items {
        msg.push_str(&format!("  {it}\n"));
    }
    msg.push_str("Trust it and run these? [y/N] ");
    crate::ewrite!("{msg}");
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return Ok(());
    }
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        state::record_trust(&review.project_root, &review.hash).map_err(|e| {
            AppError::Runtime(format!(
                "cannot record trust in {}: {e}",
                state::global_path().display()
            ))
        })?;
        crate::ewriteln!("Trusted. 'crush trust --revoke' undoes it.");
    } else {
        crate::ewriteln!(
            "Not trusted: the project's own code will not run ('crush trust' to change that)."
        );
    }
    Ok(())
}

/// Generates a title on its own thread.
fn spawn_title(t: TitleStart, prompt: String) -> std::io::Result<TitleJob> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("title".into())
        .spawn(move || {
            let g = title::generate(&t.model, &prompt, &t.policy);
            let _ = tx.send((t.session_id, g));
        })?;
    Ok(rx)
}

impl Repl {
    fn banner(&mut self, resumed: Option<&Session>) {
        if self.interactive {
            let m = &self.agent.model;
            self.term.note(&format!(
                "crush {} · {}/{} · /help for commands, Ctrl-D to quit",
                env!("CARGO_PKG_VERSION"),
                m.provider.id,
                m.model.id
            ));
        }
        if let Some(s) = resumed {
            self.term.note(&format!(
                "Resumed session {} “{}” ({} messages)",
                short_id(&s.id),
                s.title,
                s.message_count
            ));
        }
    }

    fn main_loop(&mut self) -> ExitCode {
        let mut asm = Assembler::new();
        let mut interrupts = 0;
        let code = loop {
            self.poll_titles(Duration::ZERO);
            self.mcp_warnings();
            let source = Completions {
                store: self.ctx.store,
                config: self.agent.config.as_ref().unwrap_or(&self.ctx.loaded),
                tools: self.agent.tools.iter().map(|t| t.name()).collect(),
                cwd: &self.agent.cwd,
                mcp: self.agent.mcp.as_ref().map(|m| m.manager()),
                commands: &self.ctx.commands,
                skills: &self.ctx.skills,
            };
            let got = self
                .lines
                .prompt(&mut self.term, self.interactive, asm.pending(), &source);
            match got {
                Got::Eof => {
                    if asm.discard() {
                        self.term
                            .note("the input ended inside a block or continued line: discarded");
                    }
                    self.term.newline_on_terminal();
                    break ExitCode::Success;
                }
                Got::Interrupt => {
                    self.term.newline_on_terminal();
                    if let Some(sig) = crate::signal::terminating() {
                        break ExitCode::from_signal(sig);
                    }
                    if asm.discard() {
                        self.term.note("(input discarded)");
                        interrupts = 0;
                        continue;
                    }
                    interrupts += 1;
                    if interrupts >= 2 {
                        break ExitCode::Interrupted;
                    }
                    self.term
                        .note("(press Ctrl-C again to quit, or Ctrl-D to leave)");
                }
                Got::Line(l) => {
                    interrupts = 0;
                    asm.set_names(self.command_names());
                    let Fed::Done(input) = asm.feed_text(&l) else {
                        continue;
                    };
                    if let Some(editor) = self.lines.editor()
                        && let Some(w) = editor.remember(asm.entry())
                    {
                        self.term.note(&w);
                    }
                    if let Flow::Quit = self.handle(input) {
                        break ExitCode::Success;
                    }
                }
            }
        };
        self.end_session(if code == ExitCode::Success {
            "prompt_input_exit"
        } else {
            "other"
        });
        self.poll_titles(TITLE_WAIT);
        if let Some(m) = &self.agent.mcp {
            m.manager().shutdown();
        }
        if !self.agent.session_id.is_empty() {
            let short = short_id(&self.agent.session_id).to_string();
            self.term.note(&format!(
                "Session {short} saved; continue it with: crush -s {short}"
            ));
        }
        code
    }

    fn handle(&mut self, input: Input) -> Flow {
        match input {
            Input::Empty => {}
            Input::Invalid(msg) => self.term.error(&msg),
            Input::Prompt(p) => self.prompt(&p),
            Input::Shell(c) => self.shell(&c),
            Input::Command { cmd, args } => return self.command(cmd, &args),
            Input::McpPrompt {
                server,
                prompt,
                args,
            } => self.custom(&format!("mcp:{server}:{prompt}"), &args),
            Input::Custom { name, args } => self.custom(&name, &args),
        }
        Flow::Continue
    }

    /// Creates the session when the REPL has none yet (after `/new`, or at start).
    fn ensure_session(&mut self) -> Result<(), String> {
        if !self.agent.session_id.is_empty() {
            return Ok(());
        }
        let s = self
            .ctx
            .store
            .create_session(title::PLACEHOLDER, None)
            .map_err(|e| e.to_string())?;
        self.agent.session_id = s.id;
        self.fresh = true;
        Ok(())
    }

    fn small_model(&self) -> Result<ResolvedModel, String> {
        if let Some(m) = &self.small {
            return Ok(m.clone());
        }
        // The session's configuration: `/model small` changes it.
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        // `-m` alone: the chosen model titles too, rather than a configured large one.
        if cfg.config.models.small.is_none() && self.global.model.is_some() {
            return Ok(self.agent.model.clone());
        }
        cfg.resolve_model(None, true).map_err(|e| e.to_string())
    }

    fn debug(&mut self, msg: &str) {
        // The session's configuration: `/option debug true` changes it.
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        if cfg.config.options.debug {
            self.term.note(&format!("debug: {msg}"));
        }
    }

    /// What the first prompt of a fresh session needs to be titled by the small model.
    fn title_start(&mut self) -> Option<TitleStart> {
        if !self.fresh {
            return None;
        }
        self.fresh = false;
        let model = match self.small_model() {
            Ok(m) => m,
            Err(e) => {
                self.debug(&format!("no title model: {e}"));
                return None;
            }
        };
        let mut policy = self.agent.policy.clone();
        policy.max_attempts = policy.max_attempts.min(2);
        policy.response_timeout = policy.response_timeout.min(Duration::from_secs(30));
        policy.idle_timeout = policy.idle_timeout.min(Duration::from_secs(30));
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        let when = title::timing(
            &self.agent.model,
            &model,
            cfg.config.options.side_requests.as_deref(),
        );
        Some(TitleStart {
            model,
            policy,
            session_id: self.agent.session_id.clone(),
            when,
        })
    }

    /// Applies finished titles (waiting up to `wait` for unfinished ones): the title, and the
    /// call's usage row whether or not the title was usable.
    fn poll_titles(&mut self, wait: Duration) {
        let deadline = Instant::now() + wait;
        let jobs = std::mem::take(&mut self.titles);
        for job in jobs {
            let got = match job.recv_deadline(deadline) {
                Ok(g) => g,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    self.titles.push(job);
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => continue,
            };
            let (sid, g) = got;
            let store = self.ctx.store;
            if let Some(u) = &g.usage
                && let Err(e) = store.record_usage(&sid, u)
            {
                self.term
                    .error(&format!("cannot record the title call's usage: {e}"));
            }
            match (&g.title, &g.error) {
                (Some(t), _) => {
                    if let Err(e) = store.set_title(&sid, t) {
                        self.debug(&format!("cannot set the title: {e}"));
                    }
                }
                (None, Some(e)) => self.debug(&format!("title generation: {e}")),
                (None, None) => {}
            }
        }
    }

    fn prompt(&mut self, text: &str) {
        // A title still out to a local server waits for nothing but itself: the next turn
        // goes once it is back (crush(1) CONFIGURATION, side_requests).
        if std::mem::take(&mut self.serial_title) {
            self.poll_titles(SERIAL_TITLE_WAIT);
        }
        if let Err(e) = self.ensure_session() {
            self.term.error(&format!("cannot create a session: {e}"));
            return;
        }
        // `/attach`ed files, then the files the prompt names as `@path`.
        let mut attached = std::mem::take(&mut self.attachments);
        for (_, path) in crate::tools::attach::mentions(text, &self.agent.cwd) {
            match self.attach_file(&path) {
                Ok(Some(a)) => attached.push(a),
                Ok(None) => {}
                Err(e) => {
                    self.term.error(&format!("{e}; the prompt was not sent"));
                    self.attachments = attached;
                    return;
                }
            }
        }
        for a in &attached {
            self.term.note(&format!("attached {}", a.describe()));
        }
        let title = self.title_start();
        self.cancel.store(false, Ordering::SeqCst);
        self.term.begin_answer();
        let (notice, at_question) = (self.notice(), self.notice());
        self.arm_budget();
        let meter = self.meter();
        let mut sink = ReplSink::new(
            &mut self.term,
            &mut self.lines,
            &mut self.titles,
            self.interactive,
            title,
        );
        sink.notice = Some(at_question);
        sink.meter = Some(meter);
        sink.term.start_activity();
        sink.status(WAITING);
        if let Some(source) = self.session_start.take() {
            self.agent.session_start(source, &mut sink);
        }
        let result =
            self.agent
                .run_turn_with(text, attached.iter().map(|a| a.part()).collect(), &mut sink);
        let serial = sink
            .held_title
            .as_ref()
            .is_some_and(|(t, _)| t.when == title::SideTiming::AfterTurn);
        sink.release_title();
        let interrupted = sink.interrupted;
        // A prompt the hooks refused leaves the session untitled for the next one.
        let unused_title = sink.title.is_some();
        self.serial_title |= serial;
        if unused_title {
            self.fresh = true;
        }
        self.cancel.store(false, Ordering::SeqCst);
        self.term.clear_status();
        self.term.end_line();
        match result {
            Err(e) => self.term.error(&format!(
                "the session store failed: {e}; the turn may be incomplete"
            )),
            Ok(r) => {
                self.report(&r, interrupted);
                // Canceled: the user is here.
                if !matches!(r.stop, Stop::Canceled) && !interrupted {
                    notice.send_if_long(match r.stop {
                        Stop::EndTurn => "the answer is ready",
                        _ => "the turn has stopped",
                    });
                }
                self.poll_titles(TITLE_WAIT);
                if self.agent.plan_mode {
                    self.after_plan(&r);
                }
                return;
            }
        }
        self.poll_titles(TITLE_WAIT);
    }

    /// The meter of the status line as the turn starts: the session's context and cost so far.
    fn meter(&self) -> Meter {
        let m = &self.agent.model.model;
        let (context, cost) = match self.ctx.store.resolve_session(&self.agent.session_id) {
            Ok(s) => (u64::try_from(s.context_tokens).unwrap_or(0), s.cost),
            Err(_) => (0, 0.0),
        };
        Meter {
            model: m.id.clone(),
            window: m.context_window,
            context,
            cost,
            budget: self.agent.budget_ceiling(),
        }
    }

    /// The budget of the session the next turn goes to (crush(1) USAGE AND COST, Budget):
    /// options.max_cost counts from what the session had spent when this REPL took it up,
    /// options.max_session_cost from nothing. Set again when the REPL moves to another session.
    fn arm_budget(&mut self) {
        let id = self.agent.session_id.clone();
        match &self.budget_session {
            Some(armed) if *armed == id => return,
            // A new session got its id from its first turn: its budget stands.
            Some(armed) if armed.is_empty() && self.agent.budget.is_some() => {
                self.budget_session = Some(id);
                return;
            }
            _ => {}
        }
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        let start = if id.is_empty() {
            0.0
        } else {
            self.ctx.store.session_spend(&id).unwrap_or(0.0)
        };
        match crate::agent::budget::Budget::for_run(cfg, None, false, start) {
            Ok(b) => self.agent.budget = Some(b).filter(|b| b.is_set()),
            Err(e) => {
                self.term.error(&e.to_string());
                self.agent.budget = None;
            }
        }
        self.budget_session = Some(id);
    }

    /// A notification for the turn starting now, the way `options.notifications` says.
    fn notice(&self) -> notify::Notice {
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        notify::Notice {
            style: notify::choose(
                cfg.config.options.notifications.as_deref(),
                self.term.stderr_tty(),
                &|k| std::env::var(k).ok(),
                &notify::native_available,
            ),
            since: Instant::now(),
            after: notify::threshold(),
            cwd: self.agent.cwd.clone(),
        }
    }

    fn report(&mut self, r: &TurnResult, interrupted: bool) {
        match &r.stop {
            Stop::EndTurn => {}
            Stop::MaxTokens => self
                .term
                .note("the answer was cut off at the model's output limit"),
            Stop::MaxSteps(n) => self.term.note(&format!(
                "stopped after {n} steps without finishing; say \"continue\" to go on"
            )),
            Stop::Loop => self
                .term
                .note("stopped: the model kept repeating the same tool call with the same result"),
            Stop::PermissionRefused if interrupted => self
                .term
                .note("canceled; the model was told the call was refused"),
            Stop::PermissionRefused => self
                .term
                .note("the turn ended because a permission was refused; the model was told"),
            Stop::Canceled => self
                .term
                .note("canceled; the partial answer was kept in the session"),
            Stop::ContentFilter | Stop::Empty => {
                if let Some(p) = r.stop.problem() {
                    self.term.error(p);
                }
            }
            Stop::HookDenied(reason) => self.term.error(&format!(
                "a hook blocked the prompt; nothing was sent to the model: {reason}"
            )),
            Stop::HookHalted(reason) => self
                .term
                .error(&format!("a hook halted the turn: {reason}")),
            Stop::Error(e) if e.is_context_overflow() => self.term.error(&format!(
                "{e}\nThe session no longer fits the model's context window: /compact summarizes it, then your next prompt continues from the summary."
            )),
            Stop::Error(e) => self.term.error(&format!(
                "{e}\nThe session was saved; your next prompt continues it."
            )),
            Stop::Budget(b) => self.term.error(&format!("{b}; the session was saved")),
        }
    }

    fn shell(&mut self, command: &str) {
        if let Err(e) = self.ensure_session() {
            self.term.error(&format!("cannot create a session: {e}"));
            return;
        }
        self.cancel.store(false, Ordering::SeqCst);
        let term = &mut self.term;
        let ran = shell::run(command, &self.agent.cwd, &self.cancel, &mut |b| term.raw(b));
        self.cancel.store(false, Ordering::SeqCst);
        self.term.end_line();
        let ran = match ran {
            Ok(r) => r,
            Err(e) => {
                self.term.error(&format!("cannot run {command}: {e}"));
                return;
            }
        };
        if ran.canceled {
            self.term.note("canceled");
        } else if ran.exit_code != 0 {
            self.term.note(&format!("exit {}", ran.exit_code));
        }
        let msg = NewMessage {
            role: Role::User,
            parts: vec![Part::ShellCommand {
                command: command.to_string(),
                output: ran.output,
                exit_code: ran.exit_code,
            }],
            model: None,
            provider: None,
        };
        if let Err(e) = self.ctx.store.add_message(&self.agent.session_id, &msg) {
            self.term
                .error(&format!("cannot record the command in the session: {e}"));
        }
    }

    fn command(&mut self, cmd: Slash, args: &str) -> Flow {
        match cmd {
            Slash::Quit => return Flow::Quit,
            Slash::Help => {
                let mut text = help_text();
                text.push_str(&self.custom_help());
                self.term.print(&text)
            }
            Slash::Mcp => self.mcp_command(args),
            Slash::Sandbox => self.sandbox_command(args),
            Slash::New => {
                self.switch_to(String::new());
                self.term
                    .note("New session: it starts with your next prompt.");
            }
            Slash::Sessions if self.lines.on_terminal() => self.pick_session(),
            Slash::Model if args.trim().is_empty() && self.lines.on_terminal() => self.pick_model(),
            Slash::Sessions => match self.ctx.store.list_sessions() {
                Ok(list) if list.is_empty() => self.term.note("No sessions yet."),
                Ok(list) => {
                    let cur = Some(self.agent.session_id.as_str()).filter(|s| !s.is_empty());
                    self.term.print(&sessions::list_text(&list, cur));
                }
                Err(e) => self.term.error(&e.to_string()),
            },
            Slash::Resume => self.resume(args),
            Slash::Model | Slash::Option | Slash::Permissions => {
                let name = SLASH_COMMANDS
                    .iter()
                    .find(|(c, ..)| *c == cmd)
                    .map(|(_, n, ..)| *n)
                    .unwrap_or_default();
                match self.session_config(name, args) {
                    Ok(msg) => self.term.print(&msg),
                    Err(e) => self.term.error(&e),
                }
            }
            Slash::Agents => match &self.agent.config {
                Some(loaded) => {
                    let (found, models) =
                        crate::agent::subagent::custom_agents(loaded, Some(&self.agent.model));
                    self.term.print(&found.list_text(&models));
                }
                None => self
                    .term
                    .error("no configuration to read the agent files from"),
            },
            Slash::Cost => self.cost(),
            Slash::Compact => self.compact(),
            Slash::Export => self.export(args),
            Slash::History => self.history(args),
            Slash::Init => self.init(args),
            Slash::Plan => self.plan_mode(args),
            Slash::Todos => self.todos(),
            Slash::Expand => match self.term.last_result.clone() {
                Some((name, content)) => {
                    self.term
                        .note(&format!("the last result of {name}, whole:"));
                    self.term.print(&format!("{}\n", content.trim_end()));
                }
                None => self.term.note("No tool has run yet."),
            },
            Slash::Jobs => {
                let text = crate::tools::jobs::list_text(&self.agent.session_id);
                self.term.print(&text);
            }
            Slash::Undo => self.undo(),
            Slash::Attach => self.attach(args),
            Slash::Detach => self.detach(args),
            Slash::Versions => self.versions(args),
        }
        Flow::Continue
    }

    /// SessionEnd for the current session, once its SessionStart fired.
    fn end_session(&mut self, reason: &str) {
        if self.session_start.is_some() || self.agent.session_id.is_empty() {
            return;
        }
        let mut sink = ReplSink::new(
            &mut self.term,
            &mut self.lines,
            &mut self.titles,
            self.interactive,
            None,
        );
        self.agent.session_end(reason, &mut sink);
    }

    /// Makes `sid` current (empty: a new session, created with the next prompt). Grants given
    /// with "always this session" belong to the session they were given in, and so do background
    /// jobs: the old session's are killed.
    fn switch_to(&mut self, sid: String) {
        self.end_session(if sid.is_empty() { "clear" } else { "resume" });
        crate::tools::jobs::end_session(&self.agent.session_id);
        self.session_start = Some(if sid.is_empty() { "startup" } else { "resume" });
        self.agent.session_id = sid;
        self.fresh = false;
        self.term.forget_todos();
        let p = &self.agent.permissions;
        let auto = p.auto.clone();
        self.agent.permissions =
            Permissions::new(p.yolo, p.allowed_tools.clone()).with_claude(p.claude.clone());
        self.agent.permissions.auto = auto;
    }

    /// `/sandbox [MODE]`: shows the sandbox in force, or puts the session's commands in another
    /// (crush(1) SECURITY, sandbox). Off also ends the auto approval mode, which relies on it.
    fn sandbox_command(&mut self, args: &str) {
        use crate::config::sandbox as settings;
        let mode = args.trim();
        if !mode.is_empty() {
            let Some(loaded) = self.agent.config.as_ref() else {
                return self
                    .term
                    .error("no configuration to build the sandbox from");
            };
            let flags = settings::Flags {
                mode: Some(mode.to_string()),
                network: false,
                auto: false,
            };
            match settings::session(loaded, &flags) {
                Ok(sb) => {
                    if sb.is_none() && self.agent.permissions.auto.take().is_some() {
                        self.term.note(
                            "The auto approval mode ends with the sandbox: commands ask again.",
                        );
                    }
                    self.agent.sandbox = sb;
                }
                Err(e) => return self.term.error(&e.to_string()),
            }
        }
        self.term.print(&format!(
            "sandbox  {}\n",
            settings::describe(self.agent.sandbox.as_deref())
        ));
    }

    fn resume(&mut self, args: &str) {
        let id = args.trim();
        if id.is_empty() {
            self.term
                .error("usage: /resume ID (an id or unique prefix; /sessions lists them)");
            return;
        }
        let s = match self.ctx.store.resolve_session(id) {
            Ok(s) => s,
            Err(e) => {
                self.term
                    .error(&format!("{e}; /sessions lists this project's sessions"));
                return;
            }
        };
        let s = match app::top_level(s) {
            Ok(s) => s,
            Err(e) => {
                self.term.error(&e.to_string());
                return;
            }
        };
        self.term.note(&format!(
            "Resumed session {} “{}” ({} messages)",
            short_id(&s.id),
            s.title,
            s.message_count
        ));
        self.switch_to(s.id);
    }

    /// `/model`, `/option`, `/permissions`: the crushrc commands, applied to this session's runtime
    /// layer only (crush(1) INTERACTIVE SESSION). Without arguments they show the current values.
    fn session_config(&mut self, command: &str, args: &str) -> Result<String, String> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let line = match (command, words.as_slice()) {
            ("model", []) => return self.model_command(),
            ("option", []) => return self.option_command(),
            ("permissions", []) => return self.permissions_command(),
            // `/model P/M` is short for `/model large P/M`.
            ("model", [name]) if !matches!(*name, "large" | "small") => {
                format!("model large {name}")
            }
            _ => format!("{command} {args}"),
        };
        let done = self.agent.apply_user_command(&line)?;
        let Some(cfg) = self.agent.config.as_ref() else {
            return Ok(done.text);
        };
        if command == "model" {
            self.small = cfg.resolve_model(None, true).ok();
        }
        self.term.progress = cfg.config.options.progress != Some(false) && !self.quiet;
        self.term.preview_lines = crate::tools::preview_lines(&cfg.config.options);
        Ok(format!(
            "{} (for this session only)\n",
            done.text.trim_end()
        ))
    }

    /// Warnings of MCP servers that arrived while the prompt waited (a server that failed to
    /// start); those of a turn are reported by the turn.
    fn mcp_warnings(&mut self) {
        let warnings = match &self.agent.mcp {
            Some(m) => m.manager().take_warnings(),
            None => return,
        };
        for w in warnings {
            self.term.error(&w);
        }
    }

    /// `/mcp`: the servers; `/mcp add|rm ...`: for this session; `/mcp login NAME`.
    fn mcp_command(&mut self, args: &str) {
        let Some(m) = &self.agent.mcp else {
            return self.term.error("this session has no MCP servers");
        };
        let manager = m.manager().clone();
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] | ["list"] => {
                manager.wait_ready(Some(app::mcp_wait()));
                let text = crate::commands::mcp::list_text(&manager.statuses());
                self.term.print(&text);
            }
            ["add" | "rm" | "remove", ..] => match self.session_config("mcp", args) {
                Ok(msg) => {
                    self.term.print(&msg);
                    self.mcp_warnings();
                }
                Err(e) => self.term.error(&e),
            },
            ["login", name] => {
                let cwd = self.ctx.loaded.cwd.clone();
                self.term
                    .note(&format!("authorizing MCP server '{name}' in your browser…"));
                let term = std::cell::RefCell::new(&mut self.term);
                let open = |url: &str| match crate::mcp::oauth::browser_host(url) {
                    Ok(host) => {
                        term.borrow_mut().note(&format!(
                            "opening your browser at {host}; if it does not open, visit:\n{url}"
                        ));
                        let _ = crate::mcp::oauth::open_browser(url, &cwd);
                    }
                    Err(e) => term.borrow_mut().error(&e.to_string()),
                };
                let r = manager.login(name, &open, crate::commands::mcp::login_wait());
                match r {
                    Ok(()) => self.term.note(&format!("MCP server '{name}' is authorized.")),
                    Err(e) => self.term.error(&e.to_string()),
                }
            }
            _ => self.term.error(
                "usage: /mcp | /mcp add NAME --command CMD [--args A]... | /mcp rm NAME | /mcp login NAME",
            ),
        }
    }

    /// `/sessions` on a terminal: the sessions as a pick list; the one picked is resumed.
    fn pick_session(&mut self) {
        let list = match self.ctx.store.list_sessions() {
            Ok(l) if l.is_empty() => return self.term.note("No sessions yet."),
            Ok(l) => l,
            Err(e) => return self.term.error(&e.to_string()),
        };
        let current = list
            .iter()
            .position(|s| s.id == self.agent.session_id)
            .unwrap_or(0);
        let items = list
            .iter()
            .map(|s| {
                let mark = if s.id == self.agent.session_id {
                    " (current)"
                } else {
                    ""
                };
                format!(
                    "{}  {}{mark}",
                    short_id(&s.id),
                    crate::visible::line(&s.title)
                )
            })
            .collect();
        match self.lines.pick(&mut self.term, items, current) {
            Some(Some(i)) if list[i].id != self.agent.session_id => {
                let id = short_id(&list[i].id).to_string();
                self.resume(&id);
            }
            Some(_) => {}
            None => {
                let cur = Some(self.agent.session_id.as_str()).filter(|s| !s.is_empty());
                self.term.print(&sessions::list_text(&list, cur));
            }
        }
    }

    /// `/model` on a terminal: the models, then the configured providers' models as a pick
    /// list; the one picked becomes the large model for this session.
    fn pick_model(&mut self) {
        if let Ok(text) = self.model_command() {
            self.term.print(&text);
        }
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        let models = ready_models(cfg, true);
        if models.is_empty() {
            return self
                .term
                .note("No configured provider has models to pick from.");
        }
        let m = &self.agent.model;
        let current = format!("{}/{}", m.provider.id, m.model.id);
        let at = models
            .iter()
            .position(|(id, _)| *id == current)
            .unwrap_or(0);
        let items = models
            .iter()
            .map(|(id, name)| {
                if name.is_empty() || name == id {
                    id.clone()
                } else {
                    format!("{id}  {name}")
                }
            })
            .collect();
        self.term
            .note("Pick the large model for this session (/model small P/M sets the small one):");
        match self.lines.pick(&mut self.term, items, at) {
            Some(Some(i)) if models[i].0 != current => {
                let line = format!("large {}", models[i].0);
                match self.session_config("model", &line) {
                    Ok(msg) => self.term.print(&msg),
                    Err(e) => self.term.error(&e),
                }
            }
            _ => {}
        }
    }

    fn model_command(&mut self) -> Result<String, String> {
        let small = match self.small_model() {
            Ok(m) => format!("{}/{}", m.provider.id, m.model.id),
            Err(e) => format!("none ({e})"),
        };
        let m = &self.agent.model;
        Ok(format!(
            "large  {}/{}\nsmall  {small}\n",
            m.provider.id, m.model.id
        ))
    }

    fn option_command(&mut self) -> Result<String, String> {
        Ok(format!(
            "progress  {}\n",
            if self.term.progress { "true" } else { "false" }
        ))
    }

    fn permissions_command(&mut self) -> Result<String, String> {
        let p = &self.agent.permissions;
        let tools: Vec<&str> = self.agent.tools.iter().map(|t| t.name()).collect();
        Ok(format!(
            "yolo           {}\nallowed_tools  {}\ntools          {}\n",
            p.yolo,
            if p.allowed_tools.is_empty() {
                "(none)".to_string()
            } else {
                p.allowed_tools.join(" ")
            },
            tools.join(" ")
        ))
    }

    fn current(&mut self) -> Option<Session> {
        if self.agent.session_id.is_empty() {
            self.term
                .note("No session yet: it starts with your first prompt.");
            return None;
        }
        match self.ctx.store.resolve_session(&self.agent.session_id) {
            Ok(s) => Some(s),
            Err(e) => {
                self.term.error(&e.to_string());
                None
            }
        }
    }

    /// `/undo`: the files of the session's last change by a tool get their content back; the
    /// session records it, so the model learns it with the next prompt.
    fn undo(&mut self) {
        let Some(s) = self.current() else { return };
        match crate::commands::files::undo(self.ctx.store, &s.id) {
            Ok(done) => {
                self.term.note(&done);
                let msg = NewMessage {
                    role: Role::User,
                    parts: vec![Part::Text {
                        text: format!("[/undo] {done}"),
                    }],
                    model: None,
                    provider: None,
                };
                if let Err(e) = self.ctx.store.add_message(&s.id, &msg) {
                    self.term
                        .error(&format!("cannot record the undo in the session: {e}"));
                }
            }
            Err(e) => self.term.error(&e),
        }
    }

    /// `/versions FILE`: the versions of a file kept in the session's history.
    fn versions(&mut self, args: &str) {
        let file = args.trim();
        if file.is_empty() {
            return self.term.error("usage: /versions FILE");
        }
        let Some(s) = self.current() else { return };
        let path = crate::tools::common::resolve_in(&self.agent.cwd, file);
        match crate::commands::files::versions(self.ctx.store, &s.id, &path) {
            Ok(text) => self.term.print(&text),
            Err(e) => self.term.error(&e),
        }
    }

    /// Loads `path` as an attachment; a file outside the project needs the user's yes, as a
    /// view there would (Ok(None): refused).
    fn attach_file(
        &mut self,
        path: &std::path::Path,
    ) -> Result<Option<crate::tools::attach::Attachment>, String> {
        use crate::tools::attach;
        if attach::outside(path, &self.agent.project_root) {
            let q = format!(
                "Attach {} (outside the project)? [y]es / [n]o",
                path.display()
            );
            let yes = matches!(
                self.lines.answer(&mut self.term, &q),
                Got::Line(l) if matches!(l.trim().to_ascii_lowercase().as_str(), "y" | "yes")
            );
            if !yes {
                self.term.note(&format!("{} not attached", path.display()));
                return Ok(None);
            }
        }
        attach::load(path, &self.agent.cwd).map(Some)
    }

    /// `/attach FILE`: a file for the next prompt; without FILE, what is attached.
    fn attach(&mut self, args: &str) {
        let file = args.trim();
        if file.is_empty() {
            if self.attachments.is_empty() {
                self.term
                    .note("Nothing attached. /attach FILE adds a file to your next prompt.");
            }
            let list: Vec<String> = self.attachments.iter().map(|a| a.describe()).collect();
            for l in list {
                self.term.note(&format!("attached {l}"));
            }
            return;
        }
        let path = crate::tools::common::resolve_in(&self.agent.cwd, file);
        match self.attach_file(&path) {
            Ok(Some(a)) => {
                self.term.note(&format!(
                    "attached {}; it goes with your next prompt",
                    a.describe()
                ));
                self.attachments.push(a);
            }
            Ok(None) => {}
            Err(e) => self.term.error(&e),
        }
    }

    /// `/detach [FILE]`: drops one attached file, or all of them.
    fn detach(&mut self, args: &str) {
        let file = args.trim();
        let before = self.attachments.len();
        if file.is_empty() {
            self.attachments.clear();
        } else {
            self.attachments.retain(|a| a.path != file);
        }
        let n = before - self.attachments.len();
        self.term.note(&match n {
            0 if file.is_empty() => "Nothing was attached.".to_string(),
            0 => format!("{file} is not attached (/attach lists what is)"),
            1 => "Detached 1 file.".to_string(),
            n => format!("Detached {n} files."),
        });
    }

    /// `/todos`: the session's task list as a checklist.
    /// `/plan [off]`: plan mode on (the next prompts plan) or off.
    fn plan_mode(&mut self, args: &str) {
        match args.trim() {
            "" => {
                self.agent.plan_mode = true;
                self.term.note(
                    "plan mode: only read-only tools; the model ends with a plan, then you choose how to go on (/plan off leaves it)",
                );
            }
            "off" => {
                self.agent.plan_mode = false;
                self.term
                    .note("plan mode off: all tools, the usual permissions");
            }
            other => self
                .term
                .error(&format!("/plan takes nothing or 'off', not '{other}'")),
        }
    }

    /// After a plan turn: keeps the plan (crush(1) PLAN MODE) and offers what comes next.
    fn after_plan(&mut self, r: &TurnResult) {
        match self.agent.keep_plan(r) {
            Ok(Some((_, file))) => {
                if let Some(f) = file {
                    self.term.note(&format!("the plan is in {}", f.display()));
                }
            }
            Ok(None) => return,
            Err(e) => {
                self.term.error(&e.to_string());
                return;
            }
        }
        let question = "Plan ready: [1] code  [2] code, no asking  [3] revise  [4] keep planning";
        loop {
            let line = match self.lines.answer(&mut self.term, question) {
                Got::Line(l) => l,
                Got::Eof | Got::Interrupt => {
                    self.term.newline_on_terminal();
                    self.term.note("still planning");
                    return;
                }
            };
            if !self.interactive {
                self.term.note(line.trim());
            }
            match line.trim() {
                "1" => return self.code_the_plan(false),
                "2" => return self.code_the_plan(true),
                "3" => {
                    let feedback = match self.lines.answer(&mut self.term, "What should change?") {
                        Got::Line(l) if !l.trim().is_empty() => l,
                        _ => {
                            self.term.note("still planning");
                            return;
                        }
                    };
                    if !self.interactive {
                        self.term.note(feedback.trim());
                    }
                    return self.prompt(&format!("Revise the plan: {}", feedback.trim()));
                }
                "4" | "" => {
                    self.term
                        .note("still planning: your next prompt continues the plan");
                    return;
                }
                _ => self.term.note("answer 1, 2, 3 or 4"),
            }
        }
    }

    /// Leaves plan mode and has the model carry the plan out; `auto`: with the auto approval
    /// mode's approvals (commands and writes inside the project run without asking).
    fn code_the_plan(&mut self, auto: bool) {
        self.agent.plan_mode = false;
        if auto {
            self.agent.permissions.auto = Some(self.agent.project_root.clone());
        }
        self.term.note(if auto {
            "coding: commands and in-project writes run without asking"
        } else {
            "coding, with the usual permissions"
        });
        self.prompt("The plan is approved: carry it out now.");
    }

    fn todos(&mut self) {
        let Some(s) = self.current() else { return };
        match self.ctx.store.todos(&s.id) {
            Ok(text) => {
                let list = crate::tools::todos::from_column(text.as_deref().unwrap_or(""));
                if list.is_empty() {
                    self.term.note("No tasks in this session.");
                } else {
                    self.term.checklist(&crate::tools::todos::checklist(&list));
                }
            }
            Err(e) => self.term.error(&e.to_string()),
        }
    }

    fn cost(&mut self) {
        let Some(s) = self.current() else { return };
        let rows = match self.ctx.store.usage_rows(&s.id) {
            Ok(r) => r,
            Err(e) => return self.term.error(&e.to_string()),
        };
        let unpriced = rows.iter().filter(|r| r.cost.is_none()).count();
        let cost = if unpriced == rows.len() && !rows.is_empty() {
            "unpriced (the model has no prices)".to_string()
        } else if unpriced > 0 {
            format!(
                "${:.4} (+ {unpriced} unpriced call{} not counted)",
                s.cost,
                if unpriced == 1 { "" } else { "s" }
            )
        } else {
            format!("${:.4}", s.cost)
        };
        // Tokens a server did not report are unknown, never 0 (crush(1) USAGE AND COST).
        let unknown = rows.iter().filter(|r| r.usage.is_none()).count();
        let tokens = |n: i64| match unknown {
            0 => n.to_string(),
            u if u == rows.len() => "unknown (the server reported no usage)".to_string(),
            u => format!("{n} (+ {u} call{} unknown)", if u == 1 { "" } else { "s" }),
        };
        // The context size comes from the last call that reported usage or was estimated.
        let estimated = rows
            .iter()
            .rev()
            .find(|r| r.usage.is_some() || r.price_source == "estimated")
            .is_some_and(|r| r.usage.is_none());
        let context = if estimated {
            format!("~{} (estimated)", s.context_tokens)
        } else {
            s.context_tokens.to_string()
        };
        let mut out = format!(
            "session      {} “{}”\nmodel calls  {}\ntokens in    {}\ntokens out   {}\ncontext      {context}\ncost         {cost}",
            short_id(&s.id),
            s.title,
            rows.len(),
            tokens(s.total_prompt_tokens),
            tokens(s.total_completion_tokens),
        );
        out.push('\n');
        self.term.print(&out);
    }

    fn export(&mut self, args: &str) {
        let mut format = ExportFormat::Markdown;
        let mut file: Option<&str> = None;
        let mut words = args.split_whitespace();
        while let Some(w) = words.next() {
            let f = match w {
                "--json" => Some(ExportFormat::Json),
                "--format" => match words.next().and_then(ExportFormat::parse) {
                    Some(f) => Some(f),
                    None => return self.term.error("--format takes md or json"),
                },
                _ => ExportFormat::parse(w),
            };
            match (f, file) {
                (Some(f), _) => format = f,
                (None, None) => file = Some(w),
                (None, Some(_)) => {
                    return self.term.error("usage: /export [md|json] [FILE]");
                }
            }
        }
        let Some(s) = self.current() else { return };
        let text = match sessions::export_text(self.ctx.store, &s, format) {
            Ok(t) => t,
            Err(e) => return self.term.error(&e.to_string()),
        };
        match file {
            None => self.term.print(&text),
            Some(f) => {
                let path = self.agent.cwd.join(f);
                match std::fs::write(&path, text) {
                    Ok(()) => self.term.note(&format!(
                        "Wrote session {} to {}",
                        short_id(&s.id),
                        path.display()
                    )),
                    Err(e) => self
                        .term
                        .error(&format!("cannot write {}: {e}", path.display())),
                }
            }
        }
    }

    /// `/history [N]`: the last N prompts of the project, oldest first.
    fn history(&mut self, args: &str) {
        let n = match args.trim() {
            "" => 20,
            a => match a.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return self
                        .term
                        .error("usage: /history [N] (N: how many, default 20)");
                }
            },
        };
        let loaded;
        let entries = match self.lines.editor() {
            Some(e) => e.history().entries(),
            None => {
                let (h, warning) = History::load(&history_path(&self.ctx), history::CAP);
                if let Some(w) = warning {
                    self.term.note(&w);
                }
                loaded = h;
                loaded.entries()
            }
        };
        if entries.is_empty() {
            return self.term.note("No prompts in the history yet.");
        }
        let from = entries.len().saturating_sub(n);
        let mut out = String::new();
        for (i, e) in entries.iter().enumerate().skip(from) {
            out.push_str(&format!("{:>5}  {}\n", i + 1, e.replace('\n', " ⏎ ")));
        }
        self.term.print(&out);
    }

    /// `/compact`: a summary of the session, stored in it as a summary message; later turns
    /// start from it (the same as auto-summarize, on demand).
    fn compact(&mut self) {
        if self.current().is_none() {
            return;
        }
        self.cancel.store(false, Ordering::SeqCst);
        self.term.start_activity();
        self.term.status("summarizing");
        let mut sink = ReplSink::new(
            &mut self.term,
            &mut self.lines,
            &mut self.titles,
            self.interactive,
            None,
        );
        let got = self.agent.summarize(&mut sink);
        self.cancel.store(false, Ordering::SeqCst);
        self.term.clear_status();
        match got {
            Ok(summary) => {
                let cost = match summary.cost {
                    Some(c) => format!("${c:.4}"),
                    None => "unpriced".to_string(),
                };
                self.term.note(&format!(
                    "Compacted: the session continues from a summary of {} characters (summary call: {cost}).",
                    summary.text.len()
                ));
            }
            Err(e) => self
                .term
                .error(&format!("compact: {e}; the session is unchanged")),
        }
    }
}

/// Where the text of a `/help` row starts.
pub const HELP_AT: usize = 36;

/// The text of `/help`, for 80 columns (`Term::print` wraps it to a narrower terminal).
pub fn help_text() -> String {
    const W: usize = wrap::DEFAULT_COLUMNS;
    let mut s = wrap::fill(
        "Type a prompt and press Enter. Multi-line input: a line `{` … a line `}` (or `{tag` … \
         `tag}`), or end a line with a backslash. `!COMMAND` runs a shell command and records it \
         in the session. A first word /NAME must name a command, skill or custom command; start \
         a prompt with `//` to send a leading `/` (a path such as /usr/bin/foo is sent as text).",
        W,
        "",
        "",
    );
    s.push_str("\n\nCommands (any unique prefix works):\n");
    for (_, name, args, about) in SLASH_COMMANDS {
        let head = if args.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {args}")
        };
        wrap::row(&mut s, &head, about, HELP_AT, W);
    }
    s.push('\n');
    s.push_str(&wrap::fill(
        "Ctrl-C cancels a running turn (the partial answer is kept); at the prompt, press it twice \
         to quit (exit 130). Ctrl-D quits.",
        W,
        "",
        "",
    ));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_reads_short() {
        assert_eq!(
            [850, 1234, 128_400, 200_000, 1_234_567].map(tokens),
            ["850", "1.2k", "128k", "200k", "1.2M"]
        );
        let mut m = Meter {
            model: "m".into(),
            window: 200_000,
            context: 0,
            cost: 0.0,
            budget: None,
        };
        assert_eq!(m.line(), "m");
        let u = crate::llm::Usage {
            input: 1000,
            output: 200,
            cache_read: 3000,
            cache_write: 0,
        };
        m.add("m", Some(&u), Some(0.01));
        m.add("other", Some(&u), None);
        assert_eq!(m.line(), "m · 4.2k/200k context · $0.0100");
        m.budget = Some(0.5);
        assert_eq!(
            m.line(),
            "m · 4.2k/200k context · $0.0100 of $0.5000 budget"
        );
    }
}
