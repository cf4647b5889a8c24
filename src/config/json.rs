//! Reading JSON config files (errors with file:line:column) and merging layers.

use super::ConfigError;
use serde_json::Value;
use std::path::Path;

/// Parses `text` (the contents of `path`) as a JSON object.
pub(crate) fn parse_object(path: &Path, text: &str) -> Result<Value, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ConfigError::NotObject(path.to_path_buf())),
        Err(source) => Err(ConfigError::Json {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A configuration file's text (None: it does not exist). Only a regular file (a link to one
/// included) of at most `fsutil::CONFIG_CAP` bytes is read, never blocking (crush(1) FILES).
pub(crate) fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    match crate::fsutil::read_config(path) {
        Ok(Some(b)) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| ConfigError::NotText(path.to_path_buf())),
        Ok(None) => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Merges `upper` into `lower`: objects recursively, arrays concatenated, scalars replaced.
pub(crate) fn merge(lower: &mut Value, upper: Value) {
    match (lower, upper) {
        (Value::Object(l), Value::Object(u)) => {
            for (k, v) in u {
                match l.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        l.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(u)) => l.extend(u),
        (l, u) => *l = u,
    }
}

/// The strings of a JSON array (other values skipped); empty when `v` is not an array.
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `~/x` as the home directory's `x` (Go Crush expands a leading `~` in commands).
pub(crate) fn home_long(s: &str) -> String {
    match (s.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) if !home.is_empty() => format!("{home}/{rest}"),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_rules() {
        let mut a = json!({"o": {"x": 1, "y": [1]}, "s": "a", "arr": [1, 2]});
        merge(
            &mut a,
            json!({"o": {"y": [2], "z": true}, "s": "b", "arr": [3]}),
        );
        assert_eq!(
            a,
            json!({"o": {"x": 1, "y": [1, 2], "z": true}, "s": "b", "arr": [1, 2, 3]})
        );
    }

    #[test]
    fn invalid_json_names_file_line_and_column() {
        let e = parse_object(Path::new("/p/crush.json"), "{\n  \"a\": 1,\n  oops\n}")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/p/crush.json:3:3: invalid JSON"), "{e}");
        assert!(parse_object(Path::new("x.json"), "[1]").is_err());
        assert_eq!(parse_object(Path::new("x.json"), "  ").unwrap(), json!({}));
    }
}
