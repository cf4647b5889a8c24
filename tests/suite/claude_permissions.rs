//! Claude Code's permission rules (`permissions.allow`/`ask`/`deny` of `.claude/settings.json`,
//! `.claude/settings.local.json` and `~/.claude/settings.json`), in the shapes published
//! setups use, applied by the real binary to the fake model's tool calls.

use crate::support::{Dialect, FakeServer, Reply, TestEnv, ToolCall};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn write(env: &TestEnv, rel: &str, v: &Value) {
    env.write_project_file(rel, &serde_json::to_string_pretty(v).unwrap());
}

fn user_settings(env: &TestEnv, v: &Value) {
    let p = env.home().join(".claude/settings.json");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, v.to_string()).unwrap();
}

/// One step calling every tool of `calls`, then a final answer: the exit status and the tool
/// results stored in the session, in order. A call that needed a permission nobody could give
/// ends the run with 3; a deny rule's refusal goes back to the model and the run goes on.
fn results(env: &TestEnv, calls: Vec<ToolCall>, args: &[&str]) -> (i32, Vec<String>) {
    let server = FakeServer::with_script(vec![Reply::tool_calls(calls)]);
    // The final answer, when the run gets that far.
    server.route_when(|r| !r.tool_results().is_empty(), vec![Reply::text("done")]);
    env.use_server(&server, Dialect::OpenAi);
    let mut all = vec!["--trust", "run", "-q"];
    all.extend(args);
    all.push("go");
    let bin = env.root().join("bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = env.run_with_env(&all, &[("PATH", &path)]);
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let got = env
        .stored_parts(&id)
        .into_iter()
        .filter(|p| p["type"] == "tool_result")
        .map(|p| p["data"]["content"].as_str().unwrap_or("").to_string())
        .collect();
    (out.code, got)
}

/// A fake `npm` on the PATH the tests give crush, so an allowed `npm test` visibly ran.
fn fake_npm(env: &TestEnv) {
    let p = env.root().join("bin/npm");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, "#!/bin/sh\necho \"npm ran: $*\"\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn bash(cmd: &str) -> ToolCall {
    ToolCall::new("bash", json!({ "command": cmd }))
}

#[test]
fn bash_prefix_rules_allow_that_command_only_and_deny_wins_even_with_yolo() {
    let env = TestEnv::new();
    fake_npm(&env);
    write(
        &env,
        ".claude/settings.json",
        &json!({"permissions": {"allow": ["Bash(npm test:*)", "Bash(rm:*)"], "deny": ["Bash(rm:*)"]}}),
    );
    env.write_project_file("keep.txt", "x");
    // Allowed, then denied by a rule (the run goes on): exit 0.
    let (code, r) = results(
        &env,
        vec![bash("npm test -- --ci"), bash("rm keep.txt")],
        &[],
    );
    assert_eq!(code, 0, "{r:?}");
    assert!(r[0].contains("npm ran: test -- --ci"), "{r:?}");
    assert!(
        r[1].contains("Permission denied: permissions.deny \"Bash(rm:*)\""),
        "{r:?}"
    );
    assert!(env.project().join("keep.txt").exists());
    // Another command after the allowed one, or another npm command, needs permission.
    for cmd in ["npm test && touch pwned", "npm install left-pad"] {
        let (code, r) = results(&env, vec![bash(cmd)], &[]);
        assert_eq!(code, 3, "{cmd}: {r:?}");
        assert!(r.last().unwrap().contains("may not ask"), "{cmd}: {r:?}");
    }
    assert!(!env.project().join("pwned").exists());
    // --yolo allows everything but what a deny rule refuses.
    let (code, r) = results(&env, vec![bash("cd . && rm keep.txt")], &["-y"]);
    assert_eq!(code, 0);
    assert!(r.last().unwrap().contains("refuses this call"), "{r:?}");
    assert!(env.project().join("keep.txt").exists());
}

#[test]
fn read_deny_rules_refuse_the_reading_tools_inside_the_project() {
    let env = TestEnv::new();
    env.write_project_file(".env", "SECRET=hunter2\n");
    env.write_project_file("notes.txt", "hello\n");
    write(
        &env,
        ".claude/settings.local.json",
        &json!({"permissions": {"deny": ["Read(./.env)"]}}),
    );
    let (code, r) = results(
        &env,
        vec![
            ToolCall::new("view", json!({"file_path": ".env"})),
            ToolCall::new("view", json!({"file_path": "notes.txt"})),
        ],
        &[],
    );
    assert_eq!(code, 0, "{r:?}");
    assert!(r[0].contains("Permission denied") && r[0].contains("Read(./.env)"));
    assert!(!r[0].contains("hunter2"), "{}", r[0]);
    assert!(r[1].contains("hello"), "{}", r[1]);
}

#[test]
fn read_deny_rules_leave_covered_files_out_of_folder_wide_grep_glob_and_ls() {
    let env = TestEnv::new();
    env.write_project_file(".env", "SECRET=hunter2\n");
    env.write_project_file("secrets/key.txt", "hunter2 again\n");
    env.write_project_file("notes.txt", "a hunter was here\n");
    write(
        &env,
        ".claude/settings.json",
        &json!({"permissions": {"deny": ["Read(./.env)", "Read(./secrets/**)"]}}),
    );
    let server = FakeServer::with_script(vec![Reply::tool_calls(vec![
        ToolCall::new("grep", json!({"pattern": "hunter", "path": "."})),
        // Hidden files are searched when the include names them.
        ToolCall::new("grep", json!({"pattern": "hunter", "include": ".env*"})),
        ToolCall::new("glob", json!({"pattern": "**/*"})),
        ToolCall::new("glob", json!({"pattern": "**/.env"})),
        ToolCall::new("ls", json!({"path": "."})),
    ])]);
    server.route_when(|r| !r.tool_results().is_empty(), vec![Reply::text("done")]);
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["--trust", "run", "-q", "go"], None)
        .assert_success();
    // What the model was sent.
    let sent: Vec<String> = server
        .request(1)
        .tool_results()
        .into_iter()
        .map(|(_, text, _)| text)
        .collect();
    assert_eq!(sent.len(), 5, "{sent:#?}");
    for (i, text) in sent.iter().enumerate() {
        for secret in ["hunter2", ".env", "secrets"] {
            assert!(!text.contains(secret), "result {i} shows {secret}: {text}");
        }
        assert!(text.contains("left out"), "result {i} says nothing: {text}");
    }
    for i in [0, 2, 4] {
        assert!(sent[i].contains("notes.txt"), "result {i}: {}", sent[i]);
    }
    assert!(sent[0].contains("a hunter was here"), "{}", sent[0]);
}

#[test]
fn the_users_edit_rules_cover_edit_write_and_multiedit_but_not_guarded_files() {
    let env = TestEnv::new();
    // Relative patterns start from the working directory, as in Claude Code.
    user_settings(
        &env,
        &json!({"permissions": {"allow": ["Edit(src/**)", "Edit(.crushrc)"]}}),
    );
    env.write_project_file("src/a.rs", "fn a() {}\n");
    let (code, r) = results(
        &env,
        vec![
            ToolCall::new(
                "write",
                json!({"file_path": "src/new.rs", "content": "fn n() {}\n"}),
            ),
            ToolCall::new("view", json!({"file_path": "src/a.rs"})),
            ToolCall::new(
                "edit",
                json!({"file_path": "src/a.rs", "old_string": "fn a", "new_string": "fn b"}),
            ),
        ],
        &[],
    );
    assert_eq!(code, 0, "{r:?}");
    assert!(env.project().join("src/new.rs").exists(), "{r:?}");
    assert_eq!(env.read_project_file("src/a.rs"), "fn b() {}\n", "{r:?}");
    // Outside the rule: asked, and nobody can answer.
    let (code, r) = results(
        &env,
        vec![ToolCall::new(
            "write",
            json!({"file_path": "README.md", "content": "x"}),
        )],
        &[],
    );
    assert_eq!(code, 3, "{r:?}");
    assert!(!env.project().join("README.md").exists());
    // A guarded file stays guarded whatever an allow rule says.
    let (code, r) = results(
        &env,
        vec![ToolCall::new(
            "write",
            json!({"file_path": ".crushrc", "content": "option debug\n"}),
        )],
        &[],
    );
    assert_eq!(code, 3, "{r:?}");
    assert!(!env.project().join(".crushrc").exists());
}

#[test]
fn webfetch_domain_deny_rules_refuse_before_any_request_and_rules_are_shown() {
    let env = TestEnv::new();
    write(
        &env,
        ".claude/settings.json",
        &json!({"permissions": {"deny": ["WebFetch(domain:example.com)"],
                "allow": ["WebFetch(https://docs.rs/*)"], "ask": ["Bash(git push:*)"]}}),
    );
    let (code, r) = results(
        &env,
        vec![ToolCall::new(
            "fetch",
            json!({"url": "https://api.example.com/x", "format": "text"}),
        )],
        &["-y"],
    );
    assert_eq!(code, 0, "{r:?}");
    assert!(r[0].contains("WebFetch(domain:example.com)"), "{r:?}");
    let out = env.run(&["--trust", "config", "show", "--origin"], None);
    out.assert_success();
    let file = env.project().join(".claude/settings.json");
    for want in [
        format!(
            "claude permissions.deny = \"WebFetch(domain:example.com)\"\t# {}",
            file.display()
        ),
        format!(
            "claude permissions.ask = \"Bash(git push:*)\"\t# {}",
            file.display()
        ),
    ] {
        assert!(out.stdout.contains(&want), "{want}\n{}", out.stdout);
    }
    // A rule crush cannot apply is named, not silently dropped.
    let check = env.run(&["--trust", "config", "check"], None);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check.stdout.contains(&format!(
            "{}: permissions.allow \"WebFetch(https://docs.rs/*)\" is not applied",
            file.display()
        )),
        "{}",
        check.stdout
    );
    let json_out = env.run(&["--trust", "config", "show", "--origin", "--json"], None);
    let v: Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert_eq!(v["claude_permissions"][0]["effect"], "deny");
    assert_eq!(
        v["claude_permissions"][0]["rule"],
        "WebFetch(domain:example.com)"
    );
}

#[test]
fn an_untrusted_projects_rules_do_nothing() {
    let env = TestEnv::new();
    fake_npm(&env);
    write(
        &env,
        ".claude/settings.json",
        &json!({"permissions": {"allow": ["Bash(npm test:*)"]}}),
    );
    let bin = env.root().join("bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let server = FakeServer::with_script(vec![Reply::tool_calls(vec![bash("npm test")])]);
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run_with_env(&["run", "-q", "go"], &[("PATH", &path)]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("refused bash"), "{}", out.stderr);
}

/// Published deny lists put the `*` where they like (`Bash(git push --force*)`,
/// `Bash(*--no-verify*)`); such a rule refuses what it covers, `--yolo` or not, and
/// `config check` has nothing to say about it.
#[test]
fn bash_rules_with_a_star_inside_deny_what_they_cover_even_with_yolo() {
    let env = TestEnv::new();
    fake_npm(&env);
    write(
        &env,
        ".claude/settings.json",
        &json!({"permissions": {"deny": ["Bash(*--no-verify*)", "Bash(npm publish --tag*)"]}}),
    );
    let (code, r) = results(
        &env,
        vec![
            bash("npm run lint --no-verify"),
            bash("npm publish --tag=next"),
            bash("npm test"),
        ],
        &["-y"],
    );
    assert_eq!(code, 0, "{r:?}");
    assert!(
        r[0].contains("permissions.deny \"Bash(*--no-verify*)\""),
        "{r:?}"
    );
    assert!(
        r[1].contains("permissions.deny \"Bash(npm publish --tag*)\""),
        "{r:?}"
    );
    assert!(r[2].contains("npm ran: test"), "{r:?}");
    let check = env.run(&["--trust", "config", "check"], None);
    check.assert_success();
    assert!(!check.stdout.contains("not applied"), "{}", check.stdout);
}
