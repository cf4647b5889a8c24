//! How the REPL shows a turn: the agent's events on the terminal (or a pipe), the status
//! line's meter, and the questions a turn asks (permissions, the question tool, the budget).

use super::reader::{Got, Reader};
use super::render::Term;
use super::titles::{TitleJob, TitleStart, spawn_title};
use super::{WAITING, notify, pick};
use crate::agent::{AgentEvent, Answer, Sink, title};
use crate::tools::PermissionRequest;
use crate::tools::question::{Answer as QAnswer, Question};

/// Renders a turn and asks permission questions on the REPL's input.
pub(super) struct ReplSink<'a> {
    pub(super) term: &'a mut Term,
    pub(super) lines: &'a mut Reader,
    pub(super) interactive: bool,
    /// Ctrl-C while a question was open.
    pub(super) interrupted: bool,
    /// The user just refused a call: its error result needs no second line.
    pub(super) refused: bool,
    /// How the current call's result is previewed (its tool says).
    pub(super) preview: crate::tools::Preview,
    /// A new session's title, generated once its first prompt has passed the hooks.
    pub(super) title: Option<TitleStart>,
    /// The accepted prompt's title, held back until the turn's first call or its end
    /// (crush(1) CONFIGURATION, side_requests).
    pub(super) held_title: Option<(TitleStart, String)>,
    pub(super) titles: &'a mut Vec<TitleJob>,
    /// Sent when a question waits after a long turn.
    pub(super) notice: Option<notify::Notice>,
    /// Model, context and cost, in front of the status line.
    pub(super) meter: Option<Meter>,
    /// Diffs shown before a permission question, not shown again with the call's result.
    pub(super) diffs_shown: Vec<String>,
}

/// What the status line shows in front of what is going on: the model, the context used (of
/// its window) and the session's cost so far.
pub(super) struct Meter {
    pub(super) model: String,
    pub(super) window: u64,
    pub(super) context: u64,
    pub(super) cost: f64,
    /// The session's spend at which the budget stops (or asks), when one is set.
    pub(super) budget: Option<f64>,
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
    pub(super) fn new(
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
    pub(super) fn start_title(&mut self, t: TitleStart, prompt: String) {
        match spawn_title(t, prompt) {
            Ok(job) => self.titles.push(job),
            Err(e) => self
                .term
                .error(&format!("cannot start the title thread: {e}")),
        }
    }

    /// Starts a held-back title: the turn has ended.
    pub(super) fn release_title(&mut self) {
        if let Some((t, prompt)) = self.held_title.take() {
            self.start_title(t, prompt);
        }
    }

    /// The activity line, behind the meter.
    pub(super) fn status(&mut self, what: &str) {
        self.status_until(what, None);
    }

    pub(super) fn status_until(&mut self, what: &str, until: Option<std::time::Instant>) {
        match &self.meter {
            Some(m) => self
                .term
                .status_until(&format!("{} · {what}", m.line()), until),
            None => self.term.status_until(what, until),
        }
    }
}

/// What the keys of a question got (see `pick::Choices`).
enum Keyed {
    Answer(QAnswer),
    /// The user types an answer of their own.
    Own,
    Interrupt,
}

/// How a question is answered with a line.
fn line_hint(q: &Question) -> &'static str {
    match q.kind.as_str() {
        "yes_no" => "[y]es / [n]o (Enter skips)",
        "single_choice" => "a number, or your own answer (Enter skips)",
        "multi_choice" => "numbers separated by spaces or commas, or your own answer (Enter skips)",
        _ => "your answer (Enter skips)",
    }
}

/// The keys of a question that has them on a terminal: y and n, or the numbers of its choices
/// (one key each, so at most 9); and whether several may be taken.
fn question_keys(q: &Question) -> Option<(Vec<char>, bool)> {
    match q.kind.as_str() {
        "yes_no" => Some((vec!['y', 'n'], false)),
        "single_choice" | "multi_choice" if (1..=9).contains(&q.choices.len()) => Some((
            (1..=q.choices.len())
                .filter_map(|k| char::from_digit(k as u32, 10))
                .collect(),
            q.kind == "multi_choice",
        )),
        _ => None,
    }
}

/// The hint after a question answered by keys.
fn keys_hint(keys: &[char], multi: bool) -> String {
    let own = "o your own answer, Esc skips";
    match (keys, multi) {
        (['y', 'n'], _) => format!("[y]es / [n]o, {own}"),
        ([first, .., last], true) => format!("{first}-{last} mark, Enter takes them, {own}"),
        ([first, .., last], false) => format!("{first}-{last} picks, {own}"),
        _ => format!("1 picks, {own}"),
    }
}

/// The answer a line gives to `q` (from a pipe, or typed after `o`).
fn parse_line(q: &Question, line: &str) -> QAnswer {
    let line = line.trim();
    let mut a = QAnswer::default();
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
    a
}

impl ReplSink<'_> {
    /// On a terminal, the answer to a question that has keys (see `question_keys`); None where
    /// it is answered with a line.
    fn keyed_answer(&mut self, q: &Question) -> Option<Keyed> {
        let (keys, multi) = question_keys(q)?;
        let mut choices = pick::Choices::new(keys.clone(), multi);
        let yes_no = q.kind == "yes_no";
        let echo = |picked: &[usize]| -> String {
            if yes_no {
                let yes = picked.first() == Some(&0);
                return if yes { "yes" } else { "no" }.to_string();
            }
            let labels: Vec<&str> = picked
                .iter()
                .filter_map(|&i| q.choices.get(i).map(|c| c.label.as_str()))
                .collect();
            labels.join(", ")
        };
        let hint = keys_hint(&keys, multi);
        let got = self
            .lines
            .choose_keys(self.term, &hint, &mut choices, echo)?;
        Some(match got {
            pick::Chosen::Picked(picked) => {
                let mut a = QAnswer::default();
                if yes_no {
                    a.yes = Some(picked.first() == Some(&0));
                } else {
                    a.selected = picked
                        .iter()
                        .filter_map(|&i| q.choices.get(i).map(|c| c.id.clone()))
                        .collect();
                }
                Keyed::Answer(a)
            }
            pick::Chosen::Own => Keyed::Own,
            pick::Chosen::Skip | pick::Chosen::Eof => Keyed::Answer(QAnswer::default()),
            pick::Chosen::Interrupt => {
                self.interrupted = true;
                Keyed::Interrupt
            }
        })
    }

    /// The answer to `q` as a line, after `hint`; None on Ctrl-C.
    fn line_answer(&mut self, q: &Question, hint: &str) -> Option<QAnswer> {
        let line = self.read_answer(hint)?;
        Some(parse_line(q, &line))
    }

    /// A line answered after `prompt`, echoed in a piped transcript; empty at the end of input
    /// (nothing to echo); None on Ctrl-C, which marks the turn interrupted.
    fn read_answer(&mut self, prompt: &str) -> Option<String> {
        match self.lines.answer(self.term, prompt) {
            Got::Line(l) => {
                if !self.interactive {
                    self.term.note(l.trim());
                }
                Some(l)
            }
            Got::Eof => Some(String::new()),
            Got::Interrupt => {
                self.term.newline_on_terminal();
                self.interrupted = true;
                None
            }
        }
    }
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
            let a = match self.keyed_answer(q) {
                Some(Keyed::Answer(a)) => a,
                Some(Keyed::Interrupt) => return None,
                Some(Keyed::Own) => self.line_answer(q, "your answer (Enter skips)")?,
                None => self.line_answer(q, line_hint(q))?,
            };
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
            // The end of input reads as an empty line: no.
            let Some(line) = self.read_answer(&question) else {
                return false;
            };
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
