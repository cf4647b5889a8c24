//! Session titles from the small model (Go Crush's `GenerateTitle`): one short call with no
//! tools and a small output cap. The caller falls back to the first words of the prompt when
//! the call fails or the answer is unusable, and records the call's usage either way.

use crate::config::ResolvedModel;
/// The title a session has until its first prompt has passed the UserPromptSubmit hooks.
pub(crate) const PLACEHOLDER: &str = "Untitled Session";

/// A title from the first words of a prompt (at most 50 characters), or `fallback` when the
/// prompt has none.
pub(crate) fn from_prompt(prompt: &str, fallback: &str) -> String {
    let line = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut t: String = line.chars().take(50).collect();
    if line.chars().count() > 50 {
        t.push('…');
    }
    if t.is_empty() {
        fallback.to_string()
    } else {
        t
    }
}

use crate::llm::{self, ChatRequest, FinishReason, Message, RetryPolicy, Usage};
use crate::store::{PriceSource, UsageRecord};

/// Output cap of the title call, in tokens (Go Crush uses 40).
pub(crate) const MAX_TOKENS: u32 = 40;

/// Longest title kept, in characters.
const MAX_CHARS: usize = 80;

const SYSTEM: &str = "You write the title of a conversation between a user and a coding \
assistant. Reply with the title only: at most 8 words, in the language of the user's message, \
no quotes, no trailing punctuation, no explanation. /no_think";

/// The title request for the user's first prompt.
pub(crate) fn request(model: &ResolvedModel, prompt: &str) -> ChatRequest {
    // Long prompts (pasted logs, files) add cost, not information.
    let excerpt: String = prompt.chars().take(2000).collect();
    ChatRequest {
        model: model.model.id.clone(),
        system: SYSTEM.to_string(),
        messages: vec![Message::user(format!(
            "Generate a concise title for the following content:\n\n{excerpt}"
        ))],
        tools: Vec::new(),
        max_tokens: Some(MAX_TOKENS),
        temperature: None,
        options: Default::default(),
    }
}

/// The title from the model's raw answer: `<think>` blocks and stray tags removed, newlines
/// folded, quotes and trailing punctuation trimmed, capped. None when nothing usable is left.
pub(crate) fn clean(raw: &str) -> Option<String> {
    let mut s = raw.to_string();
    while let Some(start) = s.find("<think>") {
        match s[start..].find("</think>") {
            Some(end) => s.replace_range(start..start + end + "</think>".len(), ""),
            None => s.truncate(start),
        }
    }
    // Stray tags such as <title>…</title>.
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        match rest[i..].find('>') {
            Some(j) if !rest[i + 1..i + j].contains(char::is_whitespace) => {
                rest = &rest[i + j + 1..]
            }
            _ => {
                out.push('<');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    let line = out.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line
        .trim_start_matches(['"', '\'', '`', '*', '#', ' '])
        .trim_end_matches(['"', '\'', '`', '*', '.', ' '])
        .trim_start_matches("Title:")
        .trim();
    if line.is_empty() {
        return None;
    }
    let mut t: String = line.chars().take(MAX_CHARS).collect();
    if line.chars().count() > MAX_CHARS {
        t.push('…');
    }
    Some(t)
}

/// What one title call produced.
#[derive(Debug, Clone)]
pub(crate) struct Generated {
    /// None: the call failed or the answer was unusable; use the fallback.
    pub title: Option<String>,
    /// The call's usage row, when the model answered (its tokens were spent either way).
    pub usage: Option<UsageRecord>,
    /// Why there is no title, for the debug log.
    pub error: Option<String>,
}

/// When a side request (the title) may leave, relative to the turn it belongs to
/// (crush(1) CONFIGURATION, side_requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideTiming {
    /// With the turn: another server or model answers it.
    Now,
    /// Once the turn's first model call has finished: the same model is not asked twice at once.
    AfterFirstCall,
    /// Once the turn has ended: a local server may have a single slot, and a second request
    /// would make it abandon the turn.
    AfterTurn,
}

/// When the title call to `side` may go out while `main` runs the turn; `setting` is
/// `options.side_requests` (`after` or `concurrent`).
pub(crate) fn timing(
    main: &ResolvedModel,
    side: &ResolvedModel,
    setting: Option<&str>,
) -> SideTiming {
    let local = crate::net::is_local_url(&side.provider.endpoint.base_url);
    match setting {
        Some("after") => SideTiming::AfterTurn,
        _ if local && setting != Some("concurrent") => SideTiming::AfterTurn,
        _ if main.provider.id == side.provider.id && main.model.id == side.model.id => {
            SideTiming::AfterFirstCall
        }
        _ => SideTiming::Now,
    }
}

/// Runs the title call (blocking; meant for a worker thread).
pub(crate) fn generate(model: &ResolvedModel, prompt: &str, policy: &RetryPolicy) -> Generated {
    let req = request(model, prompt);
    match llm::complete(&model.provider.endpoint, &req, policy) {
        Err(e) => Generated {
            title: None,
            usage: None,
            error: Some(e.to_string()),
        },
        Ok(resp) => {
            let usage = Some(usage_record(model, resp.usage));
            let text = crate::llm::text_of(&resp.parts);
            if resp.finish == FinishReason::MaxTokens {
                return Generated {
                    title: None,
                    usage,
                    error: Some("the title was cut off at the output limit".into()),
                };
            }
            let title = clean(&text);
            Generated {
                error: title
                    .is_none()
                    .then(|| "the model's title was empty".to_string()),
                title,
                usage,
            }
        }
    }
}

/// The ledger row of a call to `model`. `price_source` is where the cost came from (`catalog`,
/// `config`), `unpriced` when the model has no price (flat-rate providers included), or
/// `unknown_usage` when a priced model's call reported no usage: the cost is NULL in the last
/// two cases, never a made-up $0.
pub(crate) fn usage_record(model: &ResolvedModel, usage: Option<Usage>) -> UsageRecord {
    let cost = usage.as_ref().and_then(|u| model.cost(u));
    let source = model.price_source();
    UsageRecord {
        provider: model.provider.id.clone(),
        model: model.model.id.clone(),
        usage,
        cost,
        price_source: match (cost, usage) {
            (Some(_), _) => source,
            (None, None) if source.is_priced() => PriceSource::UnknownUsage,
            (None, _) => PriceSource::Unpriced,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn clean_strips_thinking_tags_quotes_and_newlines() {
        assert_eq!(
            clean("<think>hmm\nlet me see</think>\n\"Fix the login bug.\"\n").as_deref(),
            Some("Fix the login bug")
        );
        assert_eq!(
            clean("<title>Refactor   the\nparser</title>").as_deref(),
            Some("Refactor the parser")
        );
        assert_eq!(clean("Title: Add tests").as_deref(), Some("Add tests"));
        assert_eq!(clean("a < b and c > d").as_deref(), Some("a < b and c > d"));
        assert_eq!(clean("<think>never closed"), None);
        assert_eq!(clean("  \n "), None);
    }

    #[test]
    fn clean_caps_long_titles() {
        let t = clean(&"word ".repeat(40)).unwrap();
        assert!(t.chars().count() <= 81, "{t}");
        assert!(t.ends_with('…'));
    }
}
