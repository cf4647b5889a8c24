//! How many terminal cells a character takes: 0 (combining marks, format characters), 2 (East
//! Asian wide and fullwidth), else 1. The ranges are generated (`src/text/width_table.py`).

use super::width_table::{WIDE, ZERO};

fn in_table(table: &[(u32, u32)], c: u32) -> bool {
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Cells `c` takes; control characters take none (they are never printed as they are).
pub(crate) fn char_width(c: char) -> usize {
    let u = c as u32;
    if u < 0x7f {
        return usize::from(u >= 0x20);
    }
    if u < 0xa0 {
        return 0;
    }
    if in_table(ZERO, u) {
        0
    } else if in_table(WIDE, u) {
        2
    } else {
        1
    }
}

/// Cells `s` takes.
pub(crate) fn str_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// The longest prefix of `s` that fits in `cells`.
pub(crate) fn truncate(s: &str, cells: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += char_width(c);
        if used > cells {
            return &s[..i];
        }
    }
    s
}

/// `s` cut to `cells`, its last cell an ellipsis when anything was cut.
pub(crate) fn clip(s: &str, cells: usize) -> String {
    if str_width(s) <= cells {
        return s.to_string();
    }
    format!("{}…", truncate(s, cells.saturating_sub(1)))
}

/// `s` padded with spaces to `cells` (a column of a table; a wider `s` is left as it is).
pub(crate) fn pad(s: &str, cells: usize) -> String {
    let w = str_width(s);
    format!("{s}{}", " ".repeat(cells.saturating_sub(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_of_known_characters() {
        assert_eq!(char_width('a'), 1);
        assert_eq!(char_width('é'), 1);
        assert_eq!(char_width('\u{301}'), 0, "combining acute");
        assert_eq!(char_width('\u{200d}'), 0, "zero width joiner");
        assert_eq!(char_width('\u{ad}'), 1, "soft hyphen is shown");
        assert_eq!(char_width('中'), 2);
        assert_eq!(char_width('ｱ'), 1, "halfwidth katakana");
        assert_eq!(char_width('Ａ'), 2, "fullwidth latin");
        assert_eq!(char_width('한'), 2);
        assert_eq!(char_width('\u{1161}'), 0, "a joining Hangul vowel");
        assert_eq!(char_width('😀'), 2);
        assert_eq!(char_width('\u{1b}'), 0);
        assert_eq!(char_width('\u{85}'), 0);
        assert_eq!(str_width("中文 ok"), 7);
        assert_eq!(truncate("中文 ok", 3), "中");
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(clip("中文 ok", 4), "中…");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(pad("中文", 6), "中文  ");
        assert_eq!(pad("abcdef", 3), "abcdef");
    }

    #[test]
    fn tables_are_sorted_and_disjoint() {
        for t in [ZERO, WIDE] {
            assert!(t.len() > 10);
            for w in t.windows(2) {
                assert!(w[0].0 <= w[0].1 && w[0].1 + 1 < w[1].0, "{w:?}");
            }
        }
    }
}
