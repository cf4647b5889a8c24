//! The `question` tool: the model asks the user structured questions (Go Crush's parameters and
//! limits). The agent loop puts them to the user through its front end (the REPL asks inline);
//! where nobody can answer (`crush run`) the result says so and the model goes on.

use super::common::opt_str;
use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

pub(crate) struct QuestionTool;

pub(crate) const MAX_QUESTIONS: usize = 5;
pub(crate) const MAX_CHOICES: usize = 5;

/// The result when no user can answer.
pub(crate) const NO_USER: &str = "No user is available to answer: this is a non-interactive run. Do \
not ask again; decide with your best judgment, say what you assumed, and go on.";

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub description: String,
}

/// One question, as the model sends it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct Question {
    #[serde(default)]
    pub label: String,
    /// yes_no | single_choice | multi_choice | free_text
    #[serde(rename = "type")]
    pub kind: String,
    pub question: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub choices: Vec<Choice>,
    /// Accepted for `choices`, as Go Crush accepts it.
    #[serde(default)]
    options: Vec<Choice>,
}

/// The user's answer to one question.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Answer {
    pub yes: Option<bool>,
    /// Ids of the chosen choices.
    pub selected: Vec<String>,
    /// Free text (a free_text answer, or a custom answer to a choice).
    pub text: String,
}

pub(crate) const KINDS: &[&str] = &["yes_no", "single_choice", "multi_choice", "free_text"];

/// The questions of a call, checked against Go Crush's limits. A `questions` array sent as a
/// JSON string is accepted.
pub(crate) fn parse(input: &Value) -> Result<Vec<Question>, ToolError> {
    let raw = match input.get("questions") {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s.trim())
            .map_err(|e| format!("questions must be an array: {e}"))?,
        Some(v) => v.clone(),
        None => Value::Null,
    };
    let items: Vec<Value> = match raw {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        _ => return Err("questions must be an array".into()),
    };
    if items.is_empty() {
        return Err("at least one question is required".into());
    }
    if items.len() > MAX_QUESTIONS {
        return Err(format!(
            "exceeds maximum of {MAX_QUESTIONS} questions per batch (got {}). Split into multiple batches and tell the user there will be follow-up questions",
            items.len()
        ).into());
    }
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let mut q: Question =
            serde_json::from_value(item).map_err(|e| format!("question {}: {e}", i + 1))?;
        if q.choices.is_empty() {
            q.choices = std::mem::take(&mut q.options);
        }
        let label = if q.label.is_empty() {
            q.question.clone()
        } else {
            q.label.clone()
        };
        if !KINDS.contains(&q.kind.as_str()) {
            return Err(format!(
                "question {} [{label}]: invalid type {:?} (must be yes_no, single_choice, multi_choice, or free_text)",
                i + 1,
                q.kind
            ).into());
        }
        if q.question.trim().is_empty() {
            return Err(format!("question {}: the question text is empty", i + 1).into());
        }
        let choosing = q.kind == "single_choice" || q.kind == "multi_choice";
        if choosing && q.choices.is_empty() {
            return Err(format!("question {} [{label}]: {} needs choices", i + 1, q.kind).into());
        }
        if q.choices.len() > MAX_CHOICES {
            return Err(format!(
                "question {} [{label}]: at most {MAX_CHOICES} choices (got {})",
                i + 1,
                q.choices.len()
            )
            .into());
        }
        for (k, c) in q.choices.iter_mut().enumerate() {
            if c.id.is_empty() {
                c.id = if c.label.is_empty() {
                    (k + 1).to_string()
                } else {
                    c.label.clone()
                };
            }
            if c.label.is_empty() {
                c.label = c.id.clone();
            }
        }
        out.push(q);
    }
    Ok(out)
}

/// The answers as the model reads them (Go Crush's wording).
pub(crate) fn format_answers(questions: &[Question], answers: &[Answer]) -> String {
    let mut s = String::new();
    for (i, (q, a)) in questions.iter().zip(answers).enumerate() {
        if i > 0 {
            s.push_str("\n\n");
        }
        s.push_str(&format!("Q{}: {}\n", i + 1, q.question));
        if let Some(yes) = a.yes {
            s.push_str(if yes {
                "User answered: yes"
            } else {
                "User answered: no"
            });
        } else if !a.selected.is_empty() || !a.text.is_empty() {
            let mut parts = Vec::new();
            if !a.selected.is_empty() {
                parts.push(format!("User selected: {}", json!(a.selected)));
            }
            if !a.text.is_empty() {
                parts.push(format!("User provided: {}", a.text));
            }
            s.push_str(&parts.join("\n"));
        } else {
            s.push_str("User skipped this question");
        }
    }
    s
}

impl Tool for QuestionTool {
    fn name(&self) -> &'static str {
        "question"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Other
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run_mode(&self) -> super::RunMode {
        super::RunMode::Loop(super::LoopTool::Question)
    }

    fn description(&self) -> String {
        format!(
            "Ask the user a structured question and wait for their response. Use this when you \
             need clarification, confirmation, or a choice before proceeding.\n\
             \n\
             Always provide a `questions` array with at least one item. Every question MUST \
             include `type` (yes_no, single_choice, multi_choice, or free_text), `question` (a \
             short, direct question) and `description` (context shown below it).\n\
             \n\
             Hard limits: at most {MAX_CHOICES} choices per question; choices are required for \
             single_choice and multi_choice; at most {MAX_QUESTIONS} questions per batch.\n\
             \n\
             - yes_no: a proposition the user affirms or rejects. For two alternatives use \
             single_choice.\n\
             - single_choice / multi_choice: pick from `choices` ({{id, label, description}}); \
             the user may also type a custom answer, so do not add an \"Other\" choice.\n\
             - free_text: an open answer.\n\
             \n\
             Do not use it for questions the code or docs answer, or to ask permission. In a \
             non-interactive run no user can answer: the result says so, and you decide yourself."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "description": "List of questions to present. Single item = no tabs, multiple = tabbed form.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "label": {"type": "string", "description": "Short tab header label (3 words max)."},
                            "type": {"type": "string", "enum": KINDS,
                                "description": "The type of question: yes_no, single_choice, multi_choice, or free_text"},
                            "question": {"type": "string", "description": "The question text"},
                            "description": {"type": "string", "description": "Required markdown description shown below the question"},
                            "choices": {
                                "type": "array",
                                "description": "List of choices",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "id": {"type": "string", "description": "Unique identifier for this choice"},
                                        "label": {"type": "string", "description": "Display text for this choice"},
                                        "description": {"type": "string", "description": "Optional description for this choice"}
                                    },
                                    "required": ["id", "label"]
                                }
                            }
                        },
                        "required": ["type", "question", "description"]
                    }
                },
                "confirm_title": {"type": "string", "description": "Title for the confirmation tab. Required for multi-question batches."},
                "confirm_description": {"type": "string", "description": "Description for the confirmation tab. Required for multi-question batches."}
            },
            "required": ["questions"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        parse(input)?;
        opt_str(input, "confirm_title")?;
        Ok(None)
    }

    /// Without a front end to ask through (the loop asks the user itself when it can).
    fn run(&self, input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        parse(input)?;
        Ok(ToolOutput {
            content: NO_USER.to_string(),
            metadata: json!({"answered": false}),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(kind: &str, choices: Value) -> Value {
        json!({"type": kind, "question": "Q?", "description": "d", "choices": choices})
    }

    #[test]
    fn questions_are_checked_against_go_crush_s_limits() {
        let ok = parse(&json!({"questions": [q("yes_no", json!([]))]})).unwrap();
        assert_eq!(ok[0].kind, "yes_no");
        let six: Vec<Value> = (0..6).map(|_| q("free_text", json!([]))).collect();
        for (bad, why) in [
            (json!({}), "at least one"),
            (json!({"questions": []}), "at least one"),
            (json!({"questions": six}), "maximum of 5"),
            (
                json!({"questions": [q("maybe", json!([]))]}),
                "invalid type",
            ),
            (
                json!({"questions": [q("single_choice", json!([]))]}),
                "needs choices",
            ),
            (
                json!({"questions": [q("multi_choice", json!([{"id":"a"},{"id":"b"},{"id":"c"},{"id":"d"},{"id":"e"},{"id":"f"}]))]}),
                "at most 5 choices",
            ),
        ] {
            let e = parse(&bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        // A string-encoded array and `options` for `choices`, as some models send them.
        let s = json!({"questions": json!([{"type": "single_choice", "question": "Which?",
            "description": "", "options": [{"id": "pg", "label": "PostgreSQL"}, {"label": "Mongo"}]}]).to_string()});
        let p = parse(&s).unwrap();
        assert_eq!(p[0].choices[1].id, "Mongo");
    }

    #[test]
    fn answers_read_as_go_crush_writes_them() {
        let qs = parse(
            &json!({"questions": [q("yes_no", json!([])), q("multi_choice",
            json!([{"id": "a", "label": "A"}])), q("free_text", json!([]))]}),
        )
        .unwrap();
        let answers = [
            Answer {
                yes: Some(true),
                ..Default::default()
            },
            Answer {
                selected: vec!["a".into()],
                text: "and more".into(),
                ..Default::default()
            },
            Answer::default(),
        ];
        assert_eq!(
            format_answers(&qs, &answers),
            "Q1: Q?\nUser answered: yes\n\nQ2: Q?\nUser selected: [\"a\"]\nUser provided: and more\n\nQ3: Q?\nUser skipped this question"
        );
    }
}
