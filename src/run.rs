//! `crush run`: one non-interactive turn. stdout is a contract — the assistant's text, or one
//! JSON event per line with `--json` — and is written from this module only. Everything else
//! goes to stderr. What reaches a terminal from the model, a tool or a hook goes through
//! `crate::visible` (stdout only when it is a terminal: piped, it is the answer byte for byte).

use crate::agent::budget::Budget;
use crate::agent::{AgentEvent, Answer, Sink, Stop, TurnResult};
use crate::app::Global;
use crate::app::{self, AppError};
use crate::exit::ExitCode;
use crate::llm::Part;
use crate::tools::PermissionRequest;
use crate::tools::attach;
use serde::Serialize;
use serde_json::Value;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// `crush run`'s own flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RunArgs {
    pub prompt: Vec<String>,
    pub quiet: bool,
    pub json: bool,
    pub output: Option<PathBuf>,
    /// `--attach FILE`, in order.
    pub attach: Vec<PathBuf>,
    /// `--max-cost USD`: what this run may spend (crush(1) USAGE AND COST, Budget).
    pub max_cost: Option<f64>,
    /// `--max-cost-unpriced allow`: an unpriced model may run under a budget.
    pub allow_unpriced: bool,
    /// `--compact`: summarize the resumed session before the prompt (or instead of one).
    pub compact: bool,
}

/// Version of the `--json` event schema; bump on incompatible changes.
pub(crate) const JSON_SCHEMA_VERSION: u32 = 1;

/// One line of `crush run --json`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum JsonEvent<'a> {
    Session {
        v: u32,
        /// The UUID (kept from the first schema; `uuid` says the same).
        session_id: &'a str,
        /// The hash id lists show the start of (`crush sessions list`).
        id: String,
        uuid: &'a str,
        title: &'a str,
        resumed: bool,
        model: &'a str,
        provider: &'a str,
    },
    Text {
        v: u32,
        text: &'a str,
    },
    Reasoning {
        v: u32,
        text: &'a str,
    },
    Retry {
        v: u32,
        attempt: u32,
        wait_ms: u128,
        reason: &'a str,
    },
    ToolCall {
        v: u32,
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        v: u32,
        id: &'a str,
        name: &'a str,
        content: &'a str,
        is_error: bool,
    },
    /// One hook that ran.
    Hook {
        v: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<&'a str>,
        #[serde(flatten)]
        report: &'a crate::hooks::HookReport,
    },
    /// The session's task list changed (the whole list).
    Todos {
        v: u32,
        todos: &'a [crate::tools::todos::Todo],
    },
    PermissionRefused {
        v: u32,
        tool: &'a str,
        action: &'a str,
        description: &'a str,
        hint: &'a str,
    },
    Usage {
        v: u32,
        model: &'a str,
        /// Null when the provider reported no usage.
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cache_read_tokens: Option<u64>,
        cache_write_tokens: Option<u64>,
        /// USD; null when unpriced.
        cost: Option<f64>,
    },
    /// `--compact` summarized the session.
    Compacted {
        v: u32,
        session_id: &'a str,
        summary_chars: usize,
        /// USD of the summary call; null when unpriced.
        cost: Option<f64>,
    },
    Finish {
        v: u32,
        session_id: &'a str,
        id: String,
        uuid: &'a str,
        /// end_turn | max_tokens | content_filter | empty | max_steps | loop |
        /// permission_refused | hook_denied | hook_halted | budget | canceled | error
        reason: &'a str,
        steps: usize,
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
    },
}

/// Writes to stdout; a closed stdout (broken pipe) ends the process quietly with 0.
struct Out {
    /// `--json` lines held back until the session event, which comes first.
    held: Option<Vec<String>>,
}

impl Out {
    fn write(&mut self, s: &str) {
        crate::signal::write_stdout(s.as_bytes());
    }
    fn json(&mut self, ev: &JsonEvent) {
        let mut line = serde_json::to_string(ev).unwrap_or_else(|e| {
            format!("{{\"type\":\"error\",\"v\":{JSON_SCHEMA_VERSION},\"message\":\"{e}\"}}")
        });
        line.push('\n');
        match &mut self.held {
            Some(h) => h.push(line),
            None => self.write(&line),
        }
    }
}

/// The `--json` session event of a new session, sent once its title is stored (its first
/// prompt accepted) or the turn ended without one.
struct PendingSession {
    store: std::rc::Rc<crate::store::Store>,
    uuid: String,
    model: String,
    provider: String,
}

struct RunSink {
    out: Out,
    json: bool,
    quiet: bool,
    /// stdout is a terminal: text is shown as it streams (a retried call's text is replayed).
    /// Otherwise a call's text is held until the call can no longer be retried, so stdout holds
    /// exactly what the session stores.
    live: bool,
    /// The current call's text, not yet written (`live` false).
    held: String,
    /// Text printed for the current model call (to replay-skip after a retry).
    call_printed: String,
    /// How the current tool call's result is previewed (its tool says).
    preview: crate::tools::Preview,
    /// After a retry: what the user already saw of the call, and the new call's text so far.
    replay: Option<String>,
    redo: String,
    printed_any: bool,
    last_char: Option<char>,
    /// A new step began: separate its text from the previous step's.
    new_step: bool,
    /// The activity line on a terminal's stderr (crush(1) INTERACTIVE SESSION), unless `-q` or
    /// `options.progress false`.
    activity: Option<crate::activity::Activity>,
    /// Lines of a tool result's preview on stderr (`options.tool_preview_lines`).
    preview_lines: usize,
    /// Colour on stderr (a terminal, NO_COLOR unset or empty, TERM not dumb).
    color: bool,
    /// `--json` with a new session: its event waits for the stored title.
    pending_session: Option<PendingSession>,
}

impl RunSink {
    /// The session event with the title the session has now, then the lines held behind it.
    fn announce_session(&mut self) {
        let Some(p) = self.pending_session.take() else {
            return;
        };
        let title = match p.store.session(&p.uuid) {
            Ok(Some(s)) => s.title,
            _ => crate::agent::title::PLACEHOLDER.to_string(),
        };
        let held = self.out.held.take().unwrap_or_default();
        self.out.json(&session_event(
            &p.uuid,
            &title,
            false,
            &p.model,
            &p.provider,
        ));
        for l in held {
            self.out.write(&l);
        }
    }

    fn print_text(&mut self, t: &str) {
        let mut t = t;
        if !self.printed_any {
            t = t.trim_start();
            if t.is_empty() {
                return;
            }
        }
        if self.new_step && self.printed_any && self.last_char != Some('\n') {
            self.out.write("\n");
        }
        self.new_step = false;
        if self.live {
            self.out.write(&crate::visible::text(t));
        } else {
            self.out.write(t);
        }
        self.printed_any = true;
        self.last_char = t.chars().last().or(self.last_char);
    }

    /// Writes the text held for the call that just ended for good.
    fn release(&mut self) {
        if !self.held.is_empty() {
            let t = std::mem::take(&mut self.held);
            self.print_text(&t);
        }
    }

    fn text(&mut self, t: &str) {
        if self.json {
            self.out.json(&JsonEvent::Text {
                v: JSON_SCHEMA_VERSION,
                text: t,
            });
            return;
        }
        if !self.live {
            self.held.push_str(t);
            return;
        }
        if let Some(shown) = self.replay.take() {
            self.redo.push_str(t);
            if shown.starts_with(self.redo.as_str()) {
                self.replay = Some(shown);
                return;
            }
            let redo = std::mem::take(&mut self.redo);
            if let Some(rest) = redo.strip_prefix(shown.as_str()) {
                self.print_text(rest);
            } else {
                crate::ewriteln!(
                    "crush: the retried answer differs from the interrupted one; it follows in full"
                );
                self.print_text("\n");
                self.print_text(&redo);
            }
            self.call_printed = redo;
            return;
        }
        self.call_printed.push_str(t);
        self.print_text(t);
    }

    fn note(&self, s: &str) {
        if !self.quiet {
            crate::ewriteln!("{}", crate::visible::text(s));
        }
    }
}

/// What the activity line says after `ev`, and the moment it counts down to; `None` while the
/// answer streams to the same terminal.
fn activity_after(ev: &AgentEvent, live: bool) -> Option<(String, Option<std::time::Instant>)> {
    Some(match ev {
        AgentEvent::TextDelta(_) if live => return None,
        AgentEvent::ReasoningDelta(_) => ("thinking".into(), None),
        AgentEvent::Retry { attempt, wait, .. } => (
            format!("retry {attempt}"),
            Some(std::time::Instant::now() + *wait),
        ),
        AgentEvent::ToolPending(name) => (format!("preparing {name}"), None),
        AgentEvent::ToolCall { name, .. } => (format!("running {name}"), None),
        _ => ("waiting for the model".into(), None),
    })
}

impl RunSink {
    /// The sink of a run with `args`; `progress`: show the activity line on a terminal.
    fn new(args: &RunArgs, progress: bool, preview_lines: usize) -> RunSink {
        // Colour as on the REPL's terminal: NO_COLOR unset or empty, TERM not dumb.
        let color = std::io::stderr().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
        RunSink {
            out: Out { held: None },
            pending_session: None,
            preview_lines,
            color,
            json: args.json,
            quiet: args.quiet,
            live: std::io::stdout().is_terminal(),
            held: String::new(),
            call_printed: String::new(),
            preview: Default::default(),
            replay: None,
            redo: String::new(),
            printed_any: false,
            last_char: None,
            new_step: false,
            activity: (progress && !args.quiet && std::io::stderr().is_terminal()).then(|| {
                let mut a = crate::activity::Activity::new(color);
                a.start();
                a
            }),
        }
    }
}

impl Sink for RunSink {
    fn event(&mut self, ev: AgentEvent) {
        // Whatever the event writes goes on a clean row; the line comes back after.
        let after = self.activity.as_mut().and_then(|a| {
            a.hide();
            if let AgentEvent::TextDelta(t) | AgentEvent::ReasoningDelta(t) = &ev {
                a.received(t.len());
            }
            activity_after(&ev, self.live)
        });
        self.handle(ev);
        // Never inside a line of the answer on the same terminal.
        let at_line_start = !self.live || !self.printed_any || self.last_char == Some('\n');
        if let (Some(a), Some((what, until)), true) = (self.activity.as_mut(), after, at_line_start)
        {
            a.show(&what, until);
        }
    }

    fn ask(&mut self, _req: &PermissionRequest) -> Option<Answer> {
        None
    }
    fn can_ask(&self) -> bool {
        false
    }
}

impl RunSink {
    fn handle(&mut self, ev: AgentEvent) {
        let v = JSON_SCHEMA_VERSION;
        match ev {
            AgentEvent::TextDelta(t) => self.text(&t),
            AgentEvent::PromptAccepted(_) => self.announce_session(),
            AgentEvent::ReasoningDelta(t) => {
                if self.json {
                    self.out.json(&JsonEvent::Reasoning { v, text: &t });
                }
            }
            AgentEvent::Retry {
                attempt,
                wait,
                reason,
            } => {
                crate::ewriteln!(
                    "crush: {}",
                    crate::agent::retry_line(attempt, wait, &reason)
                );
                if self.json {
                    self.out.json(&JsonEvent::Retry {
                        v,
                        attempt,
                        wait_ms: wait.as_millis(),
                        reason: &reason,
                    });
                } else if !self.live {
                    // The failed attempt's text is void; the retry streams the answer anew.
                    self.held.clear();
                } else if !self.call_printed.is_empty() || self.replay.is_some() {
                    let shown = self.replay.take().unwrap_or_default() + &self.call_printed;
                    self.replay = Some(shown);
                    self.redo.clear();
                    self.call_printed.clear();
                }
            }
            AgentEvent::ToolCall {
                id,
                name,
                input,
                view,
            } => {
                self.preview = view.preview;
                self.release();
                self.new_step = true;
                self.call_printed.clear();
                self.replay = None;
                if self.json {
                    self.out.json(&JsonEvent::ToolCall {
                        v,
                        id: &id,
                        name: &name,
                        input: &input,
                    });
                } else {
                    self.note(&format!("[{name}] {}", crate::tools::key_argument(&input)));
                }
            }
            AgentEvent::ToolResult {
                id,
                name,
                content,
                is_error,
                diff,
            } => {
                if self.json {
                    self.out.json(&JsonEvent::ToolResult {
                        v,
                        id: &id,
                        name: &name,
                        content: &content,
                        is_error,
                    });
                } else if is_error {
                    let first = content.lines().next().unwrap_or("");
                    self.note(&format!("[{name}] error: {first}"));
                } else if let Some(d) = diff {
                    // What the change did, as the REPL shows it (nobody was asked).
                    if !self.quiet {
                        crate::ewrite!("{}", crate::tools::diff::painted(&d, self.color));
                    }
                } else {
                    for l in crate::tools::preview(self.preview, &content, self.preview_lines) {
                        self.note(&format!("  {}", crate::visible::line(&l)));
                    }
                }
            }
            AgentEvent::PermissionRefused { request, hint } => {
                crate::log::warn(&format!(
                    "refused {} ({}: {}): no one to ask in a non-interactive run",
                    request.tool, request.action, request.description
                ));
                crate::ewriteln!(
                    "crush: refused {} ({}: {}): a non-interactive run cannot ask for permission; to allow it, {hint}",
                    crate::visible::line(&request.tool),
                    request.action,
                    crate::visible::line(&request.description)
                );
                if self.json {
                    self.out.json(&JsonEvent::PermissionRefused {
                        v,
                        tool: &request.tool,
                        action: request.action,
                        description: &request.description,
                        hint: &hint,
                    });
                }
            }
            AgentEvent::Usage {
                usage, cost, model, ..
            } => {
                // Reported once a call has finished: its text is final.
                self.release();
                if self.json {
                    self.out.json(&JsonEvent::Usage {
                        v,
                        model: &model,
                        input_tokens: usage.map(|u| u.input),
                        output_tokens: usage.map(|u| u.output),
                        cache_read_tokens: usage.map(|u| u.cache_read),
                        cache_write_tokens: usage.map(|u| u.cache_write),
                        cost,
                    });
                }
            }
            AgentEvent::Notice(text) => crate::ewriteln!("crush: {}", crate::visible::text(&text)),
            AgentEvent::Hook {
                report,
                tool_call_id,
            } => {
                if self.json {
                    self.out.json(&JsonEvent::Hook {
                        v,
                        tool_call_id: tool_call_id.as_deref(),
                        report: &report,
                    });
                } else {
                    self.note(&report.line());
                }
            }
            AgentEvent::StepCommitted => {
                self.release();
                self.new_step = true;
                self.call_printed.clear();
                self.replay = None;
            }
            AgentEvent::ToolPending(_) => {}
            AgentEvent::Todos(todos) => {
                if self.json {
                    self.out.json(&JsonEvent::Todos { v, todos: &todos });
                }
            }
        }
    }
}

/// A piped or redirected stdin (FIFO or regular file); a terminal or /dev/null is ignored.
fn read_stdin_if_piped() -> Result<Option<Vec<u8>>, AppError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    // What fd 0 is, from a duplicate of it (std's fstat): a FIFO, a file or a socket is read.
    use std::os::fd::AsFd;
    let kind = match stdin
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
    {
        Ok(m) => m.file_type(),
        Err(_) => return Ok(None),
    };
    use std::os::unix::fs::FileTypeExt;
    if !(kind.is_fifo() || kind.is_file() || kind.is_socket()) {
        return Ok(None);
    }
    let mut buf = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut buf)
        .map_err(|e| AppError::Runtime(format!("cannot read stdin: {e}")))?;
    Ok(Some(buf))
}

/// The files of `--attach`, and an image piped on stdin (known by its bytes); the text piped
/// in otherwise.
fn attachments(
    global: &Global,
    args: &RunArgs,
    piped: Option<Vec<u8>>,
) -> Result<(Vec<Part>, Option<String>), AppError> {
    let cwd = app::working_dir(global)?;
    let mut out = Vec::new();
    for f in &args.attach {
        let path = crate::paths::resolve_real(&cwd, &f.to_string_lossy());
        let a = attach::load(&path, &cwd).map_err(|e| AppError::Usage(format!("--attach: {e}")))?;
        out.push(a.part());
    }
    let Some(bytes) = piped else {
        return Ok((out, None));
    };
    match crate::tools::image::sniff(&bytes) {
        Some(mime) => {
            let ext = mime.trim_start_matches("image/");
            let a = attach::from_bytes(&format!("stdin.{ext}"), bytes)
                .map_err(|e| AppError::Usage(format!("stdin: {e}")))?;
            out.push(a.part());
            Ok((out, None))
        }
        None => Ok((out, Some(String::from_utf8_lossy(&bytes).into_owned()))),
    }
}

/// The prompt of `crush run`'s arguments: when the first word is `/NAME` and names a custom
/// command, a user-invocable skill or an MCP prompt, the prompt it makes with the words after
/// it (`NAME=value` for named arguments); a `/NAME` that names none is a usage error naming the
/// close ones, before any model call. `//` escapes a leading slash, and a first word with a
/// second `/` (a path: `/usr/bin/foo is broken`) is text; anything else as typed.
///
/// With it, the fork of an entry whose frontmatter says `context: fork` (crush(1) SKILLS AND
/// COMMANDS, Forked skills).
fn command_prompt(
    args: &[String],
    session: &app::OpenSession,
) -> Result<(Made, Option<Fork>), AppError> {
    let joined = args.join(" ");
    let text = joined.trim_start();
    if text.starts_with("//") {
        return Ok((Made::Text(text[1..].to_string()), None));
    }
    let Some(line) = text.strip_prefix('/') else {
        return Ok((Made::Text(joined), None));
    };
    // One argument holding the whole line, or the shell's words.
    let (name, words, raw) = if args.len() == 1 {
        let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let words = crate::config::commands::split_words(rest)
            .unwrap_or_else(|_| rest.split_whitespace().map(str::to_string).collect());
        (name.to_string(), words, rest.to_string())
    } else {
        let name = args[0].trim().trim_start_matches('/');
        (name.to_string(), args[1..].to_vec(), args[1..].join(" "))
    };
    if crate::skills::catalog::is_path(&name) {
        return Ok((Made::Text(joined), None));
    }
    use crate::skills::catalog::{Catalog, for_run};
    let cat = Catalog::new(&session.commands, &session.skills, Vec::new());
    if let Some((entry, bound)) = for_run(&cat, &name, words.clone(), &raw)? {
        let fork = entry.fork().map(|f| Fork {
            name: entry.name.clone(),
            line: text.trim_end().to_string(),
            fork: f.clone(),
        });
        if let Some(segments) = entry.shell_segments(&bound) {
            let made = Made::Shell {
                name: entry.name.clone(),
                segments,
            };
            return Ok((made, fork));
        }
        let made = entry.render(&bound, None).map(Made::Text)?;
        return Ok((made, fork));
    }
    // Not a command or a skill: an MCP prompt, once the servers have started.
    let Some(m) = session.agent.toolkit.mcp.as_ref().map(|m| m.manager()) else {
        return Err(unknown_command(&name, &cat));
    };
    m.wait_ready(None);
    let cat = Catalog::new(&session.commands, &session.skills, m.prompts());
    match for_run(&cat, &name, words, &raw)? {
        Some((entry, bound)) => Ok((entry.render(&bound, Some(m)).map(Made::Text)?, None)),
        None => Err(unknown_command(&name, &cat)),
    }
}

/// A command that runs in a sub-agent: its full name, the line as typed, how it runs.
struct Fork {
    name: String,
    line: String,
    fork: crate::skills::fork::Fork,
}

/// `/NAME` names nothing in `cat`: the error, with the names it may have meant.
fn unknown_command(name: &str, cat: &crate::skills::catalog::Catalog) -> AppError {
    let names = cat.names();
    let close = crate::skills::catalog::near(name, names.iter().map(|n| n.full.as_str()));
    let mut msg = format!("unknown command /{name}");
    if !close.is_empty() {
        let list: Vec<String> = close.iter().map(|c| format!("/{c}")).collect();
        msg.push_str(&format!("; did you mean {}?", list.join(" or ")));
    }
    msg.push_str(
        " ('crush skills list' lists the commands; start the prompt with // to send a leading /)",
    );
    AppError::Usage(msg)
}

/// The prompt `crush run`'s arguments make.
enum Made {
    Text(String),
    /// A Claude Code command whose `` !`cmd` `` run first (its full name, its pieces).
    Shell {
        name: String,
        segments: Vec<crate::skills::catalog::Segment>,
    },
}

pub(crate) fn run(global: &Global, args: &RunArgs) -> Result<ExitCode, AppError> {
    if args.compact && global.session.is_none() && !global.continue_last {
        return Err(AppError::Usage(
            "--compact summarizes a session you continue: give -s ID or -C".into(),
        ));
    }
    let (attached, piped) = attachments(global, args, read_stdin_if_piped()?)?;
    let piped = piped.filter(|s| !s.trim().is_empty());
    let no_prompt = args.prompt.join(" ").trim().is_empty() && piped.is_none();
    if no_prompt && !args.compact {
        return Err(AppError::Usage(
            "no prompt: give one as arguments (crush run \"explain this\") or on stdin".into(),
        ));
    }
    if let Some(o) = &args.output
        && let Some(parent) = o.parent().filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|e| {
            AppError::Usage(format!(
                "-o {}: cannot create {}: {e}",
                o.display(),
                parent.display()
            ))
        })?;
    }

    let mut session = app::open_session(global)?;
    if args.compact {
        let code = compact(&mut session, args);
        if code != ExitCode::Success || no_prompt {
            if let Some(m) = &session.agent.toolkit.mcp {
                m.manager().shutdown();
            }
            return Ok(code);
        }
    }
    let (made, fork) = command_prompt(&args.prompt, &session)?;
    // Checked before anything runs: an agent or a model that cannot be had sends nothing.
    let fork = match fork {
        Some(f) => {
            let spec = session
                .agent
                .fork_spec(&f.fork)
                .map_err(|e| AppError::Usage(format!("/{}: {e}", f.name)))?;
            if !attached.is_empty() {
                return Err(AppError::Usage(format!(
                    "/{} runs in a sub-agent (context: fork), which takes no --attach",
                    f.name
                )));
            }
            Some((f.line, spec))
        }
        None => None,
    };
    let mut prompt = match made {
        Made::Text(t) => t,
        Made::Shell { name, segments } => {
            // Run as the bash tool runs a command, behind its permission rules: a refused one
            // sends nothing (exit 3, as any refusal).
            let mut sink = RunSink::new(args, false, session.preview_lines);
            let agent = &mut session.agent;
            let made = crate::skills::catalog::join_segments(&segments, &mut |cmd| {
                agent.run_command_shell(cmd, &mut sink)
            });
            match made {
                Ok(t) => t,
                Err(e) => {
                    crate::ewriteln!(
                        "crush: /{name} was not sent to the model: {}",
                        crate::visible::text(&e.to_string())
                    );
                    return Ok(ExitCode::Policy);
                }
            }
        }
    };
    if let Some(s) = piped {
        prompt = if prompt.trim().is_empty() {
            s
        } else {
            // A new session is named by what was asked, not by the diff or log piped in.
            session.agent.session.title_from = Some(prompt.clone());
            format!("{}\n\n{prompt}", s.trim_end())
        };
    }
    let fork = fork.as_ref().map(|(line, spec)| (line.as_str(), spec));
    run_turn(&mut session, args, &prompt, attached, fork)
}

/// `crush init`'s own arguments.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct InitArgs {
    /// What the user adds to the instructions.
    pub notes: Vec<String>,
    pub quiet: bool,
}

/// Asks on stderr whether `target` may be rewritten; the answer is a line of stdin (a
/// terminal, or a pipe: `echo y | crush init`).
fn confirm_overwrite(target: &std::path::Path) -> bool {
    crate::ewrite!(
        "{} exists: have the agent rewrite it? [y/N] ",
        crate::visible::line(&target.display().to_string())
    );
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    if !std::io::stdin().is_terminal() {
        crate::ewriteln!("{}", crate::visible::line(answer.trim()));
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// `crush init` (crush(1) SKILLS AND COMMANDS): one turn in which the agent explores the
/// project and writes `options.initialize_as` (AGENTS.md); it may write that file without
/// asking, and an existing one only after the user's yes.
pub(crate) fn init(global: &Global, args: &InitArgs) -> Result<ExitCode, AppError> {
    let ctx = app::open_run_context(global)?;
    let target = app::init_target(&ctx.loaded);
    let shown = target.display().to_string();
    let before = std::fs::metadata(&target).and_then(|m| m.modified()).ok();
    if before.is_some() && !confirm_overwrite(&target) {
        crate::ewriteln!("crush: {shown} is left as it is");
        return Ok(ExitCode::Policy);
    }
    app::mark_initialized(&ctx.loaded);
    let mut session = app::start_session(ctx, global)?;
    session.agent.policy.permissions.allow_file(target.clone());
    let run = RunArgs {
        quiet: args.quiet,
        ..RunArgs::default()
    };
    let prompt = crate::agent::prompt::init_prompt(&shown, &args.notes.join(" "));
    let code = run_turn(&mut session, &run, &prompt, Vec::new(), None)?;
    if code != ExitCode::Success {
        return Ok(code);
    }
    let after = std::fs::metadata(&target).and_then(|m| m.modified()).ok();
    if after.is_none() || after == before {
        crate::ewriteln!("crush: the agent did not write {shown}");
        return Ok(ExitCode::Failure);
    }
    if !args.quiet {
        crate::ewriteln!("crush: wrote {shown}");
    }
    Ok(ExitCode::Success)
}

/// The `--json` session event.
fn session_event<'a>(
    uuid: &'a str,
    title: &'a str,
    resumed: bool,
    model: &'a str,
    provider: &'a str,
) -> JsonEvent<'a> {
    JsonEvent::Session {
        v: JSON_SCHEMA_VERSION,
        session_id: uuid,
        id: crate::store::hashid::hash_id(uuid),
        uuid,
        title,
        resumed,
        model,
        provider,
    }
}

/// One turn of `prompt` in `session`, reported on stdout (and stderr) as `args` say.
/// The run's budget (crush(1) USAGE AND COST, Budget), counted from what the session has spent so far.
fn set_budget(agent: &mut crate::agent::Agent, args: &RunArgs) -> Result<(), AppError> {
    let Some(loaded) = &agent.config else {
        return Ok(());
    };
    let start = agent.session.store.session_spend(&agent.session.id)?;
    let budget = Budget::for_run(loaded, args.max_cost, args.allow_unpriced, start)
        .map_err(|e| AppError::Config(e.to_string()))?;
    agent.policy.budget = Some(budget);
    Ok(())
}

/// `crush run -s ID --compact` (or `-C --compact`): the session summarized as `/compact` does,
/// reported on stderr (and as a `compacted` event with `--json`).
fn compact(session: &mut app::OpenSession, args: &RunArgs) -> ExitCode {
    let mut sink = new_sink(session, args);
    if let Some(a) = sink.activity.as_mut() {
        a.show("summarizing", None);
    }
    let got = session.agent.summarize(&mut sink);
    sink.activity = None;
    let sid = session.agent.session.id.clone();
    let short = crate::commands::sessions::short_id(&sid);
    match got {
        Ok(summary) => {
            if args.json {
                sink.out.json(&JsonEvent::Compacted {
                    v: JSON_SCHEMA_VERSION,
                    session_id: &sid,
                    summary_chars: summary.text.chars().count(),
                    cost: summary.cost,
                });
            }
            let cost = match summary.cost {
                Some(c) => format!("${c:.4}"),
                None => "unpriced".to_string(),
            };
            sink.note(&format!(
                "crush: compacted session {short}: it continues from a summary of {} characters (summary call: {cost})",
                summary.text.chars().count()
            ));
            ExitCode::Success
        }
        Err(e) => {
            crate::ewriteln!(
                "crush: cannot compact session {short}: {}; the session is unchanged",
                crate::visible::text(&e.to_string())
            );
            ExitCode::Failure
        }
    }
}

/// The sink of a run: stdout as `args` say, the activity line on a terminal's stderr.
fn new_sink(session: &app::OpenSession, args: &RunArgs) -> RunSink {
    RunSink::new(args, session.progress, session.preview_lines)
}

fn run_turn(
    session: &mut app::OpenSession,
    args: &RunArgs,
    prompt: &str,
    attached: Vec<Part>,
    fork: Option<(&str, &crate::agent::subagent::ChildSpec)>,
) -> Result<ExitCode, AppError> {
    let mut sink = new_sink(session, args);
    let (uuid, model, provider) = (
        &session.agent.session.id,
        &session.agent.model.model.id,
        &session.agent.model.provider.id,
    );
    if args.json && session.resumed {
        sink.out
            .json(&session_event(uuid, &session.title, true, model, provider));
    } else if args.json {
        // A new session's title is stored with its first prompt (crush(1) SESSIONS).
        sink.out.held = Some(Vec::new());
        sink.pending_session = Some(PendingSession {
            store: session.agent.session.store.clone(),
            uuid: uuid.clone(),
            model: model.clone(),
            provider: provider.clone(),
        });
    }
    set_budget(&mut session.agent, args)?;
    let source = if session.resumed { "resume" } else { "startup" };
    session.agent.session_start(source, &mut sink);
    crate::log::info(&format!(
        "run: session {} ({}), model {}/{}",
        session.agent.session.id,
        if session.resumed { "resumed" } else { "new" },
        session.agent.model.provider.id,
        session.agent.model.model.id
    ));
    if let Some(a) = sink.activity.as_mut() {
        a.show("waiting for the model", None);
    }
    let result = match fork {
        // The session keeps the line as typed and the sub-agent's answer.
        Some((line, spec)) => session.agent.run_forked(line, prompt, spec, &mut sink),
        None => session.agent.run_turn_with(prompt, attached, &mut sink),
    };
    // Erased before the last words.
    sink.activity = None;
    // A canceled or failed call's text is what the session keeps of it.
    sink.release();
    if let Some(m) = &session.agent.toolkit.mcp {
        m.manager().shutdown();
        // What the servers reported after the last step.
        for w in m.manager().take_warnings() {
            crate::ewriteln!("crush: {w}");
        }
    }
    let result: TurnResult = result?;
    match session.agent.keep_plan(&result) {
        Ok(Some((_, Some(file)))) if !args.quiet && !args.json => {
            crate::ewriteln!("crush: the plan is in {}", file.display());
        }
        Ok(_) => {}
        Err(e) => crate::ewriteln!("crush: {e}"),
    }
    session.agent.session_end("other", &mut sink);
    if !args.json && sink.printed_any && sink.last_char != Some('\n') {
        sink.out.write("\n");
    }
    let error_text = match &result.stop {
        Stop::Error(e) => Some(e.to_string()),
        _ => None,
    };
    sink.announce_session();
    if args.json {
        sink.out.json(&JsonEvent::Finish {
            v: JSON_SCHEMA_VERSION,
            session_id: &session.agent.session.id,
            id: crate::store::hashid::hash_id(&session.agent.session.id),
            uuid: &session.agent.session.id,
            reason: result.stop.name(),
            steps: result.steps,
            text: &result.final_text,
            error: error_text.as_deref(),
        });
    }
    if let Some(o) = &args.output {
        std::fs::write(o, format!("{}\n", result.final_text.trim_end()))
            .map_err(|e| AppError::Runtime(format!("-o {}: cannot write: {e}", o.display())))?;
    }
    crate::log::info(&format!(
        "run: session {} finished: {} after {} step(s)",
        session.agent.session.id,
        result.stop.name(),
        result.steps
    ));
    // Named as every list names it: the short hash id, which `-s` takes back.
    let sid = &crate::commands::sessions::short_id(&session.agent.session.id);
    Ok(match &result.stop {
        Stop::EndTurn => ExitCode::Success,
        Stop::MaxTokens => {
            crate::ewriteln!(
                "crush: the answer was cut off at the model's output limit (session {sid})"
            );
            ExitCode::Success
        }
        Stop::ContentFilter | Stop::Empty => {
            if let Some(p) = result.stop.problem() {
                crate::ewriteln!("crush: {p} (session {sid})");
            }
            ExitCode::Failure
        }
        Stop::MaxSteps(n) => {
            crate::ewriteln!(
                "crush: stopped after {n} steps without finishing; continue with: crush run -s {sid} \"continue\""
            );
            ExitCode::Failure
        }
        Stop::Loop => {
            crate::ewriteln!(
                "crush: stopped: the model kept repeating the same tool call with the same result (session {sid})"
            );
            ExitCode::Failure
        }
        Stop::PermissionRefused => {
            crate::ewriteln!(
                "crush: the turn stopped because a tool call needed permission (session {sid})"
            );
            ExitCode::Policy
        }
        Stop::HookDenied(reason) => {
            crate::ewriteln!(
                "crush: a hook blocked the prompt; nothing was sent to the model: {}",
                crate::visible::text(reason)
            );
            ExitCode::Policy
        }
        Stop::HookHalted(reason) => {
            crate::ewriteln!(
                "crush: a hook halted the turn (session {sid}): {}",
                crate::visible::text(reason)
            );
            ExitCode::Policy
        }
        Stop::Budget(b) => {
            crate::ewriteln!("crush: {b}; the session {sid} was saved");
            ExitCode::Budget
        }
        Stop::Canceled => {
            crate::ewriteln!("crush: interrupted; the session {sid} was saved");
            crate::signal::interrupted()
        }
        Stop::Error(e) if e.is_context_overflow() => {
            crate::ewriteln!(
                "crush: {}\ncrush: the session {sid} no longer fits the model's context window; summarize it with: crush run -s {sid} --compact (or /compact in the REPL), then continue it",
                crate::visible::text(&e.to_string())
            );
            ExitCode::Failure
        }
        Stop::Error(e) => {
            crate::ewriteln!(
                "crush: {}\ncrush: the session {sid} was saved; retry with: crush run -s {sid} \"continue\"",
                crate::visible::text(&e.to_string())
            );
            ExitCode::Failure
        }
    })
}
