//! The documentation holds: README.md's shell examples run as written against the fake model
//! server, its pointers into the man page and the man page's own cross-references name real
//! sections, and the README's test command is the one CI runs (CONTRIBUTING.md, "The README's
//! examples").

use crate::support::env::run_command;
use crate::support::{FakeServer, RUN_TIMEOUT, TestEnv};
use serde_json::Value;
use std::path::Path;

/// Fence attributes that keep a block from being run, and why.
const SKIP: &[&str] = &[
    "needs-key",    // needs a real provider's API key
    "needs-server", // needs a real model server or the network
    "builds",       // builds or installs crush: the test runs the build it was given
];

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A fenced block of a Markdown file: the line of its opening fence, its language, the words
/// after the language, its text.
struct Block {
    line: usize,
    lang: String,
    attrs: Vec<String>,
    body: String,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let mut words = info.split_whitespace().map(str::to_string);
                open = Some(Block {
                    line: i + 1,
                    lang: words.next().unwrap_or_default(),
                    attrs: words.collect(),
                    body: String::new(),
                });
            }
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some(b), None) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md: a fenced block is not closed");
    out
}

/// The commands of a `sh` or `console` block (in `console`, the lines after `$ `), backslash
/// continuations joined, each with the exit code its comment promises (`# exit N`, else 0).
fn commands(block: &Block) -> Vec<(String, i32)> {
    let exit = regex_lite::Regex::new(r"#\s+exit (\d+)\b").unwrap();
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in block.body.lines() {
        let line = if block.lang == "console" {
            match line.strip_prefix("$ ") {
                Some(l) => l,
                None if pending.is_empty() => continue,
                None => line,
            }
        } else {
            line
        };
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        pending.push_str(line);
        let command = std::mem::take(&mut pending);
        let trimmed = command.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let code = exit.captures(trimmed).map_or(0, |c| c[1].parse().unwrap());
        out.push((trimmed.to_string(), code));
    }
    out
}

/// README.md's first-session configuration, pointed at `server` instead of ollama.
fn first_session_config(readme: &str, server: &FakeServer) -> Value {
    let local = "http://127.0.0.1:11434/v1";
    let block = blocks(readme)
        .into_iter()
        .find(|b| b.lang == "json" && b.body.contains(local))
        .expect("README.md has the local server's crush.json");
    let text = block.body.replace(local, &server.openai_base_url());
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("README.md:{}: not JSON: {e}", block.line))
}

#[test]
fn the_readme_shell_examples_run_as_written_against_the_fake_server() {
    let readme = read("README.md");
    let server = FakeServer::always_text("ok");
    let env = TestEnv::new();
    env.write_config(&first_session_config(&readme, &server));
    // `crush` in an example is the binary under test.
    let bin = Path::new(env!("CARGO_BIN_EXE_crush"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (mut ran, mut skipped) = (0, 0);
    for block in blocks(&readme) {
        if block.lang != "sh" && block.lang != "console" {
            continue;
        }
        for a in &block.attrs {
            assert!(
                SKIP.contains(&a.as_str()),
                "README.md:{}: unknown fence attribute {a:?} (known: {SKIP:?})",
                block.line
            );
        }
        if !block.attrs.is_empty() {
            skipped += 1;
            continue;
        }
        for (command, code) in commands(&block) {
            let before = server.requests().len();
            let mut cmd = env.crush_at(Path::new("bash"));
            cmd.args(["-c", &command]).env("PATH", &path);
            let out = run_command(cmd, None, RUN_TIMEOUT);
            assert_eq!(
                out.code, code,
                "README.md:{}: `{command}` exited {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                block.line, out.code, out.stdout, out.stderr
            );
            if command.contains("crush run") {
                assert!(
                    server.requests().len() > before,
                    "README.md:{}: `{command}` reached no model",
                    block.line
                );
                if command.contains("--json") {
                    for line in out.stdout.lines() {
                        serde_json::from_str::<Value>(line).unwrap_or_else(|e| {
                            panic!("README.md:{}: `{command}`: {line}: {e}", block.line)
                        });
                    }
                } else {
                    assert_eq!(
                        out.stdout.trim(),
                        "ok",
                        "README.md:{}: `{command}`",
                        block.line
                    );
                }
            }
            ran += 1;
        }
    }
    assert!(ran >= 10, "only {ran} README commands ran");
    assert!(
        skipped >= 2,
        "the key and build blocks are marked ({skipped} skipped)"
    );
    // The sessions the examples made are there.
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    assert!(
        sessions.as_array().is_some_and(|s| s.len() >= 5),
        "{sessions}"
    );
}

/// The man page's sections: each `.SH` with the `.SS` under it.
fn man_sections(page: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in page.lines() {
        if let Some(name) = line.strip_prefix(".SH ") {
            out.push((name.trim_matches('"').to_string(), Vec::new()));
        } else if let Some(name) = line.strip_prefix(".SS ")
            && let Some(last) = out.last_mut()
        {
            last.1.push(name.trim_matches('"').to_string());
        }
    }
    out
}

/// Whether `reference` ("SECURITY", or "SECURITY" followed by ", Sandbox ...") names a
/// section of `sections`: the section, and the subsection the text after a comma starts with.
fn names_a_section(sections: &[(String, Vec<String>)], name: &str, after: &str) -> bool {
    let Some((_, subs)) = sections.iter().find(|(s, _)| s == name) else {
        return false;
    };
    match after.strip_prefix(", ") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_uppercase()) => {
            subs.iter().any(|s| rest.starts_with(s.as_str()))
        }
        _ => true,
    }
}

/// The running text of a roff page: macros and font escapes dropped, `\-` as `-`.
fn man_text(page: &str) -> String {
    let mut text = String::new();
    for line in page.lines() {
        let line = match line.split_once(' ') {
            Some((m, rest)) if m.starts_with('.') && !m.starts_with(".S") => rest,
            _ if line.starts_with('.') => continue,
            _ => line,
        };
        text.push_str(line);
        text.push(' ');
    }
    text.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
        .replace('"', "")
}

#[test]
fn every_cross_reference_of_the_man_page_names_a_real_section() {
    let page = read("man/crush.1");
    let sections = man_sections(&page);
    assert!(sections.len() > 20, "{sections:?}");
    let text = man_text(&page);
    // "see HOOKS", "see USAGE AND COST, Budget", "SECURITY below": upper-case words, not a
    // variable (CRUSH_SHELL) or a placeholder inside a longer word.
    let reference =
        regex_lite::Regex::new(r"(?:[Ss]ee |\()([A-Z]{3,}(?: (?:[A-Z]{2,}|\([A-Z]+\)))*)").unwrap();
    let below = regex_lite::Regex::new(r"([A-Z]{3,}(?: [A-Z]{2,})*) (?:below|above)").unwrap();
    let mut bad = Vec::new();
    let mut checked = 0;
    for caps in reference
        .captures_iter(&text)
        .chain(below.captures_iter(&text))
    {
        let m = caps.get(1).unwrap();
        let after = &text[m.end()..];
        if after.starts_with(|c: char| c == '_' || c.is_ascii_alphanumeric()) {
            continue; // CRUSH_SHELL, ANTHROPIC_API_KEY
        }
        let name = m.as_str();
        // Placeholders in parentheses ((PATTERN), (SIGINT)) are not references.
        let whole = &text[caps.get(0).unwrap().start()..];
        if whole.starts_with('(') && !sections.iter().any(|(s, _)| name.starts_with(s.as_str())) {
            continue;
        }
        checked += 1;
        if !names_a_section(&sections, name, after) {
            bad.push(format!("{name}{}", &after[..after.len().min(30)]));
        }
    }
    assert!(checked > 20, "only {checked} references found");
    assert!(bad.is_empty(), "references to no section: {bad:#?}");
}

#[test]
fn the_readme_points_into_man_page_sections_that_exist() {
    let readme = read("README.md");
    let sections = man_sections(&read("man/crush.1"));
    let table = readme
        .split("## The manual")
        .nth(1)
        .expect("README.md has the manual's table");
    let mut pointers = 0;
    for row in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains("---"))
    {
        let cell = row.trim_end_matches(" |").rsplit(" | ").next().unwrap();
        if cell.contains("section") {
            continue; // the header
        }
        for name in cell.split(", ") {
            pointers += 1;
            assert!(
                names_a_section(&sections, name, ""),
                "README.md points to `man crush`, {name}: no such section"
            );
        }
    }
    assert!(pointers >= 15, "{pointers} pointers");
    // Every section of the man page is reachable from the table.
    for (name, _) in &sections {
        if !["NAME", "SYNOPSIS", "DESCRIPTION"].contains(&name.as_str()) {
            assert!(
                table.contains(name.as_str()),
                "README.md's table misses {name}"
            );
        }
    }
}

#[test]
fn the_readme_test_command_is_what_ci_and_make_run() {
    let readme = read("README.md");
    let build = blocks(&readme)
        .into_iter()
        .find(|b| b.lang == "sh" && b.attrs.iter().any(|a| a == "builds"))
        .expect("README.md has its build block");
    assert!(
        commands(&build)
            .iter()
            .any(|(c, _)| c.starts_with("make test ") || c == "make test"),
        "{}",
        build.body
    );
    assert!(
        read(".ci/run").lines().any(|l| l.trim() == "make test"),
        ".ci/run runs make test"
    );
    let makefile = read("Makefile");
    let target = makefile
        .split("\ntest:\n")
        .nth(1)
        .expect("Makefile has a test target");
    assert!(target.starts_with("\t$(CARGO) test"), "{target}");
}
