//! One-key answers and pick lists on a terminal (crush(1) INTERACTIVE SESSION): a permission
//! question takes a single key (y, a, n) and Enter for its default; a question of the
//! `question` tool takes the key of a choice (`Choices`); `/model` and `/sessions`
//! show a numbered list where Up and Down move, a number jumps and Enter picks. Both read keys
//! in raw mode through the line editor's decoder; from a pipe the REPL keeps its line answers.
//! The list state (`Picker`) is pure: keys in, a frame of text out.

use super::keys::{Decoder, Key};
use super::tty;
use crate::text::width::truncate;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Rows of a list shown at once (longer lists scroll).
const ROWS: usize = 10;
const REVERSE: &str = "\x1b[7m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// What a one-key question got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyAnswer {
    /// One of the keys asked for, lower case.
    Key(char),
    /// Enter: the default.
    Enter,
    Eof,
    Interrupt,
}

/// In raw mode: drops what was typed before, writes `show`, then reads keys until `step`
/// decides. None when raw mode is not available.
fn read_keys<T>(
    dec: &mut Decoder,
    cancel: &AtomicBool,
    show: impl FnOnce(),
    mut step: impl FnMut(Key) -> Option<T>,
    on_cancel: T,
    on_end: T,
) -> Option<T> {
    let _raw = tty::Raw::enter().ok()?;
    let mut buf = [0u8; 1024];
    // Typed while the model worked: not an answer to a question it could not have seen.
    let _ = tty::read(&mut buf, Duration::ZERO);
    show();
    loop {
        if crate::signal::terminating().is_some() || cancel.swap(false, Ordering::SeqCst) {
            return Some(on_cancel);
        }
        let wait = if dec.pending() { 30 } else { 50 };
        let settle = match tty::read(&mut buf, Duration::from_millis(wait)) {
            tty::Got::Bytes(n) => {
                dec.feed(&buf[..n]);
                false
            }
            tty::Got::Timeout => true,
            tty::Got::End => return Some(on_end),
        };
        while let Some(key) = dec.next(settle) {
            if let Some(t) = step(key) {
                return Some(t);
            }
        }
    }
}

/// `prompt` (already styled), then one of `keys` (either case), Enter, Ctrl-C or Ctrl-D; the key
/// is echoed. None: raw mode is not available (the caller asks for a line instead).
pub(super) fn key(
    dec: &mut Decoder,
    prompt: &str,
    keys: &[char],
    cancel: &AtomicBool,
) -> Option<KeyAnswer> {
    let got = read_keys(
        dec,
        cancel,
        || tty::write(prompt.as_bytes()),
        |k| match k {
            Key::Char(c) if keys.contains(&c.to_ascii_lowercase()) => {
                Some(KeyAnswer::Key(c.to_ascii_lowercase()))
            }
            Key::Enter => Some(KeyAnswer::Enter),
            Key::Ctrl('c') => Some(KeyAnswer::Interrupt),
            Key::Ctrl('d') => Some(KeyAnswer::Eof),
            _ => None,
        },
        KeyAnswer::Interrupt,
        KeyAnswer::Eof,
    );
    let echo = match got {
        Some(KeyAnswer::Key(c)) => format!("{c}\r\n"),
        Some(KeyAnswer::Interrupt) => "^C\r\n".to_string(),
        Some(_) => "\r\n".to_string(),
        None => String::new(),
    };
    tty::write(echo.as_bytes());
    got
}

/// The keys of a question of the `question` tool on a terminal (crush(1) INTERACTIVE SESSION):
/// each choice has a key (its number, or y and n), `o` asks for a typed answer instead, Esc
/// skips the question. A single choice is picked by its key at once; in a multiple choice the
/// keys mark and unmark, and Enter takes what is marked. Pure: keys in, a decision out.
#[derive(Debug)]
pub(super) struct Choices {
    keys: Vec<char>,
    multi: bool,
    marked: Vec<bool>,
}

/// What a question's keys decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Chosen {
    /// The choices picked, by index, in order.
    Picked(Vec<usize>),
    /// `o`: the user types an answer of their own.
    Own,
    /// Esc: the question is skipped.
    Skip,
    Eof,
    Interrupt,
}

/// What one key did to a question.
#[derive(Debug, PartialEq, Eq)]
enum Mark {
    Done(Chosen),
    /// The marks changed: draw them again.
    Changed,
    Nothing,
}

impl Choices {
    /// `keys`: one a choice (lower case, never `o`); `multi`: several may be taken.
    pub(super) fn new(keys: Vec<char>, multi: bool) -> Choices {
        let marked = vec![false; keys.len()];
        Choices {
            keys,
            multi,
            marked,
        }
    }

    fn handle(&mut self, key: Key) -> Mark {
        match key {
            Key::Char(c) => {
                let c = c.to_ascii_lowercase();
                match self.keys.iter().position(|&k| k == c) {
                    Some(i) if self.multi => {
                        self.marked[i] = !self.marked[i];
                        Mark::Changed
                    }
                    Some(i) => Mark::Done(Chosen::Picked(vec![i])),
                    None if c == 'o' => Mark::Done(Chosen::Own),
                    None => Mark::Nothing,
                }
            }
            // No choice is the default: Enter alone does nothing (a stray Enter picks nothing).
            Key::Enter if self.marked.contains(&true) => Mark::Done(Chosen::Picked(
                (0..self.keys.len()).filter(|&i| self.marked[i]).collect(),
            )),
            Key::Escape => Mark::Done(Chosen::Skip),
            Key::Ctrl('c') => Mark::Done(Chosen::Interrupt),
            Key::Ctrl('d') => Mark::Done(Chosen::Eof),
            _ => Mark::Nothing,
        }
    }

    /// The keys marked so far, `[1 3]`; empty when none is (or for a single choice).
    fn marks(&self) -> String {
        let on: Vec<String> = (0..self.keys.len())
            .filter(|&i| self.marked[i])
            .map(|i| self.keys[i].to_string())
            .collect();
        if on.is_empty() {
            String::new()
        } else {
            format!("[{}] ", on.join(" "))
        }
    }
}

/// `prompt` (one row, already styled), then the keys of `choices` until they decide; the marks
/// of a multiple choice are shown after the prompt. `echo` names what was picked, for the row
/// the answer leaves behind. None: raw mode is not available (the caller asks for a line).
pub(super) fn choose(
    dec: &mut Decoder,
    prompt: &str,
    choices: &mut Choices,
    echo: impl Fn(&[usize]) -> String,
    cancel: &AtomicBool,
) -> Option<Chosen> {
    let got = read_keys(
        dec,
        cancel,
        || tty::write(prompt.as_bytes()),
        |k| match choices.handle(k) {
            Mark::Done(c) => Some(c),
            Mark::Changed => {
                tty::write(format!("\r\x1b[K{prompt}{}", choices.marks()).as_bytes());
                None
            }
            Mark::Nothing => None,
        },
        Chosen::Interrupt,
        Chosen::Eof,
    );
    let tail = match &got {
        Some(Chosen::Picked(picked)) => {
            format!(
                "\r\x1b[K{prompt}{}\r\n",
                crate::visible::line(&echo(picked))
            )
        }
        Some(Chosen::Interrupt) => "^C\r\n".to_string(),
        Some(_) => "\r\n".to_string(),
        None => String::new(),
    };
    tty::write(tail.as_bytes());
    got
}

/// What a key did to a pick list.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    Moved,
    Picked(usize),
    Cancelled,
    Nothing,
}

/// A numbered list with a selection.
#[derive(Debug)]
pub(super) struct Picker {
    items: Vec<String>,
    pub selected: usize,
    /// The first row shown.
    top: usize,
    /// Digits typed so far.
    number: String,
}

impl Picker {
    pub(super) fn new(items: Vec<String>, selected: usize) -> Picker {
        let selected = selected.min(items.len().saturating_sub(1));
        let mut p = Picker {
            items,
            selected,
            top: 0,
            number: String::new(),
        };
        p.scroll();
        p
    }

    fn scroll(&mut self) {
        if self.selected < self.top {
            self.top = self.selected;
        } else if self.selected >= self.top + ROWS {
            self.top = self.selected + 1 - ROWS;
        }
    }

    pub(super) fn handle(&mut self, key: Key) -> Step {
        let n = self.items.len();
        match key {
            Key::Up | Key::Ctrl('p') if self.selected > 0 => self.selected -= 1,
            Key::Down | Key::Ctrl('n') if self.selected + 1 < n => self.selected += 1,
            Key::Home | Key::PageUp => self.selected = 0,
            Key::End | Key::PageDown => self.selected = n.saturating_sub(1),
            Key::Char(c) if c.is_ascii_digit() => {
                self.number.push(c);
                match self.number.parse::<usize>() {
                    Ok(k) if (1..=n).contains(&k) => self.selected = k - 1,
                    // No such row: start the number again with this digit.
                    _ => {
                        self.number = c.to_string();
                        match c.to_digit(10) {
                            Some(k) if k >= 1 && (k as usize) <= n => {
                                self.selected = k as usize - 1
                            }
                            _ => self.number.clear(),
                        }
                    }
                }
            }
            Key::Backspace => {
                self.number.pop();
                return Step::Moved;
            }
            Key::Enter => return Step::Picked(self.selected),
            Key::Escape | Key::Ctrl('c') | Key::Ctrl('d') | Key::Char('q') => {
                return Step::Cancelled;
            }
            _ => return Step::Nothing,
        }
        self.scroll();
        Step::Moved
    }

    /// The rows shown and the hint under them, each cut to `width - 1` cells.
    pub(super) fn frame(&self, width: usize, color: bool) -> Vec<String> {
        let cells = width.saturating_sub(1).max(10);
        let digits = self.items.len().to_string().len();
        let mut rows = Vec::new();
        for (i, item) in self.items.iter().enumerate().skip(self.top).take(ROWS) {
            let mark = if i == self.selected { '>' } else { ' ' };
            let line = format!("{mark} {:>digits$}) {item}", i + 1);
            let line = truncate(&line, cells).to_string();
            rows.push(if color && i == self.selected {
                format!("{REVERSE}{line}{RESET}")
            } else {
                line
            });
        }
        let more = if self.items.len() > ROWS {
            format!(" ({} of {})", self.selected + 1, self.items.len())
        } else {
            String::new()
        };
        let hint = truncate(
            &format!("Up/Down or a number, Enter picks, Esc keeps it as it is{more}"),
            cells,
        )
        .to_string();
        rows.push(if color {
            format!("{DIM}{hint}{RESET}")
        } else {
            hint
        });
        rows
    }
}

/// Shows `items` as a pick list below the cursor and returns the picked index; None when the
/// user cancelled (Esc, q, Ctrl-C). Err(()) when raw mode is not available. The list is erased
/// afterwards.
pub(super) fn pick(
    dec: &mut Decoder,
    items: Vec<String>,
    selected: usize,
    color: bool,
    cancel: &AtomicBool,
) -> Result<Option<usize>, ()> {
    let mut p = Picker::new(items, selected);
    let width = || tty::width().unwrap_or(crate::text::DEFAULT_COLUMNS);
    // Rows drawn last time: the cursor is on the last of them.
    let drawn = std::cell::Cell::new(0usize);
    let draw = |rows: &[String]| {
        let mut s = String::new();
        if drawn.get() > 1 {
            s.push_str(&format!("\x1b[{}A", drawn.get() - 1));
        }
        s.push_str("\r\x1b[J");
        s.push_str(&rows.join("\r\n"));
        drawn.set(rows.len());
        tty::write(s.as_bytes());
    };
    let first = p.frame(width(), color);
    let got = read_keys(
        dec,
        cancel,
        || draw(&first),
        |k| match p.handle(k) {
            Step::Picked(i) => Some(Some(i)),
            Step::Cancelled => Some(None),
            Step::Moved => {
                draw(&p.frame(width(), color));
                None
            }
            Step::Nothing => None,
        },
        None,
        None,
    );
    // Erase the list: the caller says what was picked.
    if got.is_some() {
        draw(&[String::new()]);
    }
    got.ok_or(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("item {i}")).collect()
    }

    #[test]
    fn arrows_move_numbers_jump_and_enter_picks() {
        let mut p = Picker::new(items(3), 1);
        assert_eq!(p.handle(Key::Down), Step::Moved);
        assert_eq!(p.selected, 2);
        p.handle(Key::Down);
        assert_eq!(p.selected, 2, "stops at the end");
        p.handle(Key::Char('1'));
        assert_eq!(p.selected, 0);
        assert_eq!(p.handle(Key::Enter), Step::Picked(0));
        assert_eq!(p.handle(Key::Escape), Step::Cancelled);
        assert_eq!(p.handle(Key::Char('x')), Step::Nothing);
    }

    #[test]
    fn a_choice_takes_its_key_and_a_multiple_choice_takes_enter() {
        let mut one = Choices::new(vec!['1', '2', '3'], false);
        assert_eq!(one.handle(Key::Enter), Mark::Nothing, "no default");
        assert_eq!(one.handle(Key::Char('4')), Mark::Nothing);
        assert_eq!(
            one.handle(Key::Char('2')),
            Mark::Done(Chosen::Picked(vec![1]))
        );
        assert_eq!(one.handle(Key::Char('o')), Mark::Done(Chosen::Own));
        assert_eq!(one.handle(Key::Escape), Mark::Done(Chosen::Skip));
        assert_eq!(one.handle(Key::Ctrl('c')), Mark::Done(Chosen::Interrupt));
        let mut yes = Choices::new(vec!['y', 'n'], false);
        assert_eq!(
            yes.handle(Key::Char('N')),
            Mark::Done(Chosen::Picked(vec![1]))
        );
        let mut many = Choices::new(vec!['1', '2', '3'], true);
        assert_eq!(many.handle(Key::Enter), Mark::Nothing, "nothing marked");
        assert_eq!(many.handle(Key::Char('3')), Mark::Changed);
        assert_eq!(many.handle(Key::Char('1')), Mark::Changed);
        assert_eq!(many.handle(Key::Char('2')), Mark::Changed);
        assert_eq!(many.handle(Key::Char('2')), Mark::Changed, "unmarked");
        assert_eq!(many.marks(), "[1 3] ");
        assert_eq!(
            many.handle(Key::Enter),
            Mark::Done(Chosen::Picked(vec![0, 2]))
        );
    }

    #[test]
    fn two_digit_numbers_and_a_scrolling_window() {
        let mut p = Picker::new(items(25), 0);
        p.handle(Key::Char('1'));
        p.handle(Key::Char('2'));
        assert_eq!(p.selected, 11);
        let f = p.frame(80, false);
        assert_eq!(f.len(), ROWS + 1);
        assert!(f.iter().any(|l| l.starts_with("> 12) item 11")), "{f:?}");
        assert!(f.last().unwrap().contains("12 of 25"), "{f:?}");
        p.handle(Key::Char('9'));
        assert_eq!(p.selected, 8, "129 is no row: 9 starts again");
        for l in Picker::new(vec!["x".repeat(200)], 0).frame(40, false) {
            assert!(l.chars().count() < 40, "{l}");
        }
    }
}
