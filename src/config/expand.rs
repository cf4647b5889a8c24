//! Expansion of `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR:+alternative}`, `${VAR:?message}`
//! and `$(command)` in config values (api_key, base_url, header values, MCP fields). Without the
//! colon (`${VAR-d}`, `${VAR+a}`, `${VAR?m}`) a variable set to the empty string counts as set,
//! as in the shell.
//!
//! `$(command)` runs `SHELL -c command` (crush's shell, `proc::shell_path`; stdout, trailing
//! newlines removed) with the crushrc time limit; a project's values reach here only when the project is trusted (untrusted project
//! values containing `$(` are dropped at load time, see `trust.rs`), and values from the provider
//! catalog never run one (`expand_env_vars_only`). Results are cached for the
//! process, so a value used twice runs its command once. `$$` is a literal `$`. Errors name the
//! problem (and a failing command) but never include the value itself, resolved or literal: it
//! may be a secret typed into the config; the caller names the field. Variables are looked up as `CRUSH_NAME` first, then
//! `NAME` (Go Crush's `CRUSH_` prefix override: `CRUSH_ANTHROPIC_API_KEY` wins over
//! `ANTHROPIC_API_KEY`).

use crate::env::Overlay;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// Why a value did not expand. No variant holds the value or a variable's value (it may be a
/// secret); a failing command is named, with its stderr, never its stdout.
#[derive(Debug)]
pub(crate) enum ExpandError {
    /// `${` without its `}`.
    UnclosedBrace,
    /// `${...}` that does not start with a variable name.
    NoName,
    /// `${NAME:?message}` (or `${NAME?message}`) with NAME unset.
    NotSet {
        name: String,
        message: Option<String>,
    },
    /// `${NAME...}` with an operator the expansion does not know.
    UnknownForm(String),
    /// `$(` without its `)`.
    UnclosedParen,
    /// A `$` followed by nothing that names a variable or a command.
    LoneDollar,
    /// The shell for `$(cmd)` could not be started.
    Spawn { cmd: String, source: std::io::Error },
    /// `$(cmd)` was still running at the time limit.
    TimedOut { cmd: String, limit: Duration },
    /// `$(cmd)` failed: its exit status (None: killed) and the start of its stderr.
    Failed {
        cmd: String,
        code: Option<i32>,
        stderr: String,
    },
    /// `$(...)` where no command may run (values the user did not write).
    NotAllowed,
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::UnclosedBrace => f.write_str("unclosed '${' (no closing '}')"),
            ExpandError::NoName => {
                f.write_str("a '${...}' without a valid variable name (letters, digits, '_')")
            }
            ExpandError::NotSet {
                name,
                message: None,
            } => write!(f, "{name} is not set"),
            ExpandError::NotSet {
                name,
                message: Some(m),
            } => write!(f, "{name} is not set: {m}"),
            ExpandError::UnknownForm(name) => write!(
                f,
                "'${{{name}...}}': unknown form (use ${{{name}}}, ${{{name}:-default}}, ${{{name}:+alternative}} or ${{{name}:?message}})"
            ),
            ExpandError::UnclosedParen => f.write_str("unclosed '$(' (no closing ')')"),
            ExpandError::LoneDollar => f.write_str(
                "a '$' followed by no variable name, '{' or '(' (write $$ for a literal '$')",
            ),
            ExpandError::Spawn { cmd, source } => write!(
                f,
                "$({cmd}): cannot run {}: {source}",
                crate::proc::shell_path().display()
            ),
            ExpandError::TimedOut { cmd, limit } => write!(
                f,
                "$({cmd}) still running after {} s, stopped",
                limit.as_secs_f64()
            ),
            ExpandError::Failed { cmd, code, stderr } => {
                let status = code
                    .map(|c| format!("exit {c}"))
                    .unwrap_or_else(|| "killed".into());
                if stderr.is_empty() {
                    write!(f, "$({cmd}) failed ({status})")
                } else {
                    write!(f, "$({cmd}) failed ({status}): {stderr}")
                }
            }
            ExpandError::NotAllowed => {
                f.write_str("command substitution '$(...)' is not allowed here")
            }
        }
    }
}

impl std::error::Error for ExpandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExpandError::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Expands `value` with `lookup` for variables; `$(...)` runs through `run_command`.
pub(crate) fn expand(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    expand_with(value, lookup, &run_command)
}

/// Expands variables with `lookup` and command substitutions with `run`.
pub(crate) fn expand_with(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    run: &dyn Fn(&str) -> Result<String, ExpandError>,
) -> Result<String, ExpandError> {
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
                let end = closing_brace(rest).ok_or(ExpandError::UnclosedBrace)?;
                let inner = &rest[..end];
                let name_len = inner
                    .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                    .unwrap_or(inner.len());
                let (name, op) = inner.split_at(name_len);
                if !valid_name(name) {
                    return Err(ExpandError::NoName);
                }
                let (colon, op) = match op.strip_prefix(':') {
                    Some(o) => (true, o),
                    None => (false, op),
                };
                let raw = lookup(name);
                // With a colon, empty counts as unset.
                let set = raw.as_ref().is_some_and(|v| !colon || !v.is_empty());
                let word = op.get(1..).unwrap_or("");
                match op.chars().next() {
                    None if !colon => out.push_str(&raw.unwrap_or_default()),
                    Some('-') if set => out.push_str(&raw.unwrap_or_default()),
                    Some('-') => out.push_str(&expand_with(word, lookup, run)?),
                    Some('+') if set => out.push_str(&expand_with(word, lookup, run)?),
                    Some('+') => {}
                    Some('?') if set => out.push_str(&raw.unwrap_or_default()),
                    Some('?') => {
                        let message = if word.is_empty() {
                            None
                        } else {
                            Some(expand_with(word, lookup, run)?)
                        };
                        return Err(ExpandError::NotSet {
                            name: name.to_string(),
                            message,
                        });
                    }
                    _ => {
                        return Err(ExpandError::UnknownForm(name.to_string()));
                    }
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
                let body_start = i + 2;
                let end = closing_paren(value, body_start).ok_or(ExpandError::UnclosedParen)?;
                let cmd = &value[body_start..end];
                out.push_str(&run(cmd)?);
                while let Some(&(j, _)) = chars.peek() {
                    if j > end {
                        break;
                    }
                    chars.next();
                }
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
            Some('$') => {
                out.push('$');
                chars.next();
            }
            _ => {
                return Err(ExpandError::LoneDollar);
            }
        }
    }
    Ok(out)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The byte index in `s` (what follows a `${`) of its closing `}`, counting nested `${...}`.
fn closing_brace(s: &str) -> Option<usize> {
    let mut depth = 1;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        match c {
            '{' if prev == '$' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        prev = c;
    }
    None
}

/// The byte index of the `)` closing a `$(` whose body starts at `start`.
fn closing_paren(s: &str, start: usize) -> Option<usize> {
    let mut depth = 1;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s[start..].char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(start + i);
                }
            }
            _ => {}
        }
    }
    None
}

static CACHE: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// Runs a command substitution: `SHELL -c cmd`, stdout without trailing newlines.
pub(crate) fn run_command(cmd: &str) -> Result<String, ExpandError> {
    run_command_in(cmd, &Overlay::default())
}

/// `run_command` with the session's variables `env` on top of crush's environment; the cache
/// keeps apart what one command printed with different variables.
fn run_command_in(cmd: &str, env: &Overlay) -> Result<String, ExpandError> {
    let key = if env.is_empty() {
        cmd.to_string()
    } else {
        format!("{cmd}\0{:?}", env.vars())
    };
    if let Some(hit) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        return Ok(hit);
    }
    let limit = super::crushrc::timeout();
    let mut spec =
        crate::proc::Spec::shell(cmd, std::env::current_dir().unwrap_or_else(|_| "/".into()));
    spec.env = env.vars();
    let fin = super::crushrc::run_limited(spec, limit).map_err(|source| ExpandError::Spawn {
        cmd: cmd.to_string(),
        source,
    })?;
    if fin.timed_out {
        return Err(ExpandError::TimedOut {
            cmd: cmd.to_string(),
            limit,
        });
    }
    if fin.code != Some(0) {
        return Err(ExpandError::Failed {
            cmd: cmd.to_string(),
            code: fin.code,
            stderr: fin.stderr.trim().chars().take(300).collect(),
        });
    }
    let out = fin.stdout.trim_end_matches(['\n', '\r']).to_string();
    if let Ok(mut c) = CACHE.lock() {
        c.get_or_insert_with(HashMap::new).insert(key, out.clone());
    }
    Ok(out)
}

/// A variable as config values see it: `CRUSH_NAME` first, then `NAME`, each from the
/// session's variables `env` first, then the process environment.
pub(crate) fn env_var_in(env: &Overlay, name: &str) -> Option<String> {
    env.var(&format!("CRUSH_{name}"))
        .filter(|v| !v.is_empty())
        .or_else(|| env.var(name))
}

/// A variable as config values see it, from the process environment alone (what a `.env` and
/// the `env` map are expanded against).
pub(crate) fn env_var(name: &str) -> Option<String> {
    env_var_in(&Overlay::default(), name)
}

/// Expansion against the session's variables `env`, then the process environment; `$(...)`
/// runs with `env` on top of crush's environment.
pub(crate) fn expand_env(value: &str, env: &Overlay) -> Result<String, ExpandError> {
    expand_with(value, &|n| env_var_in(env, n), &|c| run_command_in(c, env))
}

/// Expansion of variables only, against `env` and the process environment: `$(...)` is an
/// error and is never run. For values the user did not write, such as the downloaded provider
/// catalog (it comes from the network or its cache, outside any trust decision, crush(1)
/// CONFIGURATION).
pub(crate) fn expand_env_vars_only(value: &str, env: &Overlay) -> Result<String, ExpandError> {
    expand_with(value, &|n| env_var_in(env, n), &|_| {
        Err(ExpandError::NotAllowed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expansions with their messages, which is what these tests check.
    fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
        super::expand(value, lookup).map_err(|e| e.to_string())
    }

    fn expand_with(
        value: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
        run: &dyn Fn(&str) -> Result<String, ExpandError>,
    ) -> Result<String, String> {
        super::expand_with(value, lookup, run).map_err(|e| e.to_string())
    }

    fn run_command(cmd: &str) -> Result<String, String> {
        super::run_command(cmd).map_err(|e| e.to_string())
    }

    #[test]
    fn the_sessions_variables_come_before_the_process_environment() {
        let env = Overlay::new([
            ("HOME".to_string(), "/overlay-home".to_string()),
            ("CRUSH_EXPAND_OVL".to_string(), "c".to_string()),
            ("EXPAND_OVL".to_string(), "plain".to_string()),
        ]);
        assert_eq!(
            super::expand_env("$HOME|${EXPAND_OVL}", &env).unwrap(),
            "/overlay-home|c"
        );
        assert_eq!(
            super::expand_env_vars_only("$HOME", &env).unwrap(),
            "/overlay-home"
        );
        // A command substitution runs with the session's variables.
        assert_eq!(
            super::expand_env("$(printf %s \"$EXPAND_OVL\")", &env).unwrap(),
            "plain"
        );
        assert_eq!(
            super::expand_env("$(printf %s \"$EXPAND_OVL\")", &Overlay::default()).unwrap(),
            ""
        );
    }

    fn expand_env_vars_only(value: &str) -> Result<String, String> {
        super::expand_env_vars_only(value, &Overlay::default()).map_err(|e| e.to_string())
    }

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
    fn alternative_and_required_forms() {
        assert_eq!(
            expand("${KEY:+Bearer $KEY}", &env).unwrap(),
            "Bearer sekret"
        );
        assert_eq!(expand("${NOPE:+x}", &env).unwrap(), "");
        assert_eq!(expand("${EMPTY:+x}", &env).unwrap(), "");
        assert_eq!(expand("${EMPTY+x}", &env).unwrap(), "x");
        assert_eq!(expand("${EMPTY-d}", &env).unwrap(), "");
        assert_eq!(expand("${NOPE:-${HOST}}/v1", &env).unwrap(), "h:1/v1");
        assert_eq!(expand("${KEY:?needed}", &env).unwrap(), "sekret");
        assert_eq!(
            expand("${NOPE:?set NOPE to your key}", &env).unwrap_err(),
            "NOPE is not set: set NOPE to your key"
        );
        assert_eq!(expand("${EMPTY:?}", &env).unwrap_err(), "EMPTY is not set");
        assert_eq!(expand("${EMPTY?}", &env).unwrap(), "");
        assert!(
            expand("${KEY/x/y}", &env)
                .unwrap_err()
                .contains("unknown form")
        );
    }

    #[test]
    fn command_substitution() {
        let run = |c: &str| -> Result<String, ExpandError> {
            match c {
                "pass show k" => Ok("s3cret".into()),
                "echo $(inner) ')'" => Ok("nested".into()),
                _ => Err(ExpandError::Failed {
                    cmd: c.to_string(),
                    code: Some(1),
                    stderr: String::new(),
                }),
            }
        };
        assert_eq!(expand_with("$(pass show k)", &env, &run).unwrap(), "s3cret");
        assert_eq!(
            expand_with("Bearer $(pass show k)!", &env, &run).unwrap(),
            "Bearer s3cret!"
        );
        assert_eq!(
            expand_with("$(echo $(inner) ')')", &env, &run).unwrap(),
            "nested"
        );
        assert!(
            expand_with("$(oops", &env, &run)
                .unwrap_err()
                .contains("unclosed")
        );
        let e = expand_with("$(false)", &env, &run).unwrap_err();
        assert!(e.contains("$(false) failed"), "{e}");
        // The real runner: output trimmed, failures report stderr, never stdout.
        assert_eq!(run_command("printf 'a\\n\\n'").unwrap(), "a");
        let e = run_command("echo hid''den; echo boom >&2; exit 3").unwrap_err();
        assert!(
            e.contains("exit 3") && e.contains("boom") && !e.contains("hidden"),
            "{e}"
        );
    }

    /// Whether `pid` is gone (or a zombie nobody reaped yet).
    fn dead(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(s) => matches!(
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.trim_start().chars().next()),
                Some('Z' | 'X')
            ),
        }
    }

    #[test]
    fn output_is_kept_and_background_processes_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let cmd = format!("echo sekrit; sleep 60 & echo $! > '{}'", pid_file.display());
        // The background sleep holds stdout open; the output must not be lost.
        assert_eq!(run_command(&cmd).unwrap(), "sekrit");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !dead(pid) {
            if std::time::Instant::now() > deadline {
                // SAFETY: clean up the stray process before failing.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the background sleep {pid} outlived its command");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn vars_only_never_runs_commands() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("MARKER");
        let m = marker.display();
        for v in [
            format!("$(touch {m})"),
            format!("Bearer $(touch {m})"),
            format!("${{CRUSH_TEST_UNSET_XYZ:-$(touch {m})}}"),
        ] {
            let e = expand_env_vars_only(&v).unwrap_err();
            assert!(e.contains("not allowed"), "{e}");
        }
        assert!(!marker.exists());
        // Variables still expand.
        assert_eq!(
            expand_env_vars_only("${CRUSH_TEST_UNSET_XYZ:-d}/v1").unwrap(),
            "d/v1"
        );
    }

    #[test]
    fn errors_never_show_values() {
        let e = expand("${KEY", &env).unwrap_err();
        assert!(!e.contains("sekret"));
        assert!(expand("a $ b", &env).is_err());
        assert!(expand("${1X}", &env).is_err());
        // A literal secret in the config is not echoed either, whatever the problem.
        for v in [
            "sk-secretkey$",
            "sk-secretkey$ ",
            "${sk-secretkey",
            "${sk/secretkey}",
            "sk-secretkey$(x",
        ] {
            let e = expand(v, &env).unwrap_err();
            assert!(!e.contains("secretkey"), "{v}: {e}");
        }
        // The advice the lone-'$' message gives works.
        let e = expand("sk-secretkey$", &env).unwrap_err();
        assert!(e.contains("$$"), "{e}");
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        assert_eq!(expand("sk-abc$$", &env).unwrap(), "sk-abc$");
        assert_eq!(expand("a$$b", &env).unwrap(), "a$b");
        assert_eq!(expand("$$$KEY", &env).unwrap(), "$sekret");
        assert_eq!(expand("$$$$", &env).unwrap(), "$$");
        assert_eq!(expand("$${KEY}", &env).unwrap(), "${KEY}");
        assert_eq!(expand("${NOPE:-$$x}", &env).unwrap(), "$x");
        // `$$(` is a literal "$(", not a command.
        let run =
            |c: &str| -> Result<String, ExpandError> { Err(ExpandError::UnknownForm(c.into())) };
        assert_eq!(expand_with("$$(x)", &env, &run).unwrap(), "$(x)");
    }
}
