//! `.env` files as Go Crush reads them (godotenv): `KEY=VALUE` lines, `export KEY=VALUE`,
//! `KEY: VALUE`, `#` comments; single quotes keep the value literal, double quotes take `\n`,
//! `\t`, `\"` and `\\` escapes and may span lines, an unquoted value ends at ` #`. Unquoted and
//! double-quoted values expand `$VAR` and `${VAR}` from earlier lines, then the environment;
//! nothing is ever run (`$(...)` stays as written).

/// The variables of `text`, in file order (a later line wins over an earlier one of the same
/// name). `lookup` gives the environment's variables.
pub(crate) fn parse(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    entries(text, lookup)
        .into_iter()
        .map(|(k, v, _)| (k, v))
        .collect()
}

/// A variable of a `.env` file that no process environment can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NulInValue {
    /// The line (from 1) where the variable is set.
    pub line: usize,
    pub name: String,
}

impl std::fmt::Display for NulInValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: the value holds a NUL byte, which no environment variable can",
            self.line, self.name
        )
    }
}

impl std::error::Error for NulInValue {}

/// `parse`, refusing a value that holds a NUL byte (the names `parse` accepts never hold `=`
/// or NUL): the first such line is the error.
pub(crate) fn parse_checked(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, NulInValue> {
    let all = entries(text, lookup);
    if let Some((name, _, line)) = all.iter().find(|(_, v, _)| v.contains('\0')) {
        return Err(NulInValue {
            line: *line,
            name: name.clone(),
        });
    }
    Ok(all.into_iter().map(|(k, v, _)| (k, v)).collect())
}

/// The variables with the line (from 1) that sets each.
fn entries(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String, usize)> {
    let mut out: Vec<(String, String, usize)> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        i += 1;
        let at = i;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line
            .strip_prefix("export ")
            .map(str::trim_start)
            .unwrap_or(line);
        let Some(sep) = line.find(['=', ':']) else {
            continue;
        };
        let key = line[..sep].trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        let rest = line[sep + 1..].trim_start();
        let (value, expand) = if let Some(r) = rest.strip_prefix('\'') {
            (r.split_once('\'').map_or(r, |(v, _)| v).to_string(), false)
        } else if let Some(r) = rest.strip_prefix('"') {
            let mut raw = r.to_string();
            // A value may continue on the next lines until its closing quote.
            while closing_quote(&raw).is_none() && i < lines.len() {
                raw.push('\n');
                raw.push_str(lines[i]);
                i += 1;
            }
            let end = closing_quote(&raw).unwrap_or(raw.len());
            (unescape(&raw[..end]), true)
        } else {
            let v = match rest.find(" #") {
                Some(p) => &rest[..p],
                None => rest,
            };
            (v.trim_end().to_string(), true)
        };
        let value = if expand {
            let earlier = |name: &str| {
                out.iter()
                    .rev()
                    .find(|(k, _, _)| k == name)
                    .map(|(_, v, _)| v.clone())
                    .or_else(|| lookup(name))
            };
            super::expand::expand_with(&value, &earlier, &|_| {
                Err(super::expand::ExpandError::NotAllowed)
            })
            .unwrap_or(value)
        } else {
            value
        };
        out.retain(|(k, _, _)| k != key);
        out.push((key.to_string(), value, at));
    }
    out
}

/// The byte index of the first `"` not escaped by a backslash.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(c @ ('"' | '\\')) => out.push(c),
            // `\$` stays escaped for the expansion to read as a literal `$`.
            Some('$') => out.push_str("$$"),
            Some(c) => {
                out.push('\\');
                out.push(c);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn godotenv_lines() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        let text = "# comment\n\
            A=1\n\
            export B = two words # a comment\n\
            C='single $A # kept'\n\
            D=\"line\\nnext $A \\\"q\\\"\"\n\
            E: ${HOME}/x\n\
            F=\"multi\n\
            line\"\n\
            G=$(touch x)\n\
            bad key=1\n\
            A=3\n";
        let vars = parse(text, &env);
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("A"), Some("3"));
        assert_eq!(get("B"), Some("two words"));
        assert_eq!(get("C"), Some("single $A # kept"));
        assert_eq!(get("D"), Some("line\nnext 1 \"q\""));
        assert_eq!(get("E"), Some("/home/u/x"));
        assert_eq!(get("F"), Some("multi\nline"));
        assert_eq!(get("G"), Some("$(touch x)"));
        assert_eq!(get("bad key"), None);
        assert_eq!(vars.len(), 7);
        assert_eq!(parse_checked(text, &env).unwrap(), vars);
        let e = parse_checked("A=1\nB=\"x\ny\"\nX=a\0b\n", &env).unwrap_err();
        assert_eq!(
            e,
            NulInValue {
                line: 4,
                name: "X".into()
            }
        );
        assert!(
            e.to_string()
                .starts_with("4: X: the value holds a NUL byte")
        );
    }
}
