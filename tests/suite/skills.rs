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
    let doc = list_json(&env);
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
        bad["reason"].as_str().unwrap().contains("lowercase"),
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
