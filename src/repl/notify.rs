//! Notifications when the session needs the user back: a long turn finished, or a permission
//! question waits. `options.notifications` (as Go Crush names it) picks how: `bell` (BEL),
//! `osc` (OSC 9 or OSC 777, which terminals show as desktop notifications), `native`
//! (`notify-send`), `disabled`, or `auto` (the default): native on a local desktop, else OSC on a
//! terminal known to show it, else the bell. Never when stderr is not a terminal.

use std::time::Duration;

/// How a notification is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Style {
    Off,
    Bell,
    /// `ESC ] 9 ; text BEL` (iTerm2, WezTerm, Ghostty, Windows Terminal).
    Osc9,
    /// `ESC ] 777 ; notify ; title ; body BEL` (rxvt-unicode, foot, Ghostty, WezTerm).
    Osc777,
    Native,
}

/// Turns shorter than this do not notify (`CRUSH_NOTIFY_AFTER`, seconds).
pub(super) fn threshold() -> Duration {
    crate::env::seconds("CRUSH_NOTIFY_AFTER").unwrap_or(Duration::from_secs(10))
}

/// The terminal's own way: OSC where it is known to show it, else the bell.
fn terminal_style(var: &dyn Fn(&str) -> Option<String>) -> Style {
    let term = var("TERM").unwrap_or_default();
    // A multiplexer swallows OSC sequences it does not know; it passes the bell on.
    if var("TMUX").is_some() || term.starts_with("screen") || term.starts_with("tmux") {
        return Style::Bell;
    }
    let osc9 = matches!(
        var("TERM_PROGRAM").as_deref(),
        Some("iTerm.app" | "WezTerm" | "ghostty")
    );
    if osc9 || var("WT_SESSION").is_some() {
        return Style::Osc9;
    }
    if term.starts_with("foot") || term.starts_with("rxvt") {
        return Style::Osc777;
    }
    Style::Bell
}

/// The style for the `notifications` setting. `var` reads the environment; `native` says
/// whether `notify-send` can be run.
pub(super) fn choose(
    setting: Option<&str>,
    stderr_tty: bool,
    var: &dyn Fn(&str) -> Option<String>,
    native: &dyn Fn() -> bool,
) -> Style {
    if !stderr_tty {
        return Style::Off;
    }
    let desktop = || {
        var("SSH_CONNECTION").is_none()
            && var("SSH_TTY").is_none()
            && (var("DISPLAY").is_some() || var("WAYLAND_DISPLAY").is_some())
            && native()
    };
    match setting.unwrap_or("auto") {
        "disabled" => Style::Off,
        "bell" => Style::Bell,
        "osc" => match terminal_style(var) {
            Style::Osc9 => Style::Osc9,
            _ => Style::Osc777,
        },
        // "native" and "auto" alike: the desktop when there is one.
        _ if desktop() => Style::Native,
        _ => terminal_style(var),
    }
}

/// Text safe inside an OSC sequence: no control characters, no field separator.
fn field(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() || c == ';' { ' ' } else { c })
        .collect()
}

/// The bytes for the terminal (None for `Off` and `Native`).
pub(super) fn sequence(style: Style, title: &str, body: &str) -> Option<String> {
    match style {
        Style::Bell => Some("\x07".into()),
        Style::Osc9 => Some(format!("\x1b]9;{}: {}\x07", field(title), field(body))),
        Style::Osc777 => Some(format!(
            "\x1b]777;notify;{};{}\x07",
            field(title),
            field(body)
        )),
        Style::Off | Style::Native => None,
    }
}

/// Sends a notification the chosen way; failures are logged, never shown.
pub(super) fn send(style: Style, title: &str, body: &str, cwd: &std::path::Path) {
    if let Some(seq) = sequence(style, title, body) {
        super::tty::write(seq.as_bytes());
        return;
    }
    if style != Style::Native {
        return;
    }
    let mut spec = crate::proc::Spec::exec(
        vec![
            "notify-send".into(),
            "--app-name=crush".into(),
            field(title),
            field(body),
        ],
        cwd,
    );
    spec.timeout = Some(Duration::from_secs(5));
    // Off the main thread: a slow notification daemon must not hold the session.
    let spawned = std::thread::Builder::new()
        .name("notify".into())
        .spawn(move || {
            if let Err(e) = crate::proc::run(&spec) {
                crate::log::warn(&format!("notify-send: {e}"));
            }
        });
    if let Err(e) = spawned {
        crate::log::warn(&format!("cannot start the notification thread: {e}"));
    }
}

/// Whether `notify-send` is on PATH.
pub(super) fn native_available() -> bool {
    crate::proc::which("notify-send").is_some()
}

/// A notification due once something has taken long enough.
pub(super) struct Notice {
    pub style: Style,
    pub since: std::time::Instant,
    pub after: Duration,
    pub cwd: std::path::PathBuf,
}

impl Notice {
    /// Sends `body` if the wait since `since` reached `after`.
    pub(super) fn send_if_long(&self, body: &str) {
        if self.since.elapsed() >= self.after {
            send(self.style, "crush", body, &self.cwd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_setting_and_the_terminal_pick_the_style() {
        let yes = || true;
        let no = || false;
        let xterm = env(&[("TERM", "xterm-256color")]);
        assert_eq!(choose(None, false, &xterm, &yes), Style::Off, "a pipe");
        assert_eq!(choose(Some("disabled"), true, &xterm, &yes), Style::Off);
        assert_eq!(choose(Some("bell"), true, &xterm, &yes), Style::Bell);
        assert_eq!(choose(Some("osc"), true, &xterm, &no), Style::Osc777);
        assert_eq!(choose(None, true, &xterm, &no), Style::Bell);
        let iterm = env(&[("TERM", "xterm"), ("TERM_PROGRAM", "iTerm.app")]);
        assert_eq!(choose(None, true, &iterm, &no), Style::Osc9);
        assert_eq!(choose(Some("osc"), true, &iterm, &no), Style::Osc9);
        let tmux = env(&[("TERM", "screen"), ("TERM_PROGRAM", "iTerm.app")]);
        assert_eq!(choose(None, true, &tmux, &no), Style::Bell);
        let desktop = env(&[("TERM", "xterm"), ("DISPLAY", ":0")]);
        assert_eq!(choose(None, true, &desktop, &yes), Style::Native);
        assert_eq!(choose(None, true, &desktop, &no), Style::Bell);
        let ssh = env(&[
            ("TERM", "foot"),
            ("DISPLAY", ":0"),
            ("SSH_TTY", "/dev/pts/1"),
        ]);
        assert_eq!(choose(Some("native"), true, &ssh, &yes), Style::Osc777);
    }

    #[test]
    fn sequences_hold_only_our_own_control_characters() {
        assert_eq!(sequence(Style::Bell, "t", "b").unwrap(), "\x07");
        assert_eq!(
            sequence(Style::Osc777, "crush", "ask; \x1b]0;x\x07 bash").unwrap(),
            "\x1b]777;notify;crush;ask   ]0 x  bash\x07"
        );
        assert_eq!(
            sequence(Style::Osc9, "crush", "done").unwrap(),
            "\x1b]9;crush: done\x07"
        );
        assert_eq!(sequence(Style::Native, "a", "b"), None);
    }
}
