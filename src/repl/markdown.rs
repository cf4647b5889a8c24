//! Light Markdown for answers on a terminal, rendered while they stream: headings, emphasis,
//! inline code, lists, quotes, rules, fenced code blocks (set apart, language shown) and tables
//! (aligned once complete). A line is held back only until its start says what it is (a few
//! characters); a fence or table line is held to its end, a table until it ends. The text must
//! already be free of control sequences: every sequence in the output is one of these.

use crate::text::width::str_width;
use crate::text::wrap::visible_width;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const HEADING: &str = "\x1b[1;35m";
const CODE: &str = "\x1b[36m";

/// Widest rule drawn.
const RULE_MAX: usize = 60;

/// What a line is, once its start is known.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Paragraph,
    Heading,
    /// Inside a fence.
    Code,
}

/// Emphasis and code spans inside a line, streamed.
#[derive(Default)]
struct Inline {
    bold: bool,
    italic: bool,
    /// Inside a code span opened with this many backticks (0: not in one).
    code: usize,
    /// `*` seen but not yet known to open, close or be text.
    stars: usize,
    /// Backticks seen, not yet known to open or close a code span.
    ticks: usize,
    /// The last character emitted was not whitespace.
    after_word: bool,
    /// Style of the line (heading), under the inline styles.
    base: &'static str,
    /// A style is on in the output.
    styled: bool,
}

impl Inline {
    fn new(base: &'static str) -> Inline {
        Inline {
            base,
            ..Inline::default()
        }
    }

    fn restyle(&mut self, out: &mut String) {
        if self.styled {
            out.push_str(RESET);
        }
        let mut on = String::from(self.base);
        if self.bold {
            on.push_str(BOLD);
        }
        if self.italic {
            on.push_str(ITALIC);
        }
        if self.code > 0 {
            on.push_str(CODE);
        }
        self.styled = !on.is_empty();
        out.push_str(&on);
    }

    /// Decides held stars, given the character after them (None: the end of the line).
    fn settle(&mut self, next: Option<char>, out: &mut String) {
        let n = std::mem::take(&mut self.stars);
        if n == 0 {
            return;
        }
        let opens = next.is_some_and(|c| !c.is_whitespace());
        let toggled = match n {
            1 if self.italic && self.after_word => {
                self.italic = false;
                true
            }
            1 if !self.italic && opens => {
                self.italic = true;
                true
            }
            2 if self.bold && self.after_word => {
                self.bold = false;
                true
            }
            2 if !self.bold && opens => {
                self.bold = true;
                true
            }
            _ => false,
        };
        if toggled {
            self.restyle(out);
        } else {
            out.push_str(&"*".repeat(n));
            self.after_word = true;
        }
    }

    /// Decides held backticks: they open a code span, close the one they match, or are text
    /// inside a span opened by a different number.
    fn settle_ticks(&mut self, out: &mut String) {
        let n = std::mem::take(&mut self.ticks);
        if n == 0 {
            return;
        }
        if self.code == 0 {
            self.settle(Some('`'), out);
            self.code = n;
            self.restyle(out);
        } else if self.code == n {
            self.code = 0;
            self.restyle(out);
            self.after_word = true;
        } else {
            out.push_str(&"`".repeat(n));
        }
    }

    fn push(&mut self, c: char, out: &mut String) {
        if c == '`' {
            self.ticks += 1;
            return;
        }
        self.settle_ticks(out);
        if self.code > 0 {
            out.push(c);
            return;
        }
        if c == '*' {
            self.stars += 1;
            return;
        }
        self.settle(Some(c), out);
        out.push(c);
        self.after_word = !c.is_whitespace();
    }

    /// Ends the line: held stars settled, styles off.
    fn end(&mut self, out: &mut String) {
        self.settle_ticks(out);
        self.settle(None, out);
        if self.styled {
            out.push_str(RESET);
        }
        *self = Inline::new(self.base);
    }
}

/// The streaming renderer of one answer.
pub(super) struct Markdown {
    /// The start of the current line, while what it is is not known yet.
    pending: String,
    kind: Option<Kind>,
    inline: Inline,
    /// Inside a fenced code block: its fence (three or more backticks or tildes).
    fence: Option<String>,
    /// Rows of the table being read.
    table: Vec<String>,
    /// Columns: paragraphs, list items and quotes wrap at word boundaries to this width
    /// (code blocks and tables do not); rules are drawn to it.
    pub width: usize,
    /// The word wrapping of the current line.
    wrap: crate::text::wrap::Stream,
}

/// What the start of a line makes it.
enum Start {
    /// More characters are needed.
    Wait,
    /// A prefix to print in place of the markers, the rest of the line streamed as `Kind`.
    Stream {
        prefix: String,
        skip: usize,
        kind: Kind,
    },
    /// The whole line is needed (a fence, a table row or a rule).
    Whole,
}

fn is_rule(t: &str) -> bool {
    let t = t.trim();
    let Some(m) = t.chars().next() else {
        return false;
    };
    matches!(m, '-' | '*' | '_')
        && t.chars().filter(|&c| c == m).count() >= 3
        && t.chars().all(|c| c == m || c == ' ')
}

fn fence_of(t: &str) -> Option<String> {
    let t = t.trim_start();
    let m = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|&c| c == m).count();
    (n >= 3).then(|| m.to_string().repeat(n))
}

fn is_table_row(t: &str) -> bool {
    let t = t.trim();
    t.starts_with('|') && t.len() > 1 && t.matches('|').count() >= 2
}

fn cells(row: &str) -> Vec<String> {
    let t = row.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(|c| c.trim().to_string()).collect()
}

fn is_separator(cells: &[String]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|c| {
            let c = c.trim_start_matches(':').trim_end_matches(':');
            !c.is_empty() && c.chars().all(|x| x == '-')
        })
}

/// Rendered text with its colours taken out: headings keep their bold, code spans lose their
/// colour; the layout and the other styles stay.
pub(super) fn uncoloured(s: &str) -> String {
    s.replace(HEADING, BOLD).replace(CODE, "")
}

/// Text with our own SGR sequences removed.
fn plain(s: &str) -> String {
    crate::text::wrap::visible_chars(s).collect()
}

fn styled_cell(text: &str) -> String {
    let mut inl = Inline::new("");
    let mut out = String::new();
    for c in text.chars() {
        inl.push(c, &mut out);
    }
    inl.end(&mut out);
    out
}

impl Markdown {
    pub(super) fn new(width: usize) -> Markdown {
        Markdown {
            pending: String::new(),
            kind: None,
            inline: Inline::new(""),
            fence: None,
            table: Vec::new(),
            width,
            wrap: crate::text::wrap::Stream::default(),
        }
    }

    /// The start of a line, as far as it has come.
    fn start(&self, line: &str, complete: bool) -> Start {
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let stream = |prefix: String, skip: usize, kind: Kind| Start::Stream { prefix, skip, kind };
        let paragraph = || stream(String::new(), 0, Kind::Paragraph);
        if let Some(f) = &self.fence {
            // The closing fence, or a line of code.
            let could_close = body.chars().all(|c| c == ' ' || f.starts_with(c));
            if !could_close || body.len() > f.len() + 8 {
                return stream(String::new(), 0, Kind::Code);
            }
            return if complete { Start::Whole } else { Start::Wait };
        }
        let Some(first) = body.chars().next() else {
            return if complete { paragraph() } else { Start::Wait };
        };
        let second = body.chars().nth(1);
        match first {
            '`' | '~' => {
                if fence_of(body).is_some() {
                    return if complete { Start::Whole } else { Start::Wait };
                }
                let run = body.chars().take_while(|&c| c == first).count();
                if run == body.chars().count() && !complete {
                    return Start::Wait;
                }
                paragraph()
            }
            '#' => {
                let n = body.chars().take_while(|&c| c == '#').count();
                match body.chars().nth(n) {
                    None if !complete => Start::Wait,
                    Some(' ') if n <= 6 => stream(String::new(), indent + n + 1, Kind::Heading),
                    _ => paragraph(),
                }
            }
            '|' => {
                if complete {
                    Start::Whole
                } else {
                    Start::Wait
                }
            }
            '-' | '*' | '+' | '_' => match second {
                None if !complete => Start::Wait,
                Some(' ') if first != '_' => {
                    let rest = &body[2..];
                    if is_rule(body) && (complete || !rest.trim().is_empty()) {
                        return if complete { Start::Whole } else { Start::Wait };
                    }
                    if first == '*' && !complete && rest.chars().all(|c| c == '*' || c == ' ') {
                        // "* *" may still become a rule.
                        if rest.contains('*') {
                            return Start::Wait;
                        }
                    }
                    stream(
                        format!("{}• ", " ".repeat(indent)),
                        indent + 2,
                        Kind::Paragraph,
                    )
                }
                Some(c) if c == first => {
                    if body.chars().all(|c| c == first || c == ' ') {
                        if complete {
                            return if is_rule(body) {
                                Start::Whole
                            } else {
                                paragraph()
                            };
                        }
                        return Start::Wait;
                    }
                    paragraph()
                }
                _ => paragraph(),
            },
            '0'..='9' => {
                let digits = body.chars().take_while(char::is_ascii_digit).count();
                let mut after = body[digits..].chars();
                match (after.next(), after.next()) {
                    (None, _) | (Some('.' | ')'), None) if !complete => Start::Wait,
                    (Some('.' | ')'), Some(' ')) => {
                        let n = indent + digits + 2;
                        let marker = format!("{BOLD}{}{RESET}", &line[..n]);
                        stream(marker, n, Kind::Paragraph)
                    }
                    _ => paragraph(),
                }
            }
            '>' => {
                let skip = indent + 1 + usize::from(second == Some(' '));
                if second.is_none() && !complete {
                    return Start::Wait;
                }
                stream(
                    format!("{}{DIM}│{RESET} ", " ".repeat(indent)),
                    skip,
                    Kind::Paragraph,
                )
            }
            _ => paragraph(),
        }
    }

    /// Renders streamed text; returns what to print now.
    pub(super) fn feed(&mut self, text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            match c {
                '\r' => {}
                '\n' => self.close_line(&mut out),
                c => self.push(c, &mut out),
            }
        }
        out
    }

    /// The end of the answer: what was held back, rendered.
    pub(super) fn finish(&mut self) -> String {
        let mut out = String::new();
        if self.kind.is_some() || !self.pending.is_empty() {
            self.close_line(&mut out);
            // The answer's last line has no newline of its own.
            if out.ends_with('\n') && self.table.is_empty() {
                out.pop();
            }
        }
        self.flush_table(&mut out);
        self.fence = None;
        out
    }

    fn push(&mut self, c: char, out: &mut String) {
        if let Some(kind) = &self.kind {
            match kind {
                Kind::Code => out.push(c),
                Kind::Paragraph | Kind::Heading => {
                    let mut styled = String::new();
                    self.inline.push(c, &mut styled);
                    self.wrap.push(&styled, self.width, out);
                }
            }
            return;
        }
        self.pending.push(c);
        self.decide(false, out);
    }

    /// Decides the current line's kind if its start allows; prints what it can.
    fn decide(&mut self, complete: bool, out: &mut String) {
        match self.start(&self.pending, complete) {
            Start::Wait => {}
            Start::Whole => {
                if complete {
                    let line = std::mem::take(&mut self.pending);
                    self.whole_line(&line, out);
                }
            }
            Start::Stream { prefix, skip, kind } => {
                self.flush_table(out);
                let line = std::mem::take(&mut self.pending);
                out.push_str(&prefix);
                // Continuation lines start under the text: a quote's bar again, else spaces.
                let bare = plain(&prefix);
                let hang = if bare.contains('│') {
                    bare.clone()
                } else {
                    " ".repeat(str_width(&bare))
                };
                self.wrap.start_line(str_width(&bare), hang);
                self.inline = Inline::new(match kind {
                    Kind::Heading => HEADING,
                    _ => "",
                });
                if kind == Kind::Heading {
                    self.inline.restyle(out);
                }
                if kind == Kind::Code {
                    out.push_str(CODE);
                }
                self.kind = Some(kind);
                let rest = line.get(skip..).unwrap_or("").to_string();
                for c in rest.chars() {
                    self.push(c, out);
                }
            }
        }
    }

    /// A line that was held whole: a fence, a table row, a rule.
    fn whole_line(&mut self, line: &str, out: &mut String) {
        if let Some(f) = &self.fence {
            if line.trim() == f.as_str()
                || fence_of(line).is_some_and(|g| g.starts_with(f.as_str()))
            {
                self.fence = None;
                out.push_str(&format!("{DIM}{}{RESET}\n", "─".repeat(self.rule())));
            } else {
                out.push_str(&format!("{CODE}{line}{RESET}\n"));
            }
            return;
        }
        if is_table_row(line) {
            self.table.push(line.to_string());
            return;
        }
        self.flush_table(out);
        if let Some(f) = fence_of(line) {
            let lang = line.trim_start()[f.len()..].trim();
            let label = if lang.is_empty() {
                String::new()
            } else {
                format!(" {lang} ")
            };
            let rest = self.rule().saturating_sub(str_width(&label) + 2);
            out.push_str(&format!("{DIM}──{label}{}{RESET}\n", "─".repeat(rest)));
            self.fence = Some(f);
        } else if is_rule(line) {
            out.push_str(&format!("{DIM}{}{RESET}\n", "─".repeat(self.rule())));
        } else {
            // Held for nothing (a lone `|`): a paragraph after all.
            self.kind = Some(Kind::Paragraph);
            self.inline = Inline::new("");
            for c in line.chars() {
                self.inline.push(c, out);
            }
            self.inline.end(out);
            self.kind = None;
            out.push('\n');
        }
    }

    fn rule(&self) -> usize {
        self.width.clamp(3, RULE_MAX)
    }

    /// The line ends (a newline, or the end of the answer).
    fn close_line(&mut self, out: &mut String) {
        if self.kind.is_none() {
            // Complete now: a line held whole is printed (or kept as a table row) here.
            self.decide(true, out);
        }
        match self.kind.take() {
            Some(Kind::Code) => {
                out.push_str(RESET);
                out.push('\n');
            }
            Some(_) => {
                let mut styled = String::new();
                self.inline.end(&mut styled);
                self.wrap.push(&styled, self.width, out);
                self.wrap.end_line(self.width, out);
                out.push('\n');
            }
            None => {}
        }
    }

    fn flush_table(&mut self, out: &mut String) {
        if self.table.is_empty() {
            return;
        }
        let rows: Vec<Vec<String>> = std::mem::take(&mut self.table)
            .iter()
            .map(|r| cells(r))
            .collect();
        let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
        let sep = rows.get(1).is_some_and(|r| is_separator(r));
        let right: Vec<bool> = (0..ncols)
            .map(|i| {
                sep && rows[1]
                    .get(i)
                    .is_some_and(|c| c.ends_with(':') && !c.starts_with(':'))
            })
            .collect();
        let styled: Vec<Vec<String>> = rows
            .iter()
            .enumerate()
            .map(|(ri, r)| {
                (0..ncols)
                    .map(|i| {
                        let cell = r.get(i).map(String::as_str).unwrap_or("");
                        if sep && ri == 0 {
                            format!("{BOLD}{}{RESET}", plain(&styled_cell(cell)))
                        } else {
                            styled_cell(cell)
                        }
                    })
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = (0..ncols)
            .map(|i| {
                styled
                    .iter()
                    .enumerate()
                    .filter(|(ri, _)| !(sep && *ri == 1))
                    .map(|(_, r)| visible_width(&r[i]))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for (ri, row) in styled.iter().enumerate() {
            let mut line = String::new();
            if sep && ri == 1 {
                let parts: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                line = format!("{DIM}{}{RESET}", parts.join("─┼─"));
            } else {
                for (i, cell) in row.iter().enumerate() {
                    if i > 0 {
                        line.push_str(&format!(" {DIM}│{RESET} "));
                    }
                    let pad = " ".repeat(widths[i] - visible_width(cell));
                    if right[i] {
                        line.push_str(&pad);
                        line.push_str(cell);
                    } else {
                        line.push_str(cell);
                        if i + 1 < row.len() {
                            line.push_str(&pad);
                        }
                    }
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders `text` fed in pieces of `n` characters, with escapes shown as `<...>` names.
    fn render(text: &str, n: usize) -> String {
        let mut md = Markdown::new(20);
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::new();
        for piece in chars.chunks(n) {
            out.push_str(&md.feed(&piece.iter().collect::<String>()));
        }
        out.push_str(&md.finish());
        out.replace(RESET, "</>")
            .replace(HEADING, "<h>")
            .replace(BOLD, "<b>")
            .replace(ITALIC, "<i>")
            .replace(DIM, "<dim>")
            .replace(CODE, "<code>")
    }

    /// The same output whatever the pieces.
    fn check(text: &str, want: &str) {
        for n in [1, 2, 3, 7, 1000] {
            assert_eq!(render(text, n), want, "pieces of {n}");
        }
    }

    #[test]
    fn plain_text_passes_through() {
        check(
            "Hello, world.\nTwo lines\n\n",
            "Hello, world.\nTwo lines\n\n",
        );
        check("no newline at the end", "no newline at the\nend");
        check("2 * 3 * 4 = 24\n", "2 * 3 * 4 = 24\n");
    }

    #[test]
    fn headings_and_emphasis() {
        check("# Title\n", "<h>Title</>\n");
        check("### Deep **bold**\n", "<h>Deep </><h><b>bold</><h></>\n");
        check("#hashtag\n", "#hashtag\n");
        check(
            "Some **bold**, *italic* and `co*de`.\n",
            "Some <b>bold</>, <i>italic</>\nand <code>co*de</>.\n",
        );
        check("a*b*c\n", "a<i>b</>c\n");
        check("**unclosed\n", "<b>unclosed</>\n");
    }

    #[test]
    fn lists_and_quotes() {
        check(
            "- one\n  * two\n3. three\n> quoted\n",
            "• one\n  • two\n<b>3. </>three\n<dim>│</> quoted\n",
        );
        check("-not a list\n", "-not a list\n");
    }

    #[test]
    fn long_lines_wrap_at_words_under_their_marker_but_code_does_not() {
        let url = "https://example.com/a/very/long/path";
        check(
            &format!("- item with words and {url} here\n> quoted words that wrap\n"),
            &format!(
                "• item with words\n  and\n  {url}\n  here\n<dim>│</> quoted words that\n│ wrap\n"
            ),
        );
        check(
            "1. first second third fourth\n",
            "<b>1. </>first second\n   third fourth\n",
        );
        check(
            "```\nlet some_long_code = call(with, many, args);\n```\n",
            "<dim>────────────────────</>\n<code>let some_long_code = call(with, many, args);</>\n<dim>────────────────────</>\n",
        );
    }

    #[test]
    fn rules_and_fenced_code() {
        check("---\n", "<dim>────────────────────</>\n");
        check(
            "```rust\nlet a = *b; // **no**\n```\nafter\n",
            "<dim>── rust ────────────</>\n<code>let a = *b; // **no**</>\n<dim>────────────────────</>\nafter\n",
        );
        check("``in`side``\n", "<code>in`side</>\n");
    }

    #[test]
    fn tables_are_aligned_once_complete() {
        check(
            "| Name | Size |\n|---|--:|\n| a | 1 |\n| **long name** | 200 |\nafter\n",
            "<b>Name</>      <dim>│</> <b>Size</>\n\
             <dim>──────────┼─────</>\n\
             a         <dim>│</>    1\n\
             <b>long name</> <dim>│</>  200\n\
             after\n",
        );
        check("| a | b |\n", "a <dim>│</> b\n");
    }
}
