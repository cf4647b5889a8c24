//! The line editor of the interactive session on a terminal: cursor movement by character and
//! word, kill and yank, history with incremental reverse search, Tab completion, bracketed paste
//! (a large paste is kept whole and shown as `[pasted N lines]`), several lines (Alt-Enter or
//! Ctrl-J), UTF-8 and double-width characters, long lines that wrap and a terminal that changes
//! size. The edit state (`Edit`) is pure: keys in, text and screen bytes out; `Editor::read` runs
//! it over the terminal in raw mode.

use super::complete::{self, Candidate, Source};
use super::history::History;
use super::keys::{Decoder, Key};
use super::tty;
use crate::text::width::{char_width, str_width};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A paste with more lines than this is kept as one block.
const PASTE_BLOCK_LINES: usize = 20;
/// A paste longer than this (in characters) is kept as one block.
const PASTE_BLOCK_CHARS: usize = 4000;
/// Width used when the terminal reports none (or zero).
const FALLBACK_WIDTH: usize = crate::text::DEFAULT_COLUMNS;
/// Most candidates a completion list shows.
const LIST_MAX: usize = 60;

const RESET: &str = "\x1b[0m";
const DIM: &str = "\x1b[2m";

/// One element of the line: a character or a pasted block.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Char(char),
    Block(Rc<str>),
}

impl Item {
    fn is_word(&self) -> bool {
        matches!(self, Item::Char(c) if c.is_alphanumeric() || *c == '_')
    }
    fn is_space(&self) -> bool {
        matches!(self, Item::Char(c) if c.is_whitespace())
    }
}

fn items_of(s: &str) -> Vec<Item> {
    s.chars().map(Item::Char).collect()
}

fn text_of(items: &[Item]) -> String {
    let mut s = String::new();
    for it in items {
        match it {
            Item::Char(c) => s.push(*c),
            Item::Block(t) => s.push_str(t),
        }
    }
    s
}

fn block_label(text: &str) -> String {
    let lines = text.lines().count();
    if lines > 1 {
        format!("[pasted {lines} lines]")
    } else {
        format!("[pasted {} characters]", text.chars().count())
    }
}

/// What the line is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The session's prompt: history and completion.
    Prompt,
    /// An answer to a question: neither.
    Answer,
}

/// The prompt in front of the line.
pub(super) struct Prompt<'a> {
    pub text: &'a str,
    /// SGR sequence for the prompt (empty: none).
    pub style: &'static str,
}

/// What reading a line ended with.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read {
    Line(String),
    Eof,
    Interrupt,
}

/// What one key did.
#[derive(Debug, PartialEq)]
enum Step {
    Edited,
    Submit,
    Eof,
    Interrupt,
    List(Vec<Candidate>),
    ClearScreen,
    Suspend,
    /// Nothing changed (an ignored key).
    Nothing,
}

/// Incremental reverse search through the history.
#[derive(Debug)]
struct Search {
    query: String,
    /// The entry shown, and the character offset of the match in it.
    found: Option<(usize, usize)>,
    /// The entry found, as items.
    shown: Vec<Item>,
    failed: bool,
    /// The line before the search, put back when it is cancelled.
    saved: (Vec<Item>, usize),
}

/// The state of one line being edited.
#[derive(Debug, Default)]
struct Edit {
    items: Vec<Item>,
    cursor: usize,
    /// The history entry shown (None: the line being typed).
    hist: Option<usize>,
    /// The line being typed, while history entries are shown.
    draft: Vec<Item>,
    search: Option<Search>,
    /// Rows between the top of the drawn area and the cursor, as last drawn.
    cursor_row: usize,
}

/// Lays text out in rows of `width` cells, as the terminal will show it.
struct Screen {
    out: String,
    row: usize,
    col: usize,
    width: usize,
}

impl Screen {
    fn new(width: usize) -> Screen {
        Screen {
            out: String::new(),
            row: 0,
            col: 0,
            width: width.max(1),
        }
    }

    /// Writes `s`, `w` cells wide, wrapping first when it does not fit.
    fn put(&mut self, s: &str, w: usize) {
        if w > 0 && self.col > 0 && self.col + w > self.width {
            self.newline();
        }
        self.out.push_str(s);
        self.col += w;
    }

    fn put_str(&mut self, s: &str) {
        for c in s.chars() {
            self.put_char(c);
        }
    }

    /// A character as the terminal shows it; a control character is shown (`^[`, `<U+009B>`),
    /// never sent: nothing in a prompt or a recalled entry can act on the terminal.
    fn put_char(&mut self, c: char) {
        if c == '\t' {
            self.put(" ", 1);
            return;
        }
        let mut b = [0u8; 4];
        let s = c.encode_utf8(&mut b);
        match crate::visible::line(s) {
            std::borrow::Cow::Borrowed(_) => self.put(s, char_width(c)),
            std::borrow::Cow::Owned(shown) => {
                for ch in shown.chars() {
                    self.put(ch.encode_utf8(&mut [0u8; 4]), 1);
                }
            }
        }
    }

    fn newline(&mut self) {
        self.out.push_str("\r\n");
        self.row += 1;
        self.col = 0;
    }

    /// Where the next character goes, `w` cells wide.
    fn pos(&self, w: usize) -> (usize, usize) {
        if self.col >= self.width || (w > 0 && self.col > 0 && self.col + w > self.width) {
            (self.row + 1, 0)
        } else {
            (self.row, self.col)
        }
    }

    fn style(&mut self, color: bool, sgr: &str) {
        if color {
            self.out.push_str(sgr);
        }
    }
}

impl Edit {
    fn text(&self) -> String {
        text_of(&self.items)
    }

    fn insert(&mut self, new: &[Item]) {
        self.items
            .splice(self.cursor..self.cursor, new.iter().cloned());
        self.cursor += new.len();
    }

    fn line_start(&self) -> usize {
        self.items[..self.cursor]
            .iter()
            .rposition(|i| *i == Item::Char('\n'))
            .map_or(0, |p| p + 1)
    }

    fn line_end(&self) -> usize {
        self.items[self.cursor..]
            .iter()
            .position(|i| *i == Item::Char('\n'))
            .map_or(self.items.len(), |p| self.cursor + p)
    }

    fn word_left(&self) -> usize {
        let mut i = self.cursor;
        while i > 0 && !self.items[i - 1].is_word() {
            i -= 1;
        }
        while i > 0 && self.items[i - 1].is_word() {
            i -= 1;
        }
        i
    }

    fn word_right(&self) -> usize {
        let mut i = self.cursor;
        let n = self.items.len();
        while i < n && !self.items[i].is_word() {
            i += 1;
        }
        while i < n && self.items[i].is_word() {
            i += 1;
        }
        i
    }

    /// Removes `from..to` and returns it.
    fn cut(&mut self, from: usize, to: usize) -> Vec<Item> {
        let gone: Vec<Item> = self.items.drain(from..to).collect();
        if self.cursor > to {
            self.cursor -= to - from;
        } else if self.cursor > from {
            self.cursor = from;
        }
        gone
    }

    fn set(&mut self, items: Vec<Item>) {
        self.cursor = items.len();
        self.items = items;
    }

    /// Moves up (`up`) or down one line of a multi-line text; false at the first or last line.
    fn vertical(&mut self, up: bool) -> bool {
        let start = self.line_start();
        let col = self.cursor - start;
        if up {
            if start == 0 {
                return false;
            }
            let prev_end = start - 1;
            let prev_start = self.items[..prev_end]
                .iter()
                .rposition(|i| *i == Item::Char('\n'))
                .map_or(0, |p| p + 1);
            self.cursor = prev_start + col.min(prev_end - prev_start);
        } else {
            let end = self.line_end();
            if end == self.items.len() {
                return false;
            }
            let next_start = end + 1;
            let next_end = self.items[next_start..]
                .iter()
                .position(|i| *i == Item::Char('\n'))
                .map_or(self.items.len(), |p| next_start + p);
            self.cursor = next_start + col.min(next_end - next_start);
        }
        true
    }

    fn history_older(&mut self, entries: &[String]) -> bool {
        let idx = match self.hist {
            None if entries.is_empty() => return false,
            None => {
                self.draft = std::mem::take(&mut self.items);
                entries.len() - 1
            }
            Some(0) => return false,
            Some(i) => i - 1,
        };
        self.hist = Some(idx);
        self.set(items_of(&entries[idx]));
        true
    }

    fn history_newer(&mut self, entries: &[String]) -> bool {
        match self.hist {
            None => false,
            Some(i) if i + 1 < entries.len() => {
                self.hist = Some(i + 1);
                self.set(items_of(&entries[i + 1]));
                true
            }
            Some(_) => {
                self.hist = None;
                let draft = std::mem::take(&mut self.draft);
                self.set(draft);
                true
            }
        }
    }

    /// Looks for the query in entries from `from` (inclusive) back to the oldest.
    fn search_from(&mut self, entries: &[String], from: Option<usize>) {
        let Some(s) = self.search.as_mut() else {
            return;
        };
        if s.query.is_empty() {
            s.found = None;
            s.failed = false;
            return;
        }
        let start = from.unwrap_or(entries.len());
        let hit = entries[..start.min(entries.len())]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| e.find(&s.query).map(|b| (i, e[..b].chars().count())));
        match hit {
            Some(h) => {
                s.found = Some(h);
                s.shown = items_of(&entries[h.0]);
                s.failed = false;
            }
            None => s.failed = true,
        }
    }

    /// Leaves the search with the entry found as the line.
    fn accept_search(&mut self, entries: &[String]) {
        if let Some(s) = self.search.take() {
            match s.found {
                Some((i, at)) => {
                    self.items = items_of(&entries[i]);
                    self.cursor = at;
                    self.hist = Some(i);
                }
                None => {
                    self.items = s.saved.0;
                    self.cursor = s.saved.1;
                }
            }
        }
    }

    /// Handles a key while searching; None: the search ended and the key is handled as usual.
    fn search_key(&mut self, key: &Key, entries: &[String]) -> Option<Step> {
        let s = self.search.as_mut()?;
        match key {
            Key::Char(c) => {
                s.query.push(*c);
                let from = s.found.map(|(i, _)| i + 1);
                self.search_from(entries, from);
            }
            Key::Backspace => {
                s.query.pop();
                self.search_from(entries, None);
            }
            Key::Ctrl('r') => {
                let from = s.found.map(|(i, _)| i);
                if from.is_some() {
                    self.search_from(entries, from);
                }
            }
            Key::Ctrl('g') | Key::Ctrl('c') => {
                if let Some(s) = self.search.take() {
                    self.items = s.saved.0;
                    self.cursor = s.saved.1;
                }
            }
            Key::Escape => self.accept_search(entries),
            _ => {
                self.accept_search(entries);
                return None;
            }
        }
        Some(Step::Edited)
    }

    fn handle(
        &mut self,
        key: Key,
        mode: Mode,
        history: &[String],
        kill: &mut Vec<Item>,
        source: &dyn Source,
    ) -> Step {
        if let Some(step) = self.search_key(&key, history) {
            return step;
        }
        let prompt = mode == Mode::Prompt;
        match key {
            Key::Char(c) => self.insert(&[Item::Char(c)]),
            Key::Paste(text) => {
                let lines = text.lines().count();
                if lines > PASTE_BLOCK_LINES || text.chars().count() > PASTE_BLOCK_CHARS {
                    self.insert(&[Item::Block(text.into())]);
                } else {
                    self.insert(&items_of(&text));
                }
            }
            Key::Enter => return Step::Submit,
            Key::AltEnter | Key::Ctrl('j') => self.insert(&[Item::Char('\n')]),
            Key::Ctrl('c') => return Step::Interrupt,
            Key::Ctrl('d') if self.items.is_empty() => return Step::Eof,
            Key::Ctrl('d') | Key::Delete => {
                if self.cursor == self.items.len() {
                    return Step::Nothing;
                }
                self.cut(self.cursor, self.cursor + 1);
            }
            Key::Backspace | Key::Ctrl('h') => {
                if self.cursor == 0 {
                    return Step::Nothing;
                }
                self.cut(self.cursor - 1, self.cursor);
            }
            Key::Left | Key::Ctrl('b') => self.cursor = self.cursor.saturating_sub(1),
            Key::Right | Key::Ctrl('f') => self.cursor = (self.cursor + 1).min(self.items.len()),
            Key::WordLeft | Key::Alt('b') => self.cursor = self.word_left(),
            Key::WordRight | Key::Alt('f') => self.cursor = self.word_right(),
            Key::Home | Key::Ctrl('a') => self.cursor = self.line_start(),
            Key::End | Key::Ctrl('e') => self.cursor = self.line_end(),
            Key::Ctrl('u') => *kill = self.cut(self.line_start(), self.cursor),
            Key::Ctrl('k') => *kill = self.cut(self.cursor, self.line_end()),
            Key::Ctrl('w') => {
                let mut i = self.cursor;
                while i > 0 && self.items[i - 1].is_space() {
                    i -= 1;
                }
                while i > 0 && !self.items[i - 1].is_space() {
                    i -= 1;
                }
                *kill = self.cut(i, self.cursor);
            }
            Key::AltBackspace => *kill = self.cut(self.word_left(), self.cursor),
            Key::Alt('d') => *kill = self.cut(self.cursor, self.word_right()),
            Key::Ctrl('y') => self.insert(&kill.clone()),
            Key::Ctrl('t') => {
                let n = self.items.len();
                if n < 2 || self.cursor == 0 {
                    return Step::Nothing;
                }
                let at = if self.cursor == n { n - 1 } else { self.cursor };
                self.items.swap(at - 1, at);
                self.cursor = at + 1;
            }
            Key::Ctrl('l') => return Step::ClearScreen,
            Key::Ctrl('z') => return Step::Suspend,
            Key::Up | Key::Ctrl('p') => {
                let moved = self.vertical(true) || (prompt && self.history_older(history));
                if !moved {
                    return Step::Nothing;
                }
            }
            Key::Down | Key::Ctrl('n') => {
                let moved = self.vertical(false) || (prompt && self.history_newer(history));
                if !moved {
                    return Step::Nothing;
                }
            }
            Key::Ctrl('r') if prompt => {
                self.search = Some(Search {
                    query: String::new(),
                    found: None,
                    shown: Vec::new(),
                    failed: false,
                    saved: (self.items.clone(), self.cursor),
                });
            }
            Key::Tab if prompt => return self.complete(source),
            _ => return Step::Nothing,
        }
        Step::Edited
    }

    /// Tab: the unique candidate, or the longer common start, or the list to show.
    fn complete(&mut self, source: &dyn Source) -> Step {
        // Blocks stand for one character, so byte offsets map back to items.
        let before: String = self.items[..self.cursor]
            .iter()
            .map(|i| match i {
                Item::Char(c) => *c,
                Item::Block(_) => '\u{fffc}',
            })
            .collect();
        let Some(c) = complete::complete(&before, source) else {
            return Step::Nothing;
        };
        let start = self.cursor - before[c.start..].chars().count();
        let replacement = match c.candidates.as_slice() {
            [] => return Step::Nothing,
            [one] => {
                let mut t = one.text.clone();
                if !t.ends_with('/') {
                    t.push(' ');
                }
                t
            }
            _ => {
                let common = c.common_prefix();
                if common.chars().count() <= c.word.chars().count() {
                    return Step::List(c.candidates);
                }
                common
            }
        };
        self.cut(start, self.cursor);
        self.insert(&items_of(&replacement));
        Step::Edited
    }

    /// The bytes that redraw the line (from wherever the last drawing left the cursor), and
    /// the cursor's row in the new drawing.
    fn render(&self, prompt: &Prompt, width: usize, color: bool) -> (String, usize) {
        let mut s = Screen::new(width);
        let up = self.cursor_row;
        if up > 0 {
            s.out.push_str(&format!("\x1b[{up}A"));
        }
        s.out.push_str("\r\x1b[J");
        let (items, cursor): (&[Item], usize) = match &self.search {
            Some(q) => {
                let label = if q.failed {
                    "failed reverse-i-search"
                } else {
                    "reverse-i-search"
                };
                s.style(color, DIM);
                s.put_str(&format!("({label})`{}': ", q.query));
                s.style(color, RESET);
                match q.found {
                    Some((_, at)) => (&q.shown, at),
                    None => (&[], 0),
                }
            }
            None => {
                s.style(color, prompt.style);
                s.put_str(prompt.text);
                if !prompt.style.is_empty() {
                    s.style(color, RESET);
                }
                (&self.items, self.cursor)
            }
        };
        let mut cursor_pos = s.pos(0);
        for (i, it) in items.iter().enumerate() {
            if i == cursor {
                let first = match it {
                    Item::Char('\n') => 0,
                    Item::Char(c) if !c.is_control() => char_width(*c),
                    _ => 1,
                };
                cursor_pos = s.pos(first);
            }
            match it {
                Item::Char('\n') => {
                    s.newline();
                    s.style(color, DIM);
                    s.put_str(". ");
                    s.style(color, RESET);
                }
                Item::Char('\t') => {
                    for _ in 0..4 {
                        s.put(" ", 1);
                    }
                }
                Item::Char(c) => s.put_char(*c),
                Item::Block(t) => {
                    s.style(color, DIM);
                    s.put_str(&block_label(t));
                    s.style(color, RESET);
                }
            }
        }
        if cursor >= items.len() {
            cursor_pos = s.pos(0);
        }
        // Leave a full last row: the terminal would wrap lazily, and the cursor be off by one.
        if s.col >= s.width {
            s.newline();
        }
        let (row, col) = cursor_pos;
        if s.row > row {
            s.out.push_str(&format!("\x1b[{}A", s.row - row));
        }
        s.out.push('\r');
        if col > 0 {
            s.out.push_str(&format!("\x1b[{col}C"));
        }
        (s.out, row)
    }
}

/// A compact list of candidates, laid out in columns (or one per line with descriptions).
fn list_text(cands: &[Candidate], width: usize, color: bool) -> String {
    let shown = &cands[..cands.len().min(LIST_MAX)];
    let mut out = String::new();
    let widest = shown.iter().map(|c| str_width(&c.text)).max().unwrap_or(0);
    let with_about = shown.len() <= 12 && shown.iter().any(|c| !c.about.is_empty());
    if with_about {
        for c in shown {
            let pad = widest - str_width(&c.text) + 2;
            let about = crate::text::width::truncate(&c.about, width.saturating_sub(widest + 3));
            out.push_str(&c.text);
            out.push_str(&" ".repeat(pad));
            if color {
                out.push_str(&format!("{DIM}{about}{RESET}"));
            } else {
                out.push_str(about);
            }
            out.push_str("\r\n");
        }
    } else {
        let colw = widest + 2;
        let cols = (width / colw.max(1)).max(1);
        for row in shown.chunks(cols) {
            let mut line = String::new();
            for c in row {
                line.push_str(&c.text);
                line.push_str(&" ".repeat(colw - str_width(&c.text)));
            }
            out.push_str(line.trim_end());
            out.push_str("\r\n");
        }
    }
    if cands.len() > shown.len() {
        out.push_str(&format!("… and {} more\r\n", cands.len() - shown.len()));
    }
    out
}

/// The line editor: the key decoder, the history and the kill buffer live across lines.
pub(super) struct Editor {
    decoder: Decoder,
    history: History,
    kill: Vec<Item>,
    color: bool,
}

/// A source with nothing to complete (for answers).
pub(super) struct NoCompletion;

impl Source for NoCompletion {
    fn commands(&self) -> Vec<Candidate> {
        Vec::new()
    }
    fn arguments(&self, _: &str, _: &[&str]) -> Vec<Candidate> {
        Vec::new()
    }
    fn root(&self) -> Option<&std::path::Path> {
        None
    }
}

impl Editor {
    pub(super) fn new(history: History, color: bool) -> Editor {
        Editor {
            decoder: Decoder::default(),
            history,
            kill: Vec::new(),
            color,
        }
    }

    pub(super) fn history(&self) -> &History {
        &self.history
    }

    /// The key decoder, shared with one-key answers and pick lists (`pick.rs`): keys typed
    /// ahead stay in order.
    pub(super) fn decoder(&mut self) -> &mut Decoder {
        &mut self.decoder
    }

    /// Colour is on.
    pub(super) fn color(&self) -> bool {
        self.color
    }

    /// Records an entry in the history; a warning for the user if it could not be saved.
    pub(super) fn remember(&mut self, entry: &str) -> Option<String> {
        self.history.add(entry)
    }

    /// Reads one line on the terminal. `cancel` is the SIGINT flag (a `kill -INT` while
    /// editing); a SIGTERM or SIGHUP ends the read as an interrupt.
    pub(super) fn read(
        &mut self,
        prompt: &Prompt,
        mode: Mode,
        source: &dyn Source,
        cancel: &AtomicBool,
    ) -> Read {
        // Held for its drop: raw mode ends with the read.
        let mut _raw = match tty::Raw::enter() {
            Ok(r) => Some(r),
            Err(e) => {
                tty::write(
                    format!("crush: cannot switch the terminal to raw mode: {e}\r\n").as_bytes(),
                );
                return read_cooked(prompt);
            }
        };
        let mut buf = [0u8; 4096];
        // Typed ahead while the terminal was in its own mode: there Enter arrived as LF, which
        // in raw mode is Ctrl-J (a newline in the text), and Ctrl-D as the NUL that marks an
        // end of file.
        if let tty::Got::Bytes(n) = tty::read(&mut buf, Duration::ZERO) {
            let ahead: Vec<u8> = buf[..n]
                .iter()
                .map(|&b| match b {
                    b'\n' => b'\r',
                    0 => 4,
                    b => b,
                })
                .collect();
            self.decoder.feed(&ahead);
        }
        let mut ed = Edit::default();
        let mut width = tty::width().unwrap_or(FALLBACK_WIDTH);
        let mut warned = false;
        self.draw(&mut ed, prompt, width);
        loop {
            if crate::signal::terminating().is_some() || cancel.swap(false, Ordering::SeqCst) {
                self.finish(&mut ed, prompt, width, "^C");
                return Read::Interrupt;
            }
            let wait = if self.decoder.pending() { 30 } else { 50 };
            let settle = match tty::read(&mut buf, Duration::from_millis(wait)) {
                tty::Got::Bytes(n) => {
                    self.decoder.feed(&buf[..n]);
                    false
                }
                tty::Got::Timeout => true,
                tty::Got::End => {
                    self.finish(&mut ed, prompt, width, "");
                    return Read::Eof;
                }
            };
            let mut dirty = false;
            while let Some(key) = self.decoder.next(settle) {
                if key == Key::Invalid {
                    // Once per line, and before an Enter in the same read can end it.
                    if !warned {
                        warned = true;
                        self.show_above(
                            &mut ed,
                            prompt,
                            width,
                            "crush: ignored input that is not UTF-8\r\n",
                        );
                    }
                    continue;
                }
                let entries = self.history.entries();
                match ed.handle(key, mode, entries, &mut self.kill, source) {
                    Step::Edited => dirty = true,
                    Step::Nothing => {}
                    Step::Submit => {
                        ed.accept_search(self.history.entries());
                        ed.cursor = ed.items.len();
                        self.finish(&mut ed, prompt, width, "\r\n");
                        return Read::Line(ed.text());
                    }
                    Step::Eof => {
                        self.finish(&mut ed, prompt, width, "");
                        return Read::Eof;
                    }
                    Step::Interrupt => {
                        self.finish(&mut ed, prompt, width, "^C");
                        return Read::Interrupt;
                    }
                    Step::List(c) => {
                        self.show_above(&mut ed, prompt, width, &list_text(&c, width, self.color));
                    }
                    Step::ClearScreen => {
                        tty::write(b"\x1b[H\x1b[2J");
                        ed.cursor_row = 0;
                        dirty = true;
                    }
                    Step::Suspend => {
                        self.finish(&mut ed, prompt, width, "\r\n");
                        _raw = None;
                        tty::suspend();
                        _raw = tty::Raw::enter().ok();
                        ed.cursor_row = 0;
                        dirty = true;
                    }
                }
            }
            let now = tty::width().unwrap_or(FALLBACK_WIDTH);
            if now != width {
                // The terminal reflowed what was drawn: find the top again at the new width.
                width = now;
                ed.cursor_row = ed.render(prompt, width, self.color).1;
                dirty = true;
            }
            if dirty {
                self.draw(&mut ed, prompt, width);
            }
        }
    }

    fn draw(&self, ed: &mut Edit, prompt: &Prompt, width: usize) {
        let (bytes, row) = ed.render(prompt, width, self.color);
        tty::write(bytes.as_bytes());
        ed.cursor_row = row;
    }

    /// Draws the line with the cursor at its end, then `tail`.
    fn finish(&self, ed: &mut Edit, prompt: &Prompt, width: usize, tail: &str) {
        ed.search = None;
        ed.cursor = ed.items.len();
        self.draw(ed, prompt, width);
        tty::write(tail.as_bytes());
    }

    /// Prints `text` where the line was, then draws the line again below it.
    fn show_above(&self, ed: &mut Edit, prompt: &Prompt, width: usize, text: &str) {
        let cursor = ed.cursor;
        ed.cursor = ed.items.len();
        self.draw(ed, prompt, width);
        tty::write(b"\r\n");
        tty::write(text.as_bytes());
        ed.cursor = cursor;
        ed.cursor_row = 0;
        self.draw(ed, prompt, width);
    }
}

/// The line in cooked mode, when raw mode cannot be had.
fn read_cooked(prompt: &Prompt) -> Read {
    tty::write(prompt.text.as_bytes());
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => Read::Eof,
        Ok(_) => Read::Line(line.trim_end_matches(['\n', '\r']).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Src;

    impl Source for Src {
        fn commands(&self) -> Vec<Candidate> {
            ["model", "compact", "cost"]
                .iter()
                .map(|c| Candidate::plain(*c))
                .collect()
        }
        fn arguments(&self, _: &str, _: &[&str]) -> Vec<Candidate> {
            Vec::new()
        }
        fn root(&self) -> Option<&std::path::Path> {
            None
        }
    }

    /// Feeds keys to a fresh line; returns the line and the last step.
    fn run(keys: Vec<Key>, history: &[&str]) -> (Edit, Step) {
        let history: Vec<String> = history.iter().map(|s| s.to_string()).collect();
        let mut ed = Edit::default();
        let mut kill = Vec::new();
        let mut last = Step::Nothing;
        for k in keys {
            last = ed.handle(k, Mode::Prompt, &history, &mut kill, &Src);
        }
        (ed, last)
    }

    fn typed(s: &str) -> Vec<Key> {
        s.chars().map(Key::Char).collect()
    }

    fn seq(parts: Vec<Vec<Key>>) -> Vec<Key> {
        parts.into_iter().flatten().collect()
    }

    #[test]
    fn editing_keys() {
        let (ed, _) = run(
            seq(vec![
                typed("wrld"),
                vec![Key::Home],
                typed("hello "),
                vec![Key::End, Key::Left, Key::Left, Key::Left],
                typed("o"),
            ]),
            &[],
        );
        assert_eq!(ed.text(), "hello world");
        let (ed, _) = run(
            seq(vec![
                typed("one two three"),
                vec![Key::Ctrl('w'), Key::Alt('b'), Key::Ctrl('k')],
                typed("2 "),
                vec![
                    Key::Ctrl('a'),
                    Key::Ctrl('d'),
                    Key::WordRight,
                    Key::Ctrl('y'),
                ],
            ]),
            &[],
        );
        assert_eq!(ed.text(), "netwo  2 ");
        let (ed, _) = run(
            seq(vec![
                typed("abc def"),
                vec![Key::Ctrl('u'), Key::Ctrl('y'), Key::Ctrl('y')],
                vec![Key::AltBackspace, Key::Backspace, Key::Ctrl('t')],
            ]),
            &[],
        );
        assert_eq!(ed.text(), "abc defacb");
    }

    #[test]
    fn multi_line_text_and_vertical_moves() {
        let (ed, _) = run(
            seq(vec![
                typed("first"),
                vec![Key::AltEnter],
                typed("second"),
                vec![Key::Ctrl('j')],
                typed("3"),
                vec![Key::Up, Key::Up, Key::End],
                typed("!"),
            ]),
            &["old"],
        );
        assert_eq!(ed.text(), "first!\nsecond\n3");
    }

    #[test]
    fn history_up_down_keeps_the_draft() {
        let h = &["one", "two", "three"];
        let (ed, _) = run(seq(vec![typed("dra"), vec![Key::Up, Key::Up]]), h);
        assert_eq!(ed.text(), "two");
        let (ed, _) = run(
            seq(vec![
                typed("dra"),
                vec![Key::Up, Key::Up, Key::Down, Key::Down],
            ]),
            h,
        );
        assert_eq!(ed.text(), "dra");
        let (ed, _) = run(vec![Key::Up, Key::Up, Key::Up, Key::Up], h);
        assert_eq!(ed.text(), "one");
    }

    #[test]
    fn reverse_search() {
        let h = &["git status", "cargo test", "git log", "make"];
        let (ed, step) = run(
            seq(vec![vec![Key::Ctrl('r')], typed("git"), vec![Key::Enter]]),
            h,
        );
        assert_eq!(step, Step::Submit);
        assert!(ed.search.is_none());
        assert_eq!(ed.text(), "git log");
        let (ed, _) = run(
            seq(vec![
                vec![Key::Ctrl('r')],
                typed("git"),
                vec![Key::Ctrl('r'), Key::End],
            ]),
            h,
        );
        assert_eq!(ed.text(), "git status");
        let (ed, _) = run(
            seq(vec![
                typed("mine"),
                vec![Key::Ctrl('r')],
                typed("zzz"),
                vec![Key::Ctrl('g')],
            ]),
            h,
        );
        assert_eq!(ed.text(), "mine");
        let (ed, _) = run(
            seq(vec![vec![Key::Ctrl('r')], typed("tes"), vec![Key::Left]]),
            h,
        );
        assert_eq!((ed.text().as_str(), ed.cursor), ("cargo test", 5));
    }

    #[test]
    fn tab_completes_unique_and_common_and_lists_the_rest() {
        let (ed, _) = run(seq(vec![typed("/mo"), vec![Key::Tab]]), &[]);
        assert_eq!(ed.text(), "/model ");
        let (ed, step) = run(seq(vec![typed("/c"), vec![Key::Tab]]), &[]);
        assert_eq!(ed.text(), "/co");
        assert_eq!(step, Step::Edited);
        let (_, step) = run(seq(vec![typed("/co"), vec![Key::Tab]]), &[]);
        let Step::List(c) = step else {
            panic!("{step:?}")
        };
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_large_paste_is_one_block() {
        let big: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let (ed, _) = run(
            vec![Key::Char('x'), Key::Paste(big.clone()), Key::Char('y')],
            &[],
        );
        assert_eq!(ed.items.len(), 3);
        assert_eq!(ed.text(), format!("x{big}y"));
        let (out, _) = ed.render(
            &Prompt {
                text: "> ",
                style: "",
            },
            80,
            false,
        );
        assert!(out.contains("> x[pasted 50 lines]y"), "{out:?}");
        let (ed, _) = run(vec![Key::Paste("a\nb".into()), Key::Backspace], &[]);
        assert_eq!(ed.text(), "a\n");
    }

    fn drawn(text: &str, cursor: usize, width: usize) -> (String, usize) {
        let ed = Edit {
            items: items_of(text),
            cursor,
            ..Edit::default()
        };
        ed.render(
            &Prompt {
                text: "> ",
                style: "",
            },
            width,
            false,
        )
    }

    #[test]
    fn wide_characters_wrap_whole_and_the_cursor_lands_right() {
        // "> " + 4 cells of 5: the fifth column cannot hold a wide character.
        let (out, row) = drawn("ab中文", 4, 5);
        assert_eq!(out, "\r\x1b[J> ab\r\n中文\r\x1b[4C");
        assert_eq!(row, 1);
        let (out, row) = drawn("ab中文", 2, 5);
        assert!(
            out.ends_with("\r\n中文\r"),
            "on the wide character: {out:?}"
        );
        assert_eq!(row, 1);
        let (out, row) = drawn("abc", 3, 5);
        assert_eq!(
            out, "\r\x1b[J> abc\r\n\r",
            "a full row: the cursor on the next"
        );
        assert_eq!(row, 1);
        let (out, row) = drawn("abcdef", 1, 5);
        assert_eq!(out, "\r\x1b[J> abc\r\ndef\x1b[1A\r\x1b[3C");
        assert_eq!(row, 0);
        let (_, row) = drawn("é\u{301}x", 3, 80);
        assert_eq!(row, 0);
    }

    #[test]
    fn control_characters_are_shown_not_sent() {
        let ed = Edit {
            items: items_of("a\x1b[2Kb\u{9b}"),
            cursor: 0,
            ..Edit::default()
        };
        let (out, _) = ed.render(
            &Prompt {
                text: "q\r? ",
                style: "",
            },
            80,
            false,
        );
        assert_eq!(out, "\r\x1b[Jq^M? a^[[2Kb<U+009B>\r\x1b[5C");
    }

    #[test]
    fn a_zero_width_terminal_still_draws() {
        let (out, _) = drawn("abc", 3, 0);
        assert!(out.contains('a') && out.contains('c'));
    }

    #[test]
    fn lists_fit_the_width() {
        let c: Vec<Candidate> = (0..100)
            .map(|i| Candidate::plain(format!("item{i:02}")))
            .collect();
        let text = list_text(&c, 40, false);
        assert!(
            text.lines()
                .all(|l| str_width(l.trim_end_matches('\r')) <= 40)
        );
        assert!(text.contains("… and 40 more"));
        let c = vec![
            Candidate::new("/model", "switch models"),
            Candidate::plain("/more"),
        ];
        assert_eq!(
            list_text(&c, 80, false),
            "/model  switch models\r\n/more   \r\n"
        );
    }
}
