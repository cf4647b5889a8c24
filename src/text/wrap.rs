//! Word wrapping for text crush prints on a terminal (help, lists, notices): lines break at
//! spaces, never inside a word (a word wider than the line, a URL say, stands alone on its
//! line), and the lines a long line is broken into start under its text: after a list marker,
//! or after the gap of a two-column row (`  /name   what it does`). crush(1) INTERACTIVE
//! SESSION.

use super::width::char_width;

/// The characters of `s` without its SGR sequences (`ESC [ ... m`).
pub(crate) fn visible_chars(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut it = s.chars();
    std::iter::from_fn(move || {
        loop {
            let c = it.next()?;
            if c != '\x1b' {
                return Some(c);
            }
            for d in it.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        }
    })
}

/// Cells of `s`, not counting SGR sequences.
pub(crate) fn visible_width(s: &str) -> usize {
    visible_chars(s).map(char_width).sum()
}

/// The words of `text` filled into lines of at most `width` cells: the first line starts with
/// `first`, the others with `hang`. No newline at the end.
pub(crate) fn fill(text: &str, width: usize, first: &str, hang: &str) -> String {
    let mut out = String::from(first);
    let mut col = visible_width(first);
    let hang_w = visible_width(hang);
    let mut at_start = true;
    for word in text.split_whitespace() {
        let w = visible_width(word);
        if !at_start && col + 1 + w > width {
            out.push('\n');
            out.push_str(hang);
            col = hang_w;
            at_start = true;
        }
        if !at_start {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
        at_start = false;
    }
    out
}

/// A row of a two-column list, `  HEAD  TEXT` ending in a newline: TEXT starts at column `at`
/// (on the next line when HEAD leaves no room) and wraps under itself at `width`.
pub(crate) fn row(out: &mut String, head: &str, text: &str, at: usize, width: usize) {
    let mut first = format!("  {head}");
    if visible_width(&first) + 1 > at {
        out.push_str(&first);
        out.push('\n');
        first.clear();
    }
    let pad = at.saturating_sub(visible_width(&first));
    let first = format!("{first}{}", " ".repeat(pad));
    out.push_str(&fill(text, width, &first, &" ".repeat(at)));
    out.push('\n');
}

/// Where the text of a line starts for its continuation lines: after the leading spaces and a
/// list marker (`- `, `* `, `• `, `1. `, `2) `), or after the first gap of two or more spaces
/// that follows the line's first word (a two-column row). A byte offset.
fn hang_at(line: &str) -> usize {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let body = &line[indent..];
    for m in ["- ", "* ", "• ", "+ "] {
        if body.starts_with(m) {
            return indent + m.len();
        }
    }
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && (body[digits..].starts_with(". ") || body[digits..].starts_with(") ")) {
        return indent + digits + 2;
    }
    if let Some(i) = body.find("  ") {
        let after = &body[i..];
        let gap = after.len() - after.trim_start_matches(' ').len();
        if !after.trim().is_empty() {
            return indent + i + gap;
        }
    }
    indent
}

/// `text` with every line wider than `width` broken at spaces (see the module's comment);
/// lines that fit, and the lines of fenced code blocks, are kept as they are.
pub(crate) fn wrap_lines(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut code = false;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        if fence {
            code = !code;
        }
        if code || fence || visible_width(line) <= width {
            out.push_str(line);
            continue;
        }
        let mut at = hang_at(line);
        // A head so wide that little would be left beside it: continue under its indent.
        if visible_width(&line[..at]) + 20 > width {
            at = line.len() - line.trim_start_matches(' ').len();
        }
        let (head, rest) = line.split_at(at);
        let hang = " ".repeat(visible_width(head));
        out.push_str(&fill(rest, width, head, &hang));
    }
    out
}

/// Word wrapping of a line that arrives a piece at a time (an answer streaming in): a word is
/// held until the space after it shows whether it fits, then printed on this line or the next.
/// SGR sequences pass through at no width.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    /// Cells used on the current output line.
    col: usize,
    /// What continuation lines start with, and its width.
    hang: String,
    hang_w: usize,
    /// A word has been printed on the current output line.
    worded: bool,
    /// The word being read, and its width.
    word: String,
    word_w: usize,
    /// Spaces read before the word.
    spaces: String,
    /// Inside an escape sequence.
    in_esc: bool,
}

impl Stream {
    /// A line begins after `used` cells of prefix; its continuation lines start with `hang`.
    pub(crate) fn start_line(&mut self, used: usize, hang: String) {
        self.col = used;
        self.hang_w = visible_width(&hang);
        self.hang = hang;
        self.worded = false;
        self.word.clear();
        self.word_w = 0;
        self.spaces.clear();
        self.in_esc = false;
    }

    /// Text of the line (no newline), to wrap at `width` cells.
    pub(crate) fn push(&mut self, s: &str, width: usize, out: &mut String) {
        for c in s.chars() {
            if self.in_esc {
                self.word.push(c);
                self.in_esc = c != 'm';
            } else if c == '\x1b' {
                self.word.push(c);
                self.in_esc = true;
            } else if c == ' ' {
                self.flush(width, out);
                self.spaces.push(c);
            } else {
                self.word.push(c);
                self.word_w += char_width(c);
            }
        }
    }

    /// The held word goes out: on this line if it fits (or nothing is on the line yet), else on
    /// the next, without the spaces before it.
    fn flush(&mut self, width: usize, out: &mut String) {
        if self.word.is_empty() {
            return;
        }
        let spaces = self.spaces.chars().count();
        if self.word_w > 0 && self.worded && self.col + spaces + self.word_w > width {
            out.push('\n');
            out.push_str(&self.hang);
            self.col = self.hang_w;
        } else {
            out.push_str(&self.spaces);
            self.col += spaces;
        }
        self.spaces.clear();
        out.push_str(&self.word);
        self.col += self.word_w;
        self.worded |= self.word_w > 0;
        self.word.clear();
        self.word_w = 0;
    }

    /// The line ends: what is held goes out (trailing spaces only if they fit).
    pub(crate) fn end_line(&mut self, width: usize, out: &mut String) {
        self.flush(width, out);
        let spaces = self.spaces.chars().count();
        if self.col + spaces <= width {
            out.push_str(&self.spaces);
        }
        self.start_line(0, String::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(s: &str) -> usize {
        s.lines().map(visible_width).max().unwrap_or(0)
    }

    #[test]
    fn lines_break_between_words_and_long_words_stay_whole() {
        let url = format!("https://example.com/{}", "a".repeat(90));
        let text = format!("see {url} for the details of the build and its many steps");
        let out = wrap_lines(&text, 40);
        assert!(out.lines().any(|l| l == url), "{out}");
        for l in out.lines().filter(|l| *l != url) {
            assert!(visible_width(l) <= 40, "{l:?}");
        }
        let words: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn list_items_and_two_column_rows_hang_under_their_text() {
        let out = wrap_lines(
            "- one two three four five six seven eight nine ten eleven twelve",
            30,
        );
        assert!(
            out.lines()
                .skip(1)
                .all(|l| l.starts_with("  ") && !l.starts_with("   "))
        );
        let two = "  /model [large|small]   show the models, or switch one for this run of crush";
        let out = wrap_lines(two, 50);
        let col = two.find("show").unwrap();
        for l in out.lines().skip(1) {
            assert_eq!(l.len() - l.trim_start().len(), col, "{out}");
        }
        assert!(widest(&out) <= 50, "{out}");
        assert_eq!(wrap_lines("short  line\n\nkept", 50), "short  line\n\nkept");
        let code = format!("```\n{}\n```", "word ".repeat(20));
        assert_eq!(wrap_lines(&code, 30), code);
        let mut out = String::new();
        row(
            &mut out,
            "/permissions [allow|deny TOOL]",
            "show or change what runs",
            20,
            40,
        );
        row(
            &mut out,
            "/new",
            "start a new session (created with the next prompt)",
            20,
            40,
        );
        assert_eq!(
            out,
            "  /permissions [allow|deny TOOL]\n                    show or change what\n                    \
             runs\n  /new              start a new session\n                    (created with the\n                    \
             next prompt)\n"
        );
    }

    #[test]
    fn a_streamed_line_wraps_whatever_its_pieces() {
        let text = "a list item whose words go on past the edge of a narrow terminal \x1b[1mbold\x1b[0m end";
        let mut want = None;
        for n in [1, 2, 5, 1000] {
            let mut w = Stream::default();
            let mut out = String::from("• ");
            w.start_line(2, "  ".into());
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(n) {
                w.push(&piece.iter().collect::<String>(), 24, &mut out);
            }
            w.end_line(24, &mut out);
            assert!(widest(&out) <= 24, "{out}");
            assert!(out.lines().skip(1).all(|l| l.starts_with("  ")), "{out}");
            let words: Vec<&str> = out.split_whitespace().filter(|w| *w != "•").collect();
            assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
            match &want {
                None => want = Some(out),
                Some(w) => assert_eq!(&out, w, "pieces of {n}"),
            }
        }
    }

    #[test]
    fn colour_does_not_count_as_width() {
        assert_eq!(visible_width("\x1b[1mbold\x1b[0m 中"), 7);
        assert_eq!(
            visible_chars("\x1b[1mbold\x1b[0m 中\x1b[0m").collect::<String>(),
            "bold 中"
        );
        let red = "\x1b[31merror:\x1b[0m unknown command /foo; start a prompt with //";
        assert_eq!(wrap_lines(red, 55), red, "51 cells: it fits in 55 columns");
    }
}
