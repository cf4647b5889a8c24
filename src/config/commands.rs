//! The crushrc commands of crush(1) CONFIGURATION (`option`, `model`, `permissions`, `provider`,
//! `hook`, `mcp`, `lsp`): one argument vector applied to a configuration value.
//!
//! The same function serves a crushrc (each builtin call becomes a record, applied in order to
//! the configuration accumulated below the file), the REPL's slash commands and the agent's bash
//! tool (both applied to the session's runtime layer). It is pure: a value in, a value out.
//!
//! Grammar (Go Crush's): `--flag value`; `--flag=value` also works;
//! booleans accept true/false/1/0/yes/no/on/off and may be given without a value (true);
//! `--k K V` flags take two words; repeatable flags append; an unknown flag is an error.
//! `--price-cache-create` is the cache-write price (`cost_per_1m_in_cached`) and
//! `--price-cache-hit` the cache-read price (`cost_per_1m_out_cached`), as in Go Crush 0.92
//! (crush(1) CONFIGURATION).

use super::hook_event::Event;
use serde_json::{Map, Value, json};
use std::fmt;

/// Why a command was refused (the configuration is unchanged); the message says what to type.
#[derive(Debug)]
pub(crate) enum CommandError {
    /// No words at all.
    Empty,
    /// A quote the line never closes: `"single"` or `"double"`.
    Unclosed(&'static str),
    /// `--FLAG` given text that is not JSON.
    Json {
        flag: String,
        source: serde_json::Error,
    },
    /// `hook add --matcher` given a pattern that is not a regular expression.
    Matcher {
        pattern: String,
        source: regex_lite::Error,
    },
    /// Words that do not fit the command: its usage, an unknown flag, a value of the wrong kind.
    Usage(String),
    /// The error of the command `command`, named first.
    In {
        command: String,
        source: Box<CommandError>,
    },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Empty => f.write_str("empty command"),
            CommandError::Unclosed(which) => write!(f, "unclosed {which} quote"),
            CommandError::Json { flag, source } => write!(f, "--{flag}: invalid JSON: {source}"),
            CommandError::Matcher { pattern, source } => {
                write!(f, "--matcher '{pattern}' is not a valid regex: {source}")
            }
            CommandError::Usage(m) => f.write_str(m),
            CommandError::In { command, source } => {
                let inner = source.to_string();
                if inner.starts_with(command.as_str()) {
                    f.write_str(&inner)
                } else {
                    write!(f, "{command}: {inner}")
                }
            }
        }
    }
}

impl std::error::Error for CommandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CommandError::Json { source, .. } => Some(source),
            CommandError::Matcher { source, .. } => Some(source),
            CommandError::In { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Outcome {
    /// One line describing the change ("model small = anthropic/claude-haiku-4-5").
    pub summary: String,
    /// Text the command prints (`model large` without a model prints the current one).
    pub print: Option<String>,
    /// Something to warn about though the command did not fail: a removal of something that is
    /// not defined is a no-op, as in Go Crush (a crushrc goes on; the warning names its line).
    pub warning: Option<String>,
}

fn done(summary: impl Into<String>) -> Result<Outcome, CommandError> {
    Ok(Outcome {
        summary: summary.into(),
        ..Outcome::default()
    })
}

/// A removal of something that is not there: nothing changes, with a warning.
fn nothing_to_remove(what: String) -> Result<Outcome, CommandError> {
    let summary = format!("{what} to remove: nothing changed");
    Ok(Outcome {
        summary: summary.clone(),
        print: None,
        warning: Some(summary),
    })
}

/// Whether the command would widen what the agent may do without asking, or change what runs
/// (hooks, MCP and LSP servers) or where prompts go (providers): the agent needs the user's yes.
pub(crate) fn widens_permissions(args: &[String]) -> bool {
    match args.first().map(String::as_str) {
        Some("permissions") => args.get(1).map(String::as_str) == Some("allow"),
        // Hooks, MCP and LSP servers run commands; a provider decides where prompts (and the
        // code in them) are sent. The agent may not change them unseen either.
        Some("hook" | "mcp" | "lsp" | "provider") => true,
        _ => false,
    }
}

/// Applies one command (`args[0]` is its name) to `cfg`. On error `cfg` is unchanged.
pub(crate) fn apply(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let mut work = cfg.clone();
    if !work.is_object() {
        work = Value::Object(Map::new());
    }
    let (name, rest) = match args.split_first() {
        Some((n, r)) => (n.as_str(), r),
        None => return Err(CommandError::Empty),
    };
    let out = match name {
        "option" => option(&mut work, rest),
        "model" => model(&mut work, rest),
        "permissions" => permissions(&mut work, rest),
        "provider" => provider(&mut work, rest),
        "hook" => hook(&mut work, rest),
        "mcp" => mcp(&mut work, rest),
        "lsp" => lsp(&mut work, rest),
        other => Err(CommandError::Usage(format!(
            "unknown command '{other}' (commands: {})",
            crate::rcshell::NAMES.join(", ")
        ))),
    }
    .map_err(|e| CommandError::In {
        command: name.to_string(),
        source: Box::new(e),
    })?;
    // A no-op with a warning leaves the value as it was.
    if out.warning.is_none() {
        *cfg = work;
    }
    Ok(out)
}

/// Splits a command line into words like a shell would (quotes and backslashes; no expansion).
pub(crate) fn split_words(line: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(CommandError::Unclosed("single")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(CommandError::Unclosed("double")),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(CommandError::Unclosed("double")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    cur.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

// ---------------------------------------------------------------------------------------------
// Values and paths

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The object at `path` inside `v`, created (replacing non-objects) as needed.
fn obj_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = v;
    for seg in path {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else {
            unreachable!("just made an object")
        };
        cur = m
            .entry(seg.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    match cur {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// The last key of `path` and its parents (an empty path names the key "" at the top).
fn split_last<'a>(path: &[&'a str]) -> (&'a str, Vec<&'a str>) {
    match path.split_last() {
        Some((last, parent)) => (last, parent.to_vec()),
        None => ("", Vec::new()),
    }
}

fn set(v: &mut Value, path: &[&str], val: Value) {
    let (last, parent) = split_last(path);
    obj_at(v, &parent).insert(last.to_string(), val);
}

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn remove(v: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parent) = split_last(path);
    let mut cur = v;
    for seg in parent {
        cur = cur.get_mut(seg)?;
    }
    cur.as_object_mut()?.remove(last)
}

/// Appends `items` to the array at `path`, skipping ones already there.
fn push_unique(v: &mut Value, path: &[&str], items: &[String]) {
    let a = array_at(v, path);
    for it in items {
        let val = Value::String(it.clone());
        if !a.contains(&val) {
            a.push(val);
        }
    }
}

/// The array at `path` inside `v`, created (replacing non-arrays) as needed.
fn array_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Vec<Value> {
    let (last, parent) = split_last(path);
    let arr = obj_at(v, &parent)
        .entry(last.to_string())
        .or_insert_with(|| Value::Array(vec![]));
    if !arr.is_array() {
        *arr = Value::Array(vec![]);
    }
    match arr {
        Value::Array(a) => a,
        _ => unreachable!("just made an array"),
    }
}

fn merge_objects(dst: &mut Map<String, Value>, src: Map<String, Value>) {
    for (k, v) in src {
        dst.insert(k, v);
    }
}

// ---------------------------------------------------------------------------------------------
// Flags

#[derive(Clone, Copy, Debug, PartialEq)]
enum K {
    Str,
    /// One of the listed values.
    Enum(&'static [&'static str]),
    Int,
    Float,
    /// A float in 0..=1.
    Unit,
    Bool,
    /// Any JSON.
    Json,
    /// A JSON object, merged into what is there.
    JsonObj,
    /// `--flag KEY VALUE`, into an object.
    KeyVal,
    /// Repeatable, appended to an array.
    List,
}

struct F {
    name: &'static str,
    kind: K,
    /// Dotted path of the JSON key, relative to the entity.
    key: &'static str,
}

const fn f(name: &'static str, kind: K, key: &'static str) -> F {
    F { name, kind, key }
}

/// Parses `--flag value...` words against `specs` and writes them into `target`.
fn apply_flags(
    target: &mut Value,
    args: &[String],
    specs: &[F],
) -> Result<Vec<String>, CommandError> {
    let mut changed = Vec::new();
    let mut words = Words { args, next: 0 };
    while let Some(word) = args.get(words.next) {
        let (spec, flag) = find_flag(word, specs)?;
        words.next += 1;
        apply_flag(target, spec, &flag, &mut words)?;
        changed.push(format!("--{}", flag.name));
    }
    Ok(changed)
}

/// A flag as given: `--NAME`, or `--NAME=INLINE`.
struct Given<'a> {
    name: &'a str,
    inline: Option<&'a str>,
}

impl Given<'_> {
    /// `v` given to this flag is not `what`.
    fn not(&self, v: &str, what: &str) -> CommandError {
        CommandError::Usage(format!("--{}: '{v}' is not {what}", self.name))
    }
}

/// The words of a command line, `next` the first not yet read.
struct Words<'a> {
    args: &'a [String],
    next: usize,
}

impl Words<'_> {
    /// The value of `flag`: its inline text, else the next word.
    fn value(&mut self, flag: &Given, what: &str) -> Result<String, CommandError> {
        if let Some(v) = flag.inline {
            return Ok(v.to_string());
        }
        let v = self
            .args
            .get(self.next)
            .ok_or_else(|| CommandError::Usage(format!("--{} needs {what}", flag.name)))?;
        self.next += 1;
        Ok(v.clone())
    }

    /// The value of a boolean `flag`: its inline text, else the next word if it is a boolean,
    /// else true.
    fn boolean(&mut self, flag: &Given) -> Result<bool, CommandError> {
        if let Some(v) = flag.inline {
            return parse_bool(v).ok_or_else(|| flag.not(v, "true or false"));
        }
        match self.args.get(self.next).and_then(|a| parse_bool(a)) {
            Some(b) => {
                self.next += 1;
                Ok(b)
            }
            None => Ok(true),
        }
    }

    /// The two words of a `--NAME KEY VALUE` flag.
    fn key_value(&mut self, flag: &Given) -> Result<(String, String), CommandError> {
        let name = flag.name;
        if flag.inline.is_some() {
            return Err(CommandError::Usage(format!(
                "--{name} takes two words: --{name} KEY VALUE"
            )));
        }
        match (self.args.get(self.next), self.args.get(self.next + 1)) {
            (Some(k), Some(v)) => {
                self.next += 2;
                Ok((k.clone(), v.clone()))
            }
            _ => Err(CommandError::Usage(format!("--{name} needs KEY VALUE"))),
        }
    }
}

/// The spec of the flag `word` names, and the flag as given.
fn find_flag<'s, 'a>(word: &'a str, specs: &'s [F]) -> Result<(&'s F, Given<'a>), CommandError> {
    let known = || {
        specs
            .iter()
            .map(|s| format!("--{}", s.name))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let Some(body) = word.strip_prefix("--") else {
        return Err(CommandError::Usage(format!(
            "unexpected argument '{word}' (flags: {})",
            known()
        )));
    };
    let (name, inline) = match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    };
    let spec = specs.iter().find(|s| s.name == name).ok_or_else(|| {
        CommandError::Usage(format!("unknown flag --{name} (flags: {})", known()))
    })?;
    Ok((spec, Given { name, inline }))
}

/// Reads the value(s) of `flag` from `words` as `spec` says and writes them into `target`.
fn apply_flag(
    target: &mut Value,
    spec: &F,
    flag: &Given,
    words: &mut Words,
) -> Result<(), CommandError> {
    let path: Vec<&str> = spec.key.split('.').collect();
    let v = match spec.kind {
        K::Str => Value::String(words.value(flag, "a value")?),
        K::Enum(allowed) => {
            let v = words.value(flag, "a value")?;
            if !allowed.contains(&v.as_str()) {
                return Err(CommandError::Usage(format!(
                    "--{}: '{v}' is not one of {}",
                    flag.name,
                    allowed.join(", ")
                )));
            }
            Value::String(v)
        }
        K::Int => {
            let v = words.value(flag, "a number")?;
            let n: u64 = v.parse().map_err(|_| flag.not(&v, "a whole number"))?;
            json!(n)
        }
        K::Float | K::Unit => json!(number(flag, spec.kind, &words.value(flag, "a number")?)?),
        K::Bool => Value::Bool(words.boolean(flag)?),
        K::Json => json_value(flag, &words.value(flag, "a JSON value")?)?,
        K::JsonObj => {
            let Value::Object(o) = json_value(flag, &words.value(flag, "a JSON value")?)? else {
                return Err(CommandError::Usage(format!(
                    "--{}: expected a JSON object {{...}}",
                    flag.name
                )));
            };
            merge_objects(obj_at(target, &path), o);
            return Ok(());
        }
        K::KeyVal => {
            let (k, v) = words.key_value(flag)?;
            obj_at(target, &path).insert(k, Value::String(v));
            return Ok(());
        }
        K::List => {
            let v = words.value(flag, "a value")?;
            array_at(target, &path).push(Value::String(v));
            return Ok(());
        }
    };
    set(target, &path, v);
    Ok(())
}

/// The finite number `v` given to `flag`, in 0..=1 for a [`K::Unit`].
fn number(flag: &Given, kind: K, v: &str) -> Result<f64, CommandError> {
    let n: f64 = v
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| flag.not(v, "a number"))?;
    if kind == K::Unit && !(0.0..=1.0).contains(&n) {
        return Err(CommandError::Usage(format!(
            "--{}: {v} is not between 0 and 1",
            flag.name
        )));
    }
    Ok(n)
}

/// The JSON text `v` given to `flag`, parsed.
fn json_value(flag: &Given, v: &str) -> Result<Value, CommandError> {
    serde_json::from_str(v).map_err(|source| CommandError::Json {
        flag: flag.name.to_string(),
        source,
    })
}

fn need<'a>(args: &'a [String], i: usize, what: &str) -> Result<&'a str, CommandError> {
    match args.get(i) {
        Some(a) if !a.starts_with("--") && !a.is_empty() => Ok(a),
        _ => Err(CommandError::Usage(format!("missing {what}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// option

#[derive(Clone, Copy)]
enum O {
    Bool,
    /// `option metrics false` sets `disable_metrics: true`.
    InvBool,
    Str,
    Enum(&'static [&'static str]),
    Int,
    List,
}

/// (key, kind, dotted path under `options`).
type OptTable = &'static [(&'static str, O, &'static str)];

const OPTIONS: OptTable = &[
    ("debug", O::Bool, "debug"),
    ("debug-lsp", O::Bool, "debug_lsp"),
    ("auto-lsp", O::Bool, "auto_lsp"),
    ("progress", O::Bool, "progress"),
    ("metrics", O::InvBool, "disable_metrics"),
    ("auto-summarize", O::InvBool, "disable_auto_summarize"),
    (
        "provider-auto-update",
        O::InvBool,
        "disable_provider_auto_update",
    ),
    ("default-providers", O::InvBool, "disable_default_providers"),
    (
        "attribution-generated-with",
        O::Bool,
        "attribution.generated_with",
    ),
    (
        "attribution-trailer-style",
        O::Enum(&["none", "co-authored-by", "assisted-by"]),
        "attribution.trailer_style",
    ),
    ("data-directory", O::Str, "data_directory"),
    ("initialize-as", O::Str, "initialize_as"),
    (
        "notifications",
        O::Enum(&["auto", "native", "osc", "bell", "disabled"]),
        "notifications",
    ),
    ("context-path", O::List, "context_paths"),
    ("global-context-path", O::List, "global_context_paths"),
    ("skill-path", O::List, "skills_paths"),
    ("disable-skill", O::List, "disabled_skills"),
    ("max-steps", O::Int, "max_steps"),
    ("max-stop-blocks", O::Int, "max_stop_blocks"),
    ("tool-preview-lines", O::Int, "tool_preview_lines"),
    ("system-prompt", O::Str, "system_prompt"),
    ("system-prompt-file", O::Str, "system_prompt_file"),
    (
        "system-prompt-environment",
        O::Bool,
        "system_prompt_environment",
    ),
    ("request-idle-timeout", O::Int, "request_idle_timeout"),
    ("shell-env-allow", O::List, "shell_env_allow"),
];

/// The `option` keys, for help and completion.
pub(crate) fn option_keys() -> Vec<&'static str> {
    OPTIONS.iter().map(|o| o.0).collect()
}

/// The values an `option` key takes, when they are few (booleans and enumerations).
pub(crate) fn option_values(key: &str) -> Vec<&'static str> {
    match OPTIONS.iter().find(|o| o.0 == key).map(|o| o.1) {
        Some(O::Bool | O::InvBool) => vec!["true", "false"],
        Some(O::Enum(values)) => values.to_vec(),
        _ => Vec::new(),
    }
}

fn option(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let usage = "usage: option KEY [VALUE] | option reset KEY | option ui KEY [VALUE]";
    let Some(first) = args.first() else {
        return Err(CommandError::Usage(usage.into()));
    };
    let (key, values) = match first.as_str() {
        "reset" => {
            let key = need(args, 1, "the key to reset")?;
            if args.len() > 2 {
                return Err(CommandError::Usage(format!(
                    "reset takes one key ({usage})"
                )));
            }
            if key.starts_with("ui-") {
                return Ok(inert_ui());
            }
            let Some((_, kind, path)) = OPTIONS.iter().find(|o| o.0 == key) else {
                return unknown_option(key);
            };
            let mut full = vec!["options"];
            full.extend(path.split('.'));
            match kind {
                O::List => set(cfg, &full, json!([])),
                _ => {
                    remove(cfg, &full);
                }
            }
            return done(format!("option {key} reset"));
        }
        "ui" => {
            need(args, 1, "the ui key (compact, diff, exit-banner ...)")?;
            return Ok(inert_ui());
        }
        k => (k, &args[1..]),
    };
    let label = key;
    let Some((_, kind, path)) = OPTIONS.iter().find(|o| o.0 == key) else {
        return unknown_option(label);
    };
    let mut full = vec!["options"];
    full.extend(path.split('.'));
    let one = |what: &str| -> Result<&String, CommandError> {
        match values {
            [v] => Ok(v),
            [] => Err(CommandError::Usage(format!("{label} needs {what}"))),
            _ => Err(CommandError::Usage(format!("{label} takes one value"))),
        }
    };
    let shown = match kind {
        O::Bool | O::InvBool => {
            let b = match values {
                [] => true,
                [v] => parse_bool(v).ok_or_else(|| {
                    CommandError::Usage(format!("{label}: '{v}' is not true or false"))
                })?,
                _ => return Err(CommandError::Usage(format!("{label} takes one value"))),
            };
            let stored = if matches!(kind, O::InvBool) { !b } else { b };
            set(cfg, &full, Value::Bool(stored));
            b.to_string()
        }
        O::Str => {
            let v = one("a value")?;
            set(cfg, &full, Value::String(v.clone()));
            v.clone()
        }
        O::Enum(allowed) => {
            let v = one("a value")?;
            if !allowed.contains(&v.as_str()) {
                return Err(CommandError::Usage(format!(
                    "{label}: '{v}' is not one of {}",
                    allowed.join(", ")
                )));
            }
            set(cfg, &full, Value::String(v.clone()));
            v.clone()
        }
        O::Int => {
            let v = one("a number")?;
            let n: u64 = v.parse().map_err(|_| {
                CommandError::Usage(format!("{label}: '{v}' is not a whole number"))
            })?;
            set(cfg, &full, json!(n));
            v.clone()
        }
        O::List => {
            if values.is_empty() {
                return Err(CommandError::Usage(format!(
                    "{label} needs at least one value"
                )));
            }
            push_unique(cfg, &full, values);
            format!("+ {}", values.join(" "))
        }
    };
    done(format!("option {label} = {shown}"))
}

/// `option ui KEY [VALUE]`: Go Crush's interface settings (any key, `exit-banner` of Go Crush
/// 0.92 included), accepted and inert. The warning is the same for every such line, so a file
/// gets it once (crush(1) CONFIGURATION).
fn inert_ui() -> Outcome {
    let summary = format!(
        "'option ui' is read by Go Crush and ignored by crush: {}",
        crate::config::schema_keys::TUI_REASON
    );
    Outcome {
        summary: summary.clone(),
        print: None,
        warning: Some(summary),
    }
}

/// An `option` key crush does not know (a later Go Crush's, a typo): a warning naming the
/// nearest known key, never an error, so a crushrc written for another version still loads
/// (crush(1) CONFIGURATION).
fn unknown_option(key: &str) -> Result<Outcome, CommandError> {
    let hint = crate::config::schema_keys::nearest(key, OPTIONS.iter().map(|o| o.0))
        .map(|k| format!(" (did you mean '{k}'?)"))
        .unwrap_or_default();
    let summary = format!("unknown key '{key}' ignored{hint}");
    Ok(Outcome {
        summary: summary.clone(),
        print: None,
        warning: Some(summary),
    })
}

// ---------------------------------------------------------------------------------------------
// model

const SELECT_FLAGS: &[F] = &[
    f("think", K::Bool, "think"),
    f("reasoning-effort", K::Str, "reasoning_effort"),
    f("max-tokens", K::Int, "max_tokens"),
    f("temperature", K::Float, "temperature"),
    f("top-p", K::Unit, "top_p"),
    f("top-k", K::Int, "top_k"),
    f("frequency-penalty", K::Float, "frequency_penalty"),
    f("presence-penalty", K::Float, "presence_penalty"),
    f("provider-options", K::JsonObj, "provider_options"),
    f("aws-auth-refresh", K::Str, "aws_auth_refresh"),
];

const MODEL_ADD_FLAGS: &[F] = &[
    f("name", K::Str, "name"),
    f("context-window", K::Int, "context_window"),
    f("default-max-tokens", K::Int, "default_max_tokens"),
    f("can-reason", K::Bool, "can_reason"),
    f("supports-images", K::Bool, "supports_attachments"),
    f("price-input", K::Float, "cost_per_1m_in"),
    f("price-output", K::Float, "cost_per_1m_out"),
    // Catwalk: `cost_per_1m_in_cached` is the cache-write price, `..._out_cached` the read price.
    f("price-cache-create", K::Float, "cost_per_1m_in_cached"),
    f("price-cache-write", K::Float, "cost_per_1m_in_cached"),
    f("price-cache-hit", K::Float, "cost_per_1m_out_cached"),
    f("price-cache-read", K::Float, "cost_per_1m_out_cached"),
    f("reasoning-effort", K::Str, "default_reasoning_effort"),
];

fn split_ref(r: &str) -> Result<(&str, &str), CommandError> {
    match r.split_once('/') {
        Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok((p, m)),
        _ => Err(CommandError::Usage(format!("'{r}' is not PROVIDER/MODEL"))),
    }
}

/// "provider/model" of `models.large|small`, if set.
pub(crate) fn current_model(cfg: &Value, which: &str) -> Option<String> {
    let sel = get(cfg, &["models", which])?;
    let model = sel.get("model")?.as_str()?;
    match sel.get("provider").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Some(format!("{p}/{model}")),
        _ => Some(model.to_string()),
    }
}

fn model(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let usage = "usage: model large|small [PROVIDER/MODEL] [--flags] | model add PROVIDER/ID [--flags] | model remove PROVIDER/ID";
    match args.first().map(String::as_str) {
        Some(which @ ("large" | "small")) => {
            let rest = &args[1..];
            if rest.is_empty() {
                let cur = current_model(cfg, which).unwrap_or_default();
                return Ok(Outcome {
                    summary: format!("model {which} is {}", display_or_none(&cur)),
                    print: Some(cur),
                    warning: None,
                });
            }
            let (mut sel, flags) = if rest[0].starts_with("--") {
                let existing = get(cfg, &["models", which])
                    .filter(|v| v.is_object())
                    .cloned()
                    .ok_or_else(|| {
                        CommandError::Usage(format!(
                            "no {which} model is set yet: give PROVIDER/MODEL before the flags"
                        ))
                    })?;
                (existing, rest)
            } else {
                let r = &rest[0];
                let (p, m) = match r.split_once('/') {
                    Some((p, m)) if !m.is_empty() => (p, m),
                    None if !r.is_empty() => ("", r.as_str()),
                    _ => {
                        return Err(CommandError::Usage(format!(
                            "'{r}' is not [PROVIDER/]MODEL"
                        )));
                    }
                };
                (json!({"provider": p, "model": m}), &rest[1..])
            };
            apply_flags(&mut sel, flags, SELECT_FLAGS)?;
            set(cfg, &["models", which], sel);
            let cur = current_model(cfg, which).unwrap_or_default();
            let extra = if flags.is_empty() {
                String::new()
            } else {
                format!(" {}", flags.join(" "))
            };
            done(format!("model {which} = {cur}{extra}"))
        }
        Some("add") => {
            let r = need(args, 1, "PROVIDER/ID")?;
            let (p, id) = split_ref(r)?;
            if get(cfg, &["providers", p]).is_none() {
                return Err(CommandError::Usage(format!(
                    "add {r}: provider '{p}' is not defined (define it first: provider add {p} --type ... --base-url ...)"
                )));
            }
            let mut m = json!({"id": id});
            apply_flags(&mut m, &args[2..], MODEL_ADD_FLAGS)?;
            let prov = obj_at(cfg, &["providers", p]);
            let models = prov.entry("models").or_insert_with(|| Value::Array(vec![]));
            if !models.is_array() {
                *models = Value::Array(vec![]);
            }
            if let Value::Array(list) = models {
                match list
                    .iter()
                    .position(|x| x.get("id").and_then(Value::as_str) == Some(id))
                {
                    Some(i) => {
                        list[i] = m;
                        list.retain({
                            let mut seen = false;
                            move |x| {
                                if x.get("id").and_then(Value::as_str) == Some(id) {
                                    let keep = !seen;
                                    seen = true;
                                    keep
                                } else {
                                    true
                                }
                            }
                        });
                    }
                    None => list.push(m),
                }
            }
            done(format!("model {p}/{id} added"))
        }
        Some("remove" | "rm") => {
            let r = need(args, 1, "PROVIDER/ID")?;
            let (p, id) = split_ref(r)?;
            if args.len() > 2 {
                return Err(CommandError::Usage(format!(
                    "remove takes one PROVIDER/ID ({usage})"
                )));
            }
            let removed = match get(cfg, &["providers", p, "models"]) {
                Some(Value::Array(list)) => list
                    .iter()
                    .any(|x| x.get("id").and_then(Value::as_str) == Some(id)),
                _ => false,
            };
            if !removed {
                return nothing_to_remove(format!("no model '{id}' of provider '{p}'"));
            }
            if let Some(Value::Array(list)) = obj_at(cfg, &["providers", p]).get_mut("models") {
                list.retain(|x| x.get("id").and_then(Value::as_str) != Some(id));
            }
            done(format!("model {p}/{id} removed"))
        }
        Some(other) => Err(CommandError::Usage(format!(
            "unknown subcommand '{other}' ({usage})"
        ))),
        None => Err(CommandError::Usage(usage.into())),
    }
}

fn display_or_none(s: &str) -> &str {
    if s.is_empty() { "(none)" } else { s }
}

// ---------------------------------------------------------------------------------------------
// permissions

fn valid_tool(t: &str) -> bool {
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.' | '*'))
}

fn permissions(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let usage = "usage: permissions allow TOOL[:ACTION]... | permissions deny TOOL...";
    let (verb, tools) = match args.split_first() {
        Some((v, t)) => (v.as_str(), t),
        None => return Err(CommandError::Usage(usage.into())),
    };
    if tools.is_empty() {
        return Err(CommandError::Usage(format!(
            "{verb} needs at least one tool ({usage})"
        )));
    }
    if let Some(bad) = tools.iter().find(|t| !valid_tool(t)) {
        return Err(CommandError::Usage(format!("'{bad}' is not a tool name")));
    }
    match verb {
        "allow" => push_unique(cfg, &["permissions", "allowed_tools"], tools),
        "deny" => {
            if let Some(bad) = tools.iter().find(|t| t.contains(':')) {
                return Err(CommandError::Usage(format!(
                    "deny takes tool names, not actions ('{bad}'): a denied tool is hidden entirely"
                )));
            }
            push_unique(cfg, &["options", "disabled_tools"], tools)
        }
        other => {
            return Err(CommandError::Usage(format!(
                "unknown subcommand '{other}' ({usage})"
            )));
        }
    }
    done(format!("permissions {verb} {}", tools.join(" ")))
}

// ---------------------------------------------------------------------------------------------
// provider, hook, mcp, lsp

const PROVIDER_FLAGS: &[F] = &[
    f("name", K::Str, "name"),
    // Stored as given, as Go Crush does: a type this build cannot call makes the provider
    // unusable (a warning naming it; `crush models` says why), never a failed load.
    f("type", K::Str, "type"),
    f("api-key", K::Str, "api_key"),
    f("base-url", K::Str, "base_url"),
    f("disable", K::Bool, "disable"),
    f("flat-rate", K::Bool, "flat_rate"),
    f("discover-models", K::Bool, "discover_models"),
    f("system-prompt-prefix", K::Str, "system_prompt_prefix"),
    f("extra-header", K::KeyVal, "extra_headers"),
    f("extra-body", K::JsonObj, "extra_body"),
    f("provider-options", K::JsonObj, "provider_options"),
    f("use-responses-api", K::Bool, "use_responses_api"),
    f("project", K::Str, "project"),
    f("location", K::Str, "location"),
    f("api-version", K::Str, "api_version"),
    f("aws-auth-refresh", K::Str, "aws_auth_refresh"),
];

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `add NAME`/`remove NAME` for the entity `what`; returns (verb, name).
fn verb_name<'a>(args: &'a [String], what: &str) -> Result<(&'a str, &'a str), CommandError> {
    let usage = format!("usage: {what} add NAME [--flags] | {what} remove NAME");
    let verb = match args.first().map(String::as_str) {
        Some(v @ "add") => v,
        Some("remove" | "rm") => "remove",
        Some(other) => {
            return Err(CommandError::Usage(format!(
                "unknown subcommand '{other}' ({usage})"
            )));
        }
        None => return Err(CommandError::Usage(usage)),
    };
    let name = need(args, 1, "a name")?;
    if !valid_name(name) {
        return Err(CommandError::Usage(format!(
            "'{name}' is not a valid name (letters, digits, '-', '_', '.')"
        )));
    }
    if verb == "remove" && args.len() > 2 {
        return Err(CommandError::Usage(format!(
            "remove takes only a name ({usage})"
        )));
    }
    Ok((verb, name))
}

fn provider(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let (verb, id) = verb_name(args, "provider")?;
    if verb == "remove" {
        if remove(cfg, &["providers", id]).is_none() {
            return nothing_to_remove(format!("no provider '{id}'"));
        }
        return done(format!("provider {id} removed"));
    }
    // Creates the provider, or updates the given fields of one a lower layer defined.
    let mut p = get(cfg, &["providers", id])
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    apply_flags(&mut p, &args[2..], PROVIDER_FLAGS)?;
    set(cfg, &["providers", id], p);
    done(format!("provider {id} added"))
}

const HOOK_FLAGS: &[F] = &[
    f("command", K::Str, "command"),
    f("name", K::Str, "name"),
    f("matcher", K::Str, "matcher"),
    f("timeout", K::Int, "timeout"),
    f("fail-closed", K::Bool, "fail_closed"),
];

fn hook(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let usage = "usage: hook add EVENT --command C [--name N --matcher RE --timeout S --fail-closed] | hook remove EVENT [--name N]";
    let verb = match args.first().map(String::as_str) {
        Some("add") => "add",
        Some("remove" | "rm") => "remove",
        Some(other) => {
            return Err(CommandError::Usage(format!(
                "unknown subcommand '{other}' ({usage})"
            )));
        }
        None => return Err(CommandError::Usage(usage.into())),
    };
    let given = need(args, 1, "the event")?;
    let event = Event::parse(given).ok_or_else(|| {
        CommandError::Usage(format!(
            "unknown event '{given}' (events: {})",
            Event::all_names()
        ))
    })?;
    if verb == "remove" {
        let mut sel = json!({});
        apply_flags(&mut sel, &args[2..], &[f("name", K::Str, "name")])?;
        let name = sel.get("name").and_then(Value::as_str).map(str::to_string);
        let hooks = obj_at(cfg, &["hooks"]);
        let keys: Vec<String> = hooks
            .keys()
            .filter(|k| Event::parse(k) == Some(event))
            .cloned()
            .collect();
        let mut removed = 0;
        for k in keys {
            match &name {
                None => {
                    if let Some(Value::Array(a)) = hooks.remove(&k) {
                        removed += a.len();
                    }
                }
                Some(n) => {
                    if let Some(Value::Array(a)) = hooks.get_mut(&k) {
                        let before = a.len();
                        a.retain(|h| h.get("name").and_then(Value::as_str) != Some(n));
                        removed += before - a.len();
                    }
                }
            }
        }
        let what = match &name {
            Some(n) => format!("hook {event} '{n}'"),
            None => format!("hooks of {event}"),
        };
        if removed == 0 {
            return nothing_to_remove(format!("no {what}"));
        }
        return done(format!("{what} removed ({removed})"));
    }
    let mut h = json!({});
    apply_flags(&mut h, &args[2..], HOOK_FLAGS)?;
    if h.get("command")
        .and_then(Value::as_str)
        .is_none_or(|c| c.trim().is_empty())
    {
        return Err(CommandError::Usage(format!(
            "add {event} needs --command ({usage})"
        )));
    }
    if let Some(m) = h.get("matcher").and_then(Value::as_str)
        && let Err(source) = regex_lite::Regex::new(m)
    {
        return Err(CommandError::Matcher {
            pattern: m.to_string(),
            source,
        });
    }
    array_at(cfg, &["hooks", event.name()]).push(h);
    done(format!("hook {event} added"))
}

const MCP_FLAGS: &[F] = &[
    f("type", K::Enum(&["stdio", "sse", "http"]), "type"),
    f("command", K::Str, "command"),
    f("args", K::List, "args"),
    f("env", K::KeyVal, "env"),
    f("url", K::Str, "url"),
    f("header", K::KeyVal, "headers"),
    f("timeout", K::Int, "timeout"),
    f("disabled", K::Bool, "disabled"),
    f("disabled-tools", K::List, "disabled_tools"),
    f("enabled-tools", K::List, "enabled_tools"),
    f("oauth", K::Bool, "oauth"),
    f("oauth-client-id", K::Str, "oauth_client_id"),
    f("oauth-client-secret", K::Str, "oauth_client_secret"),
    f("oauth-callback-port", K::Int, "oauth_callback_port"),
];

fn mcp(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let (verb, name) = verb_name(args, "mcp")?;
    if verb == "remove" {
        if remove(cfg, &["mcp", name]).is_none() {
            return nothing_to_remove(format!("no MCP server '{name}'"));
        }
        return done(format!("mcp {name} removed"));
    }
    let mut m = json!({"type": "stdio"});
    apply_flags(&mut m, &args[2..], MCP_FLAGS)?;
    let kind = m.get("type").and_then(Value::as_str).unwrap_or("stdio");
    let has = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if kind == "stdio" && !has("command") {
        return Err(CommandError::Usage(format!(
            "add {name}: a stdio server needs --command"
        )));
    }
    if kind != "stdio" && !has("url") {
        return Err(CommandError::Usage(format!(
            "add {name}: a {kind} server needs --url"
        )));
    }
    set(cfg, &["mcp", name], m);
    done(format!("mcp {name} added"))
}

const LSP_FLAGS: &[F] = &[
    f("command", K::Str, "command"),
    f("args", K::List, "args"),
    f("env", K::KeyVal, "env"),
    f("filetypes", K::List, "filetypes"),
    f("root-markers", K::List, "root_markers"),
    f("timeout", K::Int, "timeout"),
    f("disabled", K::Bool, "disabled"),
    f("init-options", K::Json, "init_options"),
    f("options", K::Json, "options"),
];

fn lsp(cfg: &mut Value, args: &[String]) -> Result<Outcome, CommandError> {
    let (verb, name) = verb_name(args, "lsp")?;
    if verb == "remove" {
        if remove(cfg, &["lsp", name]).is_none() {
            return nothing_to_remove(format!("no LSP server '{name}'"));
        }
        return done(format!("lsp {name} removed"));
    }
    let mut l = json!({});
    apply_flags(&mut l, &args[2..], LSP_FLAGS)?;
    set(cfg, &["lsp", name], l);
    done(format!("lsp {name} added"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cfg: &mut Value, line: &str) -> Result<Outcome, String> {
        apply(cfg, &split_words(line).unwrap()).map_err(|e| e.to_string())
    }

    fn ok(cfg: &mut Value, line: &str) {
        if let Err(e) = run(cfg, line) {
            panic!("{line}: {e}");
        }
    }

    fn err(cfg: &mut Value, line: &str) -> String {
        let before = cfg.clone();
        let e = run(cfg, line).expect_err(line);
        assert_eq!(*cfg, before, "a failing command changed the config: {line}");
        e
    }

    #[test]
    fn words() {
        assert_eq!(
            split_words(r#"a "b c" 'd e' f\ g "h\"i""#).unwrap(),
            vec!["a", "b c", "d e", "f g", "h\"i"]
        );
        assert_eq!(split_words("x ''").unwrap(), vec!["x", ""]);
        assert!(split_words("'x").is_err());
    }

    #[test]
    fn options_good_and_bad() {
        let mut c = json!({});
        ok(&mut c, "option progress false");
        ok(&mut c, "option debug");
        ok(&mut c, "option provider-auto-update false");
        ok(&mut c, "option context-path docs/ more/");
        ok(&mut c, "option context-path docs/");
        ok(&mut c, "option max-steps 7");
        ok(&mut c, "option attribution-trailer-style none");
        assert_eq!(
            c["options"],
            json!({"progress": false, "debug": true, "disable_provider_auto_update": true,
                "context_paths": ["docs/", "more/"],
                "max_steps": 7, "attribution": {"trailer_style": "none"}})
        );
        ok(&mut c, "option reset context-path");
        ok(&mut c, "option reset progress");
        assert_eq!(c["options"]["context_paths"], json!([]));
        assert!(c["options"].get("progress").is_none());
        assert!(err(&mut c, "option progress maybe").contains("not true or false"));
        assert!(err(&mut c, "option data-directory").contains("needs a value"));
        assert!(err(&mut c, "option notifications loud").contains("not one of"));
        assert!(err(&mut c, "option max-steps many").contains("whole number"));
        assert!(err(&mut c, "option reset").contains("missing"));
        assert!(err(&mut c, "option").contains("usage"));
    }

    /// A key of a later Go Crush (`option ui exit-banner compact`, 0.92) or a typo is a warning
    /// with the nearest key, and changes nothing.
    #[test]
    fn unknown_option_keys_warn_and_change_nothing() {
        let mut c = json!({"options": {"debug": true}});
        for (line, want) in [
            ("option bogus 1", "unknown key 'bogus' ignored"),
            (
                "option max-step 3",
                "unknown key 'max-step' ignored (did you mean 'max-steps'?)",
            ),
            (
                "option ui exit-banner compact",
                "'option ui' is read by Go Crush and ignored by crush: Go Crush's full-screen",
            ),
            (
                "option ui compact true",
                "'option ui' is read by Go Crush and ignored by crush",
            ),
            ("option ui diff bogus", "'option ui' is read by Go Crush"),
            (
                "option reset frobnicate",
                "unknown key 'frobnicate' ignored",
            ),
        ] {
            let before = c.clone();
            let args = split_words(line).unwrap();
            let out = apply(&mut c, &args).expect(line);
            let w = out.warning.expect(line);
            assert!(w.contains(want), "{line}: {w}");
            assert_eq!(c, before, "{line}");
        }
    }

    #[test]
    fn model_select_good_and_bad() {
        let mut c = json!({});
        let o = run(&mut c, "model large").unwrap();
        assert_eq!(o.print.as_deref(), Some(""));
        ok(
            &mut c,
            "model large anthropic/claude-x --max-tokens 100 --temperature 0.5 --think",
        );
        assert_eq!(
            c["models"]["large"],
            json!({"provider": "anthropic", "model": "claude-x", "max_tokens": 100, "temperature": 0.5, "think": true})
        );
        let o = run(&mut c, "model large").unwrap();
        assert_eq!(o.print.as_deref(), Some("anthropic/claude-x"));
        ok(&mut c, "model large --top-p 0.9");
        assert_eq!(c["models"]["large"]["top_p"], json!(0.9));
        ok(
            &mut c,
            "model small openai/gpt-5-mini --reasoning-effort=low",
        );
        assert_eq!(c["models"]["small"]["reasoning_effort"], json!("low"));
        assert!(err(&mut c, "model small --top-k 3 --bogus 1").contains("unknown flag --bogus"));
        assert!(err(&mut c, "model large a/b --max-tokens lots").contains("whole number"));
        assert!(err(&mut c, "model large a/b --top-p 2").contains("between 0 and 1"));
        assert!(err(&mut c, "model large a/b --temperature").contains("needs a number"));
        assert!(err(&mut c, "model large a/b extra").contains("unexpected argument"));
        assert!(err(&mut c, "model huge a/b").contains("unknown subcommand"));
        let mut empty = json!({});
        assert!(err(&mut empty, "model small --top-k 3").contains("no small model"));
    }

    #[test]
    fn provider_and_model_add() {
        let mut c = json!({});
        ok(
            &mut c,
            "provider add local --type openai-compat --base-url http://h/v1 --extra-header X-A 1 --extra-header X-B 2",
        );
        ok(
            &mut c,
            "model add local/m1 --context-window 1000 --price-input 3 --price-output 15 --price-cache-create 3.75 --price-cache-hit 0.3 --supports-images true",
        );
        let m = &c["providers"]["local"]["models"][0];
        // As in Go Crush: cache create = cache write, cache hit = cache read.
        assert_eq!(m["cost_per_1m_in_cached"], json!(3.75));
        assert_eq!(m["cost_per_1m_out_cached"], json!(0.3));
        assert_eq!(m["supports_attachments"], json!(true));
        assert_eq!(
            c["providers"]["local"]["extra_headers"],
            json!({"X-A": "1", "X-B": "2"})
        );
        ok(&mut c, "model add local/m1 --name Again");
        assert_eq!(
            c["providers"]["local"]["models"],
            json!([{"id": "m1", "name": "Again"}])
        );
        // Updating a provider keeps its models.
        ok(&mut c, "provider add local --api-key '$KEY'");
        assert_eq!(c["providers"]["local"]["api_key"], json!("$KEY"));
        assert_eq!(c["providers"]["local"]["models"][0]["id"], json!("m1"));
        ok(&mut c, "model rm local/m1");
        assert_eq!(c["providers"]["local"]["models"], json!([]));
        let o = run(&mut c, "model remove local/m1").unwrap();
        assert_eq!(
            o.warning.as_deref(),
            Some("no model 'm1' of provider 'local' to remove: nothing changed")
        );
        assert!(err(&mut c, "model add nope/m").contains("not defined"));
        assert!(err(&mut c, "model add local").contains("not PROVIDER/MODEL"));
        assert!(err(&mut c, "model add local/x --price-input cheap").contains("not a number"));
        ok(&mut c, "provider add x --type gemini");
        assert_eq!(c["providers"]["x"]["type"], json!("gemini"));
        assert!(err(&mut c, "provider add x --extra-header K").contains("KEY VALUE"));
        assert!(err(&mut c, "provider add x --extra-body [1]").contains("JSON object"));
        assert!(err(&mut c, "provider add x --base-url").contains("needs a value"));
        assert!(err(&mut c, "provider add 'a b'").contains("not a valid name"));
        let before = c.clone();
        for line in [
            "provider remove ghost",
            "mcp remove ghost",
            "lsp rm ghost",
            "hook remove Stop --name ghost",
            "hook remove Stop",
        ] {
            let o = run(&mut c, line).unwrap();
            assert!(
                o.warning
                    .as_deref()
                    .is_some_and(|w| w.contains("nothing changed")),
                "{line}: {o:?}"
            );
        }
        assert_eq!(c, before);
        ok(&mut c, "provider remove local");
        assert!(c["providers"].get("local").is_none());
    }

    #[test]
    fn permissions_good_and_bad() {
        let mut c = json!({});
        ok(&mut c, "permissions allow grep edit:write grep");
        ok(&mut c, "permissions deny fetch");
        assert_eq!(
            c["permissions"]["allowed_tools"],
            json!(["grep", "edit:write"])
        );
        assert_eq!(c["options"]["disabled_tools"], json!(["fetch"]));
        assert!(widens_permissions(
            &split_words("permissions allow x").unwrap()
        ));
        assert!(!widens_permissions(
            &split_words("permissions deny x").unwrap()
        ));
        assert!(widens_permissions(
            &split_words("hook remove PreToolUse").unwrap()
        ));
        assert!(!widens_permissions(
            &split_words("option progress false").unwrap()
        ));
        assert!(err(&mut c, "permissions allow").contains("at least one"));
        assert!(err(&mut c, "permissions grant x").contains("unknown subcommand"));
        assert!(err(&mut c, "permissions deny bash:execute").contains("tool names"));
        assert!(err(&mut c, "permissions allow 'rm -rf'").contains("not a tool name"));
    }

    #[test]
    fn hooks_good_and_bad() {
        let mut c = json!({"hooks": {"pre_tool_use": [{"name": "g", "command": "x"}]}});
        ok(
            &mut c,
            "hook add PreToolUse --command ./check.sh --name lint --matcher ^bash$ --timeout 5 --fail-closed",
        );
        ok(&mut c, "hook add user_prompt_submit --command 'echo hi'");
        assert_eq!(
            c["hooks"]["PreToolUse"],
            json!([{"command": "./check.sh", "name": "lint", "matcher": "^bash$", "timeout": 5, "fail_closed": true}])
        );
        ok(&mut c, "hook remove pretooluse --name lint");
        assert_eq!(c["hooks"]["PreToolUse"], json!([]));
        assert_eq!(c["hooks"]["pre_tool_use"].as_array().unwrap().len(), 1);
        ok(&mut c, "hook rm PreToolUse");
        assert!(c["hooks"].get("pre_tool_use").is_none());
        assert!(err(&mut c, "hook add PreToolUse --name x").contains("needs --command"));
        assert!(err(&mut c, "hook add OnBoot --command x").contains("unknown event"));
        assert!(
            err(&mut c, "hook add Stop --command x --matcher '('").contains("not a valid regex")
        );
        assert!(err(&mut c, "hook add Stop --command x --timeout soon").contains("whole number"));
        assert!(err(&mut c, "hook add Stop --command x --when now").contains("unknown flag"));
        assert!(err(&mut c, "hook remove Stop --matcher x").contains("unknown flag"));
    }

    #[test]
    fn mcp_and_lsp_good_and_bad() {
        let mut c = json!({});
        ok(
            &mut c,
            "mcp add fs --command npx --args -y --args server-fs --env ROOT /tmp --timeout 20",
        );
        assert_eq!(
            c["mcp"]["fs"],
            json!({"type": "stdio", "command": "npx", "args": ["-y", "server-fs"], "env": {"ROOT": "/tmp"}, "timeout": 20})
        );
        ok(
            &mut c,
            "mcp add web --type http --url https://x/mcp --header Authorization 'Bearer $T'",
        );
        ok(&mut c, "mcp rm fs");
        assert!(c["mcp"].get("fs").is_none());
        assert!(err(&mut c, "mcp add s").contains("needs --command"));
        assert!(err(&mut c, "mcp add s --type http").contains("needs --url"));
        assert!(err(&mut c, "mcp add s --type pipe --command x").contains("not one of"));
        assert!(
            run(&mut c, "mcp remove ghost")
                .unwrap()
                .warning
                .is_some_and(|w| w.contains("no MCP server 'ghost'"))
        );
        ok(
            &mut c,
            r#"lsp add gopls --command gopls --filetypes go --filetypes mod --init-options '{"a":1}'"#,
        );
        assert_eq!(c["lsp"]["gopls"]["filetypes"], json!(["go", "mod"]));
        assert_eq!(c["lsp"]["gopls"]["init_options"], json!({"a": 1}));
        assert!(err(&mut c, "lsp add x --options {bad").contains("invalid JSON"));
        assert!(err(&mut c, "lsp add x --colour red").contains("unknown flag"));
        ok(&mut c, "lsp remove gopls");
        assert!(err(&mut c, "lsp frob x").contains("unknown subcommand"));
        assert!(err(&mut c, "teleport now").contains("unknown command"));
    }

    /// The grammar of the flags: `--flag=value`, booleans with or without a value, two-word
    /// flags, JSON objects merged into what is there, and what each refuses.
    #[test]
    fn flag_forms_good_and_bad() {
        let mut c = json!({});
        ok(
            &mut c,
            r#"provider add p --type=openai --disable=off --flat-rate no --discover-models --extra-body '{"a":1}' '--extra-body={"b":2}'"#,
        );
        assert_eq!(
            c["providers"]["p"],
            json!({"type": "openai", "disable": false, "flat_rate": false,
                "discover_models": true, "extra_body": {"a": 1, "b": 2}})
        );
        ok(
            &mut c,
            "mcp add m --command=x --args=-v --args -q --timeout=3",
        );
        assert_eq!(
            c["mcp"]["m"],
            json!({"type": "stdio", "command": "x", "args": ["-v", "-q"], "timeout": 3})
        );
        for (line, want) in [
            (
                "provider add p --extra-header=K V",
                "--extra-header takes two words: --extra-header KEY VALUE",
            ),
            (
                "provider add p --extra-header K",
                "--extra-header needs KEY VALUE",
            ),
            (
                "provider add p --disable=maybe",
                "--disable: 'maybe' is not true or false",
            ),
            (
                "provider add p --extra-body 3",
                "--extra-body: expected a JSON object {...}",
            ),
            ("provider add p --extra-body=", "--extra-body: invalid JSON"),
            (
                "provider add p type",
                "unexpected argument 'type' (flags: --name --type",
            ),
            (
                "mcp add m --type=pipe",
                "--type: 'pipe' is not one of stdio, sse, http",
            ),
            (
                "mcp add m --timeout=-1",
                "--timeout: '-1' is not a whole number",
            ),
            (
                "model large a/b --top-p=-0.5",
                "--top-p: -0.5 is not between 0 and 1",
            ),
            (
                "model large a/b --temperature NaN",
                "--temperature: 'NaN' is not a number",
            ),
            (
                "model large a/b --max-tokens",
                "--max-tokens needs a number",
            ),
        ] {
            let e = err(&mut c, line);
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
