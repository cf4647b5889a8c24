//! `.env` files as Go Crush reads them (godotenv): `KEY=VALUE` lines, `export KEY=VALUE`,
//! `KEY: VALUE`, `#` comments; single quotes keep the value literal, double quotes take `\n`,
//! `\t`, `\"` and `\\` escapes and may span lines, an unquoted value ends at ` #`. Unquoted and
//! double-quoted values expand `$VAR` and `${VAR}` from earlier lines, then the environment;
//! nothing is ever run (`$(...)` stays as written).

/// The variables of `text`, in file order (a later line wins over an earlier one of the same
/// name). `lookup` gives the environment's variables.
pub fn parse(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        i += 1;
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
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| lookup(name))
            };
            super::expand::expand_with(&value, &earlier, &|_| Err(String::new())).unwrap_or(value)
        } else {
            value
        };
        out.retain(|(k, _)| k != key);
        out.push((key.to_string(), value));
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
    }
}
