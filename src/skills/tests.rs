use super::*;
use crate::tools::testutil::{Fixture, Out};
use crate::tools::{Tool, view::View};
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo the thing.\n")
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn root(dir: &Path, source: Source) -> Root {
    Root {
        dir: dir.to_path_buf(),
        source,
        configured: false,
    }
}

fn state_of<'a>(s: &'a Skills, path_end: &str) -> &'a State {
    &s.found
        .iter()
        .find(|f| f.path.ends_with(path_end))
        .unwrap_or_else(|| panic!("{path_end} not found in {:#?}", s.found))
        .state
}

#[test]
fn builtin_skills_are_valid_and_listed_last() {
    let s = discover_in(&[], Path::new("/"), &[]);
    let names: Vec<&str> = s.active().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, vec!["crush-config", "crush-hooks"]);
    assert!(
        s.found.iter().all(|f| f.state == State::Active),
        "{:#?}",
        s.found
    );
    let listing = s.prompt_listing();
    assert!(listing.starts_with("<available_skills>\n"), "{listing}");
    assert!(listing.contains("<location>crush://skills/crush-config/SKILL.md</location>"));
    assert!(listing.contains("<type>builtin</type>"));
}

#[test]
fn project_comes_before_user_and_the_first_of_a_name_wins_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    let t = fs::canonicalize(t.path()).unwrap();
    let project = t.join("p");
    let user = t.join("u");
    // A user skill named like a built-in one replaces it, without a warning.
    for (dir, name, description) in [
        (project.join(".crush/skills"), "review", "project review"),
        (project.join(".claude/skills"), "review", "claude review"),
        (user.clone(), "review", "user review"),
        (user.clone(), "deploy", "user deploy"),
        (user.clone(), "crush-hooks", "my hooks"),
    ] {
        write(
            &dir.join(name).join(SKILL_FILE),
            &skill_md(name, description),
        );
    }
    let roots = vec![
        root(&project.join(".crush/skills"), Source::Project),
        root(&project.join(".claude/skills"), Source::Project),
        root(&user, Source::User),
    ];
    let s = discover_in(&roots, &project, &["deploy".to_string()]);
    let active: Vec<(&str, &str)> = s
        .active()
        .iter()
        .map(|k| (k.name.as_str(), k.description.as_str()))
        .collect();
    assert_eq!(
        active,
        vec![
            (
                "crush-config",
                "Use when the user wants to configure crush itself — crush.json or crushrc files, providers and models, permissions, MCP servers, context files, skills, custom commands, trust, or where crush keeps its files."
            ),
            ("crush-hooks", "my hooks"),
            ("review", "project review"),
        ]
    );
    assert!(
        matches!(state_of(&s, ".claude/skills/review/SKILL.md"), State::Shadowed(by) if by.ends_with(".crush/skills/review/SKILL.md"))
    );
    assert!(matches!(
        state_of(&s, "u/review/SKILL.md"),
        State::Shadowed(_)
    ));
    assert_eq!(state_of(&s, "deploy/SKILL.md"), &State::Disabled);
    assert!(matches!(
        state_of(&s, "crush://skills/crush-hooks/SKILL.md"),
        State::Shadowed(_)
    ));
    assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    assert!(
        s.warnings[0].contains("skill review") && s.warnings[0].contains(".claude/skills/review"),
        "{:?}",
        s.warnings
    );
    // Disabled and shadowed skills are neither offered nor readable.
    assert!(!s.prompt_listing().contains("deploy"));
    let files = s.files();
    assert!(files.contains(&project.join(".crush/skills/review/x.md")));
    assert!(!files.contains(&user.join("deploy/SKILL.md")));
    assert!(
        files
            .builtin("crush://skills/crush-hooks/SKILL.md")
            .is_none()
    );
    assert!(
        files
            .builtin("crush://skills/crush-config/SKILL.md")
            .is_some()
    );
}

#[test]
fn frontmatter_edge_cases_at_the_skill_level() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    let long = "a".repeat(65);
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        ("crlf", "---\r\nname: crlf\r\ndescription: \"quoted: yes\"\r\n---\r\nbody\r\n".into(), None),
        ("single", "---\nname: 'single'\ndescription: 'it''s fine'\nmetadata:\n  author: me\nallowed-tools: Read Grep\nuser-invocable: true\n---\n".into(), None),
        ("folded", "---\nname: folded\ndescription: >\n  Long text\n  over lines.\n---\n---\nnot frontmatter\n".into(), None),
        ("no-desc", "---\nname: no-desc\n---\n".into(), Some("description is required")),
        ("no-name", "---\ndescription: x\n---\n".into(), Some("name is required")),
        ("Upper", "---\nname: Upper\ndescription: x\n---\n".into(), None),
        ("mixed", "---\nname: MiXed\ndescription: x\n---\n".into(), None),
        ("under_score", "---\nname: under_score\ndescription: x\n---\n".into(), Some("letters, digits and single hyphens")),
        ("bad--name", "---\nname: bad--name\ndescription: x\n---\n".into(), Some("single hyphens")),
        ("other", "---\nname: mismatch\ndescription: x\n---\n".into(), Some("must be the name of its folder `other`")),
        (&long, format!("---\nname: {long}\ndescription: x\n---\n"), Some("name is 65 characters")),
        ("longdesc", format!("---\nname: longdesc\ndescription: {}\n---\n", "d".repeat(1025)), Some("description is 1025 characters")),
        ("compat", format!("---\nname: compat\ndescription: x\ncompatibility: {}\n---\n", "c".repeat(501)), Some("compatibility is 501")),
        ("nofm", "# Just a title\n".into(), None),
        ("nofm-para", "# Deploy helper\n\nDeploys the app\nto staging.\n\n## Steps\nRun make.\n".into(), None),
        ("empty-nofm", "\n\n".into(), Some("description is required")),
        ("broken", "---\nname: broken\ndescription: \"open\n---\n".into(), Some("line 3: the quoted value is never closed")),
        ("unclosed", "---\nname: unclosed\n".into(), Some("never closed by a line ---")),
        ("meta", "---\nname: meta\ndescription: x\nmetadata: [a, b]\n---\n".into(), Some("metadata must map")),
        ("flag", "---\nname: flag\ndescription: x\nuser-invocable: maybe\n---\n".into(), Some("user-invocable must be true or false")),
    ];
    for (folder, text, _) in &cases {
        write(&b.join(folder).join(SKILL_FILE), text);
    }
    let s = discover_in(&[root(&b, Source::User)], &b, &[]);
    for (folder, _, want) in &cases {
        let st = state_of(&s, &format!("/{folder}/SKILL.md"));
        match want {
            None => assert_eq!(st, &State::Active, "{folder}"),
            Some(w) => assert!(
                matches!(st, State::Rejected(why) if why.contains(w)),
                "{folder}: {st:?}"
            ),
        }
    }
    let single = s.get("single").unwrap();
    assert_eq!(single.description, "it's fine");
    assert_eq!(
        single.metadata,
        vec![("author".to_string(), "me".to_string())]
    );
    assert_eq!(single.allowed_tools, vec!["Read", "Grep"]);
    assert!(single.user_invocable);
    assert_eq!(s.get("crlf").unwrap().description, "quoted: yes");
    let folded = s.get("folded").unwrap();
    assert_eq!(folded.description, "Long text over lines.");
    assert_eq!(folded.instructions, "---\nnot frontmatter");
    // Without frontmatter (as Claude Code): named after its folder, described by its first
    // paragraph, else its first heading.
    let nofm = s.get("nofm").unwrap();
    assert_eq!(
        (nofm.name.as_str(), nofm.description.as_str()),
        ("nofm", "Just a title")
    );
    let para = s.get("nofm-para").unwrap();
    assert_eq!(para.description, "Deploys the app to staging.");
    assert!(
        para.instructions.starts_with("# Deploy helper"),
        "{}",
        para.instructions
    );
}

#[test]
fn bad_input_is_listed_never_fatal() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    // A 10 MB SKILL.md: rejected by its size, not read.
    let big = b.join("big/SKILL.md");
    write(&big, "");
    fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(10 << 20)
        .unwrap();
    // A loop, a link to itself, and a skill that is not UTF-8.
    symlink(&b, b.join("loop")).unwrap();
    symlink("self", b.join("self")).unwrap();
    write(&b.join("latin/SKILL.md"), "");
    fs::write(
        b.join("latin/SKILL.md"),
        b"---\nname: latin\ndescription: caf\xe9\n---\n",
    )
    .unwrap();
    write(&b.join("fine/SKILL.md"), &skill_md("fine", "ok"));
    let s = discover_in(&[root(&b, Source::User)], &b, &[]);
    assert!(
        matches!(state_of(&s, "big/SKILL.md"), State::Rejected(w) if w.contains("too large: 10485760 bytes"))
    );
    assert!(
        matches!(state_of(&s, "/loop"), State::Rejected(w) if w.contains("symbolic link loop"))
    );
    assert!(
        matches!(state_of(&s, "/self"), State::Rejected(w) if w.contains("symbolic link loop"))
    );
    assert!(
        matches!(state_of(&s, "latin/SKILL.md"), State::Rejected(w) if w.contains("not UTF-8"))
    );
    assert_eq!(state_of(&s, "fine/SKILL.md"), &State::Active);
    let text = s.list_text();
    assert!(text.contains("rejected: too large"), "{text}");
    let json = s.list_json();
    assert!(
        json.as_array()
            .unwrap()
            .iter()
            .any(|v| v["state"] == "rejected" && v["path"].as_str().unwrap().ends_with("/self"))
    );
}

#[test]
fn discovery_is_bounded_in_depth_and_count() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    write(&b.join("a/b/c/deep/SKILL.md"), &skill_md("deep", "x"));
    write(
        &b.join("a/b/c/d/too-deep/SKILL.md"),
        &skill_md("too-deep", "x"),
    );
    // A skill's own sub-folders are its files, not more skills.
    write(&b.join("outer/SKILL.md"), &skill_md("outer", "x"));
    write(&b.join("outer/inner/SKILL.md"), &skill_md("inner", "x"));
    let s = discover_in(&[root(&b, Source::User)], &b, &[]);
    assert!(s.get("deep").is_some());
    assert!(s.get("too-deep").is_none());
    assert!(s.get("outer").is_some() && s.get("inner").is_none());
    for i in 0..(MAX_DIRS + 10) {
        fs::create_dir_all(b.join(format!("many/{i:05}"))).unwrap();
    }
    let s = discover_in(&[root(&b.join("many"), Source::User)], &b, &[]);
    assert!(
        s.found
            .iter()
            .any(|f| matches!(&f.state, State::Rejected(w) if w.contains("too many folders")))
    );
}

#[test]
fn a_project_skill_linked_out_of_the_project_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    let project = b.join("p");
    write(&b.join("elsewhere/ext/SKILL.md"), &skill_md("ext", "x"));
    fs::create_dir_all(project.join(".agents/skills")).unwrap();
    symlink(b.join("elsewhere/ext"), project.join(".agents/skills/ext")).unwrap();
    let s = discover_in(
        &[root(&project.join(".agents/skills"), Source::Project)],
        &project,
        &[],
    );
    assert!(
        matches!(state_of(&s, "ext/SKILL.md"), State::Rejected(w) if w.contains("outside the project"))
    );
    // The same folder from the user's own skills folder is fine.
    let s = discover_in(&[root(&b.join("elsewhere"), Source::User)], &project, &[]);
    assert_eq!(state_of(&s, "ext/SKILL.md"), &State::Active);
}

#[test]
fn a_configured_folder_that_is_missing_is_listed_not_rejected() {
    let r = Root {
        dir: PathBuf::from("/nonexistent/skills"),
        source: Source::User,
        configured: true,
    };
    let s = discover_in(&[r], Path::new("/"), &[]);
    assert_eq!(s.found[0].state, State::Missing);
    assert!(s.list_text().contains("not found"), "{}", s.list_text());
    assert!(!s.list_text().contains("rejected"), "{}", s.list_text());
    assert_eq!(s.list_json()[0]["state"], "missing");
}

#[test]
fn view_reads_skill_files_without_asking_but_not_through_a_link_out() {
    let mut fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    let outside = fs::canonicalize(outside.path()).unwrap();
    let skill = outside.join("skills/pdf");
    write(&skill.join("SKILL.md"), &skill_md("pdf", "pdfs"));
    write(&skill.join("ref/forms.md"), "forms");
    write(&outside.join("secret.txt"), "secret");
    symlink(outside.join("secret.txt"), skill.join("leak.md")).unwrap();
    let s = discover_in(
        &[root(&outside.join("skills"), Source::User)],
        fx.root(),
        &[],
    );
    fx.skills = s.files();
    let ctx = fx.ctx();
    let md = skill.join("SKILL.md").display().to_string();
    assert_eq!(
        View.permission(&json!({"file_path": md}), &ctx).unwrap(),
        None
    );
    let forms = skill.join("ref/forms.md").display().to_string();
    assert_eq!(
        View.permission(&json!({"file_path": forms}), &ctx).unwrap(),
        None
    );
    // The link leads out of the skill's folder: the usual question.
    let leak = skill.join("leak.md").display().to_string();
    let req = View.permission(&json!({"file_path": leak}), &ctx).unwrap();
    assert!(req.is_some_and(|r| r.path == outside.join("secret.txt")));
    let out = View.run(&json!({"file_path": md}), &ctx).out();
    assert!(
        !out.is_error && out.content.contains("Do the thing."),
        "{}",
        out.content
    );
    let builtin = "crush://skills/crush-hooks/SKILL.md";
    assert_eq!(
        View.permission(&json!({"file_path": builtin}), &ctx)
            .unwrap(),
        None
    );
    let out = View.run(&json!({"file_path": builtin}), &ctx).out();
    assert!(
        !out.is_error && out.content.contains("     1|---\n     2|name: crush-hooks"),
        "{}",
        out.content
    );
    let out = View
        .run(&json!({"file_path": "crush://skills/nope/SKILL.md"}), &ctx)
        .out();
    assert!(
        out.is_error && out.content.contains("crush://skills/crush-config/SKILL.md"),
        "{}",
        out.content
    );
}

#[test]
fn a_claude_code_skill_without_a_name_is_named_after_its_folder() {
    // Claude Code's frontmatter may leave out name (the folder's is used), as published
    // .claude/skills/*/SKILL.md files do; the standard's folders still require it.
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    let text = "---\ndescription: Senior engineer code review\nuser-invocable: true\nallowed-tools: Read, Grep, Bash(git diff, git log)\n---\n\n# Code Review\n";
    let claude = b.join("proj/.claude/skills");
    let agents = b.join("proj/.agents/skills");
    write(&claude.join("code-review").join(SKILL_FILE), text);
    write(&agents.join("audit").join(SKILL_FILE), text);
    let s = discover_in(
        &[
            root(&claude, Source::Project),
            root(&agents, Source::Project),
        ],
        &b.join("proj"),
        &[],
    );
    let review = s.get("code-review").expect("named after its folder");
    assert_eq!(review.description, "Senior engineer code review");
    assert!(review.user_invocable);
    assert_eq!(
        state_of(&s, "/.claude/skills/code-review/SKILL.md"),
        &State::Active
    );
    assert!(matches!(
        state_of(&s, "/.agents/skills/audit/SKILL.md"),
        State::Rejected(why) if why.contains("name is required")
    ));
}

#[test]
fn a_forked_skill_is_marked_for_the_model_and_its_warnings_are_listed() {
    let t = tempfile::tempdir().unwrap();
    let t = fs::canonicalize(t.path()).unwrap();
    write(
        &t.join("scan/SKILL.md"),
        "---\nname: scan\ndescription: Scan.\ncontext: fork\nagent: auditor\n---\nScan.\n",
    );
    write(
        &t.join("odd/SKILL.md"),
        "---\nname: odd\ndescription: Odd.\ncontext: banana\n---\nOdd.\n",
    );
    let mut s = discover_in(&[root(&t, Source::User)], &t, &[]);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("odd/SKILL.md") && w.contains("context `banana` is not `fork`")),
        "{:?}",
        s.warnings
    );
    let listing = s.prompt_listing();
    assert!(
        listing.contains("<name>scan</name>\n    <description>Scan.</description>")
            && listing.contains("<context>fork</context>\n    <agent>auditor</agent>"),
        "{listing}"
    );
    let section = crate::agent::prompt::skills_section(&listing);
    assert!(
        section.contains("call the agent tool with its instructions"),
        "{section}"
    );
    s.check_agents(&["other"]);
    assert!(
        s.list_text()
            .contains("warning: agent `auditor` is neither"),
        "{}",
        s.list_text()
    );
    assert!(s.get("odd").unwrap().fork.is_none());
}

/// Claude Code's folders load a skill as Claude Code does: a display name or one that differs
/// from the folder gives way to the folder's name, a `compatibility` map is dropped, and the
/// skill is a command unless it says `user-invocable: false` (each with a note for `skills
/// list`, never a start warning); elsewhere the standard's (and Go Crush's) rules hold.
#[test]
fn claude_code_folders_load_skills_as_claude_code_does() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    let claude = b.join("proj/.claude/skills");
    let crush = b.join("proj/.crush/skills");
    let plan = "---\nname: Implementation Plan\ndescription: Plan the work.\n---\nPlan.\n";
    let spec = "---\nname: spec\ndescription: Specs.\ncompatibility:\n  tools: [a]\n---\nSpec.\n";
    let quiet = "---\nname: quiet\ndescription: Quiet.\nuser-invocable: false\n---\nQuiet.\n";
    write(&claude.join("implementation-plan").join(SKILL_FILE), plan);
    write(&claude.join("spec").join(SKILL_FILE), spec);
    write(&claude.join("quiet").join(SKILL_FILE), quiet);
    write(&crush.join("planning").join(SKILL_FILE), plan);
    write(
        &crush.join("spec2").join(SKILL_FILE),
        &spec.replace("spec\n", "spec2\n"),
    );
    write(
        &crush.join("plain").join(SKILL_FILE),
        &skill_md("plain", "Plain."),
    );
    let s = discover_in(
        &[
            root(&claude, Source::Project),
            root(&crush, Source::Project),
        ],
        &b.join("proj"),
        &[],
    );
    let p = s
        .get("implementation-plan")
        .expect("named after its folder");
    assert!(p.user_invocable, "Claude Code's default");
    assert!(
        p.notes[0].contains("`Implementation Plan`")
            && p.notes[0].contains("`implementation-plan`"),
        "{:?}",
        p.notes
    );
    let sp = s.get("spec").expect("a compatibility map is dropped");
    assert_eq!(sp.compatibility, None);
    assert!(sp.notes[0].contains("compatibility"), "{:?}", sp.notes);
    assert!(!s.get("quiet").unwrap().user_invocable);
    assert!(
        s.warnings.is_empty(),
        "notes are not start warnings: {:?}",
        s.warnings
    );
    // Go Crush's folders: the standard's rules and Go's default.
    assert!(matches!(
        state_of(&s, "/.crush/skills/planning/SKILL.md"),
        State::Rejected(why) if why.contains("must be letters")
    ));
    assert!(matches!(
        state_of(&s, "/.crush/skills/spec2/SKILL.md"),
        State::Rejected(why) if why.contains("compatibility must be a single value")
    ));
    assert!(!s.get("plain").unwrap().user_invocable);
    let listed = s.list_text();
    assert!(
        listed.contains("note: name `Implementation Plan`"),
        "{listed}"
    );
}

/// A hostile `name` in a Claude Code folder (a path, an escape sequence) never becomes the
/// command: the skill loads under its folder's name.
#[test]
fn a_hostile_name_in_a_claude_code_folder_gives_way_to_the_folder() {
    let t = tempfile::tempdir().unwrap();
    let b = fs::canonicalize(t.path()).unwrap();
    let claude = b.join("proj/.claude/skills");
    write(
        &claude.join("tidy").join(SKILL_FILE),
        "---\nname: ../../init\u{1b}[2K\ndescription: Tidy.\n---\nTidy.\n",
    );
    let s = discover_in(&[root(&claude, Source::Project)], &b.join("proj"), &[]);
    let names: Vec<&str> = s.active().iter().map(|k| k.name.as_str()).collect();
    assert!(names.contains(&"tidy"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("..")), "{names:?}");
}
