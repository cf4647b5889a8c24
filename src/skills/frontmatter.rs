//! The YAML frontmatter of `SKILL.md` files and command files, parsed by hand: a mapping of
//! keys to plain, quoted or block scalars, one-level lists and maps (block or flow style), and
//! comments. What YAML allows beyond that (anchors, aliases, tags, nested structures) is either
//! an error naming the line or, under a key nothing reads, skipped. Line numbers in errors are
//! those of the file.

use std::fmt;

/// A value of the frontmatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar; None for an empty value, `~` or `null`.
    Scalar(Option<String>),
    List(Vec<String>),
    Map(Vec<(String, String)>),
    /// A nested structure this parser does not interpret.
    Nested,
}

/// One key of the frontmatter, its value and the line it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub key: String,
    pub value: Value,
    pub line: usize,
}

/// A markdown file split into its frontmatter and its body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Document {
    /// None: the file has no frontmatter.
    pub fields: Option<Vec<Field>>,
    pub body: String,
}

impl Document {
    /// The field `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&Field> {
        self.fields.as_ref()?.iter().find(|f| f.key == key)
    }
}

/// Splits `text` into frontmatter and body and parses the frontmatter. A file whose first
/// non-blank line is not `---` has none (its body is the whole text). Line endings may be
/// `\n`, `\r\n` or `\r`; a leading byte-order mark is ignored.
pub(crate) fn parse(text: &str) -> Result<Document, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let Some(start) = lines.iter().position(|l| !l.trim().is_empty()) else {
        return Ok(Document::default());
    };
    if lines[start].trim_end() != "---" {
        return Ok(Document {
            fields: None,
            body: text.into_owned(),
        });
    }
    let Some(len) = lines[start + 1..]
        .iter()
        .position(|l| l.trim_end() == "---")
    else {
        return Err(FrontmatterError::Unclosed { line: start + 1 });
    };
    let end = start + 1 + len;
    let fields = Parser {
        lines: &lines[start + 1..end],
        first: start + 2,
    }
    .fields()?;
    Ok(Document {
        fields: Some(fields),
        body: lines[end + 1..].join("\n"),
    })
}

struct Parser<'a> {
    lines: &'a [&'a str],
    /// The file's line number of `lines[0]`.
    first: usize,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `text` without a trailing comment (` #...`), trimmed.
fn strip_comment(text: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in text.char_indices() {
        if c == '#' && prev_space {
            return text[..i].trim();
        }
        prev_space = c == ' ' || c == '\t';
    }
    text.trim()
}

fn null_or(s: &str) -> Option<String> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => None,
        s => Some(s.to_string()),
    }
}

/// Splits `key: rest` (the colon followed by a space or the end of the line).
fn split_key(line: &str) -> Option<(&str, &str)> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(off) = line[i..].find(':') {
        let at = i + off;
        if at + 1 == bytes.len() || bytes[at + 1] == b' ' || bytes[at + 1] == b'\t' {
            let key = line[..at].trim();
            return (!key.is_empty()).then(|| (key, line[at + 1..].trim()));
        }
        i = at + 1;
    }
    None
}

fn unquote_key(key: &str) -> &str {
    for q in ['"', '\''] {
        if key.len() >= 2 && key.starts_with(q) && key.ends_with(q) {
            return &key[1..key.len() - 1];
        }
    }
    key
}

impl Parser<'_> {
    fn line_no(&self, i: usize) -> usize {
        self.first + i
    }

    fn err(&self, i: usize, msg: &str) -> FrontmatterError {
        FrontmatterError::Syntax {
            line: self.line_no(i),
            message: msg.to_string(),
        }
    }

    fn quote_err(&self, i: usize, source: QuoteError) -> FrontmatterError {
        FrontmatterError::Quote {
            line: self.line_no(i),
            source,
        }
    }

    fn fields(&self) -> Result<Vec<Field>, FrontmatterError> {
        let mut out: Vec<Field> = Vec::new();
        let mut i = 0;
        while i < self.lines.len() {
            let line = self.lines[i];
            if line.starts_with('\t') && !line.trim().is_empty() {
                return Err(self.err(i, "tabs cannot indent YAML; use spaces"));
            }
            if blank_or_comment(line) {
                i += 1;
                continue;
            }
            if indent(line) > 0 {
                return Err(self.err(i, "unexpected indentation"));
            }
            if line.starts_with("- ") || line.trim_end() == "-" {
                return Err(self.err(
                    i,
                    "the frontmatter must map keys to values (key: value), not be a list",
                ));
            }
            let Some((key, rest)) = split_key(line) else {
                return Err(self.err(i, "expected `key: value`"));
            };
            let key = unquote_key(key).to_string();
            if out.iter().any(|f| f.key == key) {
                return Err(self.err(i, &format!("duplicate key `{key}`")));
            }
            let (value, next) = self.value(rest, i)?;
            out.push(Field {
                key,
                value,
                line: self.line_no(i),
            });
            i = next;
        }
        Ok(out)
    }

    /// The lines after `i` that belong to a value started on line `i` (indented, or blank),
    /// as the index one past them. Trailing blank lines are not included.
    fn block_end(&self, i: usize) -> usize {
        let mut end = i + 1;
        let mut j = i + 1;
        while j < self.lines.len() {
            let l = self.lines[j];
            if l.trim().is_empty() {
                j += 1;
                continue;
            }
            if indent(l) == 0 && !l.starts_with('\t') {
                break;
            }
            j += 1;
            end = j;
        }
        end
    }

    /// The value of the key on line `i`, whose text after the colon is `rest`; and the index
    /// of the line after it.
    fn value(&self, rest: &str, i: usize) -> Result<(Value, usize), FrontmatterError> {
        let end = self.block_end(i);
        let first = rest.chars().next();
        match first {
            None => Ok((self.nested(i + 1, end)?, end)),
            Some('#') => Ok((self.nested(i + 1, end)?, end)),
            Some('"') | Some('\'') => {
                let (s, next) = self.quoted(rest, i)?;
                Ok((Value::Scalar(Some(s)), next))
            }
            Some('|') | Some('>') => {
                Ok((Value::Scalar(Some(self.block_scalar(rest, i, end)?)), end))
            }
            Some('[') | Some('{') => {
                let mut text = rest.to_string();
                let mut j = i + 1;
                let close = if first == Some('[') { ']' } else { '}' };
                while !strip_comment(&text).ends_with(close) && j < end {
                    text.push(' ');
                    text.push_str(self.lines[j].trim());
                    j += 1;
                }
                Ok((self.flow(strip_comment(&text), i)?, end))
            }
            Some('&') | Some('*') | Some('!') => Err(self.err(
                i,
                "YAML anchors, aliases and tags are not supported in a frontmatter",
            )),
            Some('@') | Some('`') => Err(self.err(
                i,
                &format!("a plain value cannot start with {}", first.unwrap_or('@')),
            )),
            Some(_) => {
                // A plain scalar, possibly continued on more indented lines (folded).
                let mut s = strip_comment(rest).to_string();
                let mut pending_breaks = 0;
                for j in i + 1..end {
                    let l = self.lines[j].trim();
                    if l.is_empty() {
                        pending_breaks += 1;
                        continue;
                    }
                    if l.starts_with('#') {
                        break;
                    }
                    if pending_breaks > 0 {
                        s.push_str(&"\n".repeat(pending_breaks));
                        pending_breaks = 0;
                    } else {
                        s.push(' ');
                    }
                    s.push_str(strip_comment(l));
                }
                Ok((Value::Scalar(null_or(&s)), end))
            }
        }
    }

    /// A value given on the lines `from..end` below its key: a list, a map, or nothing.
    fn nested(&self, from: usize, end: usize) -> Result<Value, FrontmatterError> {
        let lines: Vec<(usize, &str)> = (from..end)
            .map(|j| (j, self.lines[j]))
            .filter(|(_, l)| !blank_or_comment(l))
            .collect();
        let Some(&(_, l0)) = lines.first() else {
            return Ok(Value::Scalar(None));
        };
        if let Some((j, _)) = lines.iter().find(|(_, l)| l.starts_with('\t')) {
            return Err(self.err(*j, "tabs cannot indent YAML; use spaces"));
        }
        let base = indent(l0);
        let is_list = {
            let t = l0.trim_start();
            t.starts_with("- ") || t == "-"
        };
        let mut list = Vec::new();
        let mut map: Vec<(String, String)> = Vec::new();
        for &(j, l) in &lines {
            let t = l.trim();
            if indent(l) > base {
                // A continuation of the previous plain value, or something nested deeper.
                let last = if is_list {
                    list.last_mut()
                } else {
                    map.last_mut().map(|(_, v)| v)
                };
                match last {
                    Some(v) if !v.is_empty() && !t.starts_with("- ") && split_key(t).is_none() => {
                        v.push(' ');
                        v.push_str(strip_comment(t));
                        continue;
                    }
                    _ => return Ok(Value::Nested),
                }
            }
            if indent(l) < base {
                return Err(self.err(j, "inconsistent indentation"));
            }
            if is_list {
                let Some(item) = t
                    .strip_prefix('-')
                    .filter(|r| r.is_empty() || r.starts_with(' '))
                else {
                    return Err(self.err(j, "expected a list item (- value)"));
                };
                match self.inline_scalar(item.trim(), j)? {
                    Some(s) => list.push(s),
                    None => return Ok(Value::Nested),
                }
            } else {
                let Some((k, v)) = split_key(t) else {
                    return Err(self.err(j, "expected `key: value`"));
                };
                let k = unquote_key(k).to_string();
                if map.iter().any(|(e, _)| *e == k) {
                    return Err(self.err(j, &format!("duplicate key `{k}`")));
                }
                if v.is_empty() {
                    return Ok(Value::Nested);
                }
                match self.inline_scalar(v, j)? {
                    Some(s) => map.push((k, s)),
                    None => return Ok(Value::Nested),
                }
            }
        }
        Ok(if is_list {
            Value::List(list)
        } else {
            Value::Map(map)
        })
    }

    /// A scalar that must fit on line `j` (a list item, a map value). None: not a scalar.
    fn inline_scalar(&self, text: &str, j: usize) -> Result<Option<String>, FrontmatterError> {
        match text.chars().next() {
            Some('"') | Some('\'') => {
                let (s, rest) = unquote_inline(text).map_err(|e| self.quote_err(j, e))?;
                if !strip_comment(rest).is_empty() {
                    return Err(self.err(j, "unexpected text after a quoted value"));
                }
                Ok(Some(s))
            }
            Some('[') | Some('{') | Some('|') | Some('>') => Ok(None),
            Some('&') | Some('*') | Some('!') => Err(self.err(
                j,
                "YAML anchors, aliases and tags are not supported in a frontmatter",
            )),
            _ => Ok(Some(strip_comment(text).to_string())),
        }
    }

    /// A quoted scalar starting at `rest` on line `i`, possibly spanning lines (folded as YAML
    /// folds them); and the index of the line after it.
    fn quoted(&self, rest: &str, i: usize) -> Result<(String, usize), FrontmatterError> {
        let mut text = rest.to_string();
        let mut j = i;
        loop {
            match unquote_inline(&text) {
                Ok((s, after)) => {
                    if !strip_comment(after).is_empty() {
                        return Err(self.err(j, "unexpected text after a quoted value"));
                    }
                    return Ok((s, j + 1));
                }
                Err(QuoteError::NeverClosed) => {
                    j += 1;
                    let Some(next) = self.lines.get(j) else {
                        return Err(self.err(i, "the quoted value is never closed"));
                    };
                    let t = next.trim();
                    // YAML folds a line break into a space, an empty line into a newline.
                    if t.is_empty() {
                        text.push('\n');
                    } else if text.ends_with('\n') {
                        text.push_str(t);
                    } else {
                        text.push(' ');
                        text.push_str(t);
                    }
                }
                Err(e) => return Err(self.quote_err(j, e)),
            }
        }
    }

    /// A literal (`|`) or folded (`>`) block scalar whose header is `header`, on the lines
    /// after `i` up to `end`.
    fn block_scalar(&self, header: &str, i: usize, end: usize) -> Result<String, FrontmatterError> {
        let h = strip_comment(header);
        let literal = h.starts_with('|');
        let mut chomp = 'c';
        let mut explicit: Option<usize> = None;
        for c in h[1..].chars() {
            match c {
                '-' | '+' => chomp = c,
                '1'..='9' => explicit = Some(c as usize - '0' as usize),
                _ => return Err(self.err(i, &format!("bad block scalar header `{h}`"))),
            }
        }
        let lines = &self.lines[(i + 1).min(end)..end];
        let width = explicit.unwrap_or_else(|| {
            lines
                .iter()
                .find(|l| !l.trim().is_empty())
                .map(|l| indent(l))
                .unwrap_or(0)
        });
        let mut content: Vec<&str> = Vec::new();
        for (k, l) in lines.iter().enumerate() {
            if l.trim().is_empty() {
                content.push("");
            } else if indent(l) < width {
                return Err(self.err(i + 1 + k, "inconsistent indentation in a block scalar"));
            } else {
                content.push(&l[width..]);
            }
        }
        let text = if literal {
            content.join("\n")
        } else {
            // Folded: lines join with a space; each empty line is a line break; lines more
            // indented than the block keep their breaks.
            let mut s = String::new();
            let mut breaks = 0;
            let mut prev: Option<&str> = None;
            for l in &content {
                if l.is_empty() {
                    breaks += 1;
                    continue;
                }
                if let Some(p) = prev {
                    let keep = p.starts_with(' ') || l.starts_with(' ');
                    if breaks == 0 && !keep {
                        s.push(' ');
                    } else {
                        s.push_str(&"\n".repeat(breaks + usize::from(keep)));
                    }
                } else {
                    s.push_str(&"\n".repeat(breaks));
                }
                breaks = 0;
                s.push_str(l);
                prev = Some(l);
            }
            s
        };
        let body = text.trim_end_matches('\n');
        Ok(match chomp {
            '-' => body.to_string(),
            '+' => format!("{text}\n"),
            _ if body.is_empty() => String::new(),
            _ => format!("{body}\n"),
        })
    }

    /// A flow sequence `[a, b]` or map `{k: v}` of scalars.
    fn flow(&self, text: &str, i: usize) -> Result<Value, FrontmatterError> {
        let (open, close) = if text.starts_with('[') {
            ('[', ']')
        } else {
            ('{', '}')
        };
        let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(close)) else {
            return Err(self.err(i, &format!("the {open}...{close} value is never closed")));
        };
        let mut items = Vec::new();
        for raw in split_flow(inner).map_err(|e| self.quote_err(i, e))? {
            if raw.starts_with('[') || raw.starts_with('{') {
                return Ok(Value::Nested);
            }
            items.push(raw);
        }
        let one = |t: &str| -> Result<String, FrontmatterError> {
            if t.starts_with('"') || t.starts_with('\'') {
                let (s, after) = unquote_inline(t).map_err(|e| self.quote_err(i, e))?;
                if !after.trim().is_empty() {
                    return Err(self.err(i, "unexpected text after a quoted value"));
                }
                Ok(s)
            } else {
                Ok(t.to_string())
            }
        };
        if open == '[' {
            return Ok(Value::List(
                items.iter().map(|t| one(t)).collect::<Result<_, _>>()?,
            ));
        }
        let mut map = Vec::new();
        for it in items {
            let Some((k, v)) = split_key(&it) else {
                return Err(self.err(i, "expected `key: value` in the {...} value"));
            };
            map.push((one(k)?, one(v)?));
        }
        Ok(Value::Map(map))
    }
}

/// The items of a flow collection's inside, split at the commas outside quotes, trimmed;
/// empty items dropped.
fn split_flow(inner: &str) -> Result<Vec<String>, QuoteError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, ',') => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            (None, '"' | '\'') => quote = Some(c),
            (Some('"'), '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                continue;
            }
            (Some(q), c) if c == q => {
                if q == '\'' && chars.peek() == Some(&'\'') {
                    cur.push(c);
                    cur.push(chars.next().unwrap_or('\''));
                    continue;
                }
                quote = None;
            }
            _ => {}
        }
        cur.push(c);
    }
    if quote.is_some() {
        return Err(QuoteError::NeverClosed);
    }
    out.push(cur);
    Ok(out
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

/// The quoted scalar at the start of `text` and what follows it. Err: `NeverClosed` when the
/// closing quote is missing.
fn unquote_inline(text: &str) -> Result<(String, &str), QuoteError> {
    let mut chars = text.char_indices();
    let Some((_, q)) = chars.next() else {
        return Err(QuoteError::Empty);
    };
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        if c == q {
            if q == '\'' && text[i + 1..].starts_with('\'') {
                out.push('\'');
                chars.next();
                continue;
            }
            return Ok((out, &text[i + 1..]));
        }
        if c == '\\' && q == '"' {
            let Some((_, e)) = chars.next() else {
                return Err(QuoteError::NeverClosed);
            };
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '"' | '\\' | '/' | ' ' => out.push(e),
                'x' | 'u' | 'U' => {
                    let n = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let hex: String = (0..n)
                        .filter_map(|_| chars.next().map(|(_, h)| h))
                        .collect();
                    let ch = u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| QuoteError::BadEscape(format!("{e}{hex}")))?;
                    out.push(ch);
                }
                other => return Err(QuoteError::UnknownEscape(other)),
            }
            continue;
        }
        out.push(c);
    }
    Err(QuoteError::NeverClosed)
}

/// Why a frontmatter does not parse; the message names the file's line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FrontmatterError {
    /// The `---` on `line` has no closing `---`.
    Unclosed { line: usize },
    /// A line that is not the YAML subset a frontmatter may use; says what is wrong.
    Syntax { line: usize, message: String },
    /// A quoted value that does not parse.
    Quote { line: usize, source: QuoteError },
}

impl fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrontmatterError::Unclosed { line } => write!(
                f,
                "the frontmatter opened on line {line} is never closed by a line ---"
            ),
            FrontmatterError::Syntax { line, message } => write!(f, "line {line}: {message}"),
            FrontmatterError::Quote { line, source } => write!(f, "line {line}: {source}"),
        }
    }
}

impl std::error::Error for FrontmatterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrontmatterError::Quote { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What is wrong with a quoted value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum QuoteError {
    NeverClosed,
    Empty,
    /// `\x`, `\u` or `\U` and what follows it, not a character.
    BadEscape(String),
    UnknownEscape(char),
}

impl fmt::Display for QuoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuoteError::NeverClosed => f.write_str("the quoted value is never closed"),
            QuoteError::Empty => f.write_str("empty value"),
            QuoteError::BadEscape(e) => write!(f, "bad escape \\{e}"),
            QuoteError::UnknownEscape(c) => write!(f, "unknown escape \\{c} in a quoted value"),
        }
    }
}

impl std::error::Error for QuoteError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<(String, Value)> {
        parse(text)
            .unwrap()
            .fields
            .unwrap()
            .into_iter()
            .map(|f| (f.key, f.value))
            .collect()
    }

    fn s(v: &str) -> Value {
        Value::Scalar(Some(v.to_string()))
    }

    #[test]
    fn plain_quoted_and_null_values() {
        let f = fields(
            "---\nname: pdf-tools\ndescription: \"Extract text: \\\"all\\\" of it\" # why\nlicense: 'it''s MIT'\ncompatibility:\nx: ~\ny: a # comment\nz: a#b\n---\nbody\n",
        );
        assert_eq!(
            f,
            vec![
                ("name".into(), s("pdf-tools")),
                ("description".into(), s("Extract text: \"all\" of it")),
                ("license".into(), s("it's MIT")),
                ("compatibility".into(), Value::Scalar(None)),
                ("x".into(), Value::Scalar(None)),
                ("y".into(), s("a")),
                ("z".into(), s("a#b")),
            ]
        );
    }

    #[test]
    fn crlf_bom_and_a_rule_in_the_body() {
        let d =
            parse("\u{feff}---\r\nname: a\r\ndescription: b\r\n---\r\n# Title\r\n---\r\nmore\r\n")
                .unwrap();
        assert_eq!(d.get("name").unwrap().value, s("a"));
        assert_eq!(d.get("description").unwrap().value, s("b"));
        assert_eq!(d.body, "# Title\n---\nmore\n");
        let d = parse("---\rname: a\r---\rbody").unwrap();
        assert_eq!(d.get("name").unwrap().value, s("a"));
        assert_eq!(d.body, "body");
    }

    #[test]
    fn no_frontmatter_and_unclosed_frontmatter() {
        let d = parse("# Just markdown\n---\n").unwrap();
        assert_eq!(d.fields, None);
        assert_eq!(d.body, "# Just markdown\n---\n");
        let e = parse("\n---\nname: a\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("never closed"), "{e}");
    }

    #[test]
    fn block_scalars_and_multi_line_values() {
        let f = fields(
            "---\na: |\n  one\n    two\n\n  three\nb: >-\n  folded\n  text\n\n  para\nc: plain\n  continued\n\n  after blank\nd: \"quoted\n  across\"\n---\n",
        );
        assert_eq!(f[0].1, s("one\n  two\n\nthree\n"));
        assert_eq!(f[1].1, s("folded text\npara"));
        assert_eq!(f[2].1, s("plain continued\nafter blank"));
        assert_eq!(f[3].1, s("quoted across"));
    }

    #[test]
    fn lists_and_maps() {
        let f = fields(
            "---\nmetadata:\n  author: me\n  version: \"1.0\"\ntools:\n  - Read\n  - 'Bash(git:*)'\nflow: [a, \"b c\"]\nmap: {k: v, \"x\": 'y'}\nhooks:\n  PreToolUse:\n    - matcher: x\n---\n",
        );
        assert_eq!(
            f[0].1,
            Value::Map(vec![
                ("author".into(), "me".into()),
                ("version".into(), "1.0".into())
            ])
        );
        assert_eq!(
            f[1].1,
            Value::List(vec!["Read".into(), "Bash(git:*)".into()])
        );
        assert_eq!(f[2].1, Value::List(vec!["a".into(), "b c".into()]));
        assert_eq!(
            f[3].1,
            Value::Map(vec![("k".into(), "v".into()), ("x".into(), "y".into())])
        );
        assert_eq!(f[4].1, Value::Nested);
    }

    #[test]
    fn broken_frontmatter_names_the_line() {
        for (text, want) in [
            (
                "---\nname: a\nname: b\n---\n",
                "line 3: duplicate key `name`",
            ),
            ("---\nname a\n---\n", "line 2: expected `key: value`"),
            ("---\n  name: a\n---\n", "line 2: unexpected indentation"),
            (
                "---\nname: \"open\n---\n",
                "line 2: the quoted value is never closed",
            ),
            ("---\n\tname: a\n---\n", "line 2: tabs cannot indent"),
            ("---\n- a\n---\n", "line 2: the frontmatter must map keys"),
            ("---\nname: *ref\n---\n", "line 2: YAML anchors"),
            ("---\nname: \"a\" b\n---\n", "line 2: unexpected text after"),
            ("---\nx: \"\\q\"\n---\n", "line 2: unknown escape"),
            (
                "---\nx: [a, b\n---\n",
                "line 2: the [...] value is never closed",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn escapes() {
        let f = fields("---\na: \"tab\\there \\u00e9 \\x41\"\n---\n");
        assert_eq!(f[0].1, s("tab\there é A"));
    }
}
