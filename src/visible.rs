//! The one sanitiser for text that reaches a terminal from a model, a tool or a hook (answers,
//! tool lines, permission questions, diffs, hook reasons): control characters are shown
//! visibly instead of acted on, so such text can never move the cursor, erase a line, change
//! colours or redraw a question.
//!
//! C0 controls and DEL become caret notation (`ESC` is `^[`, CR `^M`); C1 controls and the
//! Unicode direction overrides become `<U+XXXX>`. `text` keeps newlines and tabs (an answer has
//! lines); `line` shows newlines too, for what must stay on one line.

use std::borrow::Cow;

/// Whether `c` would be acted on by a terminal (or reorder what is shown) rather than printed.
fn is_control(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' => !keep_newlines,
        '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}' | '\u{80}'..='\u{9f}' => true,
        // Bidirectional embeddings, overrides and isolates, and the marks.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' => true,
        '\u{61c}' => true,
        _ => false,
    }
}

fn show(c: char, out: &mut String) {
    match c {
        '\u{0}'..='\u{1f}' => {
            out.push('^');
            out.push(char::from(c as u8 + 0x40));
        }
        '\u{7f}' => out.push_str("^?"),
        _ => out.push_str(&format!("<U+{:04X}>", c as u32)),
    }
}

fn sanitize(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_control(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c, keep_newlines) {
            show(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` with every control character shown visibly; newlines and tabs kept.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    sanitize(s, true)
}

/// `s` with every control character shown visibly, newlines included (`^J`): one line.
pub(crate) fn line(s: &str) -> Cow<'_, str> {
    sanitize(s, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_acted_on() {
        let attack = "touch pwned # \x1b[2K\r\x1b[1A\x1b[2KAllow bash: ls -la";
        assert_eq!(
            line(attack),
            "touch pwned # ^[[2K^M^[[1A^[[2KAllow bash: ls -la"
        );
        assert_eq!(line("a\nb\tc\x7f\x07"), "a^Jb\tc^?^G");
        assert_eq!(text("a\nb\r\n"), "a\nb^M\n");
        assert_eq!(text("\u{9b}31m x \u{202e}cba"), "<U+009B>31m x <U+202E>cba");
        assert!(matches!(text("plain é ✓\n"), Cow::Borrowed(_)));
    }
}
