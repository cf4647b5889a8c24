//! A small line-based unified diff (LCS over the changed middle, 3 lines of context), used by
//! edit, multiedit and write for the permission prompt and the result metadata.

const CONTEXT: usize = 3;
/// Above this many cells the LCS table is skipped and the changed middle is shown as replaced.
const MAX_CELLS: usize = 4_000_000;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    /// Unified diff text (empty when nothing changed).
    pub text: String,
    pub additions: usize,
    pub removals: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Equal(usize, usize),
    Del(usize),
    Ins(usize),
}

/// Lines including their terminating newline (the last one may lack it).
fn split_lines(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

fn diff_ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let mut pre = 0;
    while pre < a.len() && pre < b.len() && a[pre] == b[pre] {
        pre += 1;
    }
    let mut suf = 0;
    while suf < a.len() - pre && suf < b.len() - pre && a[a.len() - 1 - suf] == b[b.len() - 1 - suf]
    {
        suf += 1;
    }
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut ops: Vec<Op> = (0..pre).map(|i| Op::Equal(i, i)).collect();
    let (n, m) = (ma.len(), mb.len());
    if n == 0 || m == 0 || n.saturating_mul(m) > MAX_CELLS {
        ops.extend((0..n).map(|i| Op::Del(pre + i)));
        ops.extend((0..m).map(|j| Op::Ins(pre + j)));
    } else {
        // lcs[i][j] = LCS length of ma[i..] and mb[j..]; min(n, m) <= 2000 fits in u16.
        let w = m + 1;
        let mut lcs = vec![0u16; (n + 1) * w];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * w + j] = if ma[i] == mb[j] {
                    lcs[(i + 1) * w + j + 1] + 1
                } else {
                    lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n && j < m {
            if ma[i] == mb[j] {
                ops.push(Op::Equal(pre + i, pre + j));
                i += 1;
                j += 1;
            } else if lcs[(i + 1) * w + j] >= lcs[i * w + j + 1] {
                ops.push(Op::Del(pre + i));
                i += 1;
            } else {
                ops.push(Op::Ins(pre + j));
                j += 1;
            }
        }
        ops.extend((i..n).map(|i| Op::Del(pre + i)));
        ops.extend((j..m).map(|j| Op::Ins(pre + j)));
    }
    ops.extend((0..suf).map(|k| Op::Equal(a.len() - suf + k, b.len() - suf + k)));
    ops
}

fn push_line(out: &mut String, prefix: char, line: &str) {
    out.push(prefix);
    match line.strip_suffix('\n') {
        Some(l) => {
            out.push_str(l);
            out.push('\n');
        }
        None => {
            out.push_str(line);
            out.push_str("\n\\ No newline at end of file\n");
        }
    }
}

/// The unified diff from `old` to `new`, labelled with `path`.
pub(crate) fn unified(old: &str, new: &str, path: &str) -> Diff {
    let a = split_lines(old);
    let b = split_lines(new);
    let ops = diff_ops(&a, &b);
    let additions = ops.iter().filter(|o| matches!(o, Op::Ins(_))).count();
    let removals = ops.iter().filter(|o| matches!(o, Op::Del(_))).count();
    if additions == 0 && removals == 0 {
        return Diff::default();
    }
    // Position (old lines before, new lines before) of every op.
    let mut pos = Vec::with_capacity(ops.len());
    let (mut oa, mut ob) = (0usize, 0usize);
    for op in &ops {
        pos.push((oa, ob));
        match op {
            Op::Equal(..) => {
                oa += 1;
                ob += 1;
            }
            Op::Del(_) => oa += 1,
            Op::Ins(_) => ob += 1,
        }
    }
    let is_eq = |k: usize| matches!(ops[k], Op::Equal(..));
    let mut text = format!("--- {path}\n+++ {path}\n");
    let mut k = 0;
    while k < ops.len() {
        if is_eq(k) {
            k += 1;
            continue;
        }
        let start = k.saturating_sub(CONTEXT);
        let mut end = k;
        loop {
            while end < ops.len() && !is_eq(end) {
                end += 1;
            }
            let mut run = 0;
            while end + run < ops.len() && is_eq(end + run) {
                run += 1;
            }
            if end + run >= ops.len() || run > 2 * CONTEXT {
                end = (end + CONTEXT).min(ops.len());
                break;
            }
            end += run;
        }
        let old_count = ops[start..end]
            .iter()
            .filter(|o| !matches!(o, Op::Ins(_)))
            .count();
        let new_count = ops[start..end]
            .iter()
            .filter(|o| !matches!(o, Op::Del(_)))
            .count();
        let (o0, n0) = pos[start];
        let os = if old_count > 0 { o0 + 1 } else { o0 };
        let ns = if new_count > 0 { n0 + 1 } else { n0 };
        text.push_str(&format!("@@ -{os},{old_count} +{ns},{new_count} @@\n"));
        for op in &ops[start..end] {
            match *op {
                Op::Equal(i, _) => push_line(&mut text, ' ', a[i]),
                Op::Del(i) => push_line(&mut text, '-', a[i]),
                Op::Ins(j) => push_line(&mut text, '+', b[j]),
            }
        }
        k = end;
    }
    Diff {
        text,
        additions,
        removals,
    }
}

/// The hunks of a unified diff text as Claude Code's `structuredPatch`:
/// `[{oldStart, oldLines, newStart, newLines, lines: ["-old", "+new", " same"]}]`.
pub(crate) fn structured_patch(text: &str) -> serde_json::Value {
    let mut hunks: Vec<serde_json::Value> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut head: Option<[u64; 4]> = None;
    let flush = |head: &mut Option<[u64; 4]>, lines: &mut Vec<String>, out: &mut Vec<_>| {
        if let Some([os, ol, ns, nl]) = head.take() {
            out.push(serde_json::json!({
                "oldStart": os, "oldLines": ol, "newStart": ns, "newLines": nl,
                "lines": std::mem::take(lines),
            }));
        }
    };
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("@@ -") {
            flush(&mut head, &mut lines, &mut hunks);
            // "a,b +c,d @@"; a missing count means 1.
            let nums: Vec<u64> = rest
                .split([' ', '+', '@'])
                .filter(|w| !w.is_empty())
                .take(2)
                .flat_map(|range| {
                    let (start, count) = range.split_once(',').unwrap_or((range, "1"));
                    [start.parse().unwrap_or(0), count.parse().unwrap_or(0)]
                })
                .collect();
            if let [os, ol, ns, nl] = nums[..] {
                head = Some([os, ol, ns, nl]);
            }
        } else if head.is_some() && !l.starts_with('\\') {
            lines.push(l.to_string());
        }
    }
    flush(&mut head, &mut lines, &mut hunks);
    serde_json::Value::Array(hunks)
}

/// A unified diff as shown on stderr, each line ending in a newline: headers bold, additions
/// green, removals red, hunk lines cyan when `color`; control characters made visible.
pub(crate) fn painted(diff: &str, color: bool) -> String {
    let paint = |style: &str, l: &str| {
        if color {
            format!("{style}{l}\x1b[0m")
        } else {
            l.to_string()
        }
    };
    let mut s = String::new();
    for l in diff.lines() {
        let l = &crate::visible::line(l);
        let styled = if l.starts_with("+++") || l.starts_with("---") {
            paint("\x1b[1m", l)
        } else if l.starts_with('+') {
            paint("\x1b[32m", l)
        } else if l.starts_with('-') {
            paint("\x1b[31m", l)
        } else if l.starts_with("@@") {
            paint("\x1b[36m", l)
        } else {
            l.to_string()
        };
        s.push_str(&styled);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_change() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "f"), Diff::default());
    }

    #[test]
    fn single_change_with_context() {
        let old: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l5\n", "five\n");
        let d = unified(&old, &new, "f.txt");
        assert_eq!(
            d.text,
            "--- f.txt\n+++ f.txt\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+five\n l6\n l7\n l8\n"
        );
        assert_eq!((d.additions, d.removals), (1, 1));
    }

    #[test]
    fn separate_and_merged_hunks() {
        let old: String = (1..=30).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l2\n", "two\n").replace("l25\n", "");
        let d = unified(&old, &new, "f");
        assert_eq!(d.text.matches("@@ -").count(), 2, "{}", d.text);
        assert!(d.text.contains("@@ -1,5 +1,5 @@"));
        assert!(d.text.contains("@@ -22,7 +22,6 @@"));
        let new = old.replace("l2\n", "two\n").replace("l7\n", "seven\n");
        assert_eq!(unified(&old, &new, "f").text.matches("@@ -").count(), 1);
    }

    #[test]
    fn creation_deletion_and_missing_newline() {
        let d = unified("", "a\nb\n", "f");
        assert_eq!(d.text, "--- f\n+++ f\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        assert_eq!(
            structured_patch(&d.text),
            serde_json::json!([{"oldStart": 0, "oldLines": 0, "newStart": 1, "newLines": 2,
                "lines": ["+a", "+b"]}])
        );
        let d = unified("a\n", "", "f");
        assert_eq!(d.text, "--- f\n+++ f\n@@ -1,1 +0,0 @@\n-a\n");
        let d = unified("a\nb", "a\nb\n", "f");
        assert!(d.text.contains("-b\n\\ No newline at end of file\n+b\n"));
    }

    #[test]
    fn interleaved_lcs() {
        let d = unified("a\nb\nc\nd\n", "a\nx\nc\ny\nd\n", "f");
        assert_eq!((d.additions, d.removals), (2, 1));
        assert!(d.text.contains(" a\n-b\n+x\n c\n+y\n d\n"), "{}", d.text);
    }
}
