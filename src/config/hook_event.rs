//! The hook events (crush(1) HOOKS, Events): the one list of their names, how a name given in
//! a configuration or on the command line is read, and what Claude Code's matchers test on
//! each. The configuration (crushrc's `hook add`), the CLI and the hooks themselves all ask
//! this enum; nothing else compares event names.

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
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
