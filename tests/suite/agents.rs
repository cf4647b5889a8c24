//! Custom sub-agents end to end (crush(1) AGENTS): `crush agents list`, model aliases, the
//! agent file's permissions, and that hooks and trust hold inside a sub-agent.

use crate::support::{Dialect, FakeServer, Recorded, Reply, TestEnv};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn agent_file(name: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: Does {name} work.\n{extra}---\n{body}\n")
}

fn put(dir: &std::path::Path, file: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(file), text).unwrap();
}

fn list_json(env: &TestEnv, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["agents", "list", "--json"];
    args.extend(extra);
    let out = env.run(&args, None);
    out.assert_success();
    serde_json::from_str::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn entry<'a>(list: &'a [Value], path_end: &str) -> &'a Value {
    list.iter()
        .find(|e| e["path"].as_str().unwrap_or("").ends_with(path_end))
        .unwrap_or_else(|| panic!("{path_end} not listed: {list:#?}"))
}

/// Asserts that the file ending in `path_end` is listed in `state` for a reason containing `why`.
fn assert_state(list: &[Value], path_end: &str, state: &str, why: &str) {
    let e = entry(list, path_end);
    assert_eq!(e["state"], state, "{e}");
    assert!(e["reason"].as_str().unwrap_or("").contains(why), "{e}");
}

/// The request whose system prompt starts with `start`.
fn request_of(server: &FakeServer, start: &str) -> Recorded {
    server
        .model_requests()
        .into_iter()
        .find(|r| r.system_text().starts_with(start))
        .unwrap_or_else(|| panic!("no request with the system prompt {start:?}"))
}

#[test]
fn agents_list_names_each_of_the_four_folders_and_the_files_not_used() {
    let env = TestEnv::new();
    let server = FakeServer::start();
    env.use_server(&server, Dialect::OpenAi);
    let home = env.home();
    put(
        &env.project().join(".crush/agents"),
        "a.md",
        &agent_file("a", "tools: view\n", "A"),
    );
    put(
        &env.project().join(".claude/agents"),
        "b.md",
        &agent_file("b", "", "B"),
    );
    put(
        &env.config_dir().join("agents"),
        "c.md",
        &agent_file("c", "tools: bash, view\n", "C"),
    );
    put(
        &home.join(".claude/agents"),
        "d.md",
        &agent_file("d", "model: inherit\n", "D"),
    );
    put(
        &home.join(".claude/agents"),
        "dup.md",
        &agent_file("a", "", "again"),
    );
    put(
        &home.join(".claude/agents"),
        "broken.md",
        "---\nname: x\ndescription: [no end\n---\n",
    );
    put(
        &home.join(".claude/agents"),
        "alias.md",
        &agent_file("alias", "model: gpt-9\n", "x"),
    );
    std::fs::write(
        home.join(".claude/agents/latin1.md"),
        b"---\nname: caf\xe9\n---\n",
    )
    .unwrap();
    let list = list_json(&env, &[]);
    let origin = |f: &str| entry(&list, f)["origin"].as_str().unwrap().to_string();
    assert_eq!(origin(".crush/agents/a.md"), "project");
    assert_eq!(origin(".claude/agents/b.md"), "project (Claude Code)");
    assert_eq!(origin("/c.md"), "user");
    assert_eq!(origin("home/.claude/agents/d.md"), "user (Claude Code)");
    assert_eq!(entry(&list, "/c.md")["tools"], json!(["bash", "view"]));
    assert_eq!(entry(&list, "/d.md")["model"], "inherit");
    assert_state(&list, "dup.md", "shadowed", ".crush/agents/a.md");
    assert_state(&list, "broken.md", "rejected", "broken frontmatter");
    assert_state(
        &list,
        "alias.md",
        "rejected",
        "\"gpt-9\" is not inherit, sonnet, opus, haiku",
    );
    assert_state(&list, "latin1.md", "rejected", "not UTF-8");
    let text = env.run(&["agents", "list"], None);
    text.assert_success();
    assert!(
        text.stdout.contains("a  [project]  active\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("a  [user (Claude Code)]  shadowed\n"),
        "{}",
        text.stdout
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_model_alias_runs_the_newest_model_of_its_family_on_the_active_provider() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "agent",
            json!({"prompt": "Look", "subagent_type": "looker"}),
        ),
        Reply::text("Seen."),
        Reply::text("Done."),
    ]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    let models = cfg["providers"]["fake"]["models"].as_array_mut().unwrap();
    for id in [
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-5",
        "claude-sonnet-5-fast",
    ] {
        models.push(json!({"id": id, "context_window": 200000, "default_max_tokens": 4096}));
    }
    env.write_config(&cfg);
    let dir = env.config_dir().join("agents");
    put(
        &dir,
        "looker.md",
        &agent_file("looker", "model: sonnet\n", "You look closely."),
    );
    put(&dir, "big.md", &agent_file("big", "model: opus\n", "x"));
    let list = list_json(&env, &[]);
    assert_eq!(
        entry(&list, "looker.md")["resolved_model"],
        "fake/claude-sonnet-5"
    );
    assert_state(
        &list,
        "big.md",
        "rejected",
        "provider fake has no opus model",
    );
    let out = env.run(&["run", "look"], None);
    out.assert_success();
    assert_eq!(out.stdout, "Done.\n");
    let main = request_of(&server, "You are crush");
    assert_eq!(main.body["model"], "fake-model");
    assert!(
        !main.system_text().contains("- big:"),
        "{}",
        main.system_text()
    );
    assert_eq!(
        request_of(&server, "You look closely.").body["model"],
        "claude-sonnet-5"
    );
}

fn deny_hook(env: &TestEnv) -> String {
    let p = env.root().join("deny.sh");
    std::fs::write(&p, "#!/bin/sh\necho 'no shell for agents' >&2\nexit 2\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

fn bash_in_agent() -> FakeServer {
    FakeServer::with_script(vec![
        Reply::tool_call(
            "agent",
            json!({"prompt": "Touch", "subagent_type": "toucher"}),
        ),
        Reply::tool_call("bash", json!({"command": "touch ran.txt"})),
        Reply::text("Tried."),
        Reply::text("Done."),
    ])
}

#[test]
fn permissions_allowed_tools_lets_the_agent_run_what_its_parent_would_ask() {
    let env = TestEnv::new();
    let server = bash_in_agent();
    env.use_server(&server, Dialect::OpenAi);
    put(
        &env.config_dir().join("agents"),
        "toucher.md",
        &agent_file(
            "toucher",
            "tools: bash\npermissions:\n  allowed_tools: bash\n",
            "You touch files.",
        ),
    );
    // Without -y this run may not ask: only the agent's own rule lets bash run.
    let out = env.run(&["run", "touch"], None);
    out.assert_success();
    assert!(env.project().join("ran.txt").exists(), "{}", out.stderr);
}

#[test]
fn a_deny_hook_on_bash_still_denies_inside_the_sub_agent() {
    let env = TestEnv::new();
    let server = bash_in_agent();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] =
        json!({"PreToolUse": [{"name": "guard", "matcher": "^bash$", "command": deny_hook(&env)}]});
    env.write_config(&cfg);
    put(
        &env.config_dir().join("agents"),
        "toucher.md",
        &agent_file(
            "toucher",
            "tools: bash\npermissions:\n  allowed_tools: bash\n",
            "You touch files.",
        ),
    );
    let out = env.run(&["run", "-y", "touch"], None);
    out.assert_success();
    assert!(
        !env.project().join("ran.txt").exists(),
        "the hook was bypassed"
    );
    let sub = server
        .model_requests()
        .into_iter()
        .rfind(|r| r.system_text().starts_with("You touch files."))
        .unwrap();
    let (_, text, _) = sub.tool_results()[0].clone();
    assert!(text.contains("no shell for agents"), "{text}");
}

#[test]
fn an_untrusted_projects_agent_that_widens_tools_is_rejected_with_the_reason() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    env.use_server(&server, Dialect::OpenAi);
    let dir = env.project().join(".crush/agents");
    put(
        &dir,
        "runner.md",
        &agent_file("runner", "tools: view, bash\n", "r"),
    );
    put(
        &dir,
        "reader.md",
        &agent_file("reader", "tools: view, grep\n", "r"),
    );
    let list = list_json(&env, &[]);
    assert_state(&list, "runner.md", "rejected", "the project is not trusted");
    assert_state(&list, "runner.md", "rejected", "tools bash");
    assert_eq!(entry(&list, "reader.md")["state"], "active");
    let out = env.run(&["run", "hi"], None);
    out.assert_success();
    let system = server.request(0).system_text();
    assert!(
        system.contains("- reader:") && !system.contains("- runner:"),
        "{system}"
    );
    // Trusted for this run, it loads.
    assert_eq!(
        entry(&list_json(&env, &["--trust"]), "runner.md")["state"],
        "active"
    );
}

#[test]
fn system_prompt_flags_replace_the_prompt_and_debug_prompt_prints_what_is_sent() {
    let env = TestEnv::new();
    let server = FakeServer::with_script(vec![Reply::text("ok"), Reply::text("ok")]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"system_prompt_file": "~/nowhere.md"});
    env.write_config(&cfg);
    // The flag replaces the file the configuration names (which would be an error).
    let out = env.run(&["run", "--system-prompt", "You are terse.", "hi"], None);
    out.assert_success();
    assert!(
        server
            .request(0)
            .system_text()
            .starts_with("You are terse.\n")
    );
    env.write_project_file("mine.md", "Only haiku.\n");
    let debug = env.run(
        &["debug", "prompt", "--system-prompt-file", "mine.md"],
        None,
    );
    debug.assert_success();
    assert!(
        debug.stdout.starts_with("Only haiku.\n"),
        "{}",
        debug.stdout
    );
    assert!(
        debug.stderr.contains("tools offered: agent, "),
        "{}",
        debug.stderr
    );
    let out = env.run(&["run", "--system-prompt-file", "mine.md", "hi"], None);
    out.assert_success();
    assert_eq!(server.request(1).system_text(), debug.stdout);
    let both = env.run(
        &[
            "run",
            "--system-prompt",
            "a",
            "--system-prompt-file",
            "b",
            "hi",
        ],
        None,
    );
    both.assert_code(2);
}
