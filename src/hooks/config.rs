//! The `hooks` configuration: Crush's flat shape and Claude Code's nested shape, event names,
//! matchers, and the file each hook came from.
//!
//! ```json
//! {"hooks": {
//!   "PreToolUse": [
//!     {"name": "no-rm", "matcher": "^bash$", "command": "./hooks/no-rm.sh", "timeout": 10, "fail_closed": true},
//!     {"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "~/.claude/check.sh"}]}
//!   ]
//! }}
//! ```

use regex_lite::Regex;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use crate::config::hook_event::{exec_args, exec_form_text};

/// The events live below the configuration, which names them too (crushrc's `hook add`).
pub(crate) use crate::config::hook_event::{EVENTS, Event};

/// Default per-hook timeout.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Claude Code's default timeout of a hook in its shape on `event`: 600 s, 30 s for
/// UserPromptSubmit, 1.5 s for SessionEnd (its hooks hold up the exit).
pub(crate) fn claude_default_timeout(event: Event) -> Duration {
    match event {
        Event::UserPromptSubmit => Duration::from_secs(30),
        Event::SessionEnd => Duration::from_millis(1500),
        _ => Duration::from_secs(600),
    }
}

/// Which configuration shape declared a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `{name?, matcher?, command, timeout?, fail_closed?}`
    Crush,
    /// `{matcher?, hooks:[{type:"command", command, timeout?}]}`: Claude Code's world (its tool
    /// names, its matcher rules, plain stdout as context for prompt and session hooks).
    ClaudeCode,
}

impl Dialect {
    /// The tool name a hook of this dialect sees in its payload: Crush's own, or Claude Code's
    /// name for it (the first of `claude`, `Tool::claude_names`) when it has one.
    pub(crate) fn payload_tool_name(self, tool: &str, claude: &[String]) -> String {
        match (self, claude.first()) {
            (Dialect::ClaudeCode, Some(c)) => c.clone(),
            _ => tool.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
enum Matcher {
    All,
    /// Claude Code's plain form: exact names separated by `|` or `,`.
    Exact(Vec<String>),
    Regex(Regex),
}

/// One configured hook.
#[derive(Debug, Clone)]
pub(crate) struct HookDef {
    pub event: Event,
    pub name: Option<String>,
    /// As written ("" when absent).
    pub matcher: String,
    matcher_c: Matcher,
    pub command: String,
    pub timeout: Duration,
    pub fail_closed: bool,
    /// Also runs for the tool calls of sub-agents (the `agent` tool), whose payloads then carry
    /// `is_sub_agent: true`. Off by default: a sub-agent only reads.
    pub include_sub_agents: bool,
    pub dialect: Dialect,
    /// The Claude Code plugin folder a hook came from (its `CLAUDE_PLUGIN_ROOT`).
    pub plugin_root: Option<PathBuf>,
    /// The file it came from (or "the command line", "<merged configuration>").
    pub origin: String,
    /// Where in that file: `hooks.PreToolUse[2]` or `hooks.PreToolUse[0].hooks[1]`.
    pub location: String,
    /// A Claude Code handler's `if`: a permission rule the tool call must match for the hook
    /// to run (crush(1) HOOKS).
    pub if_rule: Option<String>,
    /// A Claude Code handler's exec form (`command` the program, `args` its arguments): the
    /// program and arguments, run without a shell. `command` then holds their quoted text.
    pub argv: Option<Vec<String>>,
}

impl HookDef {
    /// `name`, else the command.
    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.command)
    }

    /// Whether the hook applies to `target`: the tool name on tool events, the event's
    /// `matcher_field` value otherwise (None: unknown, it applies). A Claude Code hook also
    /// matches Claude Code's names for the tool (`claude`, `Tool::claude_names`). Where a
    /// matcher does not apply it was compiled to match everything.
    pub(crate) fn matches(&self, target: Option<&str>, claude: &[String]) -> bool {
        let Some(target) = target else { return true };
        let test = |name: &str| match &self.matcher_c {
            Matcher::All => true,
            Matcher::Exact(names) => names.iter().any(|n| n == name),
            Matcher::Regex(re) => re.is_match(name),
        };
        if test(target) {
            return true;
        }
        self.dialect == Dialect::ClaudeCode
            && self.event.has_tool()
            && claude.iter().any(|n| test(n))
    }

    /// Whether the hook also runs for the tool calls of sub-agents: a hook in Claude Code's
    /// shape (as in Claude Code), a guard (`fail_closed`), or one that opted in
    /// (`include_sub_agents`). Other hooks see only the top-level agent's calls, so a delegated
    /// task does not fire them once per sub-agent step.
    pub(crate) fn runs_in_sub_agents(&self) -> bool {
        self.dialect == Dialect::ClaudeCode || self.fail_closed || self.include_sub_agents
    }
}

/// One layer's `hooks` object, named after its file.
pub(crate) struct Source<'a> {
    pub origin: String,
    pub hooks: &'a Value,
}

/// Every configured hook, in config order.
#[derive(Debug, Clone, Default)]
pub(crate) struct HookConfig {
    pub hooks: Vec<HookDef>,
    /// Claude Code hooks crush does not run: events it does not have, per file
    /// (`crush hooks list` shows them).
    pub unsupported: Vec<String>,
    /// Before each run, a project hook's files are checked against what was trusted.
    pub guard: crate::guard::Guard,
    /// The session's variables (its `.env` and `env` map), on top of crush's environment.
    pub env: crate::env::Overlay,
}

impl HookConfig {
    /// The configured hooks of `loaded`, each named after the file (layer) it came from.
    /// Ok carries warnings (unknown events, unsupported handler types); Err makes the
    /// configuration invalid (bad matcher, no command).
    pub(crate) fn from_loaded(
        loaded: &crate::config::Loaded,
    ) -> Result<(HookConfig, Vec<String>), Problems> {
        let sources: Vec<Source> = loaded
            .layers
            .iter()
            .filter_map(|l| {
                l.value.get("hooks").map(|h| Source {
                    origin: match &l.path {
                        Some(p) => p.display().to_string(),
                        None => format!("{:?} layer", l.kind),
                    },
                    hooks: h,
                })
            })
            .collect();
        let (mut cfg, mut warnings) = parse(&loaded.config.hooks, &sources)?;
        cfg.guard = loaded.guard.clone();
        cfg.env = loaded.env.clone();
        for c in &loaded.claude_hooks {
            let (defs, mut p, unsupported) = parse_claude(c);
            cfg.hooks.extend(defs);
            cfg.unsupported.extend(unsupported);
            warnings.append(&mut p.warnings);
            // Claude Code's own files are never crush's to refuse: a hook crush cannot read is
            // skipped with a warning.
            warnings.extend(p.errors.into_iter().map(|e| format!("{e}; skipped")));
        }
        Ok((cfg, warnings))
    }

    /// Whether any hook is in Claude Code's shape (they are sent a transcript).
    pub(crate) fn has_claude_hooks(&self) -> bool {
        self.hooks.iter().any(|h| h.dialect == Dialect::ClaudeCode)
    }
}

/// Problems found while reading the configuration. `errors` make the configuration invalid.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

fn compile_matcher(m: &str, dialect: Dialect) -> Result<Matcher, regex_lite::Error> {
    let t = m.trim();
    if t.is_empty() || (dialect == Dialect::ClaudeCode && t == "*") {
        return Ok(Matcher::All);
    }
    if dialect == Dialect::ClaudeCode
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_- ,|".contains(c))
    {
        let names = t
            .split(['|', ','])
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        return Ok(Matcher::Exact(names));
    }
    Regex::new(t).map(Matcher::Regex)
}

const FLAT_KEYS: &[&str] = &[
    "name",
    "matcher",
    "command",
    "timeout",
    "fail_closed",
    "include_sub_agents",
    "type",
];
const HANDLER_KEYS: &[&str] = &[
    "type",
    "command",
    "timeout",
    "name",
    "fail_closed",
    "include_sub_agents",
    "statusMessage",
    "async",
    // Claude Code runs such a hook in the background and wakes the model on exit 2; crush
    // runs every hook in the turn, so its exit 2 reaches the model at once.
    "asyncRewake",
    "shell",
    "once",
    "if",
    "args",
];

struct Raw<'a> {
    event: Event,
    entry: &'a Map<String, Value>,
    /// The group of a Claude Code handler.
    group: Option<&'a Map<String, Value>>,
    location: String,
}

fn timeout_of(v: Option<&Value>, default: Duration) -> Result<Duration, super::HookError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => {
            let s = n.as_f64().unwrap_or(0.0);
            // Go Crush: zero or negative means the default.
            if s <= 0.0 || !s.is_finite() {
                Ok(default)
            } else {
                Ok(Duration::from_secs_f64(s.min(86_400.0)))
            }
        }
        Some(other) => Err(super::HookError::Timeout(other.clone())),
    }
}

fn build(raw: &Raw, origin: &str, p: &mut Problems) -> Option<HookDef> {
    let dialect = if raw.group.is_some() {
        Dialect::ClaudeCode
    } else {
        Dialect::Crush
    };
    let e = raw.entry;
    let name = e
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let command = e
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let label = match (&name, command.is_empty()) {
        (Some(n), _) => format!("hook '{n}'"),
        (None, false) => format!("hook '{command}'"),
        (None, true) => "hook".to_string(),
    };
    let here = format!("{origin}: {} ({label})", raw.location);
    let allowed = if dialect == Dialect::Crush {
        FLAT_KEYS
    } else {
        HANDLER_KEYS
    };
    for k in e.keys() {
        if !allowed.contains(&k.as_str()) {
            p.warnings
                .push(format!("{here}: unknown key '{k}' ignored"));
        }
    }
    if let Some(t) = e.get("type").and_then(Value::as_str)
        && t != "command"
    {
        p.warnings.push(format!(
            "{here}: hook type '{t}' is not supported (only \"command\"); skipped"
        ));
        return None;
    }
    if command.is_empty() {
        p.errors.push(format!("{here}: command is required"));
        return None;
    }
    let argv: Option<Vec<String>> = match exec_args(e) {
        Ok(None) => None,
        Ok(Some(args)) => Some(std::iter::once(command.clone()).chain(args).collect()),
        Err(bad) => {
            let m = super::HookError::Args(bad.clone());
            p.errors.push(format!("{here}: {m}"));
            return None;
        }
    };
    let command = match &argv {
        Some(v) => exec_form_text(&v[0], &v[1..]),
        None => command,
    };
    let matcher_v = match raw.group {
        Some(g) => g.get("matcher"),
        None => e.get("matcher"),
    };
    let matcher = match matcher_v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            p.errors
                .push(format!("{here}: matcher must be a string, not {other}"));
            return None;
        }
    };
    let mut matcher_c = match compile_matcher(&matcher, dialect) {
        Ok(m) => m,
        Err(err) => {
            p.errors
                .push(format!("{here}: invalid matcher regex '{matcher}': {err}"));
            return None;
        }
    };
    // Claude Code's matchers also select a session source, a compaction trigger...; Crush's
    // flat hooks match tools only.
    let applies = raw.event.has_tool()
        || (dialect == Dialect::ClaudeCode && raw.event.matcher_field().is_some());
    if !applies {
        if !matcher.trim().is_empty() {
            p.warnings.push(format!(
                "{here}: matcher '{matcher}' is ignored: {} has no tool",
                raw.event
            ));
        }
        matcher_c = Matcher::All;
    }
    let default = match dialect {
        Dialect::Crush => DEFAULT_TIMEOUT,
        Dialect::ClaudeCode => claude_default_timeout(raw.event),
    };
    let timeout = match timeout_of(e.get("timeout"), default) {
        Ok(t) => t,
        Err(m) => {
            p.errors.push(format!("{here}: {m}"));
            return None;
        }
    };
    let flag = |key: &str, p: &mut Problems| -> Option<bool> {
        match e.get(key) {
            None | Some(Value::Null) => Some(false),
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                p.errors
                    .push(format!("{here}: {key} must be true or false, not {other}"));
                None
            }
        }
    };
    let fail_closed = flag("fail_closed", p)?;
    let include_sub_agents = flag("include_sub_agents", p)?;
    let if_rule = match e.get("if") {
        None | Some(Value::Null) => None,
        Some(_) if !raw.event.has_tool() => {
            p.warnings.push(format!(
                "{here}: 'if' applies to tool events only; this hook never runs on {}",
                raw.event
            ));
            return None;
        }
        Some(Value::String(r)) => match crate::config::claude_rules::check(r) {
            Ok(()) => Some(r.clone()),
            // A guard keeps guarding: it runs for every call its matcher selects.
            Err(why) if fail_closed => {
                p.warnings.push(format!(
                    "{here}: 'if' \"{r}\" is not applied ({why}); as a fail_closed guard it runs for every call its matcher selects"
                ));
                None
            }
            Err(why) => {
                p.warnings.push(format!(
                    "{here}: 'if' \"{r}\" is not applied ({why}); hook skipped"
                ));
                return None;
            }
        },
        // A guard keeps guarding here too: it runs for every call its matcher selects.
        Some(other) if fail_closed => {
            p.warnings.push(format!(
                "{here}: 'if' must be a permission rule string, not {other}; as a fail_closed guard it runs for every call its matcher selects"
            ));
            None
        }
        Some(other) => {
            p.warnings.push(format!(
                "{here}: 'if' must be a permission rule string, not {other}; hook skipped"
            ));
            return None;
        }
    };
    Some(HookDef {
        if_rule,
        argv,
        event: raw.event,
        name,
        matcher,
        matcher_c,
        command,
        timeout,
        fail_closed,
        include_sub_agents,
        dialect,
        plugin_root: None,
        origin: origin.to_string(),
        location: raw.location.clone(),
    })
}

/// The hooks of a Claude Code settings file or plugin (`crate::config::claude`), in Claude
/// Code's nested shape: (hooks, problems, events crush does not have). A flat entry there is
/// skipped, as Claude Code skips it.
fn parse_claude(c: &crate::config::claude::ClaudeHooks) -> (Vec<HookDef>, Problems, Vec<String>) {
    let origin = c.path.display().to_string();
    let mut p = Problems::default();
    let mut unsupported = Vec::new();
    if let Value::Object(events) = &c.hooks {
        for (key, list) in events {
            // Claude Code reads its event names exactly: `preToolUse` never runs there.
            if Event::parse_exact(key).is_none() {
                let n = list.as_array().map_or(0, Vec::len);
                let hint = Event::parse(key)
                    .map(|e| format!("; Claude Code's name is {}", e.name()))
                    .unwrap_or_default();
                unsupported.push(format!("{origin}: {key} ({n} matcher group(s){hint})"));
            }
        }
    }
    let known: Map<String, Value> = match &c.hooks {
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| Event::parse_exact(k).is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Map::new(),
    };
    let known = Value::Object(known);
    let mut defs = Vec::new();
    for raw in flatten(&known, &origin, &mut p) {
        if raw.group.is_none() {
            p.warnings.push(format!(
                "{origin}: {}: Claude Code's files take the nested shape ({{\"matcher\": ..., \"hooks\": [{{\"type\": \"command\", ...}}]}}); this entry is skipped, as Claude Code skips it",
                raw.location
            ));
            continue;
        }
        if let Some(mut d) = build(&raw, &origin, &mut p) {
            d.plugin_root = c.plugin_root.clone();
            defs.push(d);
        }
    }
    (defs, p, unsupported)
}

/// The entries of one `hooks` object, flattened (a Claude Code group becomes one entry per
/// handler), in order. Shape errors and unknown events go to `p` under `origin`.
fn flatten<'a>(hooks: &'a Value, origin: &str, p: &mut Problems) -> Vec<Raw<'a>> {
    let mut out = Vec::new();
    let map = match hooks {
        Value::Null => return out,
        Value::Object(m) => m,
        other => {
            p.errors.push(format!(
                "{origin}: hooks must be an object keyed by event name, not {other}"
            ));
            return out;
        }
    };
    for (key, list) in map {
        let Some(event) = Event::parse(key) else {
            p.warnings.push(format!(
                "{origin}: unknown hook event '{key}' ignored (known: {})",
                Event::all_names()
            ));
            continue;
        };
        let Some(items) = list.as_array() else {
            p.errors
                .push(format!("{origin}: hooks.{key} must be an array of hooks"));
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let Some(entry) = item.as_object() else {
                p.errors.push(format!(
                    "{origin}: hooks.{key}[{i}] must be an object with a command"
                ));
                continue;
            };
            match entry.get("hooks") {
                Some(Value::Array(handlers)) => {
                    for k in entry.keys() {
                        if k != "hooks" && k != "matcher" {
                            p.warnings.push(format!(
                                "{origin}: hooks.{key}[{i}]: unknown key '{k}' ignored"
                            ));
                        }
                    }
                    for (j, h) in handlers.iter().enumerate() {
                        match h.as_object() {
                            Some(hm) => out.push(Raw {
                                event,
                                entry: hm,
                                group: Some(entry),
                                location: format!("hooks.{key}[{i}].hooks[{j}]"),
                            }),
                            None => p.errors.push(format!(
                                "{origin}: hooks.{key}[{i}].hooks[{j}] must be an object with a command"
                            )),
                        }
                    }
                }
                Some(_) => p.errors.push(format!(
                    "{origin}: hooks.{key}[{i}].hooks must be an array of handlers"
                )),
                None => out.push(Raw {
                    event,
                    entry,
                    group: None,
                    location: format!("hooks.{key}[{i}]"),
                }),
            }
        }
    }
    out
}

/// A hook entry of one layer, for naming the file a merged entry came from.
struct Attributed<'a> {
    event: Event,
    entry: &'a Map<String, Value>,
    group: Option<&'a Map<String, Value>>,
    origin: String,
    location: String,
    used: bool,
}

/// Reads the merged `hooks` value of the configuration. `sources` are the layers' own `hooks`
/// values, lowest priority first: they name the file each hook came from and fix config order
/// (global before project, file order within a file), whatever the merged object's key order.
pub(crate) fn parse(
    merged: &Value,
    sources: &[Source],
) -> Result<(HookConfig, Vec<String>), Problems> {
    let mut p = Problems::default();
    // Flatten each source to (event, entry, origin, location) for attribution; their own
    // problems are reported against the merged value below, so discard them here.
    let mut scratch = Problems::default();
    let mut attributed: Vec<Attributed> = Vec::new();
    for s in sources {
        for r in flatten(s.hooks, &s.origin, &mut scratch) {
            attributed.push(Attributed {
                event: r.event,
                entry: r.entry,
                group: r.group,
                origin: s.origin.clone(),
                location: r.location,
                used: false,
            });
        }
    }
    let mut defs: Vec<(usize, HookDef)> = Vec::new();
    let merged_raw = flatten(merged, "<merged configuration>", &mut Problems::default());
    for raw in merged_raw {
        // The first unused identical entry in the layers is where this one came from.
        let found = attributed.iter_mut().enumerate().find(|(_, a)| {
            !a.used
                && a.event == raw.event
                && a.entry == raw.entry
                && a.group.map(|g| g.get("matcher")) == raw.group.map(|g| g.get("matcher"))
        });
        let (order, origin, location) = match found {
            Some((i, a)) => {
                a.used = true;
                (i, a.origin.clone(), a.location.clone())
            }
            None => (
                usize::MAX,
                "<merged configuration>".to_string(),
                raw.location.clone(),
            ),
        };
        let raw = Raw { location, ..raw };
        if let Some(d) = build(&raw, &origin, &mut p) {
            defs.push((order, d));
        }
    }
    // Shape problems and unknown events, named after the file that has them.
    for s in sources {
        let mut own = Problems::default();
        flatten(s.hooks, &s.origin, &mut own);
        p.errors.extend(own.errors);
        p.warnings.extend(own.warnings);
    }
    if sources.is_empty() {
        flatten(merged, "<configuration>", &mut p);
    }
    if !p.errors.is_empty() {
        return Err(p);
    }
    defs.sort_by_key(|(order, _)| *order);
    Ok((
        HookConfig {
            hooks: defs.into_iter().map(|(_, d)| d).collect(),
            unsupported: Vec::new(),
            guard: Default::default(),
            env: Default::default(),
        },
        p.warnings,
    ))
}

impl HookConfig {
    /// Parses one `hooks` value on its own (tests, `hooks test` with an inline config).
    #[cfg(test)]
    pub(crate) fn from_value(
        v: &Value,
        origin: &str,
    ) -> Result<(HookConfig, Vec<String>), Problems> {
        parse(
            v,
            &[Source {
                origin: origin.to_string(),
                hooks: v,
            }],
        )
    }

    /// The hooks of `event` in config order.
    pub(crate) fn for_event(&self, event: Event) -> impl Iterator<Item = &HookDef> {
        self.hooks.iter().filter(move |h| h.event == event)
    }

    /// The hooks that run for `event` on `target` (the tool, or the event's matcher field):
    /// matching ones, identical commands dropped (first kept). A dropped copy still counts: the
    /// kept hook becomes fail-closed if any copy is, gets the longest timeout, and includes
    /// sub-agents if any copy does, so dropping a duplicate never weakens a guard. The kept hook
    /// is borrowed unless a copy changed it.
    pub(crate) fn select(
        &self,
        event: Event,
        target: Option<&str>,
        claude: &[String],
    ) -> Vec<Cow<'_, HookDef>> {
        self.select_where(event, |h| h.matches(target, claude))
    }

    /// `select` with any test of which hooks take part.
    pub(crate) fn select_where(
        &self,
        event: Event,
        wants: impl Fn(&HookDef) -> bool,
    ) -> Vec<Cow<'_, HookDef>> {
        let mut out: Vec<Cow<'_, HookDef>> = Vec::new();
        for h in self.for_event(event) {
            if !wants(h) {
                continue;
            }
            let Some(kept) = out
                .iter_mut()
                .find(|o| o.command == h.command && o.argv == h.argv)
            else {
                out.push(Cow::Borrowed(h));
                continue;
            };
            if (h.fail_closed && !kept.fail_closed)
                || h.timeout > kept.timeout
                || (h.include_sub_agents && !kept.include_sub_agents)
            {
                let k = kept.to_mut();
                k.fail_closed |= h.fail_closed;
                k.timeout = k.timeout.max(h.timeout);
                k.include_sub_agents |= h.include_sub_agents;
            }
        }
        out
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Claude Code's names for a tool, as the tool itself says.
    fn cc(tool: &str) -> Vec<String> {
        crate::agent::Agent::claude_names_of(tool)
    }

    fn cfg(v: Value) -> HookConfig {
        HookConfig::from_value(&v, "/p/crush.json")
            .unwrap_or_else(|p| panic!("{:?}", p.errors))
            .0
    }

    fn problems(v: Value) -> Problems {
        HookConfig::from_value(&v, "/p/crush.json").unwrap_err()
    }

    #[test]
    fn a_hostile_if_skips_a_hook_but_never_unguards_a_guard() {
        for bad in [json!("Bash(rm *"), json!(42), json!({"x": 1}), json!("(((")] {
            let v = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "plain", "if": bad},
                {"type": "command", "command": "guard", "if": bad, "fail_closed": true}]}]});
            let (c, warnings) = HookConfig::from_value(&v, "/p/settings.json")
                .unwrap_or_else(|p| panic!("{:?}", p.errors));
            let names: Vec<&str> = c.hooks.iter().map(|h| h.command.as_str()).collect();
            assert_eq!(names, ["guard"], "{bad}: {warnings:?}");
            assert!(c.hooks[0].if_rule.is_none(), "{bad}");
            assert_eq!(warnings.len(), 2, "{bad}: {warnings:?}");
        }
    }

    #[test]
    fn args_make_the_exec_form_shown_quoted_and_deduplicated_with_its_arguments() {
        let v = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": " node ", "args": ["g.js", "it's"]},
            {"type": "command", "command": "node", "args": ["g.js", "it's"]},
            {"type": "command", "command": "node", "args": ["other.js"]}]}]});
        let (c, warnings) = HookConfig::from_value(&v, "/p/settings.json")
            .unwrap_or_else(|p| panic!("{:?}", p.errors));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(c.hooks[0].command, "node 'g.js' 'it'\\''s'");
        assert_eq!(
            c.hooks[0].argv.as_deref(),
            Some(&["node".to_string(), "g.js".into(), "it's".into()][..])
        );
        let ran = c.select(Event::PreToolUse, Some("bash"), &cc("bash"));
        assert_eq!(ran.len(), 2, "the repeated handler runs once");
        let p = problems(json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "node", "args": "g.js"},
            {"type": "command", "command": "node", "args": ["g.js", 1]}]}]}));
        assert_eq!(p.errors.len(), 2, "{:?}", p.errors);
        assert!(
            p.errors[0].contains("hooks[0]")
                && p.errors[0].contains("args must be a list of strings"),
            "{:?}",
            p.errors
        );
    }

    #[test]
    fn invalid_regex_is_an_error_naming_the_hook_and_file() {
        let p = problems(
            json!({"PreToolUse":[{"name":"guard","matcher":"[invalid","command":"true"}]}),
        );
        assert_eq!(p.errors.len(), 1);
        let e = &p.errors[0];
        assert!(
            e.starts_with("/p/crush.json: hooks.PreToolUse[0] (hook 'guard')")
                && e.contains("invalid matcher regex"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_command_is_an_error() {
        let p = problems(json!({"PreToolUse":[{"matcher":"bash","command":""}]}));
        assert!(
            p.errors[0].contains("command is required"),
            "{:?}",
            p.errors
        );
        let p = problems(json!({"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command"}]}]}));
        assert!(
            p.errors[0].contains("hooks.PreToolUse[0].hooks[0]"),
            "{:?}",
            p.errors
        );
    }

    #[test]
    fn claude_code_handler_keys_are_known_and_others_warned() {
        // As published: a PostToolUse formatter with asyncRewake and a status message.
        let (c, w) = HookConfig::from_value(
            &json!({"PostToolUse":[{"matcher":"Edit|Write","hooks":[
                {"type":"command","command":".claude/hooks/format.sh","asyncRewake":true,
                 "statusMessage":"Formatting","async":false},
                {"type":"command","command":".claude/hooks/tests.sh","reWake":true}]}]}),
            "/p/.claude/settings.json",
        )
        .unwrap();
        assert_eq!(c.for_event(Event::PostToolUse).count(), 2);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("unknown key 'reWake'"), "{w:?}");
    }

    #[test]
    fn an_unknown_event_is_a_warning() {
        let (c, w) =
            HookConfig::from_value(&json!({"TurnEnd":[{"command":"true"}]}), "/p/crush.json")
                .unwrap();
        assert!(c.is_empty());
        assert!(w[0].contains("unknown hook event 'TurnEnd'"), "{w:?}");
    }

    // Go Crush TestRunnerMatcherFiltering.
    #[test]
    fn matchers_filter_by_tool_name() {
        let c = cfg(json!({"PreToolUse":[
            {"matcher":"^bash$","command":"a"},
            {"matcher":"^edit$","command":"b"},
            {"command":"c"},
            {"matcher":"^mcp_","command":"d"}
        ]}));
        let names = |tool: &str| {
            c.select(Event::PreToolUse, Some(tool), &cc(tool))
                .iter()
                .map(|h| h.command.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("bash"), vec!["a", "c"]);
        assert_eq!(names("mcp_github_get_me"), vec!["c", "d"]);
        assert_eq!(names("view"), vec!["c"]);
    }

    #[test]
    fn identical_commands_are_deduplicated_first_kept() {
        let c = cfg(json!({"PreToolUse":[
            {"name":"one","command":"same"},
            {"name":"two","command":"same"},
            {"command":"other"}
        ]}));
        let sel = c.select(Event::PreToolUse, Some("bash"), &cc("bash"));
        assert_eq!(sel.len(), 2);
        assert_eq!(sel[0].display_name(), "one");
    }

    #[test]
    fn a_dropped_duplicate_keeps_its_guarantees_in_the_kept_hook() {
        let c = cfg(json!({"PreToolUse":[
            {"name":"one","command":"same","timeout":5},
            {"name":"two","command":"same","timeout":9,"fail_closed":true,"include_sub_agents":true},
            {"name":"three","command":"same","timeout":2}
        ]}));
        let sel = c.select(Event::PreToolUse, Some("bash"), &cc("bash"));
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].display_name(), "one");
        assert!(
            sel[0].fail_closed,
            "a fail-closed copy keeps the guard fail-closed"
        );
        assert_eq!(sel[0].timeout, Duration::from_secs(9));
        assert!(sel[0].include_sub_agents);
        // Only copies that match take part: a non-matching fail-closed copy changes nothing.
        let c = cfg(json!({"PreToolUse":[
            {"command":"same"},
            {"matcher":"^edit$","command":"same","fail_closed":true}
        ]}));
        assert!(!c.select(Event::PreToolUse, Some("bash"), &cc("bash"))[0].fail_closed);
        assert!(c.select(Event::PreToolUse, Some("edit"), &cc("edit"))[0].fail_closed);
    }

    // Go Crush TestRunnerHookNameUsesDisplayName.
    #[test]
    fn display_name_is_the_name_else_the_command() {
        let c = cfg(json!({"PreToolUse":[{"name":"nice","command":"x"},{"command":"echo hi"}]}));
        assert_eq!(c.hooks[0].display_name(), "nice");
        assert_eq!(c.hooks[1].display_name(), "echo hi");
    }

    #[test]
    fn timeout_defaults_to_30_s_and_fail_closed_to_false() {
        let c = cfg(
            json!({"PreToolUse":[{"command":"x"},{"command":"y","timeout":5,"fail_closed":true},{"command":"z","timeout":0}]}),
        );
        assert_eq!(c.hooks[0].timeout, DEFAULT_TIMEOUT);
        assert!(!c.hooks[0].fail_closed);
        assert_eq!(c.hooks[1].timeout, Duration::from_secs(5));
        assert!(c.hooks[1].fail_closed);
        assert_eq!(c.hooks[2].timeout, DEFAULT_TIMEOUT);
        assert!(
            problems(json!({"PreToolUse":[{"command":"x","timeout":"5"}]})).errors[0]
                .contains("timeout")
        );
    }

    #[test]
    fn claude_code_nested_shape_is_accepted() {
        let c = cfg(json!({"PreToolUse":[{"matcher":"Bash","hooks":[
            {"type":"command","command":"check.sh","timeout":7},
            {"type":"http","url":"http://x"}
        ]}]}));
        assert_eq!(c.hooks.len(), 1);
        let h = &c.hooks[0];
        assert_eq!(h.dialect, Dialect::ClaudeCode);
        assert_eq!(h.timeout, Duration::from_secs(7));
        assert_eq!(h.location, "hooks.PreToolUse[0].hooks[0]");
        // Without one, Claude Code's defaults.
        let c = cfg(json!({
            "PreToolUse": [{"hooks": [{"command": "a"}]}],
            "SessionEnd": [{"hooks": [{"command": "b"}]}]
        }));
        assert_eq!(c.hooks[0].timeout, Duration::from_secs(600));
        assert_eq!(c.hooks[1].timeout, Duration::from_millis(1500));
        assert!(
            h.matches(Some("bash"), &cc("bash")),
            "Bash matches Crush's bash"
        );
        assert!(!h.matches(Some("edit"), &cc("edit")));
        assert_eq!(h.dialect.payload_tool_name("bash", &cc("bash")), "Bash");
        let (_, w) = HookConfig::from_value(
            &json!({"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"http","url":"u"}]}]}),
            "f",
        )
        .unwrap();
        assert!(w.iter().any(|w| w.contains("type 'http'")), "{w:?}");
    }

    #[test]
    fn claude_code_matchers_follow_claude_code_rules() {
        let c = cfg(json!({"PreToolUse":[
            {"matcher":"Edit|Write","hooks":[{"command":"a"}]},
            {"matcher":"*","hooks":[{"command":"b"}]},
            {"matcher":"Edit","hooks":[{"command":"c"}]},
            {"matcher":"mcp__github__.*","hooks":[{"command":"d"}]},
            {"matcher":"Read","hooks":[{"command":"e"}]}
        ]}));
        let names = |tool: &str| {
            c.select(Event::PreToolUse, Some(tool), &cc(tool))
                .iter()
                .map(|h| h.command.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("write"), vec!["a", "b"]);
        // A plain name is exact: Edit does not match MultiEdit.
        assert_eq!(names("multiedit"), vec!["b"]);
        assert_eq!(names("edit"), vec!["a", "b", "c"]);
        assert_eq!(names("mcp_github_create_pr"), vec!["b", "d"]);
        assert_eq!(names("view"), vec!["b", "e"]);
    }

    #[test]
    fn claude_code_matchers_select_sources_and_agent_types_and_task_means_agent() {
        let c = cfg(json!({
            "SessionStart": [{"matcher": "compact", "hooks": [{"command": "a"}]},
                             {"matcher": "startup|resume", "hooks": [{"command": "b"}]},
                             {"matcher": "ignored", "command": "flat"}],
            "PreToolUse": [{"matcher": "Task", "hooks": [{"command": "t"}]}]
        }));
        let names = |event: Event, target: &str| {
            c.select(event, Some(target), &cc(target))
                .iter()
                .map(|h| h.command.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Event::SessionStart, "startup"), vec!["b", "flat"]);
        assert_eq!(names(Event::SessionStart, "compact"), vec!["a", "flat"]);
        assert_eq!(names(Event::PreToolUse, "agent"), vec!["t"]);
        assert_eq!(cc("agent"), ["Agent", "Task"]);
    }

    #[test]
    fn claude_code_hooks_guards_and_opted_in_hooks_run_in_sub_agents() {
        let c = cfg(json!({"PreToolUse": [
            {"command": "plain"},
            {"command": "guard", "fail_closed": true},
            {"command": "opted", "include_sub_agents": true},
            {"hooks": [{"command": "claude"}]}
        ]}));
        let runs: Vec<bool> = c.hooks.iter().map(HookDef::runs_in_sub_agents).collect();
        assert_eq!(runs, [false, true, true, true]);
    }

    #[test]
    fn claude_code_files_take_the_nested_shape_and_unknown_events_are_listed() {
        let c = crate::config::claude::ClaudeHooks {
            kind: crate::config::claude::ClaudeKind::Plugin,
            path: "/plug/hooks/hooks.json".into(),
            hooks: json!({
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "g.sh"}]},
                               {"matcher": "Bash", "command": "flat.sh"}],
                "PermissionRequest": [{"hooks": [{"type": "command", "command": "p.sh"}]}]
            }),
            permissions: Value::Null,
            plugin_root: Some("/plug".into()),
            disable_all: false,
        };
        let (defs, p, unsupported) = parse_claude(&c);
        assert_eq!(defs.len(), 1);
        assert_eq!(
            defs[0].plugin_root.as_deref(),
            Some(std::path::Path::new("/plug"))
        );
        assert_eq!(defs[0].dialect, Dialect::ClaudeCode);
        assert!(p.warnings[0].contains("nested shape"), "{:?}", p.warnings);
        assert_eq!(
            unsupported,
            vec!["/plug/hooks/hooks.json: PermissionRequest (1 matcher group(s))"]
        );
    }

    #[test]
    fn claude_tool_names() {
        assert_eq!(cc("view"), ["Read"]);
        assert_eq!(cc("job_output"), ["BashOutput"]);
        assert_eq!(cc("job_kill"), ["KillShell"]);
        assert_eq!(cc("web_fetch"), ["WebFetch"]);
        assert_eq!(cc("mcp_fs_read"), ["mcp__fs__read"]);
        assert!(cc("mystery").is_empty());
    }

    #[test]
    fn origins_name_the_file_and_config_order_is_layer_order() {
        let global = json!({"pre_tool_use":[{"command":"g"}]});
        let project = json!({"PreToolUse":[{"command":"p"}, {"command":"q"}]});
        let mut merged = json!({});
        crate::config::json::merge(&mut merged, json!({"hooks": global.clone()}));
        crate::config::json::merge(&mut merged, json!({"hooks": project.clone()}));
        let (c, _) = parse(
            &merged["hooks"],
            &[
                Source {
                    origin: "/g/crush.json".into(),
                    hooks: &global,
                },
                Source {
                    origin: "/p/crush.json".into(),
                    hooks: &project,
                },
            ],
        )
        .unwrap();
        let got: Vec<(&str, &str)> = c
            .hooks
            .iter()
            .map(|h| (h.command.as_str(), h.origin.as_str()))
            .collect();
        // The merged object sorts PreToolUse (project) before pre_tool_use (global); config
        // order follows the files.
        assert_eq!(
            got,
            vec![
                ("g", "/g/crush.json"),
                ("p", "/p/crush.json"),
                ("q", "/p/crush.json")
            ]
        );
    }

    #[test]
    fn entries_removed_by_a_later_layer_are_gone() {
        // The merged value is authoritative (a crushrc `hook remove` changes it); layers only name files.
        let global = json!({"PreToolUse":[{"command":"g"}]});
        let merged = json!({"PreToolUse":[]});
        let (c, _) = parse(
            &merged,
            &[Source {
                origin: "/g/crush.json".into(),
                hooks: &global,
            }],
        )
        .unwrap();
        assert!(c.is_empty());
    }
}
