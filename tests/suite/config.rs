//! Configuration end to end (crush(1) CONFIGURATION): the ten layers, crushrc, state, trust,
//! `config show`, session-only commands. Runs the real binary in a temp environment.

use crate::support::{Dialect, FakeServer, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn run_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Output {
    env.run_with_env(args, vars)
}

/// `config show --origin --json`, parsed.
fn show(env: &TestEnv, extra: &[&str], vars: &[(&str, &str)]) -> Value {
    let mut args = extra.to_vec();
    args.extend(["config", "show", "--origin", "--json"]);
    let out = run_env(env, &args, vars);
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn global_rc(env: &TestEnv, text: &str) -> PathBuf {
    let p = env.config_dir().join("crushrc");
    write(&p, text);
    p
}

/// The shells a crushrc must work under: crush's default (bash when it is on PATH) and, when
/// the system has it, dash (Debian's /bin/sh, which has no `$LINENO` in older releases), as
/// `CRUSH_SHELL` settings.
fn shells() -> Vec<Vec<(&'static str, &'static str)>> {
    let mut v = vec![vec![]];
    if Path::new("/bin/dash").exists() {
        v.push(vec![("CRUSH_SHELL", "/bin/dash")]);
    }
    v
}

/// Expects exit 2 and a message on stderr containing `want`.
fn fails_with(out: &Output, want: &str) {
    out.assert_code(2);
    assert!(
        out.stderr.contains(want),
        "stderr lacks {want:?}:\n{}",
        out.stderr
    );
}

#[test]
fn all_ten_layers_set_the_same_key_and_the_highest_wins() {
    // Layer n sets options.debug to (n is even); the flag of layer 10 can only say true.
    for top in 1..=10u8 {
        let env = TestEnv::new();
        let val = |n: u8| n.is_multiple_of(2);
        let p = env.project();
        for n in 2..=top {
            let v = val(n);
            match n {
                2 => write(
                    &env.data_dir().join("state.json"),
                    &json!({"options": {"debug": v}}).to_string(),
                ),
                3 => write(
                    &p.join(".crush/state.json"),
                    &json!({"options": {"debug": v}}).to_string(),
                ),
                4 => env.write_config(&json!({"options": {"debug": v}})),
                5 => {
                    global_rc(&env, &format!("option debug {v}\n"));
                }
                6 => write(
                    &p.join("crush.json"),
                    &json!({"options": {"debug": v}}).to_string(),
                ),
                7 => write(&p.join("crushrc"), &format!("option debug {v}\n")),
                8 => write(
                    &p.join(".crush.json"),
                    &json!({"options": {"debug": v}}).to_string(),
                ),
                9 => write(&p.join(".crushrc"), &format!("option debug {v}\n")),
                _ => {}
            }
        }
        let flags: &[&str] = if top == 10 { &["--debug"] } else { &[] };
        let s = show(&env, flags, &[("CRUSH_TRUST_PROJECT", "1")]);
        assert_eq!(
            s["config"]["options"]["debug"],
            json!(val(top)),
            "top layer {top}"
        );
        let o = &s["origins"]["/options/debug"];
        assert_eq!(o["layer"], json!(top), "top layer {top}: {o}");
        if (4..=9).contains(&top) {
            assert!(o["line"].is_u64(), "top layer {top}: {o}");
            assert!(o["file"].is_string(), "top layer {top}: {o}");
        }
    }
}

#[test]
fn go_crush_global_data_crush_json_is_read_as_state_and_state_loses_to_config() {
    let env = TestEnv::new();
    write(
        &env.data_dir().join("crush.json"),
        r#"{"models": {"large": {"provider": "old", "model": "legacy"}}, "options": {"progress": false}}"#,
    );
    write(
        &env.data_dir().join("state.json"),
        r#"{"models": {"large": {"provider": "st", "model": "chosen"}}}"#,
    );
    let s = show(&env, &[], &[]);
    assert_eq!(s["config"]["models"]["large"]["model"], json!("chosen"));
    assert_eq!(s["config"]["options"]["progress"], json!(false));
    assert_eq!(s["origins"]["/options/progress"]["layer"], json!(2));
    env.write_config(&json!({"models": {"large": {"provider": "cfg", "model": "configured"}}}));
    let s = show(&env, &[], &[]);
    assert_eq!(s["config"]["models"]["large"]["model"], json!("configured"));
}

#[test]
fn every_crushrc_command_applies() {
    for vars in shells() {
        every_crushrc_command_applies_under(&vars);
    }
}

fn every_crushrc_command_applies_under(vars: &[(&str, &str)]) {
    let env = TestEnv::new();
    let rc = global_rc(
        &env,
        r#"option progress false
option context-path docs/
option ui diff split
option provider-auto-update false
model large local/m1 --max-tokens 512 --temperature 0.2
model small local/m2
permissions allow grep edit:write
permissions deny fetch
provider add local --type openai-compat --base-url http://127.0.0.1:9/v1 --extra-header X-Team core
model add local/m1 --context-window 1000 --price-input 3 --price-output 15 --price-cache-create 3.75 --price-cache-hit 0.3
hook add PreToolUse --command ./check.sh --name lint --matcher '^bash$' --timeout 5 --fail-closed
hook add Stop --command 'echo bye'
hook remove Stop
mcp add fs --command npx --args -y --args server-fs --env ROOT /tmp
lsp add gopls --command gopls --filetypes go
lsp remove gopls
"#,
    );
    let s = show(&env, &[], vars);
    let c = &s["config"];
    assert_eq!(c["options"]["progress"], json!(false));
    assert_eq!(c["options"]["context_paths"], json!(["docs/"]));
    // Go Crush's interface settings are inert here.
    assert!(c["options"].get("tui").is_none(), "{c}");
    assert_eq!(c["options"]["disable_provider_auto_update"], json!(true));
    assert_eq!(
        c["models"]["large"],
        json!({"provider": "local", "model": "m1", "max_tokens": 512, "temperature": 0.2})
    );
    assert_eq!(
        c["permissions"]["allowed_tools"],
        json!(["grep", "edit:write"])
    );
    assert_eq!(c["options"]["disabled_tools"], json!(["fetch"]));
    // Header values may be secrets: shown only when they are templates.
    assert_eq!(
        c["providers"]["local"]["extra_headers"]["X-Team"],
        json!("********")
    );
    let m = &c["providers"]["local"]["models"][0];
    // Go Crush swaps these two; create = cache write, hit = cache read.
    assert_eq!(m["cost_per_1m_in_cached"], json!(3.75));
    assert_eq!(m["cost_per_1m_out_cached"], json!(0.3));
    assert_eq!(c["hooks"]["PreToolUse"][0]["fail_closed"], json!(true));
    assert_eq!(c["hooks"]["Stop"], Value::Null);
    assert_eq!(c["mcp"]["fs"]["args"], json!(["-y", "server-fs"]));
    assert_eq!(c["lsp"]["gopls"], Value::Null);
    let o = &s["origins"]["/providers/local/models/0/cost_per_1m_in_cached"];
    assert_eq!(o["file"], json!(rc.to_string_lossy()));
    assert_eq!(o["line"], json!(10));
}

#[test]
fn every_crushrc_command_with_bad_flags_fails_with_file_and_line() {
    let cases = [
        ("option max-steps lots", "not a whole number"),
        ("option progress maybe", "not true or false"),
        ("model large a/b --bogus 1", "unknown flag --bogus"),
        ("model large a/b --max-tokens lots", "not a whole number"),
        ("model add nowhere/m", "provider 'nowhere' is not defined"),
        ("permissions grant x", "unknown subcommand 'grant'"),
        ("provider add p --type", "needs a value"),
        ("provider add p --extra-header K", "needs KEY VALUE"),
        ("hook add Nope --command x", "unknown event 'Nope'"),
        ("hook add PreToolUse --name x", "needs --command"),
        (
            "hook add PreToolUse --command x --matcher '('",
            "not a valid regex",
        ),
        ("mcp add s --type http", "needs --url"),
        (
            "mcp add s --command x --colour red",
            "unknown flag --colour",
        ),
        ("lsp add l --init-options '{bad'", "invalid JSON"),
    ];
    for vars in shells() {
        for (line, want) in cases {
            let env = TestEnv::new();
            let rc = global_rc(
                &env,
                &format!("# a comment\noption debug\n{line}\noption progress false\n"),
            );
            let out = run_env(&env, &["config", "show"], &vars);
            fails_with(&out, &format!("{}:3: ", rc.display()));
            fails_with(&out, want);
            assert!(out.stdout.is_empty(), "no partial configuration is printed");
        }
    }
}

/// Go Crush 0.92's crushrc (`option ui exit-banner compact`, more `option ui` lines) and a
/// typo load: the ui lines are inert with one warning and its reason, the typo names the
/// nearest key; the lines around them still apply; `crush config check` lists both, exit 1.
#[test]
fn unknown_crushrc_option_keys_warn_and_the_load_goes_on() {
    let env = TestEnv::new();
    let rc = global_rc(
        &env,
        "option debug\noption ui exit-banner compact\noption max-step 7\noption progress false\n\
         option ui compact true\noption ui diff split\n",
    );
    let out = env.run(&["config", "show", "--json"], None);
    out.assert_success();
    let ui = format!(
        "{}:2: 'option ui' is read by Go Crush and ignored by crush: Go Crush's full-screen \
         interface settings; crush has no such interface",
        rc.display()
    );
    for want in [
        ui.clone(),
        format!(
            "{}:3: unknown key 'max-step' ignored (did you mean 'max-steps'?)",
            rc.display()
        ),
    ] {
        assert!(out.stderr.contains(&want), "{want}\n{}", out.stderr);
    }
    assert_eq!(
        out.stderr.matches("'option ui'").count(),
        1,
        "{}",
        out.stderr
    );
    let c: Value = serde_json::from_str(&out.stdout).unwrap();
    let c = c.get("config").unwrap_or(&c);
    assert_eq!(c["options"]["progress"], json!(false));
    assert_eq!(c["options"]["debug"], json!(true));
    assert!(c["options"].get("tui").is_none(), "{c}");
    let check = env.run(&["config", "check"], None);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(check.stdout.contains(&ui), "{}", check.stdout);
    assert!(
        check.stdout.contains("configuration: 2 problems"),
        "{}",
        check.stdout
    );
}

/// `/etc/crush/crush.json` (here the file CRUSH_SYSTEM_CONFIG names) is the lowest file: its
/// settings apply, the user's global file wins over it, and `config show --origin` names it.
#[test]
fn the_system_config_is_read_below_the_users_files() {
    let env = TestEnv::new();
    let system = env.root().join("system-crush.json");
    write(
        &system,
        "{\n  \"options\": {\"max_steps\": 7, \"debug\": true},\n  \"bogus\": 1\n}\n",
    );
    env.write_config(&json!({"options": {"max_steps": 9}}));
    let vars = [("CRUSH_SYSTEM_CONFIG", system.to_str().unwrap())];
    let s = show(&env, &[], &vars);
    assert_eq!(s["config"]["options"]["debug"], json!(true));
    assert_eq!(s["config"]["options"]["max_steps"], json!(9));
    let o = &s["origins"]["/options/debug"];
    assert_eq!(o["layer"], json!(1), "{o}");
    assert_eq!(o["layer_name"], json!("system crush.json"), "{o}");
    assert_eq!(o["file"], json!(system.to_str().unwrap()), "{o}");
    assert_eq!(o["line"], json!(2), "{o}");
    assert_eq!(s["origins"]["/options/max_steps"]["layer"], json!(4));
    // Its unknown keys are named like any file's.
    let out = run_env(&env, &["config", "check"], &vars);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "{}:3: unknown key 'bogus' ignored",
            system.display()
        )),
        "{}",
        out.stdout
    );
    // Without the file, nothing changes.
    std::fs::remove_file(&system).unwrap();
    let s = show(&env, &[], &vars);
    assert!(
        s["config"]["options"]
            .get("debug")
            .is_none_or(|d| d != true)
    );
}

/// Nested keys of published configs that do nothing are named with file:line and the nearest
/// key; `lsp.NAME.enabled: false` turns the server off.
#[test]
fn nested_unknown_keys_warn_with_line_and_nearest_key() {
    let env = TestEnv::new();
    env.write_project_file(
        "crush.json",
        r#"{
  "lsp": {"gopls": {"enabled": false, "rootMarkers": ["go.mod"]}},
  "providers": {"local": {"type": "openai-compat", "base_url": "http://127.0.0.1:9",
    "extra_params": {"x": 1},
    "models": [{"id": "m", "has_reasoning_efforts": true}]}},
  "options": {"tui": {"compact_mode": true}}
}"#,
    );
    let out = env.run(&["config", "show"], None);
    out.assert_success();
    let f = env.project().join("crush.json");
    let f = f.display();
    for want in [
        format!(
            "{f}:2: unknown key 'lsp.gopls.rootMarkers' ignored (did you mean 'lsp.gopls.root_markers'?)"
        ),
        format!("{f}:4: unknown key 'providers.local.extra_params' ignored"),
        format!("{f}:5: unknown key 'providers.local.models[0].has_reasoning_efforts' ignored"),
        format!("{f}:6: 'options.tui' is read by Go Crush and ignored by crush"),
    ] {
        assert!(out.stderr.contains(&want), "{want}\n{}", out.stderr);
    }
    assert!(
        !out.stderr.contains("'lsp.gopls.enabled'"),
        "{}",
        out.stderr
    );
    let check = env.run(&["config", "check"], None);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(!check.stderr.contains("unknown key"), "{}", check.stderr);
    assert!(
        check.stdout.contains("configuration: 4 problems"),
        "{}",
        check.stdout
    );
    assert!(
        check.stdout.contains(&format!("{f}:5: unknown key")),
        "{}",
        check.stdout
    );
    std::fs::remove_file(env.project().join("crush.json")).unwrap();
    let clean = env.run(&["config", "check"], None);
    clean.assert_success();
    assert!(
        clean.stdout.contains("no problems found"),
        "{}",
        clean.stdout
    );
}

/// `crush --trust config check` in `env`: it exits 1 and its output has each of `wants`; the
/// output.
fn check_finds(env: &TestEnv, wants: &[&str]) -> String {
    let check = env.run(&["--trust", "config", "check"], None);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    for want in wants {
        assert!(check.stdout.contains(want), "{want}\n{}", check.stdout);
        // Once, in the report: not also as a start-up warning.
        assert!(!check.stderr.contains(want), "{want}\n{}", check.stderr);
    }
    check.stdout
}

/// config check names what the hooks reader warns about too, in crush.json and in Claude Code's
/// settings: before, it said "no problems found" while `crush hooks list` warned.
#[test]
fn config_check_names_the_hooks_problems() {
    let env = TestEnv::new();
    env.write_project_file(
        "crush.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "^bash$", "command": "true", "comand": "x"}]}}"#,
    );
    env.write_project_file(
        ".claude/settings.json",
        r#"{"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [
  {"type": "command", "command": ".claude/hooks/format.sh", "asyncRewake": true, "argz": []}]}]}}"#,
    );
    check_finds(
        &env,
        &[
            "crush.json: hooks.PreToolUse[0] (hook 'true'): unknown key 'comand' ignored",
            "settings.json: hooks.PostToolUse[0].hooks[0] (hook '.claude/hooks/format.sh'): unknown key 'argz' ignored",
            "configuration: 2 problems",
        ],
    );
    std::fs::remove_file(env.project().join("crush.json")).unwrap();
    std::fs::remove_file(env.project().join(".claude/settings.json")).unwrap();
    let clean = env.run(&["--trust", "config", "check"], None);
    clean.assert_success();
}

/// Published Claude Code settings hook events crush has no moment for (a compaction's end, a
/// sub-agent's start, a settings change): config check names each one, as it names every other
/// setting that does nothing, instead of "no problems found".
#[test]
fn config_check_names_claude_code_hook_events_that_never_run() {
    let env = TestEnv::new();
    env.write_project_file(
        ".claude/settings.json",
        r#"{"hooks": {
  "PostCompact": [{"hooks": [{"type": "command", "command": "echo compacted"}]}],
  "SubagentStart": [{"matcher": "", "hooks": [{"type": "command", "command": "true"}]},
                    {"hooks": [{"type": "command", "command": "true"}]}],
  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}"#,
    );
    let out = check_finds(
        &env,
        &[
            "settings.json: PostCompact (1 matcher group(s)): a Claude Code hook event crush does not have; not run",
            "settings.json: SubagentStart (2 matcher group(s)): a Claude Code hook event crush does not have; not run",
            "configuration: 2 problems",
        ],
    );
    assert!(!out.contains("PreToolUse"), "{out}");
}

/// Claude Code reads its settings' event names exactly: a published `preToolUse` group never
/// runs there, so it does not run in crush either, and config check says what the name is.
#[test]
fn claude_code_event_names_are_read_exactly() {
    let env = TestEnv::new();
    env.write_project_file(
        ".claude/settings.json",
        r#"{"hooks": {"preToolUse": [{"matcher": "Bash", "hooks": [
  {"type": "command", "command": "echo '{\"decision\": \"block\", \"reason\": \"no\"}'; exit 2"}]}]}}"#,
    );
    check_finds(
        &env,
        &[
            "settings.json: preToolUse (1 matcher group(s); Claude Code's name is PreToolUse): a Claude Code hook event crush does not have; not run",
        ],
    );
    let ls = r#"{"command":"ls"}"#;
    let mut args: Vec<&str> = "--trust hooks test PreToolUse --tool bash --input"
        .split(' ')
        .collect();
    args.push(ls);
    let test = env.run(&args, None);
    test.assert_success();
    assert!(!test.stdout.contains("deny"), "{}", test.stdout);
}

#[test]
fn a_failing_script_fails_the_load() {
    for vars in shells() {
        let env = TestEnv::new();
        let rc = global_rc(&env, "option debug\nfalse\n");
        let out = run_env(&env, &["config", "show"], &vars);
        fails_with(&out, &rc.display().to_string());
        fails_with(&out, "exited with status 1");
        global_rc(
            &env,
            "option debug\nif true; then\n  option progress false\n",
        );
        let out = run_env(&env, &["dirs"], &vars);
        // dash says "Syntax error", bash "syntax error"; both name the line.
        fails_with(&out, &format!("{}:4: ", rc.display()));
        assert!(
            out.stderr.to_lowercase().contains(":4: syntax error"),
            "{vars:?}: {}",
            out.stderr
        );
        // A failing command in the middle is the script's business, like in a .bashrc.
        global_rc(&env, "cat /nonexistent 2>/dev/null\noption debug\n");
        run_env(&env, &["config", "show"], &vars).assert_success();
    }
}

#[test]
fn a_script_that_never_ends_is_stopped() {
    let env = TestEnv::new();
    let marker = env.root().join("after-sleep");
    let rc = global_rc(
        &env,
        &format!("option debug\nsleep 30\ntouch {}\n", marker.display()),
    );
    let out = run_env(
        &env,
        &["config", "show"],
        &[("CRUSH_CONFIG_TIMEOUT", "0.3")],
    );
    fails_with(
        &out,
        &format!("{}: still running after 0.3 s, stopped", rc.display()),
    );
    assert!(!marker.exists());
}

#[test]
fn if_source_and_command_substitution_work_in_a_crushrc() {
    for vars in shells() {
        if_source_and_command_substitution_work_under(&vars);
    }
}

fn if_source_and_command_substitution_work_under(vars: &[(&str, &str)]) {
    let env = TestEnv::new();
    let dir = env.config_dir();
    write(
        &dir.join("extra.rc"),
        "\n\noption context-path from-extra/\n",
    );
    write(&dir.join("flag"), "");
    let rc = global_rc(
        &env,
        r#"if [ -f flag ]; then
  option initialize-as "$(echo GENERATED.md)"
else
  option initialize-as never.md
fi
source extra.rc
add_paths() { for p in "$@"; do option context-path "$p"; done; }
add_paths a/ b/
[ "$CRUSH_VERSION" != "" ] && option debug
model large x/y
current=$(model large)
option data-directory "$current-data"
"#,
    );
    let s = show(&env, &[], vars);
    let c = &s["config"];
    assert_eq!(c["options"]["initialize_as"], json!("GENERATED.md"));
    assert_eq!(
        c["options"]["context_paths"],
        json!(["from-extra/", "a/", "b/"])
    );
    assert_eq!(c["options"]["debug"], json!(true));
    assert_eq!(c["options"]["data_directory"], json!("x/y-data"));
    let o = &s["origins"];
    assert_eq!(o["/options/initialize_as"]["line"], json!(2));
    assert_eq!(
        o["/options/context_paths/0"]["file"],
        json!(dir.join("extra.rc").to_string_lossy())
    );
    assert_eq!(o["/options/context_paths/0"]["line"], json!(3));
    assert_eq!(o["/options/context_paths/1"]["line"], json!(7));
    assert_eq!(
        o["/options/context_paths/1"]["file"],
        json!(rc.to_string_lossy())
    );
}

#[test]
fn project_crushrc_can_remove_and_reset_what_global_files_set() {
    let env = TestEnv::new();
    env.write_config(&json!({
        "hooks": {"PreToolUse": [{"name": "g", "command": "true"}]},
        "options": {"context_paths": ["global/"]}
    }));
    env.write_project_file(
        ".crushrc",
        "hook remove PreToolUse --name g\noption reset context-path\n",
    );
    let s = show(&env, &["--trust"], &[]);
    assert_eq!(s["config"]["hooks"]["PreToolUse"], json!([]));
    assert_eq!(s["config"]["options"]["context_paths"], json!([]));
    assert_eq!(s["origins"]["/options/context_paths"]["layer"], json!(9));
}

#[test]
fn config_show_origin_names_layer_and_file_line() {
    let env = TestEnv::new();
    std::fs::write(
        env.config_dir().join("crush.json"),
        "{\n  \"options\": {\n    \"progress\": false\n  }\n}\n",
    )
    .unwrap();
    env.write_project_file(
        ".crush.json",
        "{\"options\":\n {\"context_paths\": [\"p/\"]}}",
    );
    let out = env.run(&["config", "show", "--origin"], None);
    out.assert_success();
    let g = env.config_dir().join("crush.json");
    assert!(
        out.stdout.contains(&format!(
            "options.progress = false\t# global crush.json (layer 4) {}:3",
            g.display()
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "options.context_paths[0] = \"p/\"\t# project .crush.json (layer 8) {}:2",
            env.project().join(".crush.json").display()
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("options.max_steps = 100\t# built-in default (layer 1)")
    );
    assert!(out.stdout.contains(
        "options.disable_provider_auto_update = true\t# runtime (layer 10) environment CRUSH_DISABLE_PROVIDER_AUTO_UPDATE"
    ));
    // Plain show is the effective JSON; secrets typed literally are masked.
    env.write_config(&json!({"providers": {"p": {"api_key": "sk-literal", "base_url": "$URL"}}}));
    let out = env.run(&["config", "show"], None);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["providers"]["p"]["api_key"], json!("********"));
    assert_eq!(v["providers"]["p"]["base_url"], json!("$URL"));
    assert!(!out.stdout.contains("sk-literal"));
}

#[test]
fn bad_files_exit_2_and_unknown_keys_warn() {
    let env = TestEnv::new();
    env.write_project_file("crush.json", "{\n  \"options\": {\n    oops\n}");
    let out = env.run(&["config", "show"], None);
    fails_with(
        &out,
        &format!(
            "{}:3:5: invalid JSON",
            env.project().join("crush.json").display()
        ),
    );
    assert!(out.stdout.is_empty());
    std::fs::remove_file(env.project().join("crush.json")).unwrap();
    std::fs::create_dir(env.project().join(".crush.json")).unwrap();
    fails_with(&env.run(&["config", "show"], None), "is a directory");
    std::fs::remove_dir(env.project().join(".crush.json")).unwrap();
    env.write_project_file(
        "crush.json",
        "{\"colour\": 1,\n \"options\": {\"speed\": 2}}",
    );
    let out = env.run(&["config", "show"], None);
    out.assert_success();
    let f = env.project().join("crush.json");
    assert!(
        out.stderr
            .contains(&format!("{}:1: unknown key 'colour' ignored", f.display())),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "{}:2: unknown key 'options.speed' ignored",
            f.display()
        )),
        "{}",
        out.stderr
    );
}

fn snapshot(paths: &[PathBuf]) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    paths
        .iter()
        .map(|p| {
            let meta = std::fs::metadata(p).unwrap();
            (
                p.clone(),
                std::fs::read(p).unwrap(),
                meta.modified().unwrap(),
            )
        })
        .collect()
}

#[test]
fn state_is_never_written_into_config() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    global_rc(&env, "option progress false\n");
    env.write_project_file(".crushrc", "option debug false\n");
    let files = [
        env.config_dir().join("crush.json"),
        env.config_dir().join("crushrc"),
        env.project().join(".crushrc"),
    ];
    let before = snapshot(&files);
    env.run(&["trust"], None).assert_success();
    env.run(&["run", "hi"], None).assert_success();
    env.run(&["config", "show"], None).assert_success();
    assert_eq!(snapshot(&files), before);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.data_dir().join("state.json")).unwrap())
            .unwrap();
    assert!(state["trust"][env.project().to_string_lossy().as_ref()]["hash"].is_string());
    let names: Vec<String> = std::fs::read_dir(env.config_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "nothing new in the config dir: {names:?}");
}

#[test]
fn a_cloned_project_runs_nothing_until_trusted() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let m1 = env.root().join("pwned-by-crushrc");
    let m2 = env.root().join("pwned-by-subst");
    env.write_project_file(
        ".crushrc",
        &format!("touch {}\noption debug\n", m1.display()),
    );
    env.write_project_file(
        "crush.json",
        &json!({
            "hooks": {"PreToolUse": [{"command": format!("touch {}", m1.display())}]},
            "mcp": {"evil": {"type": "stdio", "command": "touch", "args": [m1.to_string_lossy()]}},
            "env": {"STOLEN": format!("$(touch {})", m2.display())},
            "options": {"context_paths": ["HACKING.md"]}
        })
        .to_string(),
    );
    let out = env.run(&["run", "--no-project-hooks", "hi"], None);
    out.assert_success();
    assert!(!m1.exists() && !m2.exists(), "untrusted project code ran");
    assert_eq!(
        out.stderr
            .lines()
            .filter(|l| l.contains("is not trusted"))
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "skipped 1 crushrc file, 1 hook, 1 MCP server, 1 command substitution, settings env;"
        ),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("crush trust"), "{}", out.stderr);
    let s = show(&env, &[], &[]);
    assert_eq!(s["config"]["hooks"], Value::Null);
    assert_eq!(s["config"]["mcp"], Value::Null);
    // The rest of the project config loads.
    assert_eq!(
        s["config"]["options"]["context_paths"],
        json!(["HACKING.md"])
    );
    assert!(!m1.exists() && !m2.exists());

    let t = env.run(&["trust"], None);
    t.assert_success();
    assert!(
        t.stdout.contains(".crushrc") && t.stdout.contains("hook PreToolUse"),
        "{}",
        t.stdout
    );
    assert!(!m1.exists(), "crush trust itself runs nothing");
    let s = show(&env, &[], &[]);
    assert!(m1.exists() && m2.exists());
    assert_eq!(s["config"]["mcp"]["evil"]["command"], json!("touch"));

    // A change to what runs asks again.
    std::fs::remove_file(&m1).unwrap();
    env.write_project_file(
        ".crushrc",
        &format!("touch {}\noption debug false\n", m1.display()),
    );
    let out = env.run(&["config", "show"], None);
    out.assert_success();
    assert!(
        out.stderr.contains("has changed since it was trusted"),
        "{}",
        out.stderr
    );
    assert!(!m1.exists());
    // One invocation only.
    run_env(&env, &["config", "show"], &[("CRUSH_TRUST_PROJECT", "1")]).assert_success();
    assert!(m1.exists());
    std::fs::remove_file(&m1).unwrap();
    env.run(&["--trust", "config", "show"], None)
        .assert_success();
    assert!(m1.exists());
    std::fs::remove_file(&m1).unwrap();
    env.run(&["config", "show"], None).assert_success();
    assert!(!m1.exists());
    env.run(&["trust"], None).assert_success();
    let r = env.run(&["trust", "--revoke"], None);
    r.assert_success();
    assert!(r.stdout.contains("revoked"));
    env.run(&["config", "show"], None).assert_success();
    assert!(!m1.exists());
}

#[test]
fn dirs_lists_state_and_the_files_in_use() {
    let env = TestEnv::new();
    env.write_config(&json!({}));
    global_rc(&env, "true\n");
    let out = env.run(&["dirs"], None);
    out.assert_success();
    let p = env.project();
    for want in [
        format!("config\t{}", env.config_dir().display()),
        format!("data\t{}", env.data_dir().display()),
        format!("project\t{}", p.display()),
        format!("project data\t{}", p.join(".crush").display()),
        format!(
            "global state\t{}",
            env.data_dir().join("state.json").display()
        ),
        format!("workspace state\t{}", p.join(".crush/state.json").display()),
        format!("layer 4\t{}", env.config_dir().join("crush.json").display()),
        format!("layer 5\t{}", env.config_dir().join("crushrc").display()),
    ] {
        assert!(
            out.stdout.contains(&want),
            "{want:?} not in\n{}",
            out.stdout
        );
    }
}

#[test]
fn env_map_and_command_substitution_reach_the_bash_tool() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "printf '%s' \"$GREETING\" > out.txt"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["env"] = json!({"GREETING": "$(printf hello)-${NAME:-world}"});
    env.write_config(&cfg);
    env.run(&["run", "-y", "go"], None).assert_success();
    assert_eq!(env.read_project_file("out.txt"), "hello-world");
}

#[test]
fn session_only_commands_from_the_bash_tool_change_no_file() {
    let env2 = TestEnv::new();
    let server2 = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "option progress false && model small fake/fake-model && echo \"large=$(model large)\" && permissions allow view"}),
        ),
        Reply::text("done"),
    ]);
    let mut cfg = env2.config_for(&server2, Dialect::OpenAi);
    cfg["permissions"] = json!({"allowed_tools": ["bash"]});
    env2.write_config(&cfg);
    global_rc(&env2, "option debug false\n");
    env2.write_project_file(".crush.json", "{}");
    let files2 = [
        env2.config_dir().join("crush.json"),
        env2.config_dir().join("crushrc"),
        env2.project().join(".crush.json"),
    ];
    let before2 = snapshot(&files2);
    let out = env2.run(&["run", "-q", "change the settings"], None);
    out.assert_success();
    let results = server2.last_request().tool_results();
    let text = &results[0].1;
    assert!(text.contains("large=fake/fake-model"), "{text}");
    assert!(
        text.contains("session config: option progress = false"),
        "{text}"
    );
    assert!(
        text.contains("session config: model small = fake/fake-model"),
        "{text}"
    );
    assert!(text.contains("refused: 'permissions allow view'"), "{text}");
    assert!(out.stderr.contains("--yolo"), "{}", out.stderr);
    assert_eq!(snapshot(&files2), before2);
    // With --yolo the widening is accepted (still for this session only).
    let server3 = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "permissions allow view"})),
        Reply::text("done"),
    ]);
    let env3 = TestEnv::new();
    env3.use_server(&server3, Dialect::OpenAi);
    let files3 = [env3.config_dir().join("crush.json")];
    let before3 = snapshot(&files3);
    env3.run(&["run", "-y", "-q", "allow"], None)
        .assert_success();
    let text = &server3.last_request().tool_results()[0].1;
    assert!(
        text.contains("session config: permissions allow view"),
        "{text}"
    );
    assert_eq!(snapshot(&files3), before3);
    let s = show(&env3, &[], &[]);
    assert_eq!(s["config"]["permissions"], Value::Null, "nothing persisted");
}

#[test]
fn the_bash_tool_cannot_change_hooks_unseen() {
    // A guard hook in the global config denies `rm`.
    let guard = json!({"PreToolUse": [{"name": "no-rm", "matcher": "^bash$",
        "command": "grep -q '\"rm ' && { echo 'no rm' >&2; exit 2; }; exit 0"}]});
    // Without --yolo: the model's `hook remove` is refused and the guard still stands.
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "hook remove PreToolUse"})),
        Reply::tool_call("bash", json!({"command": "rm x.txt"})),
        Reply::text("could not"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::Anthropic);
    cfg["hooks"] = guard.clone();
    cfg["permissions"] = json!({"allowed_tools": ["bash"]});
    env.write_config(&cfg);
    env.write_project_file("x.txt", "keep me\n");
    let out = env.run(&["run", "-q", "clean up"], None);
    assert!(
        out.stderr.contains("hook remove PreToolUse"),
        "{}",
        out.stderr
    );
    assert!(
        env.project().join("x.txt").exists(),
        "the guard hook must still deny rm"
    );
    let results = server.request(1).tool_results();
    assert!(results[0].1.contains("refused"), "{:?}", results);

    // With --yolo the user agreed up front: a hook the model adds takes effect at once.
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "hook add PreToolUse --name no-touch --matcher '^bash$' --command 'grep -q touch && exit 2; exit 0'"}),
        ),
        Reply::tool_call("bash", json!({"command": "touch y.txt"})),
        Reply::text("blocked"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    env.run(&["run", "-q", "-y", "add a guard"], None)
        .assert_success();
    assert!(
        !env.project().join("y.txt").exists(),
        "the added hook denies touch"
    );
    let (_, text, is_error) = server.last_request().tool_results().last().unwrap().clone();
    assert!(is_error, "{text}");
}

#[test]
fn the_model_flag_is_part_of_the_runtime_layer() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(
        &["-m", "fake/other-model", "config", "show", "--origin"],
        None,
    );
    out.assert_success();
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("models.large.model"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(line.contains("\"other-model\""), "{line}");
    assert!(
        line.contains("command line: --model fake/other-model"),
        "{line}"
    );
    assert_eq!(server.request_count(), 0);
}

/// A FIFO at `path` (a cloned repository can link to one, or to `/dev/stdin`).
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string naming a path in the test's own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_projects_files_linked_to_a_device_or_a_fifo_fail_fast_and_name_the_file() {
    // git stores symbolic links, so a clone can ship any of these as a link: none may be read
    // without end (/dev/zero) or block the start (a FIFO), .git/config included.
    let fatal = [
        "crush.json",
        ".crush.json",
        "crushrc",
        ".crushrc",
        ".mcp.json",
        ".claude/settings.json",
    ];
    let warned = [".crush/state.json", ".crush/crush.json", ".env"];
    for target in ["zero", "fifo"] {
        for rel in fatal.iter().chain(&warned).chain(&[".git/config"]) {
            let server = if fatal.contains(rel) {
                FakeServer::start()
            } else {
                FakeServer::with_script(vec![Reply::text("ok")])
            };
            let env = TestEnv::new();
            env.use_server(&server, Dialect::OpenAi);
            let fifo = env.root().join("fifo");
            mkfifo(&fifo);
            let link = env.project().join(rel);
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&link);
            let to = if target == "zero" {
                PathBuf::from("/dev/zero")
            } else {
                fifo.clone()
            };
            std::os::unix::fs::symlink(&to, &link).unwrap();
            let started = std::time::Instant::now();
            let out = env.run(&["run", "hi"], None);
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(5),
                "{rel} -> {target}: {took:?}\n{}",
                out.stderr
            );
            let named = out.stderr.contains(&link.display().to_string())
                && out.stderr.contains("not a regular file");
            if fatal.contains(rel) {
                out.assert_code(2);
                assert!(named, "{rel} -> {target}: {}", out.stderr);
            } else if warned.contains(rel) {
                out.assert_success();
                assert!(named, "{rel} -> {target}: {}", out.stderr);
            } else {
                // .git/config: crush's own `git status` is left out, the run goes on.
                out.assert_success();
            }
        }
    }
}

#[test]
fn an_environment_name_or_value_no_process_can_hold_is_a_config_error_with_its_line() {
    // std::env::set_var aborts on these (exit 134): they must be refused where they are written.
    let server = FakeServer::start();
    let env = TestEnv::new();
    let mut global = env.config_for(&server, Dialect::OpenAi);
    let cases: [(&str, Value); 4] = [
        (
            "env.: an environment variable needs a name",
            json!({"": "x"}),
        ),
        (
            "env.\"A=B\": an environment variable's name cannot hold '='",
            json!({"A=B": "x"}),
        ),
        ("env.N: the value holds a NUL byte", json!({"N": "a\u{0}b"})),
        (
            "env.M: the value holds a NUL byte",
            json!({"M": "$(printf 'a\\000b')"}),
        ),
    ];
    for (want, map) in cases {
        global["env"] = map;
        let text = serde_json::to_string_pretty(&global).unwrap();
        write(&env.config_dir().join("crush.json"), &text);
        let line = text.lines().position(|l| l.contains("\"env\"")).unwrap() + 2;
        let out = env.run(&["run", "hi"], None);
        out.assert_code(2);
        let at = format!("{}:{line}: ", env.config_dir().join("crush.json").display());
        assert!(
            out.stderr.contains(&format!("{at}{want}")),
            "{want}: {}",
            out.stderr
        );
    }
    global.as_object_mut().unwrap().remove("env");
    global["mcp"] = json!({"s": {"command": "true", "env": {"K=V": "x"}}});
    write(&env.config_dir().join("crush.json"), &global.to_string());
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("mcp.s.env.\"K=V\": an environment variable's name cannot hold '='"),
        "{}",
        out.stderr
    );
    // A trusted .env line holding a NUL byte.
    global.as_object_mut().unwrap().remove("mcp");
    write(&env.config_dir().join("crush.json"), &global.to_string());
    write(&env.project().join(".env"), "A=1\nX=a\0b\n");
    let out = env.run(&["run", "--trust", "hi"], None);
    out.assert_code(2);
    let want = format!(
        "{}:2: X: the value holds a NUL byte",
        env.project().join(".env").display()
    );
    assert!(out.stderr.contains(&want), "{}", out.stderr);
}

#[test]
fn location_variables_from_a_dotenv_or_the_env_map_move_nothing() {
    // A trusted .env's CRUSH_GLOBAL_DATA used to move projects.json but not state.json.
    let env = TestEnv::new();
    let moved = env.root().join("moved");
    let run = |args: &[&str]| {
        let server = FakeServer::with_script(vec![Reply::text("ok")]);
        env.write_config(&env.config_for(&server, Dialect::OpenAi));
        let mut cmd = env.crush();
        cmd.env_remove("CRUSH_GLOBAL_DATA").args(args);
        crate::support::env::run_command(cmd, None, crate::support::env::RUN_TIMEOUT)
    };
    write(
        &env.project().join(".env"),
        &format!("CRUSH_GLOBAL_DATA={}\nOTHER=1\n", moved.display()),
    );
    let out = run(&["run", "--trust", "hi"]);
    out.assert_success();
    assert!(
        out.stderr.contains(
            "CRUSH_GLOBAL_DATA not set: crush's location variables cannot be set from a .env"
        ),
        "{}",
        out.stderr
    );
    let data = env.xdg_data().join("crush");
    assert!(data.join("projects.json").exists(), "{}", out.stderr);
    assert!(!moved.exists(), "a file went to {}", moved.display());
    // The env map of a trusted project is exported, but crush's own files stay where they were.
    std::fs::remove_file(env.project().join(".env")).unwrap();
    write(
        &env.project().join("crush.json"),
        &json!({"env": {"CRUSH_GLOBAL_DATA": moved, "XDG_DATA_HOME": moved}}).to_string(),
    );
    run(&["run", "--trust", "hi"]).assert_success();
    assert!(!moved.exists(), "a file went to {}", moved.display());
}
