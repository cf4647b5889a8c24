//! The hook events (crush(1) HOOKS, Events): the one list of their names, how a name given in
//! a configuration or on the command line is read, and what Claude Code's matchers test on
//! each. The configuration (crushrc's `hook add`), the CLI and the hooks themselves all ask
//! this enum; nothing else compares event names. Also the exec form's text, which the trust
//! review and the hooks both know a hook by.

use serde_json::{Map, Value};

/// Declares `Event` and `EVENTS` from one list of variants, so a new event is named once: its
/// name is the variant's, and `EVENTS` (the order of `crush hooks list` and of the names in
/// messages) cannot leave it out.
macro_rules! events {
    ($($(#[$doc:meta])* $variant:ident,)+) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) enum Event {
            $($(#[$doc])* $variant,)+
        }

        /// Every event, in the man page's order.
        pub(crate) const EVENTS: [Event; [$(stringify!($variant)),+].len()] =
            [$(Event::$variant),+];

        impl Event {
            /// The canonical spelling, Claude Code's as well.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Event::$variant => stringify!($variant),)+
                }
            }
        }
    };
}

events! {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    SessionStart,
    Stop,
    /// A sub-agent (the `agent` tool) finished; a block makes it go on.
    SubagentStop,
    /// The session ends (`crush run` done, the REPL quits, `/new`).
    SessionEnd,
    /// Before the session is summarized; a block skips the summary.
    PreCompact,
    /// crush is about to ask the user something (a permission question).
    Notification,
}

impl Event {
    /// The event named exactly `s`, as Claude Code's settings files name it (`PreToolUse`, not
    /// `preToolUse`).
    pub(crate) fn parse_exact(s: &str) -> Option<Event> {
        EVENTS.into_iter().find(|e| e.name() == s)
    }

    /// Case-insensitive; `_` and `-` ignored: `PreToolUse`, `pretooluse`, `pre_tool_use`.
    pub(crate) fn parse(s: &str) -> Option<Event> {
        let norm: String = s
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        EVENTS
            .into_iter()
            .find(|e| e.name().to_ascii_lowercase() == norm)
    }

    /// Every name, comma-separated, as messages list the valid events.
    pub(crate) fn all_names() -> String {
        EVENTS.map(Event::name).join(", ")
    }

    /// The payload field a Claude Code matcher is tested against on an event without a tool
    /// (`SessionStart` matchers name a source, `PreCompact` ones a trigger...). None: matchers
    /// do not apply.
    pub(crate) fn matcher_field(self) -> Option<&'static str> {
        match self {
            Event::SessionStart => Some("source"),
            Event::PreCompact => Some("trigger"),
            Event::Notification => Some("notification_type"),
            Event::SessionEnd => Some("reason"),
            Event::SubagentStop => Some("agent_type"),
            Event::PreToolUse | Event::PostToolUse | Event::UserPromptSubmit | Event::Stop => None,
        }
    }

    /// Events that carry a tool call (matchers apply, tool variables are set).
    pub(crate) fn has_tool(self) -> bool {
        matches!(self, Event::PreToolUse | Event::PostToolUse)
    }

    /// What a block (exit 2, or a deny decision) does on this event, as in Claude Code
    /// (crush(1) HOOKS, Events).
    pub(crate) fn block_effect(self) -> BlockEffect {
        match self {
            Event::PreToolUse
            | Event::UserPromptSubmit
            | Event::Stop
            | Event::SubagentStop
            | Event::PreCompact => BlockEffect::Blocks,
            Event::PostToolUse => BlockEffect::FeedbackToModel,
            Event::SessionStart | Event::SessionEnd | Event::Notification => {
                BlockEffect::ShownToUser
            }
        }
    }

    /// Whether a hook can stop what this event announces.
    pub(crate) fn can_block(self) -> bool {
        self.block_effect() == BlockEffect::Blocks
    }

    /// Whether a halt (exit 49, `continue: false`) ends the turn here: everywhere a turn is
    /// under way, not on the events that only inform.
    pub(crate) fn can_halt(self) -> bool {
        self.block_effect() != BlockEffect::ShownToUser
    }

    /// Whether a verdict that denies (`deny`) or halts (`halt`) stops something on this event.
    pub(crate) fn stops(self, deny: bool, halt: bool) -> bool {
        (deny && self.can_block()) || (halt && self.can_halt())
    }
}

/// What a hook's block does on an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockEffect {
    /// The call, prompt, stop or summary does not happen.
    Blocks,
    /// The tool already ran: the reason reaches the model as feedback.
    FeedbackToModel,
    /// Nothing to stop: the reason is shown to the user only.
    ShownToUser,
}

impl BlockEffect {
    /// Why a deny on `event` stopped nothing, for `crush hooks test` and the hook lines; None
    /// where it blocks.
    pub(crate) fn explain(self, event: Event) -> Option<String> {
        match self {
            BlockEffect::Blocks => None,
            BlockEffect::FeedbackToModel => Some(format!(
                "{event} cannot block (the tool already ran): the reason goes to the model as feedback"
            )),
            BlockEffect::ShownToUser => Some(format!(
                "{event} cannot block: the reason is shown to the user only"
            )),
        }
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The text of a hook in exec form, `PROGRAM 'ARG' 'ARG'`: how it is shown, deduplicated and
/// tied to the project files it runs (the trust review reads it as a command line).
pub(crate) fn exec_form_text(program: &str, args: &[String]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push_str(" '");
        s.push_str(&a.replace('\'', "'\\''"));
        s.push('\'');
    }
    s
}

/// A Claude Code handler's `args`: None when absent; Err with the value when it is not a list
/// of strings.
pub(crate) fn exec_args(e: &Map<String, Value>) -> Result<Option<Vec<String>>, &Value> {
    match e.get("args") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(Some(
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        )),
        Some(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Go Crush TestValidateHooks*: event-name normalisation.
    #[test]
    fn event_names_are_case_insensitive_and_snake_caseable() {
        for s in [
            "PreToolUse",
            "pretooluse",
            "pre_tool_use",
            "PRE_TOOL_USE",
            "preToolUse",
        ] {
            assert_eq!(Event::parse(s), Some(Event::PreToolUse), "{s}");
        }
        assert_eq!(
            Event::parse("user-prompt-submit"),
            Some(Event::UserPromptSubmit)
        );
        assert_eq!(Event::parse("stop"), Some(Event::Stop));
        assert_eq!(Event::parse("TurnEnd"), None);
    }

    #[test]
    fn only_events_that_announce_something_stoppable_can_block() {
        let blocking: Vec<&str> = EVENTS
            .into_iter()
            .filter(|e| e.can_block())
            .map(Event::name)
            .collect();
        assert_eq!(
            blocking,
            [
                "PreToolUse",
                "UserPromptSubmit",
                "Stop",
                "SubagentStop",
                "PreCompact"
            ]
        );
        assert!(Event::PostToolUse.can_halt());
        assert!(!Event::SessionEnd.can_halt());
        let why = Event::PostToolUse
            .block_effect()
            .explain(Event::PostToolUse);
        assert!(why.unwrap().contains("feedback"));
        assert_eq!(Event::Stop.block_effect().explain(Event::Stop), None);
    }

    #[test]
    fn every_event_is_listed_once_under_its_own_name() {
        assert_eq!(
            Event::all_names(),
            "PreToolUse, PostToolUse, UserPromptSubmit, SessionStart, Stop, SubagentStop, \
             SessionEnd, PreCompact, Notification"
        );
        for e in EVENTS {
            assert_eq!(Event::parse(e.name()), Some(e));
            assert_eq!(e.to_string(), e.name());
        }
    }
}
