//! Folding the verdicts of a hook batch into one, in config order whatever order the hooks
//! finished in. Pure except `resolve_context_files`, which looks at the file system.
//!
//! Rules (crush(1) HOOKS): any deny blocks (reasons joined by newlines); halt is sticky; otherwise
//! any ask makes crush ask the user (Claude Code's order: deny, ask, allow); otherwise any allow
//! pre-approves; context concatenates; `systemMessage`s are all shown; `updated_input` patches shallow-merge in order
//! with literal keys (later wins, nested objects replaced whole); `updated_prompt` is a full
//! replacement, last one wins; `context_files` concatenate and deduplicate. On deny or halt,
//! everything but the reason is dropped.

use super::envelope::{Decision, HookResult};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Composed {
    pub decision: Decision,
    pub halt: bool,
    /// Reasons of the hooks that denied or halted (of those that asked, when the decision is
    /// ask), joined by newlines.
    pub reason: String,
    /// Claude Code's `systemMessage`s, for the user, in config order.
    pub system_messages: Vec<String>,
    pub context: Vec<String>,
    /// The tool input with every patch applied; None when no patch applied.
    pub updated_input: Option<Value>,
    pub updated_prompt: Option<String>,
    /// As the hooks gave them, deduplicated (see `resolve_context_files`).
    pub context_files: Vec<String>,
    /// Problems met while composing (a patch over a non-object input).
    pub notes: Vec<String>,
}

impl Composed {
    /// The call or prompt must not go ahead.
    pub(crate) fn blocked(&self) -> bool {
        self.decision == Decision::Deny || self.halt
    }

    /// "halt", "deny", "allow" or "none".
    pub(crate) fn verdict(&self) -> &'static str {
        if self.halt {
            "halt"
        } else {
            self.decision.as_str()
        }
    }
}

/// Composes `results` (in config order). `tool_input` is the input the patches apply to (None for
/// events without a tool).
pub(crate) fn compose(results: &[HookResult], tool_input: Option<&Value>) -> Composed {
    let mut c = Composed::default();
    let mut reasons: Vec<&str> = Vec::new();
    let mut ask_reasons: Vec<&str> = Vec::new();
    let mut merged = tool_input.cloned();
    let mut patched = false;
    for r in results {
        c.decision = c.decision.max(r.decision);
        c.halt |= r.halt;
        if (r.decision == Decision::Deny || r.halt) && !r.reason.is_empty() {
            reasons.push(&r.reason);
        }
        if r.decision == Decision::Ask && !r.reason.is_empty() {
            ask_reasons.push(&r.reason);
        }
        if !r.system_message.is_empty() {
            c.system_messages.push(r.system_message.clone());
        }
        c.context.extend(r.context.iter().cloned());
        if let Some(patch) = &r.updated_input {
            match merged.as_mut() {
                Some(Value::Object(target)) => {
                    for (k, v) in patch {
                        // Literal keys: "a.b" is a key, not a path.
                        target.insert(k.clone(), v.clone());
                    }
                    patched = true;
                }
                Some(_) => c
                    .notes
                    .push("the tool input is not a JSON object; updated_input ignored".into()),
                None => c
                    .notes
                    .push("this event has no tool input; updated_input ignored".into()),
            }
        }
        if let Some(p) = &r.updated_prompt {
            c.updated_prompt = Some(p.clone());
        }
        for f in &r.context_files {
            if !c.context_files.contains(f) {
                c.context_files.push(f.clone());
            }
        }
    }
    c.reason = if c.decision == Decision::Ask && !c.halt {
        ask_reasons.join("\n")
    } else {
        reasons.join("\n")
    };
    if patched {
        c.updated_input = merged;
    }
    if c.blocked() {
        if c.reason.is_empty() {
            c.reason = if c.halt {
                "turn halted by hook".into()
            } else {
                "blocked by hook".into()
            };
        }
        c.context.clear();
        c.updated_input = None;
        c.updated_prompt = None;
        c.context_files.clear();
    }
    c
}

/// Resolves context files against `cwd` (CRUSH_CWD), deduplicates them and drops the missing ones.
/// Returns (existing, dropped as given).
pub(crate) fn resolve_context_files(files: &[String], cwd: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut kept: Vec<PathBuf> = Vec::new();
    let mut dropped = Vec::new();
    for f in files {
        let p = crate::paths::normalize(&cwd.join(f));
        if !p.exists() {
            dropped.push(f.clone());
        } else if !kept.contains(&p) {
            kept.push(p);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn r(decision: Decision) -> HookResult {
        HookResult {
            decision,
            ..Default::default()
        }
    }
    fn with_reason(decision: Decision, reason: &str) -> HookResult {
        HookResult {
            decision,
            reason: reason.into(),
            ..Default::default()
        }
    }
    fn with_context(decision: Decision, ctx: &str) -> HookResult {
        HookResult {
            decision,
            context: vec![ctx.into()],
            ..Default::default()
        }
    }
    fn patch(v: Value) -> HookResult {
        HookResult {
            updated_input: match v {
                Value::Object(m) => Some(m),
                _ => Some(Map::new()),
            },
            ..Default::default()
        }
    }

    // Go Crush TestAggregation.
    #[test]
    fn no_hooks_compose_to_no_opinion() {
        let c = compose(&[], None);
        assert_eq!(c.decision, Decision::None);
        assert!(!c.halt && c.reason.is_empty() && c.context.is_empty());
    }

    #[test]
    fn a_single_allow_allows() {
        assert_eq!(
            compose(&[r(Decision::Allow)], None).decision,
            Decision::Allow
        );
    }

    #[test]
    fn deny_beats_allow_and_drops_the_allows_context() {
        let c = compose(
            &[
                with_context(Decision::Allow, "ctx1"),
                with_reason(Decision::Deny, "blocked"),
            ],
            None,
        );
        assert_eq!(c.decision, Decision::Deny);
        assert_eq!(c.reason, "blocked");
        // Go Crush keeps "ctx1" in the aggregate but never applies it; we drop it (crush(1) HOOKS).
        assert!(c.context.is_empty());
    }

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_order() {
        let ask = with_reason(Decision::Ask, "check with the user");
        let allow = r(Decision::Allow);
        let deny = with_reason(Decision::Deny, "no");
        let c = compose(&[allow.clone(), ask.clone()], None);
        assert_eq!(c.decision, Decision::Ask);
        assert_eq!(c.reason, "check with the user");
        assert!(!c.blocked());
        assert_eq!(compose(&[ask.clone(), allow], None).decision, Decision::Ask);
        let c = compose(&[ask.clone(), deny.clone()], None);
        assert_eq!((c.decision, c.reason.as_str()), (Decision::Deny, "no"));
        assert_eq!(compose(&[deny, ask], None).decision, Decision::Deny);
    }

    #[test]
    fn system_messages_are_kept_even_on_deny() {
        let mut a = r(Decision::Deny);
        a.system_message = "guard fired".into();
        assert_eq!(compose(&[a], None).system_messages, vec!["guard fired"]);
    }

    #[test]
    fn two_deny_reasons_join_in_config_order() {
        let c = compose(
            &[
                with_reason(Decision::Deny, "reason1"),
                with_reason(Decision::Deny, "reason2"),
            ],
            None,
        );
        assert_eq!(c.reason, "reason1\nreason2");
    }

    #[test]
    fn context_concatenates_in_config_order() {
        let c = compose(
            &[
                with_context(Decision::Allow, "ctx-a"),
                with_context(Decision::None, "ctx-b"),
            ],
            None,
        );
        assert_eq!(c.decision, Decision::Allow);
        assert_eq!(c.context, vec!["ctx-a", "ctx-b"]);
    }

    #[test]
    fn allow_after_none_allows() {
        assert_eq!(
            compose(&[r(Decision::None), r(Decision::Allow)], None).decision,
            Decision::Allow
        );
    }

    #[test]
    fn halt_is_sticky_and_contributes_its_reason() {
        let mut h = r(Decision::None);
        h.halt = true;
        h.reason = "stop now".into();
        let c = compose(&[r(Decision::Allow), h, r(Decision::Allow)], None);
        assert!(c.halt && c.blocked());
        assert!(c.reason.contains("stop now"));
        assert_eq!(c.verdict(), "halt");
    }

    #[test]
    fn deny_and_halt_in_one_hook_gives_the_reason_once() {
        let mut h = with_reason(Decision::Deny, "stop");
        h.halt = true;
        assert_eq!(compose(&[h], None).reason, "stop");
    }

    #[test]
    fn a_deny_without_reason_gets_a_default() {
        assert_eq!(
            compose(&[r(Decision::Deny)], None).reason,
            "blocked by hook"
        );
    }

    // Go Crush TestAggregationUpdatedInput.
    #[test]
    fn patches_shallow_merge_in_config_order() {
        let orig = json!({"command":"orig","timeout":60});
        let c = compose(
            &[
                patch(json!({"command":"first","keep":"me"})),
                patch(json!({"command":"second"})),
            ],
            Some(&orig),
        );
        assert_eq!(
            c.updated_input,
            Some(json!({"command":"second","keep":"me","timeout":60}))
        );
    }

    #[test]
    fn nested_objects_are_replaced_whole() {
        let orig = json!({"opts":{"a":1,"b":2}});
        let c = compose(&[patch(json!({"opts":{"c":3}}))], Some(&orig));
        assert_eq!(c.updated_input, Some(json!({"opts":{"c":3}})));
    }

    #[test]
    fn keys_are_literal_not_paths() {
        let orig = json!({"a":{"b":1}});
        let c = compose(&[patch(json!({"a.b":2}))], Some(&orig));
        assert_eq!(c.updated_input, Some(json!({"a":{"b":1},"a.b":2})));
    }

    #[test]
    fn deny_drops_the_merged_input() {
        let orig = json!({"command":"x"});
        let c = compose(
            &[patch(json!({"command":"y"})), r(Decision::Deny)],
            Some(&orig),
        );
        assert_eq!(c.updated_input, None);
    }

    #[test]
    fn no_patches_means_no_updated_input() {
        let orig = json!({"command":"x"});
        assert_eq!(
            compose(&[r(Decision::Allow)], Some(&orig)).updated_input,
            None
        );
    }

    #[test]
    fn a_non_object_tool_input_rejects_every_patch() {
        let orig = json!("a string");
        let c = compose(&[patch(json!({"command":"y"}))], Some(&orig));
        assert_eq!(c.updated_input, None);
        assert_eq!(c.notes.len(), 1);
    }

    #[test]
    fn a_hook_without_patch_between_patches_changes_nothing() {
        let orig = json!({"command":"x","n":1});
        let c = compose(
            &[
                patch(json!({"command":"a"})),
                r(Decision::None),
                patch(json!({"n":2})),
            ],
            Some(&orig),
        );
        assert_eq!(c.updated_input, Some(json!({"command":"a","n":2})));
    }

    // UserPromptSubmit: updated_prompt and context_files (crush(1) HOOKS).
    #[test]
    fn updated_prompt_last_one_wins() {
        let a = HookResult {
            updated_prompt: Some("first".into()),
            ..Default::default()
        };
        let b = HookResult {
            updated_prompt: Some("second".into()),
            ..Default::default()
        };
        assert_eq!(
            compose(&[a.clone(), b.clone()], None)
                .updated_prompt
                .as_deref(),
            Some("second")
        );
        assert_eq!(
            compose(&[b, a], None).updated_prompt.as_deref(),
            Some("first")
        );
    }

    #[test]
    fn deny_or_halt_drops_prompt_rewrites_context_and_files() {
        let a = HookResult {
            updated_prompt: Some("x".into()),
            context: vec!["c".into()],
            context_files: vec!["README.md".into()],
            ..Default::default()
        };
        let mut h = r(Decision::None);
        h.halt = true;
        let c = compose(&[a, h], None);
        assert!(c.updated_prompt.is_none() && c.context.is_empty() && c.context_files.is_empty());
    }

    #[test]
    fn context_files_concatenate_and_deduplicate() {
        let a = HookResult {
            context_files: vec!["a.md".into(), "b.md".into()],
            ..Default::default()
        };
        let b = HookResult {
            context_files: vec!["b.md".into(), "c.md".into()],
            ..Default::default()
        };
        assert_eq!(
            compose(&[a, b], None).context_files,
            vec!["a.md", "b.md", "c.md"]
        );
    }

    #[test]
    fn context_files_resolve_against_cwd_dedupe_and_drop_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "a").unwrap();
        let (kept, dropped) = resolve_context_files(
            &[
                "a.md".into(),
                "./a.md".into(),
                "sub/../a.md".into(),
                "missing.md".into(),
            ],
            dir.path(),
        );
        assert_eq!(kept, vec![dir.path().join("a.md")]);
        assert_eq!(dropped, vec!["missing.md"]);
    }
}
