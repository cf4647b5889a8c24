//! Where the REPL's input comes from: the line editor on a terminal, else lines of stdin read
//! on their own thread (the module comment of `repl` says why a thread).

use super::editor::{self, Editor, Mode, Prompt, Read};
use super::render::{self, Term};
use super::{complete::Source, pick};
use crate::app::AppError;
use crate::text::wrap;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the line reader delivered.
pub(super) enum Got {
    Line(String),
    Eof,
    Interrupt,
}

/// Lines from stdin, read on their own thread, with the SIGINT flag polled while waiting.
pub(super) struct Lines {
    rx: Receiver<Option<String>>,
    cancel: Arc<AtomicBool>,
    eof: bool,
}

impl Lines {
    pub(super) fn spawn(cancel: Arc<AtomicBool>) -> Result<Lines, AppError> {
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
    pub(super) fn next(&mut self) -> Got {
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
pub(super) enum Reader {
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
    pub(super) fn prompt(
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
    pub(super) fn answer(&mut self, term: &mut Term, question: &str) -> Got {
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
    pub(super) fn choose(&mut self, term: &mut Term, question: &str, keys: &[char]) -> Got {
        let Reader::Editor { editor, cancel } = self else {
            return self.answer(term, question);
        };
        term.end_line();
        let text = wrap::wrap_lines(&crate::visible::line(question), crate::text::columns(2));
        let prompt = format!("{} ", term.paint(render::YELLOW, &text));
        match pick::key(editor.decoder(), &prompt, keys, cancel) {
            Some(pick::KeyAnswer::Key(c)) => Got::Line(c.to_string()),
            Some(pick::KeyAnswer::Enter) => Got::Line(String::new()),
            Some(pick::KeyAnswer::Eof) => Got::Eof,
            Some(pick::KeyAnswer::Interrupt) => Got::Interrupt,
            None => self.answer(term, question),
        }
    }

    /// A question of the `question` tool answered by keys on the terminal, after `hint` (see
    /// `pick::Choices`); `echo` names what was picked. None from a pipe, or without raw mode.
    pub(super) fn choose_keys(
        &mut self,
        term: &mut Term,
        hint: &str,
        choices: &mut pick::Choices,
        echo: impl Fn(&[usize]) -> String,
    ) -> Option<pick::Chosen> {
        let Reader::Editor { editor, cancel } = self else {
            return None;
        };
        term.end_line();
        // One row, with room for the marks, so that they can be drawn again over it.
        let cols = crate::text::terminal_columns(2).unwrap_or(crate::text::DEFAULT_COLUMNS);
        let hint = crate::visible::line(hint);
        let hint = crate::text::width::truncate(&hint, cols.saturating_sub(14).max(10));
        let prompt = format!("{} ", term.paint(render::YELLOW, hint));
        pick::choose(editor.decoder(), &prompt, choices, echo, cancel)
    }

    /// A pick from `items` on the terminal (None from a pipe, or without raw mode): Some(None)
    /// when the user kept things as they are.
    pub(super) fn pick(
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
    pub(super) fn on_terminal(&self) -> bool {
        matches!(self, Reader::Editor { .. })
    }

    pub(super) fn editor(&mut self) -> Option<&mut Editor> {
        match self {
            Reader::Editor { editor, .. } => Some(editor),
            Reader::Lines(_) => None,
        }
    }
}
