//! The shell crush runs scripts with (crush(1) ENVIRONMENT, CRUSH_SHELL): bash when it is on
//! PATH, else /bin/sh with a notice; the bash tool, hooks, crushrc files, `$(...)` values and
//! the REPL's `!command` all use it.

use crate::support::env::run_command;
use crate::support::{Dialect, FakeServer, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::Path;

fn have_bash() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bash").is_file()))
}

fn run_with(env: &TestEnv, args: &[&str], vars: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut cmd = env.crush();
    cmd.args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    run_command(cmd, stdin, crate::support::RUN_TIMEOUT)
}

/// What bash reads one way and dash another: `[[ ]]`, arrays, brace expansion, pipefail.
const BASH_ONLY: &str = "set -o pipefail; a=(x y); [[ ${a[1]} == y ]] && echo {p,q}";

#[test]
fn the_bash_tool_runs_bash_and_says_so() {
    if !have_bash() {
        eprintln!("bash is not on PATH: skipped");
        return;
    }
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": BASH_ONLY})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "-y", "go"], None).assert_success();
    let results = server.request(1).tool_results();
    assert!(results[0].1.starts_with("p q\n"), "{results:?}");
    let tools = server.request(0).body["tools"].clone();
    let bash = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "bash")
        .unwrap()["function"]["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(bash.contains("The shell is bash"), "{bash}");
}

#[test]
fn crush_shell_chooses_the_shell_and_the_description_follows() {
    if !Path::new("/bin/dash").exists() {
        eprintln!("dash is not installed: skipped");
        return;
    }
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo ${BASH_VERSION:-no-bash}"})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    run_with(
        &env,
        &["run", "-q", "-y", "go"],
        &[("CRUSH_SHELL", "/bin/dash")],
        None,
    )
    .assert_success();
    let results = server.request(1).tool_results();
    assert!(results[0].1.starts_with("no-bash\n"), "{results:?}");
    let body = server.request(0).body_text;
    assert!(body.contains("/bin/dash -c"), "{body}");
    assert!(body.contains("portable POSIX sh"), "{body}");
}

#[test]
fn go_crushs_readme_crushrc_takes_the_right_branch() {
    if !have_bash() {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(
        env.config_dir().join("crushrc"),
        "if [[ $CRUSH_VERSION == *.* ]]; then\n  option initialize-as BASH.md\nelse\n  option initialize-as SH.md\nfi\n",
    )
    .unwrap();
    let out = env.run(&["config", "show", "--json"], None);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["options"]["initialize_as"], "BASH.md", "{}", out.stderr);
}

#[test]
fn an_inline_bash_deny_hook_denies_and_under_sh_it_warns_and_fails_closed() {
    let env = TestEnv::new();
    let hook = r#"[[ $CRUSH_TOOL_INPUT_COMMAND == rm* ]] && { echo "no rm" >&2; exit 2; }"#;
    let cfg = |fail_closed: bool| {
        json!({"hooks": {"PreToolUse": [
            {"name": "no-rm", "matcher": "^bash$", "command": hook, "fail_closed": fail_closed}
        ]}})
    };
    let test = [
        "hooks",
        "test",
        "PreToolUse",
        "--tool",
        "bash",
        "--input",
        r#"{"command":"rm -rf x"}"#,
    ];
    env.write_config(&cfg(false));
    if have_bash() {
        let out = env.run(&test, None);
        out.assert_code(3);
        assert!(out.stdout.contains("reason: no rm"), "{}", out.stdout);
    }
    if !Path::new("/bin/dash").exists() {
        return;
    }
    // Under a shell without [[, the hook cannot run: a warning naming it, never a silent pass.
    let dash = [("CRUSH_SHELL", "/bin/dash")];
    let out = run_with(&env, &test, &dash, None);
    out.assert_success();
    assert!(
        out.stdout.contains(
            "warning: PreToolUse hook 'no-rm': /bin/dash could not run it (exit 127: a command was not found"
        ),
        "{}",
        out.stdout
    );
    env.write_config(&cfg(true));
    let out = run_with(&env, &test, &dash, None);
    out.assert_code(3);
    assert!(
        out.stdout.contains("it fails closed, so it denies"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_hook_that_cannot_run_is_a_warning_line_in_crush_run_even_when_quiet() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo ran > ran.txt"})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": [
        {"name": "guard", "command": "no-such-checker-crush-test --strict", "fail_closed": true}
    ]});
    env.write_config(&cfg);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    assert!(
        out.stderr.contains("warning: PreToolUse hook 'guard'")
            && out.stderr.contains("it fails closed, so it denies"),
        "{}",
        out.stderr
    );
    assert!(!env.project().join("ran.txt").exists());
}

#[test]
fn command_substitutions_and_bang_commands_use_the_same_shell() {
    if !have_bash() {
        return;
    }
    // A `$(...)` value: the key the server receives was made by bash.
    let server = FakeServer::with_script(vec![Reply::text("hello")]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["providers"]["fake"]["api_key"] = json!("$(a=(k1 k2); echo ${a[1]}-{x,y})");
    env.write_config(&cfg);
    env.run(&["run", "-q", "hi"], None).assert_success();
    assert_eq!(
        server.request(0).header("authorization"),
        Some("Bearer k2-x k2-y")
    );
    // The REPL's !command.
    let out = env.run(&[], Some(&format!("!{BASH_ONLY}\n")));
    out.assert_success();
    assert_eq!(out.stdout, "p q\n", "{}", out.stderr);
}

#[test]
fn without_bash_on_path_scripts_run_with_sh_and_one_notice_says_so() {
    let env = TestEnv::new();
    let empty = env.root().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    env.write_config(&json!({"hooks": {"UserPromptSubmit": [
        {"command": "echo \"{\\\"context\\\": \\\"shell=${BASH_VERSION:+bash}sh\\\"}\""},
        {"command": "echo \"{\\\"context\\\": \\\"again=${BASH_VERSION:+bash}sh\\\"}\""}
    ]}}));
    let out = run_with(
        &env,
        &["hooks", "test", "UserPromptSubmit", "--prompt", "x"],
        &[("PATH", &empty.to_string_lossy())],
        None,
    );
    out.assert_success();
    assert!(out.stdout.contains("shell=sh"), "{}", out.stdout);
    assert_eq!(
        out.stderr.matches("bash is not on PATH").count(),
        1,
        "{}",
        out.stderr
    );
}

#[test]
fn the_bash_tool_gets_no_secrets_hooks_get_them_and_provider_keys_are_masked() {
    let key = "sk-fake-provider-key-0123456789";
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo \"[$ANTHROPIC_API_KEY][$MY_TOKEN][$GITHUB_TOKEN][$PLAIN]\"; cat key.txt"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.write_project_file("key.txt", &format!("the key is {key}\n"));
    let seen_by_hook = env.root().join("hook-saw");
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["providers"]["fake"]["api_key"] = json!(key);
    cfg["options"] = json!({"shell_env_allow": ["my_*"]});
    let payload = env.root().join("post-payload");
    cfg["hooks"] = json!({"PreToolUse": [
        {"command": format!("echo \"$ANTHROPIC_API_KEY\" > {}", seen_by_hook.display())}
    ], "PostToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": format!("cat > {}", payload.display())}]}
    ]});
    env.write_config(&cfg);
    let out = run_with(
        &env,
        &["run", "-q", "-y", "go"],
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-user-secret-value"),
            ("MY_TOKEN", "allowed-token-value"),
            ("GITHUB_TOKEN", "ghp_user_secret_value"),
            ("PLAIN", "visible"),
        ],
        None,
    );
    out.assert_success();
    let result = &server.request(1).tool_results()[0].1;
    assert!(
        result
            .starts_with("[][allowed-token-value][][visible]\nthe key is [masked fake API key]\n"),
        "{result}"
    );
    assert!(!result.contains(key));
    // Hooks are the user's: they get the whole environment.
    assert_eq!(
        std::fs::read_to_string(&seen_by_hook).unwrap(),
        "sk-ant-user-secret-value\n"
    );
    // So is what a hook gets as Claude Code's tool_response.
    let payload = std::fs::read_to_string(&payload).unwrap();
    assert!(
        payload.contains("[masked fake API key]") && !payload.contains(key),
        "{payload}"
    );
    // The stored result is masked too.
    for f in std::fs::read_dir(env.project().join(".crush"))
        .unwrap()
        .flatten()
    {
        if f.file_name().to_string_lossy().starts_with("crush.db") {
            let bytes = std::fs::read(f.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(key),
                "the key reached {}",
                f.path().display()
            );
        }
    }
}

#[test]
fn no_environment_a_bash_command_can_read_holds_a_secret() {
    // Every ancestor's /proc/PID/environ, from the job server up: what a command could read
    // there is what crush was started with.
    let walk = "p=$PPID; : > envs; while [ \"$p\" -gt 1 ]; do echo \"== $p\" >> envs; \
                cat /proc/$p/environ >> envs 2>/dev/null; \
                p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status); done";
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": walk})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = run_with(
        &env,
        &["run", "-q", "-y", "go"],
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-user-secret-value"),
            ("GITHUB_TOKEN", "ghp_user_secret_value"),
        ],
        None,
    );
    out.assert_success();
    let seen = std::fs::read(env.project().join("envs")).unwrap();
    let seen = String::from_utf8_lossy(&seen);
    // The job server and crush at least.
    assert!(seen.matches("== ").count() >= 2, "{seen}");
    for secret in ["sk-ant-user-secret-value", "ghp_user_secret_value"] {
        assert!(!seen.contains(secret), "{secret} found in {seen}");
    }
}

#[test]
fn printenv_and_env_need_permission() {
    for cmd in ["printenv", "env", "printenv ANTHROPIC_API_KEY"] {
        let server =
            FakeServer::with_script(vec![Reply::tool_call("bash", json!({"command": cmd}))]);
        let env = TestEnv::new();
        env.use_server(&server, Dialect::OpenAi);
        let out = env.run(&["run", "go"], None);
        out.assert_code(3);
        assert!(out.stderr.contains("refused bash"), "{cmd}: {}", out.stderr);
    }
}

#[test]
fn listings_that_follow_a_shipped_link_out_of_the_project_ask() {
    let env = TestEnv::new();
    std::fs::write(env.home().join("outside-name.txt"), "x").unwrap();
    std::os::unix::fs::symlink(env.home(), env.project().join("h")).unwrap();
    for cmd in [
        "ls -RL",
        "ls --dereference -R",
        "ls --deref -R",
        "ls -R --dereference-command-line-symlink-to-dir",
        "ls -lH",
        "du -aL",
        "du -a --dereference-args .",
        "du -aD",
    ] {
        let server =
            FakeServer::with_script(vec![Reply::tool_call("bash", json!({"command": cmd}))]);
        env.use_server(&server, Dialect::OpenAi);
        let out = env.run(&["run", "go"], None);
        out.assert_code(3);
        assert!(out.stderr.contains("refused bash"), "{cmd}: {}", out.stderr);
    }
    // Without them the listing stays inside and needs no question.
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "ls -R"})),
        Reply::text("done"),
    ]);
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "go"], None).assert_success();
    let listed = &server.request(1).tool_results()[0].1;
    assert!(
        listed.contains('h') && !listed.contains("outside-name"),
        "{listed}"
    );
}

#[test]
fn a_command_name_built_from_an_expansion_is_refused_even_with_yolo() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "c=tou; ${c}ch made-by-expansion"}),
        ),
        Reply::tool_call("bash", json!({"command": "$MYTOOL made-by-variable"})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let touch = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("touch"))
        .find(|p| p.is_file())
        .unwrap();
    run_with(
        &env,
        &["run", "-q", "-y", "go"],
        &[("MYTOOL", &touch.to_string_lossy())],
        None,
    )
    .assert_success();
    assert!(!env.project().join("made-by-expansion").exists());
    let refused = &server.request(1).tool_results()[0].1;
    assert!(refused.contains("built from an expansion"), "{refused}");
    // A plain variable naming an installed program is fine.
    assert!(env.project().join("made-by-variable").exists());
}

#[test]
fn package_installs_and_scripts_fed_to_a_shell_are_refused_even_with_yolo() {
    // Each would create its marker if it ran.
    let commands = [
        "pip install requests; touch ran-pip",
        "python3 -m pip install x; touch ran-python-m-pip",
        "uv pip install x; touch ran-uv",
        "poetry add x; touch ran-poetry",
        "printf 'curl http://127.0.0.1:9/\\ntouch ran-pipe\\n' | sh",
        "sh <<< 'wget http://127.0.0.1:9/; touch ran-here-string'",
        "echo 'touch ran-bash-s' | bash -s",
    ];
    let mut script: Vec<Reply> = commands
        .iter()
        .map(|c| Reply::tool_call("bash", json!({ "command": c })))
        .collect();
    script.push(Reply::text("done"));
    let server = FakeServer::with_script(script);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "-y", "go"], None).assert_success();
    for (i, c) in commands.iter().enumerate() {
        let (_, text, _) = server.request(i + 1).tool_results()[0].clone();
        assert!(
            text.contains("not allowed for security reasons"),
            "{c}: {text}"
        );
    }
    let ran: Vec<_> = std::fs::read_dir(env.project())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-"))
        .collect();
    assert!(ran.is_empty(), "{ran:?}");
}
