//! `*` and `?` patterns matched against a whole text: the names of the bash tool's environment
//! allow list (crush(1) ENVIRONMENT) and Claude Code's Bash permission rules (crush(1) SECURITY).

/// One piece of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Any run of characters, none included.
    Star,
    /// Exactly one character.
    One,
    /// This character.
    Char(char),
}

/// Whether `parts` cover the whole of `text`.
pub(crate) fn matches(parts: &[Part], text: &[char]) -> bool {
    // Iterative matching: the last `Star` seen and where it started matching; on a mismatch it
    // takes one more character.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < text.len() {
        match parts.get(pi) {
            Some(Part::Star) => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(Part::One) => {
                pi += 1;
                ti += 1;
            }
            Some(Part::Char(c)) if *c == text[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    parts[pi..].iter().all(|p| *p == Part::Star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<Part> {
        p.chars()
            .map(|c| match c {
                '*' => Part::Star,
                '?' => Part::One,
                c => Part::Char(c),
            })
            .collect()
    }

    #[test]
    fn stars_take_any_run_and_question_marks_one_character() {
        let m = |p: &str, t: &str| matches(&parts(p), &t.chars().collect::<Vec<_>>());
        assert!(m("git push --force*", "git push --force-with-lease"));
        assert!(m("*--no-verify*", "git commit --no-verify -m x"));
        assert!(m("a*b*c", "aXbYbc"));
        assert!(!m("a*b*c", "aXbY"));
        assert!(m("AWS_?", "AWS_X"));
        assert!(!m("AWS_?", "AWS_XY"));
        assert!(m("*", ""));
        assert!(!m("x", ""));
    }
}
