//! The activity line (crush(1) INTERACTIVE SESSION): while a model call is in flight, one dimmed row on a
//! terminal's stderr shows a spinner, what is going on, the seconds since the turn began, the
//! tokens received so far (estimated from the text) and how to interrupt. A ticker thread
//! redraws it at most 10 times a second; every other write first erases it, under the same
//! lock, so the row never lands in the middle of other output. It is never drawn on a pipe.

use crate::text;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// The redraw period: at most 10 times a second.
const TICK: Duration = Duration::from_millis(100);
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

struct State {
    /// What is going on ("waiting for the model"); `None`: nothing shown.
    what: Option<String>,
    /// A retry's moment: the line counts down to it.
    until: Option<Instant>,
    started: Instant,
    /// Characters of text and reasoning received in this turn.
    chars: u64,
    frame: usize,
    color: bool,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// The activity line of one terminal (stderr).
pub(crate) struct Activity {
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
}

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    // A panic elsewhere cannot leave the state inconsistent: every field is valid on its own.
    s.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_stderr(s: &str) {
    let mut err = std::io::stderr().lock();
    // Nowhere left to report a failing stderr.
    let _ = err.write_all(s.as_bytes()).and_then(|_| err.flush());
}

/// Writes a notice (one logical line) to stderr, word-wrapped to the terminal's width when
/// stderr is a terminal (crush(1) INTERACTIVE SESSION: `COLUMNS`, else the width the terminal
/// reports, else 80), continuation rows indented by two spaces; as it is otherwise (a pipe, a
/// log file, a test).
pub(crate) fn note(line: &str) {
    use std::io::IsTerminal;
    let text = if std::io::stderr().is_terminal() {
        layout(line, text::columns(2))
    } else {
        line.to_string()
    };
    write_stderr(&format!("{text}\n"));
}

/// `line` broken at spaces into rows of at most `cols` cells (a longer word keeps its own
/// row), rows after the first indented by two spaces.
fn layout(line: &str, cols: usize) -> String {
    text::wrap::fill(line, cols, "", "  ")
}

/// The line for `st` at `now`, `cols` columns wide at most (one row, or erasing it would leave
/// the rest behind).
fn render(st: &State, what: &str, now: Instant, cols: usize) -> String {
    let mut s = format!("{} {what}", FRAMES[st.frame % FRAMES.len()]);
    if let Some(until) = st.until {
        let left = until.saturating_duration_since(now).as_secs_f64().ceil() as u64;
        s.push_str(&format!(" in {left} s"));
    }
    s.push_str(&format!(
        " · {} s",
        now.saturating_duration_since(st.started).as_secs()
    ));
    if st.chars > 0 {
        // About four characters a token.
        s.push_str(&format!(" · ~{} tokens", st.chars.div_ceil(4)));
    }
    s.push_str(" · Ctrl-C cancels");
    text::width::truncate(&s, cols.saturating_sub(1)).to_string()
}

/// Draws the line (the caller holds the lock and has checked something is shown).
fn draw(st: &State, what: &str) {
    let cols = text::terminal_columns(2).unwrap_or(text::DEFAULT_COLUMNS);
    let line = render(st, what, Instant::now(), cols);
    if st.color {
        write_stderr(&format!("\r\x1b[K{DIM}{line}{RESET}"));
    } else {
        write_stderr(&format!("\r\x1b[K{line}"));
    }
}

impl Activity {
    pub(crate) fn new(color: bool) -> Activity {
        Activity {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    what: None,
                    until: None,
                    started: Instant::now(),
                    chars: 0,
                    frame: 0,
                    color,
                    stop: false,
                }),
                wake: Condvar::new(),
            }),
            ticker: None,
        }
    }

    /// A turn begins: the clock and the token count start from zero.
    pub(crate) fn start(&mut self) {
        let mut st = lock(&self.shared);
        st.started = Instant::now();
        st.chars = 0;
    }

    /// `n` characters of text or reasoning arrived.
    pub(crate) fn received(&self, n: usize) {
        lock(&self.shared).chars += n as u64;
    }

    /// Shows the line with `what`, counting down to `until` when given.
    pub(crate) fn show(&mut self, what: &str, until: Option<Instant>) {
        {
            let mut st = lock(&self.shared);
            st.what = Some(what.to_string());
            st.until = until;
            draw(&st, what);
        }
        if self.ticker.is_none() {
            let shared = Arc::clone(&self.shared);
            // Without the ticker the line is still drawn, only not animated.
            self.ticker = std::thread::Builder::new()
                .name("activity".into())
                .spawn(move || tick(&shared))
                .ok();
        }
    }

    /// Erases the line if it is shown. Returns whether it was.
    pub(crate) fn hide(&mut self) -> bool {
        let mut st = lock(&self.shared);
        if st.what.take().is_some() {
            write_stderr("\r\x1b[K");
            true
        } else {
            false
        }
    }
}

/// The ticker: redraws the line while it is shown, until the activity is dropped.
fn tick(shared: &Shared) {
    let mut st = lock(shared);
    loop {
        st = match shared.wake.wait_timeout(st, TICK) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
        if st.stop {
            return;
        }
        if let Some(what) = st.what.clone() {
            st.frame = st.frame.wrapping_add(1);
            draw(&st, &what);
        }
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.hide();
        lock(&self.shared).stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_notice_wraps_at_spaces_with_its_rows_indented() {
        let line = "crush: provider 'local' does not say the context window of smollm2; assuming 4096 tokens";
        let wrapped = super::layout(line, 40);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 40),
            "{wrapped}"
        );
        assert!(
            wrapped.lines().skip(1).all(|l| l.starts_with("  ")),
            "{wrapped}"
        );
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            line.split_whitespace().collect::<Vec<_>>()
        );
        assert!(
            wrapped.contains("4096 tokens"),
            "never inside a word: {wrapped}"
        );
        assert_eq!(super::layout("short", 40), "short");
        assert_eq!(
            super::layout("a-very-long-word b", 5),
            "a-very-long-word\n  b"
        );
    }

    use super::*;

    fn state(started: Instant) -> State {
        State {
            what: None,
            until: None,
            started,
            chars: 0,
            frame: 0,
            color: false,
            stop: false,
        }
    }

    #[test]
    fn the_line_shows_seconds_tokens_and_how_to_cancel() {
        let t0 = Instant::now();
        let mut st = state(t0);
        let now = t0 + Duration::from_millis(3500);
        assert_eq!(
            render(&st, "waiting for the model", now, 120),
            "⠋ waiting for the model · 3 s · Ctrl-C cancels"
        );
        st.chars = 41;
        st.frame = 1;
        assert_eq!(
            render(&st, "thinking", now, 120),
            "⠙ thinking · 3 s · ~11 tokens · Ctrl-C cancels"
        );
        st.until = Some(now + Duration::from_millis(2100));
        assert_eq!(
            render(&st, "retry 1 (HTTP 529)", now, 120),
            "⠙ retry 1 (HTTP 529) in 3 s · 3 s · ~11 tokens · Ctrl-C cancels"
        );
        // One row of a narrow terminal.
        assert!(
            render(&st, "waiting for the model", now, 20)
                .chars()
                .count()
                < 20
        );
    }
}
