//! How crush reads its process environment, and what of it each child gets.

/// `1`, `true`, `yes`, `on` (any case, surrounding blanks ignored): how `CRUSH_*` switches in
/// the environment read as on.
pub(crate) fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// The variable `name` read as a number of seconds (fractions allowed), if it is one.
pub(crate) fn seconds(name: &str) -> Option<std::time::Duration> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(std::time::Duration::from_secs_f64)
}

/// The variables a loaded configuration adds to the environment: the trusted project's `.env`
/// and the `env` map (crush(1) CONFIGURATION). They are never put into crush's own process
/// environment, which every session of `crush acp` shares (and which C code reads without
/// std's lock): the configuration carries them, `$VAR` lookups for its values consult them
/// first, and every child started for its session gets them on top of crush's environment.
/// A later entry of the same name wins (the `env` map over the `.env`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overlay(std::sync::Arc<Vec<(String, String)>>);

impl Overlay {
    /// The overlay of `vars`, in order (a later one of the same name replaces an earlier one).
    pub(crate) fn new(vars: impl IntoIterator<Item = (String, String)>) -> Overlay {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in vars {
            match out.iter_mut().find(|(n, _)| *n == k) {
                Some(e) => e.1 = v,
                None => out.push((k, v)),
            }
        }
        Overlay(std::sync::Arc::new(out))
    }

    /// The overlay's own value of `name` (not the process environment's).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `name` as the session sees it: the overlay's value, else the process environment's.
    pub(crate) fn var(&self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(v) => Some(v.to_string()),
            None => std::env::var(name).ok(),
        }
    }

    /// `var` as an `OsString` (a process variable that is not UTF-8 included).
    pub(crate) fn var_os(&self, name: &str) -> Option<std::ffi::OsString> {
        match self.get(name) {
            Some(v) => Some(v.into()),
            None => std::env::var_os(name),
        }
    }

    /// Every variable of the overlay, for a child's environment (`proc::Spec::env`).
    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        self.0.as_ref().clone()
    }

    /// The variables the bash tool's commands get: those `tool_keeps`.
    pub(crate) fn for_tool(&self, allow: &[String]) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter(|(k, _)| tool_keeps(k, allow))
            .cloned()
            .collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The environment policy (crush(1) SECURITY): which child gets which environment, in one
/// place. The bash tool (and whatever the model starts through it) gets crush's environment
/// without the variables whose names look secret; hooks, crushrc files, `$(...)` values and the
/// user's `!command` get it whole. These are the parts of a name that make it look secret
/// (compared without regard to case), as in Codex's `shell_environment_policy`.
pub(crate) const SECRET_NAME_PARTS: &[&str] = &["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// Whether a variable's name looks like it holds a secret (`*KEY*`, `*SECRET*`, `*TOKEN*`,
/// `*PASSWORD*`, any case).
pub(crate) fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Whether the bash tool's environment keeps the variable `name`: it does not look secret, or
/// `allow` (`options.shell_env_allow`: names or globs with `*` and `?`, any case) lists it.
pub(crate) fn tool_keeps(name: &str, allow: &[String]) -> bool {
    !secret_name(name) || allow.iter().any(|pat| name_matches(pat, name))
}

/// The variables of crush's environment the bash tool does not get.
pub(crate) fn tool_removals(allow: &[String]) -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| !tool_keeps(k, allow))
        .collect()
}

/// `pat` (with `*` and `?`) against a variable name, case-insensitively.
fn name_matches(pat: &str, name: &str) -> bool {
    use crate::wildcard::Part;
    let p: Vec<Part> = pat
        .trim()
        .to_ascii_uppercase()
        .chars()
        .map(|c| match c {
            '*' => Part::Star,
            '?' => Part::One,
            c => Part::Char(c),
        })
        .collect();
    let n: Vec<char> = name.to_ascii_uppercase().chars().collect();
    crate::wildcard::matches(&p, &n)
}

/// Shortest value `mask` hides: shorter ones would hide ordinary words.
pub(crate) const MIN_MASKED_LEN: usize = 8;

/// `text` with every occurrence of a secret's value replaced by `[masked NAME]`; `secrets` are
/// (name, value) pairs. None when nothing was found.
pub(crate) fn mask(text: &str, secrets: &[(String, String)]) -> Option<String> {
    let mut out: Option<String> = None;
    for (name, value) in secrets {
        if value.len() < MIN_MASKED_LEN {
            continue;
        }
        let cur = out.as_deref().unwrap_or(text);
        if cur.contains(value.as_str()) {
            out = Some(cur.replace(value.as_str(), &format!("[masked {name}]")));
        }
    }
    out
}

/// `mask` over every string of a JSON value, in place.
pub(crate) fn mask_json(v: &mut serde_json::Value, secrets: &[(String, String)]) {
    match v {
        serde_json::Value::String(s) => {
            if let Some(m) = mask(s, secrets) {
                *s = m;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| mask_json(x, secrets)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| mask_json(x, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_reaches_every_string_of_a_json_value() {
        let secrets = [("K".to_string(), "sk-secret-123".to_string())];
        let mut v = serde_json::json!({"stdout": "key sk-secret-123", "n": 1,
            "list": [{"x": "sk-secret-123!"}]});
        mask_json(&mut v, &secrets);
        assert_eq!(
            v,
            serde_json::json!({"stdout": "key [masked K]", "n": 1, "list": [{"x": "[masked K]!"}]})
        );
    }

    #[test]
    fn secret_looking_names_are_left_out_unless_allowed() {
        for n in [
            "ANTHROPIC_API_KEY",
            "github_token",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "KEYCHAIN",
        ] {
            assert!(secret_name(n), "{n}");
            assert!(!tool_keeps(n, &[]), "{n}");
        }
        for n in ["PATH", "HOME", "LANG", "CRUSH", "TERM"] {
            assert!(tool_keeps(n, &[]), "{n}");
        }
        let allow = vec!["github_*".to_string(), "DB_PASSWORD".to_string()];
        assert!(tool_keeps("GITHUB_TOKEN", &allow));
        assert!(tool_keeps("db_password", &allow));
        assert!(!tool_keeps("ANTHROPIC_API_KEY", &allow));
        assert!(name_matches("*_KEY", "OPENAI_API_KEY"));
        assert!(name_matches("A?C", "abc"));
        assert!(!name_matches("*_KEY", "OPENAI_API_KEYS"));
        assert!(name_matches("*", ""));
    }

    #[test]
    fn secret_values_are_masked() {
        let s = vec![
            (
                "ANTHROPIC_API_KEY".to_string(),
                "sk-ant-12345678".to_string(),
            ),
            ("SHORT".to_string(), "abc".to_string()),
        ];
        assert_eq!(
            mask("key=sk-ant-12345678; abc", &s).unwrap(),
            "key=[masked ANTHROPIC_API_KEY]; abc"
        );
        assert_eq!(mask("nothing here", &s), None);
    }

    #[test]
    fn an_overlay_is_consulted_before_the_process_environment() {
        let o = Overlay::new([
            ("PATH".to_string(), "/overlay/bin".to_string()),
            ("CRUSH_OVERLAY_T".to_string(), "a".to_string()),
            ("CRUSH_OVERLAY_T".to_string(), "b".to_string()),
            ("MY_API_KEY".to_string(), "k".to_string()),
        ]);
        assert_eq!(o.var("PATH").as_deref(), Some("/overlay/bin"));
        assert_eq!(o.get("CRUSH_OVERLAY_T"), Some("b"));
        assert_eq!(o.vars().len(), 3);
        assert_eq!(o.var("HOME"), std::env::var("HOME").ok());
        assert!(o.get("HOME").is_none());
        let tool: Vec<String> = o.for_tool(&[]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(tool, ["PATH", "CRUSH_OVERLAY_T"]);
        assert_eq!(o.for_tool(&["MY_*".to_string()]).len(), 3);
    }

    #[test]
    fn truthy_switches() {
        for v in ["1", "true", "TRUE", " yes ", "On"] {
            assert!(truthy(v), "{v}");
        }
        for v in ["", " ", "0", "false", "no", "off", "y", "enabled"] {
            assert!(!truthy(v), "{v}");
        }
    }
}
