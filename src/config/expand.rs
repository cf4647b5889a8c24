//! Expansion of `$VAR`, `${VAR}` and `${VAR:-default}` in config values (api_key, base_url,
//! header values). `$(command)` comes with project trust.

/// Expands variables in `value` using `lookup`. Unset variables expand to "". Errors name the
/// problem but never include a resolved value.
pub fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    if !value.contains('$') {
        return Ok(value.to_string());
    }
    let mut out = String::new();
    let mut chars = value.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().map(|&(_, c)| c) {
            Some('{') => {
                let rest = &value[i + 2..];
                let end = rest
                    .find('}')
                    .ok_or_else(|| format!("unclosed '${{' in '{value}'"))?;
                let inner = &rest[..end];
                let (name, default) = match inner.find(":-") {
                    Some(p) => (&inner[..p], Some(&inner[p + 2..])),
                    None => (inner, None),
                };
                if !valid_name(name) {
                    return Err(format!("'${{{inner}}}' is not a valid variable reference"));
                }
                let v = lookup(name).filter(|v| !v.is_empty());
                match (v, default) {
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(&expand(d, lookup)?),
                    (None, None) => {}
                }
                // Skip past the closing brace.
                let stop = i + 2 + end;
                while let Some(&(j, _)) = chars.peek() {
                    if j > stop {
                        break;
                    }
                    chars.next();
                }
            }
            Some('(') => {
                return Err(
                    "command substitution $(...) is not supported in this value yet".to_string(),
                );
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let start = i + 1;
                let mut end = start;
                while let Some(&(j, c)) = chars.peek() {
                    if c == '_' || c.is_ascii_alphanumeric() {
                        end = j + c.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                if let Some(v) = lookup(&value[start..end]) {
                    out.push_str(&v);
                }
            }
            _ => return Err(format!("a lone '$' in '{value}' (write $$ or quote it)")),
        }
    }
    Ok(out)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Expansion against the process environment.
pub fn expand_env(value: &str) -> Result<String, String> {
    expand(value, &|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "KEY" => Some("sekret".into()),
            "HOST" => Some("h:1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn forms() {
        assert_eq!(expand("$KEY", &env).unwrap(), "sekret");
        assert_eq!(expand("http://${HOST}/v1", &env).unwrap(), "http://h:1/v1");
        assert_eq!(expand("${NOPE:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand("${KEY:-d}x", &env).unwrap(), "sekretx");
        assert_eq!(expand("a$NOPE-b", &env).unwrap(), "a-b");
        assert_eq!(expand("plain", &env).unwrap(), "plain");
    }

    #[test]
    fn errors_never_show_values() {
        let e = expand("${KEY", &env).unwrap_err();
        assert!(!e.contains("sekret"));
        assert!(expand("a $ b", &env).is_err());
        assert!(expand("${1X}", &env).is_err());
    }
}
