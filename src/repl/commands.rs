//! The REPL's built-in slash commands (the table is `input::SLASH_COMMANDS`): `/help`, the
//! session commands, the session-only configuration, attachments, plan mode, cost and export.

use super::completion::ready_models;
use super::history::{self, History};
use super::input::{SLASH_COMMANDS, Slash};
use super::reader::Got;
use super::sink::ReplSink;
use super::{Flow, Repl, history_path};
use crate::agent::TurnResult;
use crate::agent::permissions::Permissions;
use crate::agent::session_config::SessionConfigError;
use crate::app;
use crate::commands::sessions::{self, ExportFormat, short_id};
use crate::llm::{Part, Role};
use crate::store::{NewMessage, Session};
use crate::text::wrap;
use std::sync::atomic::Ordering;

/// Why a file could not be attached (what the attachment loader says of it).
#[derive(Debug)]
pub(super) struct AttachError(String);

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AttachError {}

impl Repl {
    pub(super) fn command(&mut self, cmd: Slash, args: &str) -> Flow {
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
                    let cur = Some(self.agent.session.id.as_str()).filter(|s| !s.is_empty());
                    self.term.print(&sessions::list_text(&list, cur));
                }
                Err(e) => self.term.error(&e.to_string()),
            },
            Slash::Resume => self.resume(args),
            Slash::Model | Slash::Option | Slash::Permissions => {
                let name = SLASH_COMMANDS
                    .iter()
                    .find(|c| c.cmd == cmd)
                    .map(|c| c.name)
                    .unwrap_or_default();
                match self.session_config(name, args) {
                    Ok(msg) => self.term.print(&msg),
                    Err(e) => self.term.error(&e.to_string()),
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
                let text = crate::tools::jobs::list_text(&self.agent.session.id);
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
    pub(super) fn end_session(&mut self, reason: &str) {
        if self.session_start.is_some() || self.agent.session.id.is_empty() {
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
    pub(super) fn switch_to(&mut self, sid: String) {
        self.end_session(if sid.is_empty() { "clear" } else { "resume" });
        crate::tools::jobs::end_session(&self.agent.session.id);
        self.session_start = Some(if sid.is_empty() { "startup" } else { "resume" });
        self.agent.session.id = sid;
        self.fresh = false;
        self.term.forget_todos();
        let p = &self.agent.policy.permissions;
        let auto = p.auto.clone();
        self.agent.policy.permissions =
            Permissions::new(p.yolo, p.allowed_tools.clone()).with_claude(p.claude.clone());
        self.agent.policy.permissions.auto = auto;
    }

    /// `/sandbox [MODE]`: shows the sandbox in force, or puts the session's commands in another
    /// (crush(1) SECURITY, sandbox). Off also ends the auto approval mode, which relies on it.
    pub(super) fn sandbox_command(&mut self, args: &str) {
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
                    if sb.is_none() && self.agent.policy.permissions.auto.take().is_some() {
                        self.term.note(
                            "The auto approval mode ends with the sandbox: commands ask again.",
                        );
                    }
                    self.agent.workspace.sandbox = sb;
                }
                Err(e) => return self.term.error(&e.to_string()),
            }
        }
        self.term.print(&format!(
            "sandbox  {}\n",
            settings::describe(self.agent.workspace.sandbox.as_deref())
        ));
    }

    pub(super) fn resume(&mut self, args: &str) {
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
    pub(super) fn session_config(
        &mut self,
        command: &str,
        args: &str,
    ) -> Result<String, SessionConfigError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let line = match (command, words.as_slice()) {
            ("model", []) => return Ok(self.model_command()),
            ("option", []) => return Ok(self.option_command()),
            ("permissions", []) => return Ok(self.permissions_command()),
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
        self.term.preview_lines =
            crate::tools::preview_lines(cfg.config.options.tool_preview_lines);
        Ok(format!(
            "{} (for this session only)\n",
            done.text.trim_end()
        ))
    }

    /// Warnings of MCP servers that arrived while the prompt waited (a server that failed to
    /// start); those of a turn are reported by the turn.
    pub(super) fn mcp_warnings(&mut self) {
        let warnings = match &self.agent.toolkit.mcp {
            Some(m) => m.manager().take_warnings(),
            None => return,
        };
        for w in warnings {
            self.term.error(&w);
        }
    }

    /// `/mcp`: the servers; `/mcp add|rm ...`: for this session; `/mcp login NAME`.
    pub(super) fn mcp_command(&mut self, args: &str) {
        let Some(m) = &self.agent.toolkit.mcp else {
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
                Err(e) => self.term.error(&e.to_string()),
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
    pub(super) fn pick_session(&mut self) {
        let list = match self.ctx.store.list_sessions() {
            Ok(l) if l.is_empty() => return self.term.note("No sessions yet."),
            Ok(l) => l,
            Err(e) => return self.term.error(&e.to_string()),
        };
        let current = list
            .iter()
            .position(|s| s.id == self.agent.session.id)
            .unwrap_or(0);
        let items = list
            .iter()
            .map(|s| {
                let mark = if s.id == self.agent.session.id {
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
            Some(Some(i)) if list[i].id != self.agent.session.id => {
                let id = short_id(&list[i].id).to_string();
                self.resume(&id);
            }
            Some(_) => {}
            None => {
                let cur = Some(self.agent.session.id.as_str()).filter(|s| !s.is_empty());
                self.term.print(&sessions::list_text(&list, cur));
            }
        }
    }

    /// `/model` on a terminal: the models, then the configured providers' models as a pick
    /// list; the one picked becomes the large model for this session.
    pub(super) fn pick_model(&mut self) {
        let text = self.model_command();
        self.term.print(&text);
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
                    Err(e) => self.term.error(&e.to_string()),
                }
            }
            _ => {}
        }
    }

    pub(super) fn model_command(&mut self) -> String {
        let small = match self.small_model() {
            Ok(m) => format!("{}/{}", m.provider.id, m.model.id),
            Err(e) => format!("none ({e})"),
        };
        let m = &self.agent.model;
        format!("large  {}/{}\nsmall  {small}\n", m.provider.id, m.model.id)
    }

    pub(super) fn option_command(&mut self) -> String {
        format!(
            "progress  {}\n",
            if self.term.progress { "true" } else { "false" }
        )
    }

    pub(super) fn permissions_command(&mut self) -> String {
        let p = &self.agent.policy.permissions;
        let tools: Vec<&str> = self.agent.toolkit.tools.iter().map(|t| t.name()).collect();
        format!(
            "yolo           {}\nallowed_tools  {}\ntools          {}\n",
            p.yolo,
            if p.allowed_tools.is_empty() {
                "(none)".to_string()
            } else {
                p.allowed_tools.join(" ")
            },
            tools.join(" ")
        )
    }

    pub(super) fn current(&mut self) -> Option<Session> {
        if self.agent.session.id.is_empty() {
            self.term
                .note("No session yet: it starts with your first prompt.");
            return None;
        }
        match self.ctx.store.resolve_session(&self.agent.session.id) {
            Ok(s) => Some(s),
            Err(e) => {
                self.term.error(&e.to_string());
                None
            }
        }
    }

    /// `/undo`: the files of the session's last change by a tool get their content back; the
    /// session records it, so the model learns it with the next prompt.
    pub(super) fn undo(&mut self) {
        let Some(s) = self.current() else { return };
        match crate::commands::files::undo(&self.ctx.store, &s.id) {
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
            Err(e) => self.term.error(&e.to_string()),
        }
    }

    /// `/versions FILE`: the versions of a file kept in the session's history.
    pub(super) fn versions(&mut self, args: &str) {
        let file = args.trim();
        if file.is_empty() {
            return self.term.error("usage: /versions FILE");
        }
        let Some(s) = self.current() else { return };
        let path = crate::paths::resolve_real(&self.agent.workspace.cwd, file);
        match crate::commands::files::versions(&self.ctx.store, &s.id, &path) {
            Ok(text) => self.term.print(&text),
            Err(e) => self.term.error(&e.to_string()),
        }
    }

    /// Loads `path` as an attachment; a file outside the project needs the user's yes, as a
    /// view there would (Ok(None): refused).
    pub(super) fn attach_file(
        &mut self,
        path: &std::path::Path,
    ) -> Result<Option<crate::tools::attach::Attachment>, AttachError> {
        use crate::tools::attach;
        if attach::outside(path, &self.agent.workspace.project_root) {
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
        attach::load(path, &self.agent.workspace.cwd)
            .map(Some)
            .map_err(|e| AttachError(e.to_string()))
    }

    /// `/attach FILE`: a file for the next prompt; without FILE, what is attached.
    pub(super) fn attach(&mut self, args: &str) {
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
        let path = crate::paths::resolve_real(&self.agent.workspace.cwd, file);
        match self.attach_file(&path) {
            Ok(Some(a)) => {
                self.term.note(&format!(
                    "attached {}; it goes with your next prompt",
                    a.describe()
                ));
                self.attachments.push(a);
            }
            Ok(None) => {}
            Err(e) => self.term.error(&e.to_string()),
        }
    }

    /// `/detach [FILE]`: drops one attached file, or all of them.
    pub(super) fn detach(&mut self, args: &str) {
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
    pub(super) fn plan_mode(&mut self, args: &str) {
        match args.trim() {
            "" => {
                self.agent.policy.plan_mode = true;
                self.term.note(
                    "plan mode: only read-only tools; the model ends with a plan, then you choose how to go on (/plan off leaves it)",
                );
            }
            "off" => {
                self.agent.policy.plan_mode = false;
                self.term
                    .note("plan mode off: all tools, the usual permissions");
            }
            other => self
                .term
                .error(&format!("/plan takes nothing or 'off', not '{other}'")),
        }
    }

    /// After a plan turn: keeps the plan (crush(1) PLAN MODE) and offers what comes next.
    pub(super) fn after_plan(&mut self, r: &TurnResult) {
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
    pub(super) fn code_the_plan(&mut self, auto: bool) {
        self.agent.policy.plan_mode = false;
        if auto {
            self.agent.policy.permissions.auto = Some(self.agent.workspace.project_root.clone());
        }
        self.term.note(if auto {
            "coding: commands and in-project writes run without asking"
        } else {
            "coding, with the usual permissions"
        });
        self.prompt("The plan is approved: carry it out now.");
    }

    pub(super) fn todos(&mut self) {
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

    pub(super) fn cost(&mut self) {
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
            .find(|r| r.usage.is_some() || r.price_source == crate::store::PriceSource::Estimated)
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

    pub(super) fn export(&mut self, args: &str) {
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
        let text = match sessions::export_text(&self.ctx.store, &s, format) {
            Ok(t) => t,
            Err(e) => return self.term.error(&e.to_string()),
        };
        match file {
            None => self.term.print(&text),
            Some(f) => {
                let path = self.agent.workspace.cwd.join(f);
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
    pub(super) fn history(&mut self, args: &str) {
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
    pub(super) fn compact(&mut self) {
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
pub(super) const HELP_AT: usize = 36;

/// The text of `/help`, for 80 columns (`Term::print` wraps it to a narrower terminal).
pub(super) fn help_text() -> String {
    const W: usize = crate::text::DEFAULT_COLUMNS;
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
    for c in SLASH_COMMANDS {
        let head = if c.args.is_empty() {
            format!("/{}", c.name)
        } else {
            format!("/{} {}", c.name, c.args)
        };
        wrap::row(&mut s, &head, c.about, HELP_AT, W);
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
