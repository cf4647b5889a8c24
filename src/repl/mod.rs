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

mod commands;
mod complete;
mod completion;
mod custom;
mod editor;
mod history;
mod init;
pub(crate) mod input;
mod keys;
mod markdown;
mod notify;
mod pick;
mod reader;
pub(crate) mod render;
mod shell;
mod sink;
mod titles;
mod tty;

use crate::agent::{Agent, Stop, TurnResult, title};
use crate::app::Global;
use crate::app::{self, AppError, Context};
use crate::commands::sessions::short_id;
use crate::config::ResolvedModel;
use crate::exit::ExitCode;
use crate::llm::{Part, Role};
use crate::store::{NewMessage, Session};
use completion::Completions;
use editor::Editor;
use history::History;
use input::{Assembler, Fed, Input};
use reader::{Got, Lines, Reader};
use render::Term;
use sink::{Meter, ReplSink};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use titles::{SERIAL_TITLE_WAIT, TITLE_WAIT, TitleJob};

/// The interactive session's own flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ReplArgs {
    pub quiet: bool,
}

const WAITING: &str = "waiting for the model";

struct Repl {
    ctx: Context,
    global: Global,
    agent: Agent,
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

pub(crate) fn run(global: &Global, args: &ReplArgs) -> Result<ExitCode, AppError> {
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
    let resumed = app::session_to_continue(&ctx.store, global)?;
    let sid = resumed.as_ref().map(|s| s.id.clone()).unwrap_or_default();
    let mut agent = app::build_agent(&ctx, model, sid, global.yolo, Some(app::mcp_wait()));
    agent.policy.plan_mode = global.plan;
    // A Ctrl-C while the configuration loaded (a slow crushrc or `$(...)`) means: stop.
    if cancel.swap(false, Ordering::SeqCst) {
        return Ok(crate::signal::interrupted());
    }
    let progress = !args.quiet && ctx.loaded.config.options.progress != Some(false);
    let interactive = std::io::stdin().is_terminal();
    let mut term = Term::detect(progress);
    term.preview_lines = crate::tools::preview_lines(ctx.loaded.config.options.tool_preview_lines);
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
                store: &self.ctx.store,
                config: self.agent.config.as_ref().unwrap_or(&self.ctx.loaded),
                tools: self.agent.toolkit.tools.iter().map(|t| t.name()).collect(),
                cwd: &self.agent.workspace.cwd,
                mcp: self.agent.toolkit.mcp.as_ref().map(|m| m.manager()),
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
        if let Some(m) = &self.agent.toolkit.mcp {
            m.manager().shutdown();
        }
        if !self.agent.session.id.is_empty() {
            let short = short_id(&self.agent.session.id).to_string();
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
    fn ensure_session(&mut self) -> Result<(), crate::store::StoreError> {
        if !self.agent.session.id.is_empty() {
            return Ok(());
        }
        let s = self.ctx.store.create_session(title::PLACEHOLDER, None)?;
        self.agent.session.id = s.id;
        self.fresh = true;
        Ok(())
    }

    fn small_model(&self) -> Result<ResolvedModel, crate::config::ConfigError> {
        if let Some(m) = &self.small {
            return Ok(m.clone());
        }
        // The session's configuration: `/model small` changes it.
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        // `-m` alone: the chosen model titles too, rather than a configured large one.
        if cfg.config.models.small.is_none() && self.global.model.is_some() {
            return Ok(self.agent.model.clone());
        }
        cfg.resolve_model(None, true)
    }

    fn debug(&mut self, msg: &str) {
        // The session's configuration: `/option debug true` changes it.
        let cfg = self.agent.config.as_ref().unwrap_or(&self.ctx.loaded);
        if cfg.config.options.debug {
            self.term.note(&format!("debug: {msg}"));
        }
    }

    fn prompt(&mut self, text: &str) {
        self.send(text, None);
    }

    /// Sends `text` as a turn; with `fork` (the line as typed, how it runs) `text` is the task
    /// of a forked skill's sub-agent (crush(1) SKILLS AND COMMANDS, Forked skills).
    fn send(&mut self, text: &str, fork: Option<(&str, &crate::agent::subagent::ChildSpec)>) {
        // A title still out to a local server waits for nothing but itself: the next turn
        // goes once it is back (crush(1) CONFIGURATION, side_requests).
        if std::mem::take(&mut self.serial_title) {
            self.poll_titles(SERIAL_TITLE_WAIT);
        }
        if let Err(e) = self.ensure_session() {
            self.term.error(&format!("cannot create a session: {e}"));
            return;
        }
        // `/attach`ed files, then the files the prompt names as `@path`; a forked skill's
        // sub-agent takes none (they wait for the next prompt).
        let mut attached = if fork.is_some() {
            Vec::new()
        } else {
            std::mem::take(&mut self.attachments)
        };
        let mentions = match fork {
            Some(_) => Vec::new(),
            None => crate::tools::attach::mentions(text, &self.agent.workspace.cwd),
        };
        for (_, path) in mentions {
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
        let result = match fork {
            Some((line, spec)) => self.agent.run_forked(line, text, spec, &mut sink),
            None => self.agent.run_turn_with(
                text,
                attached.iter().map(|a| a.part()).collect(),
                &mut sink,
            ),
        };
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
                if self.agent.policy.plan_mode {
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
        let (context, cost) = match self.ctx.store.resolve_session(&self.agent.session.id) {
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
        let id = self.agent.session.id.clone();
        match &self.budget_session {
            Some(armed) if *armed == id => return,
            // A new session got its id from its first turn: its budget stands.
            Some(armed) if armed.is_empty() && self.agent.policy.budget.is_some() => {
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
            Ok(b) => self.agent.policy.budget = Some(b).filter(|b| b.is_set()),
            Err(e) => {
                self.term.error(&e.to_string());
                self.agent.policy.budget = None;
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
                &|k| cfg.env.var(k),
                &notify::native_available,
            ),
            since: Instant::now(),
            after: notify::threshold(),
            cwd: self.agent.workspace.cwd.clone(),
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
        let ran = shell::run(
            command,
            &self.agent.workspace.cwd,
            &self.agent.workspace.env,
            &self.cancel,
            &mut |b| term.raw(b),
        );
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
        if let Err(e) = self.ctx.store.add_message(&self.agent.session.id, &msg) {
            self.term
                .error(&format!("cannot record the command in the session: {e}"));
        }
    }
}
