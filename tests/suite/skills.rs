//! Agent Skills, custom commands and project init, end to end: the real binary, real folders,
//! and the fake model server.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::{Value, json};

fn skill_md(name: &str, description: &str, extra: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n\nSteps of {name}.\n"
    )
}

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn list_json(env: &TestEnv) -> Value {
    let out = env.run(&["skills", "list", "--json"], None);
    out.assert_success();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn by_path<'a>(list: &'a Value, end: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"].as_str().unwrap_or("").ends_with(end))
        .unwrap_or_else(|| panic!("{end} not listed: {list:#}"))
}

#[test]
fn skills_list_shows_where_each_skill_is_and_why_any_was_rejected() {
    let env = TestEnv::new();
    env.write_project_file(
        ".crush/skills/review/SKILL.md",
        &skill_md("review", "Project review.", ""),
    );
    env.write_project_file(
        ".claude/skills/review/SKILL.md",
        &skill_md("review", "Claude review.", ""),
    );
    env.write_project_file(
        ".agents/skills/broken/SKILL.md",
        "---\nname: broken\ndescription: 'open\n---\n",
    );
    write(
        &env.home().join(".agents/skills/deploy/SKILL.md"),
        &skill_md("deploy", "User deploy.", "user-invocable: true\n"),
    );
    write(
        &env.home().join(".agents/skills/review/SKILL.md"),
        &skill_md("review", "User review.", ""),
    );
    write(
        &env.config_dir().join("skills/Bad_Name/SKILL.md"),
        &skill_md("Bad_Name", "x", ""),
    );
    env.write_config(&json!({"options": {"disabled_skills": ["crush-hooks"]}}));
    env.write_project_file(".crush/commands/ok.md", "Fine.\n");
    std::fs::write(env.project().join(".crush/commands/latin.md"), b"caf\xe9\n").unwrap();
    let doc = list_json(&env);
    let commands = &doc["commands"];
    assert_eq!(by_path(commands, "commands/ok.md")["name"], "project:ok");
    let latin = by_path(commands, "commands/latin.md");
    assert_eq!(latin["state"], "rejected");
    assert!(
        latin["reason"].as_str().unwrap().contains("not UTF-8"),
        "{latin}"
    );
    let skills = &doc["skills"];
    for (end, key, want) in [
        (".crush/skills/review/SKILL.md", "state", "active"),
        (".crush/skills/review/SKILL.md", "source", "project"),
        (".claude/skills/review/SKILL.md", "state", "shadowed"),
        (".agents/skills/review/SKILL.md", "state", "shadowed"),
        ("crush://skills/crush-hooks/SKILL.md", "state", "disabled"),
        ("crush://skills/crush-config/SKILL.md", "source", "builtin"),
    ] {
        assert_eq!(by_path(skills, end)[key], want, "{end}");
    }
    let broken = by_path(skills, "broken/SKILL.md");
    assert_eq!(broken["state"], "rejected");
    assert!(
        broken["reason"].as_str().unwrap().contains("line 3"),
        "{broken}"
    );
    let bad = by_path(skills, "Bad_Name/SKILL.md");
    assert!(
        bad["reason"].as_str().unwrap().contains("single hyphens"),
        "{bad}"
    );
    let deploy = by_path(skills, "deploy/SKILL.md");
    assert_eq!(
        (deploy["state"].as_str(), deploy["user_invocable"].as_bool()),
        (Some("active"), Some(true))
    );
    // The clash is a warning on stderr; the text listing says the same.
    let out = env.run(&["skills", "list"], None);
    out.assert_success();
    assert!(
        out.stderr.contains("warning: skill review:"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("rejected: line 3"), "{}", out.stdout);
    assert!(out.stdout.contains("/user:deploy"), "{}", out.stdout);
    assert!(
        out.stdout.contains("Custom commands:\n  /project:ok"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_model_loads_a_skill_by_viewing_it_without_a_permission_question() {
    for d in [Dialect::OpenAi, Dialect::Anthropic] {
        let env = TestEnv::new();
        let skill_dir = env.home().join(".agents/skills/pdf-forms");
        write(
            &skill_dir.join("SKILL.md"),
            &skill_md("pdf-forms", "Fill PDF forms <fast> & well.", ""),
        );
        write(&skill_dir.join("reference/fields.md"), "FIELD LIST\n");
        let location = skill_dir.join("SKILL.md").display().to_string();
        let server = FakeServer::with_script(vec![
            Reply::tool_call("view", json!({"file_path": location})),
            Reply::tool_call(
                "view",
                json!({"file_path": skill_dir.join("reference/fields.md")}),
            ),
            Reply::tool_call(
                "view",
                json!({"file_path": "crush://skills/crush-config/SKILL.md"}),
            ),
            Reply::text("Loaded."),
        ]);
        env.use_server(&server, d);
        // No --yolo: the skill lies outside the project, and still needs no permission.
        let out = env.run(&["run", "fill the form"], None);
        out.assert_success();
        assert_eq!(out.stdout, "Loaded.\n");
        let system = server.request(0).system_text();
        assert!(system.contains("<available_skills>"), "{system}");
        assert!(
            system.contains(&format!("<location>{location}</location>")),
            "{system}"
        );
        assert!(
            system.contains("Fill PDF forms &lt;fast&gt; &amp; well."),
            "{system}"
        );
        // Stable order: by name.
        let a = system.find("<name>crush-config</name>").unwrap();
        let b = system.find("<name>crush-hooks</name>").unwrap();
        let c = system.find("<name>pdf-forms</name>").unwrap();
        assert!(a < b && b < c, "{system}");
        let results = server.last_request().tool_results();
        assert_eq!(results.len(), 3);
        assert!(
            !results[0].2 && results[0].1.contains("Steps of pdf-forms."),
            "{results:?}"
        );
        assert!(results[1].1.contains("FIELD LIST"), "{results:?}");
        assert!(results[2].1.contains("name: crush-config"), "{results:?}");
    }
}

#[test]
fn a_project_sets_skills_paths_only_once_trusted() {
    let env = TestEnv::new();
    let outside = env.root().join("outside-skills");
    write(
        &outside.join("ext/SKILL.md"),
        &skill_md("ext", "External.", ""),
    );
    env.write_project_file(".agents/skills/own/SKILL.md", &skill_md("own", "Own.", ""));
    env.write_project_file(
        "crush.json",
        &json!({"options": {"skills_paths": [outside.display().to_string()]}}).to_string(),
    );
    let out = env.run(&["skills", "list", "--json"], None);
    out.assert_success();
    assert!(
        out.stderr.contains("options.skills_paths"),
        "{}",
        out.stderr
    );
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let paths: Vec<&str> = doc["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["path"].as_str())
        .collect();
    // The project's own skills folders load untrusted: skills are text.
    assert!(
        paths
            .iter()
            .any(|p| p.ends_with(".agents/skills/own/SKILL.md")),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("outside-skills")),
        "{paths:?}"
    );
    let out = env.run(&["--trust", "skills", "list", "--json"], None);
    out.assert_success();
    assert!(
        out.stdout.contains("outside-skills/ext/SKILL.md"),
        "{}",
        out.stdout
    );
}

/// Title requests are answered off-script.
fn title_route(server: &FakeServer) {
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A title")],
    );
}

/// The last user text of each turn request (title requests left out).
fn prompts(server: &FakeServer) -> Vec<String> {
    server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("title of a conversation"))
        .map(|r| r.user_texts().pop().unwrap_or_default())
        .collect()
}

fn last_prompt(server: &FakeServer) -> String {
    prompts(server).pop().expect("a turn request")
}

fn commands_env(server: &FakeServer) -> TestEnv {
    let env = TestEnv::new();
    env.use_server(server, Dialect::OpenAi);
    env.write_project_file(
        ".crush/commands/review.md",
        "---\ndescription: Review one file\n---\nReview $FILE, looking for $FOCUS.\n$ARGUMENTS\n",
    );
    env.write_project_file(
        ".claude/commands/git/commit.md",
        "Write a commit message.\n",
    );
    write(
        &env.home().join(".claude/commands/review.md"),
        "User review of $ARGUMENTS\n",
    );
    write(
        &env.home().join(".codex/prompts/explain.md"),
        "Explain $ARGUMENTS simply.\n",
    );
    write(
        &env.home().join(".agents/skills/pdf-forms/SKILL.md"),
        &skill_md("pdf-forms", "Fill PDF forms.", "user-invocable: true\n"),
    );
    env
}

#[test]
fn repl_custom_commands_ask_named_arguments_one_by_one_from_a_pipe() {
    let server = FakeServer::with_script(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
        Reply::text("five"),
    ]);
    title_route(&server);
    let env = commands_env(&server);
    let input = "/help\n/project:review\nsrc/a.rs\nerrors\n/rev FOCUS=style FILE=b.rs be brief\n/user:review the diff\n/explain monads\n/pdf-forms the tax form\n/re\n";
    let out = env.run(&[], Some(input));
    out.assert_success();
    assert!(
        out.stdout.contains("/project:review FILE=… FOCUS=…"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Review one file"), "{}", out.stdout);
    assert!(
        out.stdout.contains("/user:pdf-forms [TEXT]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("FILE:") && out.stderr.contains("FOCUS:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("/re is ambiguous")
            && out.stderr.contains("/project:review")
            && out.stderr.contains("/resume"),
        "{}",
        out.stderr
    );
    let turns = prompts(&server);
    assert_eq!(turns[0], "Review src/a.rs, looking for errors.");
    // A unique prefix of the bare name; named arguments in any order; the rest is $ARGUMENTS.
    assert_eq!(turns[1], "Review b.rs, looking for style.\nbe brief");
    assert_eq!(turns[2], "User review of the diff");
    assert_eq!(turns[3], "Explain monads simply.");
    assert!(
        turns[4].starts_with("<loaded_skill>\n<name>pdf-forms</name>"),
        "{}",
        turns[4]
    );
    assert!(
        turns[4].contains("Steps of pdf-forms.") && turns[4].ends_with("\n\nthe tax form"),
        "{}",
        turns[4]
    );
}

#[test]
fn crush_run_runs_a_command_named_by_its_first_word() {
    let server = FakeServer::with_script(vec![
        Reply::text("reviewed"),
        Reply::text("committed"),
        Reply::text("a path"),
        Reply::text("escaped"),
    ]);
    let env = commands_env(&server);
    env.run(
        &[
            "run",
            "/project:review",
            "FILE=src/a b.rs",
            "FOCUS=bugs",
            "and",
            "tests",
        ],
        None,
    )
    .assert_success();
    assert_eq!(
        last_prompt(&server),
        "Review src/a b.rs, looking for bugs.\nand tests"
    );
    // The whole line as one argument, a bare name, and piped text before it.
    env.run(&["run", "/git:commit"], Some("diff --git a b\n"))
        .assert_success();
    assert_eq!(
        last_prompt(&server),
        "diff --git a b\n\nWrite a commit message."
    );
    env.run(&["run", "/etc/hosts is wrong"], None)
        .assert_success();
    assert_eq!(last_prompt(&server), "/etc/hosts is wrong");
    env.run(&["run", "//project:review it"], None)
        .assert_success();
    assert_eq!(last_prompt(&server), "/project:review it");
    let out = env.run(&["run", "/review FILE=x.rs"], None);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("/project:review needs FOCUS: pass each as NAME=value"),
        "{}",
        out.stderr
    );
}

#[test]
fn crush_init_writes_initialize_as_without_asking_and_only_that_file() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "write",
            json!({"file_path": "AGENTS.md", "content": "# Agents\n\nRun `make test`.\n"}),
        ),
        Reply::text("Wrote AGENTS.md."),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file("Makefile", "test:\n\tcargo test\n");
    let out = env.run(&["init", "mention", "the", "Makefile"], None);
    out.assert_success();
    assert_eq!(
        env.read_project_file("AGENTS.md"),
        "# Agents\n\nRun `make test`.\n"
    );
    assert!(
        out.stderr.contains("wrote ") && out.stderr.contains("AGENTS.md"),
        "{}",
        out.stderr
    );
    let prompt = server.request(0).user_texts().pop().unwrap();
    assert!(
        prompt.contains("AGENTS.md") && prompt.ends_with("The user adds: mention the Makefile"),
        "{prompt}"
    );
    assert!(env.project().join(".crush/init").exists());

    // Another name from the configuration; writing any other file still needs permission.
    // A refused call ends the turn.
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "write",
        json!({"file_path": "other.md", "content": "x"}),
    )]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"initialize_as": "docs/CRUSH.md"});
    env.write_config(&cfg);
    let out = env.run(&["init"], None);
    out.assert_code(3);
    assert!(!env.project().join("other.md").exists());
    let prompt = server.request(0).user_texts().pop().unwrap();
    assert!(prompt.contains("docs/CRUSH.md"), "{prompt}");
}

#[test]
fn crush_init_rewrites_an_existing_file_only_after_a_yes() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "AGENTS.md"})),
        Reply::tool_call(
            "edit",
            json!({"file_path": "AGENTS.md", "old_string": "old", "new_string": "new"}),
        ),
        Reply::text("Improved."),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file("AGENTS.md", "old notes\n");
    let out = env.run(&["init"], None);
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("exists: have the agent rewrite it? [y/N]"),
        "{}",
        out.stderr
    );
    assert_eq!(env.read_project_file("AGENTS.md"), "old notes\n");
    assert_eq!(server.request_count(), 0);
    let out = env.run(&["init"], Some("y\n"));
    out.assert_success();
    assert_eq!(env.read_project_file("AGENTS.md"), "new notes\n");
}

#[test]
fn repl_mentions_init_once_and_init_asks_before_rewriting() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "write",
            json!({"file_path": "AGENTS.md", "content": "notes\n"}),
        ),
        Reply::text("Written."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file("main.go", "package main\n");
    let first = env.run(&[], Some(""));
    first.assert_success();
    assert!(
        first.stderr.contains("/init has the agent write one"),
        "{}",
        first.stderr
    );
    let again = env.run(&[], Some("/init\n/init\nn\n"));
    again.assert_success();
    assert!(
        !again.stderr.contains("/init has the agent"),
        "{}",
        again.stderr
    );
    assert_eq!(env.read_project_file("AGENTS.md"), "notes\n");
    // The second /init found the file and was told no.
    assert!(
        again.stderr.contains("is left as it is"),
        "{}",
        again.stderr
    );
}

#[test]
fn an_unknown_slash_command_is_refused_with_the_close_names_and_costs_no_call() {
    // No reply scripted: any model request is a violation.
    let server = FakeServer::with_script(vec![]);
    let env = commands_env(&server);
    let out = env.run(&["run", "/git:comit"], Some("diff --git a b\n"));
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("unknown command /git:comit; did you mean /")
            && out.stderr.contains("git:commit?"),
        "{}",
        out.stderr
    );
    let out = env.run(&["run", "/foo", "the", "bar"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown command /foo"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("//"),
        "how to send a slash: {}",
        out.stderr
    );
    // The REPL refuses the same way and goes on.
    let out = env.run(&[], Some("/revew x\n/git:comit\n"));
    out.assert_success();
    assert!(
        out.stderr
            .contains("unknown command /revew; did you mean /project:review")
            && out
                .stderr
                .contains("unknown command /git:comit; did you mean /"),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 0);
    server.assert_clean();
}

/// A Claude Code command as published: a Dockerfile snippet with `$PATH` and `$HOME` (text, not
/// arguments), `$1` and `$ARGUMENTS`, an `argument-hint`, and a `` !`cmd` `` whose output goes
/// in the prompt.
const DOCKER_COMMAND: &str = "---\ndescription: Write a Dockerfile\nargument-hint: <image> [notes]\n---\nWrite a Dockerfile based on $1.\n\n```dockerfile\nFROM $1\nENV PATH=/opt/tool/bin:$PATH\nWORKDIR $HOME/app\n```\n\nProject files: !`ls`\n\nAll arguments: $ARGUMENTS\n";

#[test]
fn a_claude_code_command_follows_claude_codes_rules() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(".claude/commands/docker.md", DOCKER_COMMAND);
    env.write_project_file("marker-file.txt", "x");
    // The same text in crush's folder keeps Go Crush's named arguments.
    env.write_project_file(".crush/commands/named.md", "Deploy to $TARGET.\n");
    let out = env.run(&["run", "-y", "/docker", "alpine:3", "slim please"], None);
    out.assert_success();
    let p = last_prompt(&server);
    assert!(
        p.starts_with("Write a Dockerfile based on alpine:3."),
        "{p}"
    );
    assert!(
        p.contains("FROM alpine:3\nENV PATH=/opt/tool/bin:$PATH\nWORKDIR $HOME/app"),
        "{p}"
    );
    assert!(p.contains("Project files: "), "{p}");
    assert!(p.contains("marker-file.txt"), "the output of ls: {p}");
    assert!(!p.contains("!`ls`") && !p.contains("<cwd>"), "{p}");
    assert!(p.ends_with("All arguments: alpine:3 slim please"), "{p}");
    // Listed with its hint.
    let out = env.run(&["skills", "list"], None);
    out.assert_success();
    assert!(
        out.stdout.contains("/project:docker <image> [notes]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("/project:named TARGET=…"),
        "{}",
        out.stdout
    );
    let out = env.run(&["run", "/named"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("needs TARGET"), "{}", out.stderr);
}

#[test]
fn a_claude_code_commands_shell_line_needs_bashs_permission() {
    let server = FakeServer::always_text("never");
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // A read-only command (ls) needs no permission, as in the bash tool; one that writes does.
    env.write_project_file(
        ".claude/commands/stamp.md",
        "Files: !`ls`\nStamp: !`touch stamped.txt`\n",
    );
    // No --yolo and nothing allowed: nobody can be asked in crush run.
    let out = env.run(&["run", "/stamp"], None);
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("/project:stamp was not sent to the model")
            && out.stderr.contains("`touch stamped.txt`"),
        "{}",
        out.stderr
    );
    assert!(!env.project().join("stamped.txt").exists());
    assert_eq!(server.model_requests().len(), 0);
}

/// The requests of turns (title requests left out).
fn turn_requests(server: &FakeServer) -> Vec<crate::support::Recorded> {
    server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("title of a conversation"))
        .collect()
}

/// The messages of session `id` as `crush sessions show --json` gives them.
fn session_messages(env: &TestEnv, id: &str) -> Vec<Value> {
    let show = env.run(&["sessions", "show", id, "--json"], None);
    show.assert_success();
    let s: Value = serde_json::from_str(&show.stdout).expect("sessions show --json");
    s["messages"].as_array().cloned().unwrap_or_default()
}

/// `crush run --json "/LINE"`: the session's id, and the ids of its child sessions.
fn run_forked(env: &TestEnv, line: &str) -> (String, Vec<String>, crate::support::Output) {
    let out = env.run(&["run", "--json", line], None);
    let first: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let parent = first["uuid"].as_str().unwrap_or_default().to_string();
    let db = rusqlite::Connection::open(env.project().join(".crush/crush.db")).unwrap();
    let mut q = db
        .prepare("SELECT id FROM sessions WHERE parent_session_id = ?1")
        .unwrap();
    let children = q
        .query_map([&parent], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (parent, children, out)
}

#[test]
fn a_forked_skill_runs_in_a_child_session_and_only_its_answer_comes_back() {
    let server = FakeServer::with_script(vec![Reply::text("The logs are quiet.")]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(
        ".crush/skills/digest/SKILL.md",
        &skill_md(
            "digest",
            "Digest a file.",
            "user-invocable: true\ncontext: fork\nagent: Explore\n",
        )
        .replace("Steps of digest.", "Read $ARGUMENTS and tell what matters."),
    );
    let (parent, children, out) = run_forked(&env, "/digest the build logs");
    out.assert_success();
    assert!(
        out.stdout.contains("\"text\":\"The logs are quiet.\""),
        "{}",
        out.stdout
    );
    // One model call: the sub-agent's, with the skill's text and the words in place.
    let turns = turn_requests(&server);
    assert_eq!(
        turns.len(),
        1,
        "{:#?}",
        turns.iter().map(|r| r.system_text()).collect::<Vec<_>>()
    );
    assert!(turns[0].system_text().starts_with("You are a sub-agent"));
    let [child] = children.as_slice() else {
        panic!("one child session of {parent}: {children:?}");
    };
    let child_msgs = session_messages(&env, child);
    let first = child_msgs[0].to_string();
    assert!(
        child_msgs[0]["role"] == "user"
            && first.contains("Read the build logs and tell what matters."),
        "{first}"
    );
    // The parent holds the line as typed and the sub-agent's answer, nothing of the skill.
    let msgs = session_messages(&env, &parent);
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    let (user, answer) = (msgs[0].to_string(), msgs[1].to_string());
    assert!(user.contains("/digest the build logs"), "{user}");
    assert!(
        msgs[1]["role"] == "assistant" && answer.contains("The logs are quiet."),
        "{answer}"
    );
    assert!(
        !format!("{msgs:?}").contains("tell what matters"),
        "{msgs:#?}"
    );
}

/// In the REPL too: the fork skill's text goes to the sub-agent only, and the next prompt's
/// request carries the sub-agent's answer, not the skill.
#[test]
fn a_forked_skill_in_the_repl_leaves_only_its_answer_for_the_next_prompt() {
    let server = FakeServer::with_script(vec![
        Reply::text("The logs are quiet."),
        Reply::text("Noted."),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(
        ".claude/skills/digest/SKILL.md",
        "---\ndescription: Digest logs.\ncontext: fork\n---\nRead $ARGUMENTS and tell what matters.\n",
    );
    let out = env.run(&["--trust"], Some("/digest the build logs\nand then?\n"));
    out.assert_success();
    assert!(out.stdout.contains("The logs are quiet."), "{}", out.stdout);
    let turns = turn_requests(&server);
    assert_eq!(turns.len(), 2, "{}", out.stderr);
    assert!(turns[0].system_text().starts_with("You are a sub-agent"));
    assert!(
        turns[0]
            .body_text
            .contains("Read the build logs and tell what matters."),
        "{}",
        turns[0].body_text
    );
    let next = &turns[1].body_text;
    assert!(
        next.contains("The logs are quiet.") && next.contains("and then?"),
        "{next}"
    );
    assert!(!next.contains("tell what matters"), "{next}");
}

#[test]
fn a_forked_skill_runs_on_its_model_and_agent() {
    let server = FakeServer::with_script(vec![Reply::text("Reviewed.")]);
    title_route(&server);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["providers"]["fake"]["models"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"id": "claude-haiku-4-5", "context_window": 200000, "default_max_tokens": 4096}),
        );
    env.write_config(&cfg);
    write(
        &env.config_dir().join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews.\n---\nYou review closely.\n",
    );
    env.write_project_file(
        ".crush/skills/check/SKILL.md",
        &skill_md(
            "check",
            "Check a change.",
            "user-invocable: true\ncontext: fork\nagent: reviewer\nmodel: haiku\n",
        ),
    );
    let list = list_json(&env);
    let e = by_path(&list["skills"], "check/SKILL.md");
    assert_eq!(
        (&e["context"], &e["agent"], &e["model"]),
        (&json!("fork"), &json!("reviewer"), &json!("haiku")),
        "{e}"
    );
    let (_, children, out) = run_forked(&env, "/check it");
    out.assert_success();
    assert_eq!(children.len(), 1);
    let turns = turn_requests(&server);
    assert_eq!(turns.len(), 1);
    assert!(turns[0].system_text().starts_with("You review closely."));
    assert_eq!(turns[0].body["model"], "claude-haiku-4-5");
}

#[test]
fn a_forked_skill_naming_no_agent_is_listed_with_a_warning_and_sends_nothing() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(
        ".crush/skills/odd/SKILL.md",
        &skill_md(
            "odd",
            "Odd values.",
            "user-invocable: true\ncontext: fork\nagent: nobody\n",
        ),
    );
    env.write_project_file(
        ".crush/skills/inline/SKILL.md",
        &skill_md("inline", "Inline.", "context: banana\nmodel: haiku\n"),
    );
    let list = list_json(&env);
    let odd = by_path(&list["skills"], "odd/SKILL.md");
    assert_eq!(odd["state"], "active", "{odd}");
    assert!(
        odd["warnings"][0]
            .as_str()
            .unwrap()
            .contains("agent `nobody` is neither"),
        "{odd}"
    );
    let inline = by_path(&list["skills"], "inline/SKILL.md");
    assert_eq!(inline["context"], "inline", "{inline}");
    assert_eq!(
        inline["warnings"].as_array().map(Vec::len),
        Some(2),
        "{inline}"
    );
    let text = env.run(&["skills", "list"], None);
    assert!(
        text.stdout
            .contains("warning: context `banana` is not `fork`"),
        "{}",
        text.stdout
    );
    let out = env.run(&["run", "/odd go"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("no agent named \"nobody\""),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}
