//! What both request builders need from a stored conversation before they translate it: every
//! tool call answered exactly once, right after the message that made it.

use super::{Message, Part, Role};
use std::collections::HashSet;

/// The content of the result that stands in for a tool call that never got one (the run was
/// interrupted, or the result was lost). It is the one text for this in the program.
pub(crate) const INTERRUPTED_TOOL_RESULT: &str = "tool call was interrupted before it finished";

/// `messages` with tool results paired to their calls. After each assistant message that calls
/// tools comes one `Tool` message holding one result per distinct call id, in call order: the
/// first result for that id found before the next assistant message (results can be separated
/// from their call by a user message), or, if there is none, an error result saying the call was
/// interrupted. Results for no call of the assistant message before them, and repeated ones, are
/// dropped; a message left without parts by that is dropped too. Everything else is untouched.
pub(crate) fn pair_tool_results(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        i += 1;
        if m.role != Role::Assistant {
            // Before any assistant message, or after one without calls: results here answer
            // nothing.
            push_without_results(&mut out, m);
            continue;
        }
        out.push(m.clone());
        let calls: Vec<(&str, &str)> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { id, name, .. } => Some((id.as_str(), name.as_str())),
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            continue;
        }
        let end = messages[i..]
            .iter()
            .position(|m| m.role == Role::Assistant)
            .map_or(messages.len(), |n| i + n);
        let answers: Vec<&Part> = messages[i..end]
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolResult { .. }))
            .collect();
        let mut seen = HashSet::new();
        let results = calls
            .iter()
            .filter(|(id, _)| seen.insert(*id))
            .map(|&(id, name)| {
                answers
                    .iter()
                    .find(|p| matches!(p, Part::ToolResult { tool_call_id, .. } if tool_call_id == id))
                    .map_or_else(|| interrupted(id, name), |p| (*p).clone())
            })
            .collect();
        out.push(Message {
            role: Role::Tool,
            parts: results,
        });
        for m in &messages[i..end] {
            push_without_results(&mut out, m);
        }
        i = end;
    }
    out
}

fn push_without_results(out: &mut Vec<Message>, m: &Message) {
    let parts: Vec<Part> = m
        .parts
        .iter()
        .filter(|p| !matches!(p, Part::ToolResult { .. }))
        .cloned()
        .collect();
    if !parts.is_empty() {
        out.push(Message {
            role: m.role,
            parts,
        });
    }
}

fn interrupted(id: &str, name: &str) -> Part {
    Part::ToolResult {
        tool_call_id: id.to_string(),
        name: name.to_string(),
        content: INTERRUPTED_TOOL_RESULT.to_string(),
        data: String::new(),
        mime_type: String::new(),
        metadata: String::new(),
        is_error: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> Part {
        Part::ToolCall {
            id: id.into(),
            name: "bash".into(),
            input: "{}".into(),
            provider_executed: false,
            finished: true,
        }
    }

    fn result(id: &str, content: &str) -> Part {
        Part::ToolResult {
            tool_call_id: id.into(),
            name: "bash".into(),
            content: content.into(),
            data: String::new(),
            mime_type: String::new(),
            metadata: String::new(),
            is_error: false,
        }
    }

    fn msg(role: Role, parts: Vec<Part>) -> Message {
        Message { role, parts }
    }

    /// (role, [tool_call_id/content of results, text of texts]) for compact comparisons.
    fn shape(ms: &[Message]) -> Vec<(Role, Vec<String>)> {
        ms.iter()
            .map(|m| {
                let parts = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::ToolResult {
                            tool_call_id,
                            content,
                            ..
                        } => format!("{tool_call_id}={content}"),
                        Part::ToolCall { id, .. } => format!("call {id}"),
                        Part::Text { text } => text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                (m.role, parts)
            })
            .collect()
    }

    #[test]
    fn calls_are_answered_once_in_order_right_after_the_call() {
        let ms = vec![
            msg(Role::Tool, vec![result("orphan", "x")]),
            Message::user("go"),
            msg(
                Role::Assistant,
                vec![call("a"), call("b"), call("c"), call("a")],
            ),
            Message::user("wait"),
            msg(
                Role::Tool,
                vec![
                    result("c", "C"),
                    result("zz", "orphan"),
                    result("c", "again"),
                ],
            ),
            msg(Role::Tool, vec![result("a", "A")]),
            msg(Role::Assistant, vec![call("d")]),
        ];
        let out = pair_tool_results(&ms);
        let i = INTERRUPTED_TOOL_RESULT;
        assert_eq!(
            shape(&out),
            vec![
                (Role::User, vec!["go".into()]),
                (
                    Role::Assistant,
                    vec![
                        "call a".into(),
                        "call b".into(),
                        "call c".into(),
                        "call a".into()
                    ]
                ),
                (
                    Role::Tool,
                    vec!["a=A".into(), format!("b={i}"), "c=C".into()]
                ),
                (Role::User, vec!["wait".into()]),
                (Role::Assistant, vec!["call d".into()]),
                (Role::Tool, vec![format!("d={i}")]),
            ]
        );
        assert!(matches!(
            &out[2].parts[1],
            Part::ToolResult { is_error: true, name, .. } if name == "bash"
        ));
        // A well-formed history is left as it was.
        let ok = vec![
            Message::user("go"),
            msg(Role::Assistant, vec![call("a")]),
            msg(Role::Tool, vec![result("a", "A")]),
            msg(
                Role::Assistant,
                vec![Part::Text {
                    text: "done".into(),
                }],
            ),
        ];
        assert_eq!(pair_tool_results(&ok), ok);
    }
}
