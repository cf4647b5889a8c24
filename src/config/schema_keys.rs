//! The keys crush.json may hold, nested ones included, and the warnings for the others
//! (crush(1) FILES, "Unknown and ignored keys"): an unknown key is a warning naming its file,
//! line and the nearest known key, never an error; keys Go Crush reads that crush has no use
//! for are named as such.

use super::pos::{self, Positions};
use serde_json::Value;
use std::path::Path;

/// What a value may hold.
pub(crate) enum Shape {
    /// Anything (free-form maps such as `env`, `extra_body`, `headers`).
    Any,
    /// An object with these keys.
    Keys(&'static [(&'static str, &'static Shape)]),
    /// An object whose keys are names the user chooses, each value of the shape.
    Named(&'static Shape),
    /// An array whose items are of the shape.
    Items(&'static Shape),
    /// Read by Go Crush, not used by crush: the reason, warned about once.
    Inert(&'static str),
}

use Shape::{Any, Inert, Items, Keys, Named};

const SELECTED: Shape = Keys(&[
    ("model", &Any),
    ("provider", &Any),
    ("max_tokens", &Any),
    ("temperature", &Any),
    ("reasoning_effort", &Any),
    ("think", &Any),
    ("top_p", &Any),
    ("top_k", &Any),
    ("frequency_penalty", &Any),
    ("presence_penalty", &Any),
    ("provider_options", &Any),
]);

const MODEL: Shape = Keys(&[
    ("id", &Any),
    ("name", &Any),
    ("cost_per_1m_in", &Any),
    ("cost_per_1m_out", &Any),
    ("cost_per_1m_in_cached", &Any),
    ("cost_per_1m_out_cached", &Any),
    ("context_window", &Any),
    ("default_max_tokens", &Any),
    ("can_reason", &Any),
    ("reasoning_levels", &Any),
    ("default_reasoning_effort", &Any),
    ("supports_attachments", &Any),
    ("options", &Any),
]);

const PROVIDER: Shape = Keys(&[
    ("id", &Any),
    ("name", &Any),
    ("type", &Any),
    ("base_url", &Any),
    ("api_key", &Any),
    ("disable", &Any),
    ("extra_headers", &Any),
    ("system_prompt_prefix", &Any),
    ("flat_rate", &Any),
    ("models", &Items(&MODEL)),
    ("extra_body", &Any),
    ("provider_options", &Any),
    ("discover_models", &Any),
    ("use_responses_api", &Any),
    ("project", &Any),
    ("location", &Any),
    ("api_version", &Any),
    ("aws_auth_refresh", &Any),
    ("oauth", &Any),
]);

const MCP: Shape = Keys(&[
    ("type", &Any),
    ("command", &Any),
    ("args", &Any),
    ("env", &Any),
    ("url", &Any),
    ("headers", &Any),
    ("timeout", &Any),
    ("disabled", &Any),
    ("enabled_tools", &Any),
    ("disabled_tools", &Any),
    ("oauth", &Any),
    ("oauth_client_id", &Any),
    ("oauth_client_secret", &Any),
    ("oauth_callback_port", &Any),
]);

const LSP: Shape = Keys(&[
    ("command", &Any),
    ("args", &Any),
    ("env", &Any),
    ("disabled", &Any),
    ("enabled", &Any),
    ("timeout", &Any),
    ("filetypes", &Any),
    ("root_markers", &Any),
    ("init_options", &Any),
    ("options", &Any),
]);

const SANDBOX: Shape = Keys(&[("mode", &Any), ("network", &Any), ("writable_roots", &Any)]);

/// Why `options.tui` and crushrc's `option ui` do nothing here.
pub(crate) const TUI_REASON: &str =
    "Go Crush's full-screen interface settings; crush has no such interface";

/// Keys of `options` (Go Crush's and crush's own).
pub(crate) const OPTIONS: &[(&str, &Shape)] = &[
    ("context_paths", &Any),
    ("global_context_paths", &Any),
    ("skills_paths", &Any),
    ("tui", &Inert(TUI_REASON)),
    ("debug", &Any),
    ("debug_lsp", &Any),
    ("disable_auto_summarize", &Any),
    ("plans_directory", &Any),
    ("data_directory", &Any),
    ("disabled_tools", &Any),
    ("disable_provider_auto_update", &Any),
    ("disable_default_providers", &Any),
    ("attribution", &Any),
    ("disable_metrics", &Any),
    ("initialize_as", &Any),
    ("auto_lsp", &Any),
    ("progress", &Any),
    ("notifications", &Any),
    ("disabled_skills", &Any),
    ("disable_notifications", &Any),
    ("max_steps", &Any),
    ("max_stop_blocks", &Any),
    ("tool_preview_lines", &Any),
    ("request_idle_timeout", &Any),
    ("shell_env_allow", &Any),
    ("claude_code_hooks", &Any),
    ("claude_plugins", &Any),
    ("sandbox", &SANDBOX),
    ("approval", &Any),
    ("max_cost", &Any),
    ("max_session_cost", &Any),
    ("system_prompt", &Any),
    ("system_prompt_file", &Any),
    ("system_prompt_environment", &Any),
    ("side_requests", &Any),
    ("auto_local", &Any),
];

/// The whole file.
pub(crate) const TOP: Shape = Keys(&[
    ("$schema", &Any),
    (
        "models",
        &Keys(&[("large", &SELECTED), ("small", &SELECTED)]),
    ),
    ("providers", &Named(&PROVIDER)),
    ("login", &Any),
    ("mcp", &Named(&MCP)),
    ("lsp", &Named(&LSP)),
    ("options", &Keys(OPTIONS)),
    ("permissions", &Keys(&[("allowed_tools", &Any)])),
    (
        "tools",
        &Inert(
            "Go Crush's limits for its ls, grep and glob tools (max_depth, max_items, timeout); \
             crush's keep their own (ls 1000 entries, grep and glob 30 s, depth as the model asks)",
        ),
    ),
    // Checked key by key where hooks are read (crush(1) HOOKS).
    ("hooks", &Any),
    ("env", &Any),
    ("recent_models", &Any),
]);

/// Warnings for every key of `v` that `TOP` does not know, or knows as inert, one line each
/// (`FILE:LINE: ...`), in document order of the walk.
pub(crate) fn check(path: &Path, v: &Value, p: &Positions) -> Vec<String> {
    let mut out = Vec::new();
    walk(&TOP, v, "", "", &mut |ptr, msg| {
        let line = p.get(ptr).map(|l| format!(":{l}")).unwrap_or_default();
        out.push(format!("{}{line}: {msg}", path.display()));
    });
    out
}

/// `dotted.key`, a key holding a dot quoted as `config show` quotes it (`providers."llama.cpp"`);
/// other characters stay as they are, for the warning's printer to make visible.
fn join(dotted: &str, key: &str) -> String {
    let key = if key.contains('.') {
        format!("\"{key}\"")
    } else {
        key.to_string()
    };
    if dotted.is_empty() {
        key
    } else {
        format!("{dotted}.{key}")
    }
}

fn walk(shape: &Shape, v: &Value, ptr: &str, dotted: &str, warn: &mut dyn FnMut(&str, String)) {
    match (shape, v) {
        (Keys(keys), Value::Object(m)) => {
            for (k, x) in m {
                let (p, d) = (pos::child(ptr, k), join(dotted, k));
                match keys.iter().find(|(name, _)| name == k) {
                    Some((_, sub)) => walk(sub, x, &p, &d, warn),
                    None => {
                        let hint = nearest(k, keys.iter().map(|(n, _)| *n))
                            .map(|n| join(dotted, n))
                            .or_else(|| {
                                // Already a dotted path of known keys: joined, not quoted.
                                one_level_down(keys, k).map(|n| match dotted {
                                    "" => n,
                                    _ => format!("{dotted}.{n}"),
                                })
                            })
                            .map(|n| format!(" (did you mean '{n}'?)"))
                            .unwrap_or_default();
                        warn(&p, format!("unknown key '{d}' ignored{hint}"));
                    }
                }
            }
            if std::ptr::eq(shape, &MODEL) && !m.contains_key("id") {
                warn(
                    ptr,
                    format!("'{dotted}' has no id: the model cannot be chosen"),
                );
            }
        }
        (Named(sub), Value::Object(m)) => {
            for (k, x) in m {
                walk(sub, x, &pos::child(ptr, k), &join(dotted, k), warn);
            }
        }
        (Items(sub), Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                walk(
                    sub,
                    x,
                    &format!("{ptr}/{i}"),
                    &format!("{dotted}[{i}]"),
                    warn,
                );
            }
        }
        // An empty one (`"tools": {"ls": {}}`) changes nothing in Go Crush either.
        (Inert(why), x) if sets_something(x) => warn(
            ptr,
            format!("'{dotted}' is read by Go Crush and ignored by crush: {why}"),
        ),
        _ => {}
    }
}

/// A key one object below that `key` is near (`disabled_skills` at the top is
/// `options.disabled_skills`), when exactly one such key is.
fn one_level_down(keys: &[(&str, &Shape)], key: &str) -> Option<String> {
    let mut found = keys.iter().filter_map(|(parent, sub)| match sub {
        Keys(inner) => nearest(key, inner.iter().map(|(n, _)| *n)).map(|n| format!("{parent}.{n}")),
        _ => None,
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Whether `v` holds a value: not null, an empty object or array, or objects of only those.
fn sets_something(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Object(m) => m.values().any(sets_something),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    }
}

/// The known key nearest to `key`: the same once case, `_` and `-` are set aside
/// (`rootMarkers`, `root-markers`), else at most two edits away.
pub(crate) fn nearest<'a>(key: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let nk = norm(key);
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        let d = if norm(k) == nk {
            0
        } else {
            edits(&nk, &norm(k))
        };
        if d <= 2 && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn warnings(v: Value) -> Vec<String> {
        check(Path::new("/p/crush.json"), &v, &Positions::new())
    }

    #[test]
    fn nested_unknown_keys_are_named_with_the_nearest_known_one() {
        let w = warnings(json!({
            "lsp": {"ts": {"command": "x", "rootMarkers": ["a"], "initOptions": {}}},
            "providers": {"p": {"extra_params": {}, "models": [
                {"id": "m", "has_reasoning_efforts": true, "limit": 3}, {"name": "no id"}]}},
            "mcp": {"fs": {"comand": "x"}},
        }));
        let all = w.join("\n");
        for want in [
            "unknown key 'lsp.ts.rootMarkers' ignored (did you mean 'lsp.ts.root_markers'?)",
            "unknown key 'lsp.ts.initOptions' ignored (did you mean 'lsp.ts.init_options'?)",
            "unknown key 'providers.p.extra_params' ignored",
            "unknown key 'providers.p.models[0].has_reasoning_efforts' ignored",
            "unknown key 'providers.p.models[0].limit' ignored",
            "'providers.p.models[1]' has no id",
            "unknown key 'mcp.fs.comand' ignored (did you mean 'mcp.fs.command'?)",
        ] {
            assert!(all.contains(want), "{want} not in\n{all}");
        }
        assert_eq!(w.len(), 7, "{all}");
    }

    #[test]
    fn inert_keys_are_named_once_and_known_ones_pass() {
        let w = warnings(json!({
            "options": {"tui": {"compact_mode": true, "diff_mode": "split"}, "debug": true},
            "tools": {"ls": {"max_depth": 2}},
            "lsp": {"go": {"enabled": false}},
            "models": {"large": {"model": "m", "provider": "p"}},
        }));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("'options.tui' is read by Go Crush and ignored"));
        assert!(w[1].contains("'tools' is read by Go Crush and ignored"));
    }

    #[test]
    fn an_empty_inert_key_sets_nothing_and_is_not_warned() {
        // As published: "tools": {"ls": {}} next to real settings.
        let w = warnings(json!({
            "options": {"initialize_as": "AGENTS.md", "tui": {}},
            "tools": {"ls": {}, "grep": null},
        }));
        assert!(w.is_empty(), "{w:?}");
        let w = warnings(json!({"tools": {"ls": {}, "glob": {"timeout": 10}}}));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("'tools' is read by Go Crush"), "{w:?}");
    }

    #[test]
    fn a_key_path_quotes_an_id_with_a_dot_as_config_show_does() {
        let v =
            serde_json::json!({"providers": {"llama.cpp": {"models": [{"id": "m", "nmae": "x"}]}}});
        let w = check(Path::new("/p/crush.json"), &v, &Positions::default());
        assert!(
            w.iter()
                .any(|l| l.contains("providers.\"llama.cpp\".models[0].nmae")),
            "{w:?}"
        );
    }

    #[test]
    fn a_key_at_the_wrong_level_is_pointed_to_where_it_belongs() {
        let w = warnings(json!({"disabled_skills": ["x"], "zzzz_qqq": 1}));
        let all = w.join("\n");
        assert!(
            all.contains(
                "unknown key 'disabled_skills' ignored (did you mean 'options.disabled_skills'?)"
            ),
            "{all}"
        );
        assert!(
            all.contains("unknown key 'zzzz_qqq' ignored\n")
                || all.ends_with("unknown key 'zzzz_qqq' ignored"),
            "{all}"
        );
    }

    #[test]
    fn nearest_is_none_when_nothing_is_close() {
        assert_eq!(nearest("zzzzzz", ["debug", "tui"].into_iter()), None);
        assert_eq!(
            nearest("debgu", ["debug", "tui"].into_iter()),
            Some("debug")
        );
    }
}
