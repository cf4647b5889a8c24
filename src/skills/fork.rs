//! Claude Code's `context: fork`, `agent` and `model` keys of a skill's or a command's
//! frontmatter (crush(1) SKILLS AND COMMANDS, Forked skills): invoked as a command, such a
//! skill runs in a sub-agent and only the sub-agent's final answer comes back. A value crush
//! cannot use is a warning, never a reason to drop the skill.

use super::frontmatter::{Document, Value};

/// The model a sub-agent runs on: a forked skill's or a custom agent's `model:` (crush(1)
/// AGENTS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ModelChoice {
    /// The parent's model (`inherit`, or no `model`).
    Inherit,
    /// The catalog's current model of a family (`sonnet`, `opus`, `haiku`) for the provider.
    Family(String),
    /// `provider/model`.
    Exact { provider: String, model: String },
}

impl std::fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelChoice::Inherit => f.write_str("inherit"),
            ModelChoice::Family(x) => f.write_str(x),
            ModelChoice::Exact { provider, model } => write!(f, "{provider}/{model}"),
        }
    }
}

/// Claude Code's names of its built-in agents, which crush's built-in read-only sub-agent
/// stands for (crush(1) SKILLS AND COMMANDS, Forked skills).
pub(crate) const BUILTIN_AGENTS: &[&str] = &["general-purpose", "Explore", "Plan"];

/// Whether `name` names the built-in sub-agent: empty, or one of [`BUILTIN_AGENTS`].
pub(crate) fn is_builtin_agent(name: &str) -> bool {
    name.is_empty() || BUILTIN_AGENTS.contains(&name)
}

/// How a skill invoked as a command runs in a sub-agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fork {
    /// `agent:` as written: None (or a name of [`BUILTIN_AGENTS`]) for the built-in sub-agent,
    /// else a custom agent's name (crush(1) AGENTS).
    pub agent: Option<String>,
    /// `model:`: Inherit leaves the agent's own model (a custom agent's `model`, else the
    /// session's).
    pub model: ModelChoice,
}

impl Fork {
    /// The custom agent it names; None for the built-in sub-agent.
    pub(crate) fn custom_agent(&self) -> Option<&str> {
        self.agent.as_deref().filter(|a| !is_builtin_agent(a))
    }

    /// How `crush skills list` shows it.
    pub(crate) fn describe(&self) -> String {
        let agent = match (&self.agent, self.custom_agent()) {
            (_, Some(a)) => format!("agent {a}"),
            (Some(a), None) => format!("the built-in sub-agent ({a})"),
            (None, None) => "the built-in sub-agent".to_string(),
        };
        match &self.model {
            ModelChoice::Inherit => format!("runs in a sub-agent: {agent}"),
            m => format!("runs in a sub-agent: {agent}, model {m}"),
        }
    }
}

/// The `model:` values crush reads, as custom agents take them (crush(1) AGENTS).
pub(crate) fn parse_model(m: &str) -> Option<ModelChoice> {
    match m {
        "inherit" => Some(ModelChoice::Inherit),
        f @ ("sonnet" | "opus" | "haiku") => Some(ModelChoice::Family(f.to_string())),
        m => match m.split_once('/') {
            Some((p, id)) if !p.is_empty() && !id.is_empty() => Some(ModelChoice::Exact {
                provider: p.to_string(),
                model: id.to_string(),
            }),
            _ => None,
        },
    }
}

/// Whether `name` has the shape of a custom agent's name (crush(1) AGENTS).
fn agent_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The text of `key` when it is one; a warning when it is something else.
fn text_of(doc: &Document, key: &str, warnings: &mut Vec<String>) -> Option<String> {
    match &doc.get(key)?.value {
        Value::Scalar(Some(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Scalar(_) => None,
        _ => {
            warnings.push(format!("{key} must be a single value; it is ignored"));
            None
        }
    }
}

/// `context`, `agent` and `model` of `doc`: the fork, if the skill runs in one, and a warning
/// for each value that cannot be used as written.
pub(crate) fn parse(doc: &Document) -> (Option<Fork>, Vec<String>) {
    let mut warnings = Vec::new();
    let context = text_of(doc, "context", &mut warnings);
    let agent = text_of(doc, "agent", &mut warnings);
    let model_text = text_of(doc, "model", &mut warnings);
    let fork = match context.as_deref() {
        None => false,
        Some("fork") => true,
        Some(other) => {
            warnings.push(format!(
                "context `{other}` is not `fork` (the only value crush knows); the skill runs inline"
            ));
            false
        }
    };
    let model = match model_text.as_deref() {
        None => ModelChoice::Inherit,
        Some(m) => parse_model(m).unwrap_or_else(|| {
            warnings.push(format!(
                "model `{m}` is not inherit, sonnet, opus, haiku or PROVIDER/MODEL; the model is inherited"
            ));
            ModelChoice::Inherit
        }),
    };
    if !fork {
        for (key, v) in [("agent", &agent), ("model", &model_text)] {
            if let Some(v) = v {
                warnings.push(format!(
                    "{key} `{v}` applies only with context: fork; the skill runs inline on the session's model"
                ));
            }
        }
        return (None, warnings);
    }
    if let Some(a) = &agent
        && !is_builtin_agent(a)
        && !agent_name_ok(a)
    {
        warnings.push(format!(
            "agent `{a}` is not {} or a custom agent's name (lowercase letters, digits and hyphens); the skill cannot run",
            BUILTIN_AGENTS.join(", ")
        ));
    }
    (Some(Fork { agent, model }), warnings)
}

/// The warning for a fork whose agent is not among the custom agents `known` (by name), if any.
pub(crate) fn unknown_agent(fork: &Fork, known: &[&str]) -> Option<String> {
    let a = fork.custom_agent()?;
    if known.contains(&a) || !agent_name_ok(a) {
        return None;
    }
    Some(format!(
        "agent `{a}` is neither {} nor a custom agent found (crush agents list); the skill cannot run",
        BUILTIN_AGENTS.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(front: &str) -> (Option<Fork>, Vec<String>) {
        let doc = super::super::frontmatter::parse(&format!("---\n{front}---\nBody\n")).unwrap();
        parse(&doc)
    }

    #[test]
    fn a_fork_takes_its_agent_and_model() {
        let (f, w) = of("context: fork\nagent: Explore\nmodel: haiku\n");
        assert!(w.is_empty(), "{w:?}");
        let f = f.expect("a fork");
        assert_eq!(f.custom_agent(), None);
        assert_eq!(f.model, ModelChoice::Family("haiku".into()));
        let (f, w) = of("context: fork\nagent: reviewer\nmodel: fake/big\n");
        assert!(w.is_empty(), "{w:?}");
        let f = f.unwrap();
        assert_eq!(f.custom_agent(), Some("reviewer"));
        assert_eq!(
            f.describe(),
            "runs in a sub-agent: agent reviewer, model fake/big"
        );
        assert_eq!(of("description: x\n"), (None, Vec::new()));
    }

    #[test]
    fn values_crush_cannot_use_are_warnings() {
        let (f, w) = of("context: banana\nagent: Explore\nmodel: sonnet\n");
        assert_eq!(f, None);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("context `banana` is not `fork`"), "{w:?}");
        assert!(w[1].contains("agent `Explore` applies only with context: fork"));
        assert!(w[2].contains("model `sonnet` applies only with context: fork"));
        let (f, w) = of("context: fork\nagent: Not An Agent\nmodel: gpt-9\n");
        let f = f.expect("still a fork");
        assert_eq!(f.model, ModelChoice::Inherit);
        assert!(w[0].contains("model `gpt-9` is not inherit"), "{w:?}");
        assert!(w[1].contains("agent `Not An Agent` is not general-purpose"));
        let (_, w) = of("context: [a, b]\n");
        assert!(w[0].contains("context must be a single value"), "{w:?}");
    }

    #[test]
    fn an_agent_not_found_is_a_warning() {
        let (f, _) = of("context: fork\nagent: reviewer\n");
        let f = f.unwrap();
        assert!(
            unknown_agent(&f, &["other"])
                .unwrap()
                .contains("agent `reviewer` is neither")
        );
        assert_eq!(unknown_agent(&f, &["reviewer"]), None);
        let (f, _) = of("context: fork\nagent: Plan\n");
        assert_eq!(unknown_agent(&f.unwrap(), &[]), None);
    }
}
