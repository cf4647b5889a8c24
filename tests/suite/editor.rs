//! The line editor of the interactive session, driven in a pseudo-terminal (tmux): editing keys,
//! history across restarts, reverse search, completion, bracketed paste, Ctrl-C, bad input, and
//! the terminal's mode put back however crush ends.

use super::repl::{Tmux, setup, start_in_tmux, start_in_tmux_with, tmux_available, turns};
use crate::support::{FakeServer, RUN_TIMEOUT, Reply};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

fn at_prompt(s: &str) -> bool {
    s.lines().any(|l| l.trim_end() == ">")
}

/// Waits for an empty prompt as the last line: the turn is over and the editor reads. (Keys
/// typed during a turn go to the terminal's own line editing.)
fn wait_prompt(tmux: &Tmux) {
    tmux.wait_for("an empty prompt", |s| s.lines().last_non_empty() == ">");
}

/// The last user text of the last turn the server got.
fn last_prompt(server: &FakeServer) -> String {
    let t = turns(server);
    let last = t.last().expect("a turn");
    last.user_texts().last().cloned().unwrap_or_default()
}

/// Waits until the server has seen `n` turns.
fn wait_turns(server: &FakeServer, n: usize, tmux: &Tmux) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    while turns(server).len() < n {
        assert!(
            Instant::now() < deadline,
            "turn {n} never came; screen:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for crush to exit; its status and the terminal's mode after it (`stty -a`).
fn wait_exit(tmux: &Tmux, status_file: &Path) -> (String, String) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        if let Ok(s) = std::fs::read_to_string(status_file)
            && !s.is_empty()
        {
            let stty = std::fs::read_to_string(status_file.with_file_name("stty")).unwrap();
            return (s.trim().to_string(), stty);
        }
        assert!(
            Instant::now() < deadline,
            "crush did not exit; screen:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The terminal is back in its own mode: lines, echo and signal keys.
fn assert_cooked(stty: &str) {
    let words: Vec<&str> = stty.split_whitespace().collect();
    for flag in ["icanon", "echo", "isig", "icrnl"] {
        assert!(words.contains(&flag), "{flag} is off after crush:\n{stty}");
    }
}

/// The pid of crush: the child of the shell tmux runs.
fn crush_pid(tmux: &Tmux) -> i32 {
    let out = tmux.cmd(&["display", "-p", "-t", "t", "#{pane_pid}"]);
    let shell = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    children
        .split_whitespace()
        .next()
        .expect("crush runs")
        .parse()
        .unwrap()
}

macro_rules! need_tmux {
    () => {
        if !tmux_available() {
            eprintln!("tmux is not installed: skipped");
            return;
        }
    };
}

#[test]
fn editing_keys_shape_the_prompt_the_model_gets() {
    need_tmux!();
    let (server, env) = setup(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
    ]);
    let (tmux, status) = start_in_tmux(&env, "keys");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["wrld", "Home", "hello ", "End", "Left", "Left", "Left", "o"]);
    tmux.keys(&[
        "C-a", "C-Right", "C-k", " world", "M-b", "M-b", "C-d", "H", "Enter",
    ]);
    wait_turns(&server, 1, &tmux);
    assert_eq!(last_prompt(&server), "Hello world");
    wait_prompt(&tmux);
    // Kill and yank, and a second line with Alt-Enter.
    tmux.keys(&["second third", "C-w", "C-w", "draft", "C-u", "first", "C-y"]);
    tmux.keys(&[
        "M-Enter", "line", "C-j", "last", "BSpace", "BSpace", "t", "Enter",
    ]);
    wait_turns(&server, 2, &tmux);
    assert_eq!(last_prompt(&server), "firstdraft\nline\nlat");
    wait_prompt(&tmux);
    // A block typed line by line still works, and so does a trailing backslash; a line typed
    // across a resize of the terminal arrives whole.
    tmux.keys(&["{", "Enter", "in a block", "Enter", "}", "Enter"]);
    wait_turns(&server, 3, &tmux);
    assert_eq!(last_prompt(&server), "in a block");
    wait_prompt(&tmux);
    tmux.keys(&["first \\", "Enter", "a long second line that will wrap"]);
    let out = tmux.cmd(&["resize-window", "-t", "t", "-x", "20"]);
    assert!(out.status.success(), "{out:?}");
    tmux.keys(&[" once narrowed", "Enter"]);
    wait_turns(&server, 4, &tmux);
    assert_eq!(
        last_prompt(&server),
        "first \na long second line that will wrap once narrowed"
    );
    wait_prompt(&tmux);
    tmux.keys(&["C-d"]);
    let (code, stty) = wait_exit(&tmux, &status);
    assert_eq!(code, "0");
    assert_cooked(&stty);
}

#[test]
fn history_survives_a_restart_and_ctrl_r_finds_an_old_prompt() {
    need_tmux!();
    let (server, env) = setup(vec![
        Reply::text("one"),
        Reply::tool_call("bash", json!({"command": "touch made-by-test"})),
        Reply::text("two"),
        Reply::text("again one"),
        Reply::text("again two"),
    ]);
    let (tmux, status) = start_in_tmux(&env, "hist1");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["alpha one", "Enter"]);
    wait_turns(&server, 1, &tmux);
    wait_prompt(&tmux);
    tmux.keys(&["beta two", "Enter"]);
    tmux.wait_for("the question", |s| s.contains("[N]o"));
    tmux.keys(&["y"]);
    wait_turns(&server, 3, &tmux);
    wait_prompt(&tmux);
    tmux.keys(&["/quit", "Enter"]);
    let (code, stty) = wait_exit(&tmux, &status);
    assert_eq!(code, "0");
    assert_cooked(&stty);
    drop(tmux);
    let history = std::fs::read_to_string(env.project().join(".crush/history")).unwrap();
    assert_eq!(
        history, "alpha one\nbeta two\n/quit\n",
        "one line each, no permission answer"
    );

    std::fs::remove_file(env.root().join("status")).unwrap();
    let (tmux, status) = start_in_tmux(&env, "hist2");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["Up", "Up", "Up"]);
    tmux.wait_for("the oldest entry", |s| s.contains("> alpha one"));
    tmux.keys(&["Enter"]);
    wait_turns(&server, 4, &tmux);
    assert_eq!(last_prompt(&server), "alpha one");
    wait_prompt(&tmux);
    tmux.keys(&["C-r", "bet"]);
    tmux.wait_for("the search", |s| s.contains("`bet': beta two"));
    tmux.keys(&["Enter"]);
    wait_turns(&server, 5, &tmux);
    assert_eq!(last_prompt(&server), "beta two");
    wait_prompt(&tmux);
    tmux.keys(&["/hist", "Enter"]);
    tmux.wait_for("the history", |s| s.contains("    1  /quit"));
    wait_prompt(&tmux);
    tmux.keys(&["C-d"]);
    assert_eq!(wait_exit(&tmux, &status).0, "0");
}

trait LastNonEmpty<'a> {
    fn last_non_empty(self) -> &'a str;
}

impl<'a, I: DoubleEndedIterator<Item = &'a str>> LastNonEmpty<'a> for I {
    fn last_non_empty(self) -> &'a str {
        self.map(str::trim_end)
            .rev()
            .find(|l| !l.is_empty())
            .unwrap_or("")
    }
}

#[test]
fn tab_completes_commands_and_project_paths() {
    need_tmux!();
    let (server, env) = setup(vec![Reply::text("seen")]);
    env.write_project_file("src/main.rs", "fn main() {}\n");
    env.write_project_file("srt/ignored.txt", "");
    env.write_project_file(".gitignore", "srt/\n");
    let (tmux, _) = start_in_tmux(&env, "tab");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["/mo", "Tab"]);
    tmux.wait_for("the command", |s| s.lines().last_non_empty() == "> /model");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the models", |s| {
        s.contains("large  fake/fake-model") && s.contains("Enter picks")
    });
    // The pick list of /model: Esc keeps the model.
    tmux.keys(&["Escape"]);
    wait_prompt(&tmux);
    tmux.keys(&["look at @sr", "Tab"]);
    tmux.wait_for("the directory", |s| s.contains("> look at @src/"));
    tmux.keys(&["m", "Tab"]);
    tmux.wait_for("the file", |s| s.contains("> look at @src/main.rs"));
    tmux.keys(&["Enter"]);
    wait_turns(&server, 1, &tmux);
    // The completed @path attaches the file: the prompt, then its content.
    let sent = last_prompt(&server);
    assert!(sent.starts_with("look at @src/main.rs\n"), "{sent}");
    assert!(sent.contains("<file path='src/main.rs'>"), "{sent}");
    wait_prompt(&tmux);
    // Arguments: the models of the configuration, option keys and values.
    tmux.keys(&["/model sm", "Tab", "fa", "Tab"]);
    tmux.wait_for("the model", |s| {
        s.lines().last_non_empty() == "> /model small fake/fake-model"
    });
    tmux.keys(&["C-u", "/option progr", "Tab", "f", "Tab"]);
    tmux.wait_for("the option", |s| {
        s.lines().last_non_empty() == "> /option progress false"
    });
    tmux.keys(&["C-u"]);
    // Ambiguous: the candidates are listed.
    tmux.keys(&["/co", "Tab"]);
    let screen = tmux.wait_for("the list", |s| s.contains("/compact"));
    assert!(screen.contains("/cost"), "{screen}");
    tmux.keys(&["C-u", "C-d"]);
}

#[test]
fn a_bracketed_paste_of_50_lines_is_one_prompt() {
    need_tmux!();
    let (server, env) = setup(vec![Reply::text("got it")]);
    let text: String = (1..=50).map(|i| format!("pasted line {i}\n")).collect();
    let file = env.root().join("paste.txt");
    std::fs::write(&file, &text).unwrap();
    let (tmux, _) = start_in_tmux(&env, "paste");
    tmux.wait_for("the prompt", at_prompt);
    let out = tmux.cmd(&["load-buffer", &file.to_string_lossy()]);
    assert!(out.status.success(), "{out:?}");
    tmux.keys(&["about this: "]);
    let out = tmux.cmd(&["paste-buffer", "-p", "-t", "t"]);
    assert!(out.status.success(), "{out:?}");
    tmux.wait_for("the summary", |s| {
        s.contains("> about this: [pasted 50 lines]")
    });
    tmux.keys(&["Enter"]);
    wait_turns(&server, 1, &tmux);
    tmux.wait_for("the answer", |s| s.contains("got it"));
    assert_eq!(turns(&server).len(), 1, "one request");
    assert_eq!(
        last_prompt(&server),
        format!("about this: {}", text.trim_end())
    );
}

#[test]
fn ctrl_c_clears_the_line_and_a_second_quits_with_130() {
    need_tmux!();
    let (server, env) = setup(Vec::new());
    let (tmux, status) = start_in_tmux(&env, "ctrlc");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["never sent", "C-c"]);
    tmux.wait_for("the hint", |s| s.contains("Ctrl-C again"));
    tmux.wait_for("an empty prompt", |s| s.lines().last_non_empty() == ">");
    tmux.keys(&["C-c"]);
    let (code, stty) = wait_exit(&tmux, &status);
    assert_eq!(code, "130", "screen:\n{}", tmux.screen());
    assert_cooked(&stty);
    assert!(turns(&server).is_empty());
}

fn restored_after(sig: i32, name: &str, expect: &str) {
    let (_server, env) = setup(Vec::new());
    let (tmux, status) = start_in_tmux(&env, name);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["half typed"]);
    tmux.wait_for("the text", |s| s.contains("> half typed"));
    // SAFETY: a signal to the crush this test started.
    assert_eq!(unsafe { libc::kill(crush_pid(&tmux), sig) }, 0);
    let (code, stty) = wait_exit(&tmux, &status);
    assert_eq!(code, expect, "screen:\n{}", tmux.screen());
    assert_cooked(&stty);
}

#[test]
fn the_terminal_is_restored_after_sigterm() {
    need_tmux!();
    restored_after(libc::SIGTERM, "term", "143");
}

#[test]
fn the_terminal_is_restored_after_sighup() {
    need_tmux!();
    restored_after(libc::SIGHUP, "hup", "129");
}

#[test]
fn bad_input_and_an_unusable_history_cost_one_warning_each() {
    need_tmux!();
    let (server, env) = setup(vec![Reply::text("fine"), Reply::text("still fine")]);
    // A directory where the history file goes: it can be neither read nor written.
    std::fs::create_dir_all(env.project().join(".crush/history")).unwrap();
    let (tmux, _) = start_in_tmux(&env, "bad");
    let screen = tmux.wait_for("the prompt", at_prompt);
    assert!(
        screen.contains("cannot read the prompt history"),
        "{screen}"
    );
    tmux.keys(&["ok"]);
    tmux.cmd(&["send-keys", "-t", "t", "-H", "ff", "fe", "c3"]);
    tmux.cmd(&["send-keys", "-t", "t", "-H", "1b", "5b", "39", "39", "7a"]);
    tmux.keys(&[" go", "Enter"]);
    wait_turns(&server, 1, &tmux);
    assert_eq!(last_prompt(&server), "ok go");
    wait_prompt(&tmux);
    let screen = tmux.screen();
    assert_eq!(screen.matches("not UTF-8").count(), 1, "{screen}");
    assert_eq!(
        screen.matches("cannot save the prompt history").count(),
        1,
        "{screen}"
    );
    tmux.keys(&["and again", "Enter"]);
    wait_turns(&server, 2, &tmux);
    wait_prompt(&tmux);
    let screen = tmux.screen();
    assert_eq!(
        screen.matches("cannot save the prompt history").count(),
        1,
        "warned once: {screen}"
    );
    // Up still finds this run's entries.
    tmux.keys(&["Up", "Up"]);
    tmux.wait_for("the first entry", |s| {
        s.lines().last_non_empty() == "> ok go"
    });
}

const MARKDOWN: &str = "# Plan\n\nSome **bold** and `code`.\n\n- first\n- second\n\n\
                        ```rust\nfn main() {}\n```\n\n| a | bb |\n|---|---|\n| 1 | 2 |\n";

#[test]
fn answers_are_light_markdown_on_a_terminal_and_plain_with_no_color() {
    need_tmux!();
    let (_server, env) = setup(vec![Reply::text(MARKDOWN), Reply::text(MARKDOWN)]);
    let (tmux, _) = start_in_tmux(&env, "md");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["show me", "Enter"]);
    let screen = tmux.wait_for("the table", |s| s.contains("a │ bb"));
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    for want in [
        "Plan",
        "Some bold and code.",
        "• first",
        "• second",
        "fn main() {}",
        "──┼───",
        "1 │ 2",
    ] {
        assert!(lines.contains(&want), "no line {want:?}:\n{screen}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with("── rust ──")),
        "{screen}"
    );
    assert!(
        !screen.contains("```") && !screen.contains("**"),
        "{screen}"
    );
    drop(tmux);

    let (tmux, _) = start_in_tmux_with(&env, "md-no-color", &[], &[("NO_COLOR", "1")]);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["again", "Enter"]);
    // NO_COLOR: the same layout, without colours (bold stays: it is not a colour).
    let screen = tmux.wait_for("the table", |s| s.contains("1 │ 2"));
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    for want in ["Plan", "Some bold and code.", "• first", "fn main() {}"] {
        assert!(lines.contains(&want), "no line {want:?}:\n{screen}");
    }
    let styled = String::from_utf8_lossy(
        &tmux
            .cmd(&["capture-pane", "-p", "-e", "-t", "t", "-S", "-200"])
            .stdout,
    )
    .into_owned();
    let colour = regex_lite::Regex::new(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;)[0-9;]*m").unwrap();
    assert!(
        !colour.is_match(&styled),
        "a colour with NO_COLOR: {styled:?}"
    );
}

fn bell(tmux: &Tmux) -> bool {
    let out = tmux.cmd(&["display", "-p", "-t", "t", "#{window_bell_flag}"]);
    String::from_utf8_lossy(&out.stdout).trim() == "1"
}

#[test]
fn a_long_turn_and_a_waiting_question_ring_the_bell_unless_disabled() {
    need_tmux!();
    let (server, env) = setup(vec![
        Reply::text("rings"),
        Reply::text("quiet"),
        Reply::tool_call("bash", json!({"command": "touch rung"})),
        Reply::text("done"),
    ]);
    let vars = [("CRUSH_NOTIFY_AFTER", "0")];
    // The default under a multiplexer: the bell, when the turn ends.
    let (tmux, _) = start_in_tmux_with(&env, "bell-end", &[], &vars);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["hello", "Enter"]);
    wait_turns(&server, 1, &tmux);
    wait_prompt(&tmux);
    assert!(bell(&tmux), "no bell at the end of the turn");
    drop(tmux);
    // Disabled: nothing rings.
    let (tmux, _) = start_in_tmux_with(&env, "bell-off", &[], &vars);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["/option notifications disabled", "Enter"]);
    tmux.wait_for("the option", |s| s.contains("for this session only"));
    tmux.keys(&["hello", "Enter"]);
    wait_turns(&server, 2, &tmux);
    wait_prompt(&tmux);
    assert!(!bell(&tmux), "rang while disabled");
    drop(tmux);
    // A question waiting.
    let (tmux, _) = start_in_tmux_with(&env, "bell-ask", &[], &vars);
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["touch it", "Enter"]);
    tmux.wait_for("the question", |s| s.contains("[N]o"));
    assert!(bell(&tmux), "no bell at the question");
    tmux.keys(&["y"]);
    wait_turns(&server, 4, &tmux);
    wait_prompt(&tmux);
}

#[test]
fn from_a_pipe_history_is_listed_but_not_recorded() {
    let (_server, env) = setup(Vec::new());
    let file = env.project().join(".crush/history");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "old one\ntwo\\nlines\nnewest\n").unwrap();
    let out = env.run(&[], Some("/history 2\n/history x\n"));
    out.assert_success();
    assert_eq!(out.stdout, "    2  two ⏎ lines\n    3  newest\n");
    assert!(out.stderr.contains("usage: /history [N]"), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "old one\ntwo\\nlines\nnewest\n"
    );
}

#[test]
fn the_status_line_shows_model_context_and_cost_on_one_line() {
    need_tmux!();
    let (server, env) = setup(vec![
        Reply::text("first"),
        Reply::stall(Duration::from_secs(60)),
    ]);
    let (tmux, _) = start_in_tmux(&env, "status");
    tmux.wait_for("the prompt", at_prompt);
    tmux.keys(&["one", "Enter"]);
    wait_turns(&server, 1, &tmux);
    wait_prompt(&tmux);
    let out = tmux.cmd(&["resize-window", "-t", "t", "-x", "50"]);
    assert!(out.status.success(), "{out:?}");
    tmux.keys(&["two", "Enter"]);
    wait_turns(&server, 2, &tmux);
    // At 50 columns the activity line is cut to the width: "Ctrl-C cancels" may not fit.
    let screen = tmux.wait_for("the status", |s| {
        s.contains("fake-model · 120/200k context")
    });
    // Behind the spinner.
    let is_status = |l: &str| {
        l.split_once(' ')
            .is_some_and(|(_, s)| s.starts_with("fake-model · "))
    };
    let status = screen
        .lines()
        .map(str::trim_end)
        .find(|l| is_status(l))
        .unwrap();
    // The first call's usage (100 in, 20 out) and cost, cut to the width.
    assert!(
        status
            .split_once(' ')
            .is_some_and(|(_, s)| s.starts_with("fake-model · 120/200k context · $0.0012")),
        "{screen}"
    );
    assert!(status.chars().count() < 50, "{status:?}");
    let after: Vec<&str> = screen
        .lines()
        .skip_while(|l| !is_status(l))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(after.is_empty(), "the status wrapped: {after:?}");
    tmux.keys(&["C-c"]);
    tmux.wait_for("the cancel", |s| s.contains("canceled"));
}
