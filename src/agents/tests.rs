use super::*;

const DEFAULT: &[&str] = &["glob", "grep", "ls", "view"];

fn agent_md(name: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: Does {name} things.\n{extra}---\n{body}\n")
}

struct Dirs {
    _t: tempfile::TempDir,
    project: PathBuf,
    config: PathBuf,
    home: PathBuf,
}

fn dirs() -> Dirs {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("p");
    let config = t.path().join("cfg");
    let home = t.path().join("home");
    Dirs {
        project,
        config,
        home,
        _t: t,
    }
}

fn put(dir: &Path, file: &str, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(file);
    std::fs::write(&p, bytes).unwrap();
    p
}

impl Dirs {
    fn discover(&self, trusted: bool) -> Agents {
        discover(
            &folders(&self.project, &self.config, &self.home),
            &Policy {
                project_trusted: trusted,
                default_tools: DEFAULT,
                project_providers: vec!["evil".into()],
            },
        )
    }
}

#[test]
fn an_agent_in_each_of_the_four_folders_is_found_with_its_origin() {
    let d = dirs();
    put(
        &d.project.join(".crush/agents"),
        "a.md",
        agent_md("a", "", "A body").as_bytes(),
    );
    put(
        &d.project.join(".claude/agents"),
        "b.md",
        agent_md("b", "tools: view, grep\n", "B").as_bytes(),
    );
    put(
        &d.config.join("agents"),
        "c.md",
        agent_md("c", "model: sonnet\n", "C").as_bytes(),
    );
    put(
        &d.home.join(".claude/agents"),
        "d.md",
        agent_md("d", "model: fake/m1\ntools: bash\n", "D").as_bytes(),
    );
    let got = d.discover(false);
    assert!(got.rejected.is_empty(), "{:?}", got.rejected);
    let seen: Vec<(&str, Origin)> = got
        .agents
        .iter()
        .map(|a| (a.name.as_str(), a.origin))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("a", Origin::Project),
            ("b", Origin::ClaudeProject),
            ("c", Origin::User),
            ("d", Origin::ClaudeUser)
        ]
    );
    assert_eq!(got.agents[0].body, "A body");
    assert_eq!(got.agents[0].tools, None);
    assert_eq!(
        got.agents[1].tools,
        Some(vec!["view".into(), "grep".into()])
    );
    assert_eq!(got.agents[2].model, ModelChoice::Family("sonnet".into()));
    assert_eq!(
        got.agents[3].model,
        ModelChoice::Exact {
            provider: "fake".into(),
            model: "m1".into()
        }
    );
}

#[test]
fn bad_files_are_listed_with_the_reason() {
    let d = dirs();
    let dir = d.config.join("agents");
    put(&dir, "broken.md", b"---\nname: [unclosed\n---\nbody\n");
    put(
        &dir,
        "model.md",
        agent_md("model", "model: gpt-9000\n", "x").as_bytes(),
    );
    put(&dir, "first.md", agent_md("twin", "", "one").as_bytes());
    let big = agent_md("big", "", &"x".repeat(10 * 1024 * 1024));
    put(&dir, "huge.md", big.as_bytes());
    put(
        &dir,
        "latin1.md",
        b"---\nname: caf\xe9\ndescription: d\n---\n",
    );
    put(&dir, "noname.md", b"---\ndescription: d\n---\n");
    put(
        &d.home.join(".claude/agents"),
        "second.md",
        agent_md("twin", "", "two").as_bytes(),
    );
    let got = d.discover(true);
    assert_eq!(got.agents.len(), 1, "{:?}", got.agents);
    assert_eq!(got.agents[0].body, "one");
    let reason = |file: &str| {
        got.rejected
            .iter()
            .find(|r| r.path.ends_with(file))
            .unwrap_or_else(|| panic!("{file} not rejected: {:?}", got.rejected))
            .reason
            .to_string()
    };
    assert!(
        reason("broken.md").contains("frontmatter"),
        "{}",
        reason("broken.md")
    );
    assert!(
        reason("model.md").contains("gpt-9000"),
        "{}",
        reason("model.md")
    );
    assert!(
        reason("huge.md").contains("too large"),
        "{}",
        reason("huge.md")
    );
    assert!(
        reason("latin1.md").contains("not UTF-8"),
        "{}",
        reason("latin1.md")
    );
    assert!(
        reason("noname.md").contains("no name"),
        "{}",
        reason("noname.md")
    );
    assert!(
        reason("second.md").contains("shadowed by") && reason("second.md").contains("first.md")
    );
}

#[test]
fn an_untrusted_projects_agent_loads_only_if_it_widens_nothing() {
    let d = dirs();
    let dir = d.project.join(".crush/agents");
    put(
        &dir,
        "reader.md",
        agent_md("reader", "tools: view, grep\nmodel: haiku\n", "r").as_bytes(),
    );
    put(
        &dir,
        "runner.md",
        agent_md("runner", "tools: view, bash\n", "r").as_bytes(),
    );
    put(
        &dir,
        "elsewhere.md",
        agent_md("elsewhere", "model: evil/m\n", "r").as_bytes(),
    );
    let got = d.discover(false);
    let names: Vec<&str> = got.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, vec!["reader"]);
    let why: Vec<String> = got.rejected.iter().map(|r| r.reason.to_string()).collect();
    assert!(
        why.iter()
            .any(|w| w.contains("not trusted") && w.contains("tools bash")),
        "{why:?}"
    );
    assert!(why.iter().any(|w| w.contains("model evil/m")), "{why:?}");
    assert_eq!(d.discover(true).agents.len(), 3);
}

#[test]
fn fifty_agents_are_discovered_quickly() {
    let d = dirs();
    let dir = d.config.join("agents");
    for i in 0..50 {
        put(
            &dir,
            &format!("a{i}.md"),
            agent_md(&format!("a{i}"), "tools: view\n", &"Body.\n".repeat(100)).as_bytes(),
        );
    }
    let mut times = Vec::new();
    for _ in 0..20 {
        let start = std::time::Instant::now();
        let got = d.discover(true);
        times.push(start.elapsed());
        assert_eq!(got.agents.len(), 50);
    }
    times.sort();
    eprintln!(
        "50 agents discovered in {:?} (fastest of 20), {:?} (median)",
        times[0], times[10]
    );
    // Generous on a loaded machine; the figures printed are the measure.
    assert!(
        times[0] < std::time::Duration::from_millis(200),
        "{times:?}"
    );
}
