//! The whitespace-normalised fallback of `edit` and `multiedit` (crush(1) TOOLS, edit): when
//! `old_string` is not in the file as written, whole lines of the file that equal it once every
//! run of whitespace is one space are the match, if there is exactly one such place (or any
//! number with `replace_all`). `new_string` is then re-indented to the file's style and nesting.

/// The text the model is told after a whitespace-corrected edit.
pub(crate) const CORRECTED_NOTE: &str = "Note: old_string did not match exactly (whitespace corrected): \
     the edit was applied to the one place whose text is the same apart from whitespace, and \
     new_string was re-indented to the file's style. View the file to verify the result.";

/// A line with each run of whitespace made one space, and none at either end.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The leading spaces and tabs of `line`, and the rest; None for a blank line.
fn indent_of(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start_matches([' ', '\t']);
    (!rest.trim().is_empty()).then(|| (&line[..line.len() - rest.len()], rest))
}

/// The indentation unit of `lines`: a tab when an indented line starts with one, else the
/// smallest run of leading spaces; None when no line is indented.
fn unit_of<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut spaces: Option<usize> = None;
    for (lead, _) in lines.into_iter().filter_map(indent_of) {
        if lead.contains('\t') {
            return Some("\t".to_string());
        }
        if !lead.is_empty() {
            spaces = Some(spaces.map_or(lead.len(), |s| s.min(lead.len())));
        }
    }
    spaces.map(|n| " ".repeat(n))
}

/// How many `unit`s deep the indentation `lead` is.
fn depth(lead: &str, unit: &str) -> usize {
    if unit == "\t" {
        lead.matches('\t').count()
    } else {
        lead.matches(' ').count() / unit.len().max(1)
    }
}

/// The depth of the first non-blank line of `lines`.
fn first_depth<'a>(lines: impl IntoIterator<Item = &'a str>, unit: &str) -> usize {
    lines
        .into_iter()
        .find_map(indent_of)
        .map_or(0, |(lead, _)| depth(lead, unit))
}

/// `new` re-indented from the unit the model wrote `old` in to the file's (`file_unit`), and
/// moved to the nesting of `actual` (the file's lines that matched `old`).
fn reindent(actual: &[&str], old: &str, new: &str, file_unit: Option<&str>) -> String {
    let Some(file_unit) = file_unit else {
        return new.to_string();
    };
    let source = unit_of(old.split('\n'))
        .or_else(|| unit_of(new.split('\n')))
        .unwrap_or_else(|| file_unit.to_string());
    let at = first_depth(actual.iter().copied(), file_unit) as isize;
    let was = first_depth(old.split('\n'), &source) as isize;
    let shift = at - was;
    if source == file_unit && shift == 0 {
        return new.to_string();
    }
    new.split('\n')
        .map(|line| match indent_of(line) {
            None => line.to_string(),
            Some((lead, rest)) => {
                let d = (depth(lead, &source) as isize + shift).max(0) as usize;
                format!("{}{rest}", file_unit.repeat(d))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first lines of the places in `lines` whose whole lines equal `want` (squeezed), apart
/// from each other.
fn places(lines: &[String], want: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let k = want.len();
    let mut i = 0;
    while k > 0 && i + k <= lines.len() {
        if lines[i..i + k] == *want {
            out.push(i);
            i += k;
        } else {
            i += 1;
        }
    }
    out
}

/// `content` with `old` replaced by `new` where they match apart from whitespace: at the one
/// such place, or at every one with `replace_all`; the new content and the number of places.
/// None when there is no such place, or several without `replace_all`. The file's line endings
/// (LF or CRLF) are kept.
pub(crate) fn replace(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Option<(String, usize)> {
    let crlf = content.contains("\r\n");
    let text = if crlf {
        content.replace("\r\n", "\n")
    } else {
        content.to_string()
    };
    let (mut old, mut new) = (old.replace("\r\n", "\n"), new.replace("\r\n", "\n"));
    // A final line break on both sides is the end of the last line, not an empty line to match.
    if old.ends_with('\n') && new.ends_with('\n') {
        old.pop();
        new.pop();
    }
    if old.trim().is_empty() {
        return None;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let squeezed: Vec<String> = lines.iter().map(|l| squeeze(l)).collect();
    let want: Vec<String> = old.split('\n').map(squeeze).collect();
    let found = places(&squeezed, &want);
    if found.is_empty() || (found.len() > 1 && !replace_all) {
        return None;
    }
    let file_unit = unit_of(lines.iter().copied());
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut next = 0;
    for &at in &found {
        out.extend(lines[next..at].iter().map(|l| l.to_string()));
        let actual = &lines[at..at + want.len()];
        out.extend(
            reindent(actual, &old, &new, file_unit.as_deref())
                .split('\n')
                .map(str::to_string),
        );
        next = at + want.len();
    }
    out.extend(lines[next..].iter().map(|l| l.to_string()));
    let joined = out.join("\n");
    Some((
        if crlf {
            joined.replace('\n', "\r\n")
        } else {
            joined
        },
        found.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_for_spaces_is_corrected_and_reindented_to_the_file() {
        let file = "fn main() {\n\tif x {\n\t\tcall(1,  2);\n\t}\n}\n";
        // The model wrote four spaces where the file has tabs, and squeezed a double space.
        let (out, n) = replace(
            file,
            "    if x {\n        call(1, 2);\n    }",
            "    if x {\n        call(1, 2);\n        more();\n    }",
            false,
        )
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            out,
            "fn main() {\n\tif x {\n\t\tcall(1, 2);\n\t\tmore();\n\t}\n}\n"
        );
    }

    #[test]
    fn the_nesting_of_the_match_wins_over_the_models() {
        let file = "a:\n    b:\n        c: 1\n";
        // Written without indentation: moved to the depth of the lines it matched.
        let (out, _) = replace(file, "c:   1\n", "c: 2\nd: 3\n", false).unwrap();
        assert_eq!(out, "a:\n    b:\n        c: 2\n        d: 3\n");
    }

    #[test]
    fn only_a_unique_whole_line_match_counts() {
        let file = "x = 1\n  x  =  1\ny = 2\n";
        assert_eq!(replace(file, "x =   1", "x = 3", false), None);
        let (out, n) = replace(file, "x =   1", "x = 3", true).unwrap();
        // Each place keeps its own nesting.
        assert_eq!((out.as_str(), n), ("x = 3\n  x = 3\ny = 2\n", 2));
        // Part of a line is not a match: the rest of the line would be lost.
        assert_eq!(replace("let y = 2;\n", "y  = 2", "y = 3", false), None);
        assert_eq!(replace("a\n", "  \n", "b", false), None);
        assert_eq!(replace("a\n", "zzz", "b", false), None);
    }

    #[test]
    fn crlf_is_kept() {
        let (out, _) = replace("a\r\n  b  c\r\nd\r\n", "b c\n", "b\nc\n", false).unwrap();
        assert_eq!(out, "a\r\n  b\r\n  c\r\nd\r\n");
    }
}
