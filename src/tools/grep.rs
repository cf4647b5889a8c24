//! The `grep` tool: searches file contents with a regular expression (or literal text), results
//! grouped by file, newest files first. Uses ripgrep when on PATH, else a walk with regex-lite;
//! both honour `.gitignore` and `.crushignore` and skip binary files.

use super::ToolError;
use super::common::{
    file_kind, inside_project, looks_binary, mtime_ns, open_regular, opt_bool, opt_str,
    outside_project_permission, req_str, resolve_or_cwd, truncate_line,
};
use super::confine::ReadDeny;
use super::glob::{SEARCH_TIMEOUT, wants_hidden};
use super::ignore::{self, CrushIgnoreFilter, Flow, GlobSet, WalkOptions};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use crate::paths::canonicalize_lenient;
use crate::proc::{self, Spec};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub(crate) struct Grep;

pub(crate) const MAX_MATCHES: usize = 100;
const MAX_LINE_CHARS: usize = 500;
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

struct Query<'a> {
    pattern: &'a str,
    include: Option<&'a str>,
    literal: bool,
}

/// (line number, text)
type MatchLine = (usize, String);
/// Matches per file.
type Matches = BTreeMap<PathBuf, Vec<MatchLine>>;

fn rg_search(
    rg: &Path,
    root: &Path,
    q: &Query,
    top: Option<&Path>,
    deny: &mut ReadDeny,
    cancel: &std::sync::Arc<AtomicBool>,
    env: &crate::env::Overlay,
) -> Result<Option<(Matches, bool)>, ToolError> {
    let (cwd, target) = if root.is_dir() {
        (root.to_path_buf(), ".".to_string())
    } else {
        let parent = root.parent().unwrap_or(Path::new("/")).to_path_buf();
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (parent, name)
    };
    let mut argv = vec![
        rg.display().to_string(),
        "-n".into(),
        "-H".into(),
        "--no-heading".into(),
        "--null".into(),
        "--no-messages".into(),
        "--no-require-git".into(),
        "--color".into(),
        "never".into(),
        "--max-count".into(),
        (MAX_MATCHES + 1).to_string(),
    ];
    if q.literal {
        argv.push("-F".into());
    }
    // rg's --glob overrides ignore files; a file type does not. Name-only globs become a type,
    // path globs are applied to the results.
    let include = q.include.map(GlobSet::new);
    let mut post_filter = None;
    if let Some(inc) = q.include {
        if wants_hidden(inc) {
            argv.extend(["--hidden".into(), "--glob".into(), "!.git".into()]);
        }
        if inc.contains('/') {
            post_filter = include;
        } else {
            argv.extend([
                "--type-add".into(),
                format!("crushinclude:{inc}"),
                "--type".into(),
                "crushinclude".into(),
            ]);
        }
    }
    argv.extend(["-e".into(), q.pattern.to_string(), "--".into(), target]);
    let mut spec = Spec::exec(argv, &cwd);
    spec.env = env.vars();
    spec.timeout = Some(SEARCH_TIMEOUT);
    spec.cancel = Some(cancel.clone());
    spec.output_cap = 32 * 1024 * 1024;
    let Ok(r) = proc::run(&spec) else {
        return Ok(None);
    };
    if r.exit_code == Some(2) && r.stdout.is_empty() {
        let stderr = r.stderr_text();
        let msg = stderr.trim();
        if msg.is_empty() {
            return Ok(None);
        }
        return Err(format!("grep failed: {msg}").into());
    }
    let mut filter = top.map(CrushIgnoreFilter::new);
    let mut matches = Matches::new();
    // Files a Read deny rule covers, counted at their first line.
    let mut denied = std::collections::HashSet::new();
    for line in r.stdout_text().lines() {
        let Some((file, rest)) = line.split_once('\0') else {
            continue;
        };
        let Some((num, text)) = rest.split_once(':') else {
            continue;
        };
        let Ok(num) = num.parse::<usize>() else {
            continue;
        };
        let rel = file.trim_start_matches("./");
        if post_filter.as_ref().is_some_and(|g| !g.matches(rel)) {
            continue;
        }
        let path = cwd.join(rel);
        if filter.as_mut().is_some_and(|f| f.ignored(&path, false)) {
            continue;
        }
        if denied.contains(&path) {
            continue;
        }
        if !matches.contains_key(&path) && deny.skip_found(&cwd, &path) {
            denied.insert(path);
            continue;
        }
        matches
            .entry(path)
            .or_default()
            .push((num, text.trim_end_matches('\r').to_string()));
    }
    Ok(Some((matches, r.timed_out || r.canceled)))
}

fn build_regex(q: &Query) -> Result<regex_lite::Regex, ToolError> {
    let src = if q.literal {
        regex_lite::escape(q.pattern)
    } else {
        q.pattern.to_string()
    };
    regex_lite::Regex::new(&src)
        .map_err(|e| ToolError::RespondToModel(format!("invalid regular expression: {e}")))
}

/// Searches one file. Only regular files are read: a symlink found in the walk is not followed
/// (ripgrep does not follow them either, and its target may lie outside the project), and a FIFO
/// would block the read.
fn search_file(re: &regex_lite::Regex, path: &Path, matches: &mut Matches) {
    let Ok((file, meta)) = open_regular(path) else {
        return;
    };
    if meta.len() > MAX_FILE_BYTES {
        return;
    }
    let mut data = Vec::new();
    if file.take(MAX_FILE_BYTES).read_to_end(&mut data).is_err() {
        return;
    }
    if looks_binary(&data) {
        return;
    }
    let text = String::from_utf8_lossy(&data);
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if re.is_match(line) {
            found.push((i + 1, line.trim_end_matches('\r').to_string()));
            if found.len() > MAX_MATCHES {
                break;
            }
        }
    }
    if !found.is_empty() {
        matches.insert(path.to_path_buf(), found);
    }
}

fn walk_search(
    root: &Path,
    q: &Query,
    top: Option<&Path>,
    deny: &mut ReadDeny,
    cancel: &AtomicBool,
) -> Result<(Matches, bool), ToolError> {
    let re = build_regex(q)?;
    let mut matches = Matches::new();
    if root.is_file() {
        search_file(&re, root, &mut matches);
        return Ok((matches, false));
    }
    let include = q.include.map(GlobSet::new);
    let opts = WalkOptions {
        hidden: q.include.is_some_and(wants_hidden),
        top: top.map(Path::to_path_buf),
        ..Default::default()
    };
    let started = Instant::now();
    let mut stopped = false;
    ignore::walk(root, &opts, &mut |e| {
        if started.elapsed() > SEARCH_TIMEOUT || cancel.load(Ordering::Relaxed) {
            stopped = true;
            return Flow::Stop;
        }
        if e.is_dir {
            if deny.skip(&e.path, true) {
                return Flow::Skip;
            }
        } else if include.as_ref().is_none_or(|g| g.matches(&e.rel)) && !deny.skip(&e.path, false) {
            search_file(&re, &e.path, &mut matches);
        }
        Flow::Continue
    });
    Ok((matches, stopped))
}

fn search(input: &Value, ctx: &ToolCtx, allow_rg: bool) -> Result<ToolOutput, ToolError> {
    let q = Query {
        pattern: req_str(input, "pattern")?,
        include: opt_str(input, "include")?,
        literal: opt_bool(input, "literal_text")?,
    };
    let root = resolve_or_cwd(ctx, opt_str(input, "path")?)?;
    match fs::metadata(&root) {
        Err(_) => return Err(format!("path not found: {}", root.display()).into()),
        Ok(m) if !m.is_dir() && !m.is_file() => {
            return Err(format!(
                "{} is {}; grep searches regular files and directories",
                root.display(),
                file_kind(&m.file_type())
            )
            .into());
        }
        Ok(_) => {}
    }
    let project = canonicalize_lenient(ctx.project_root);
    let top = inside_project(ctx, &root).then_some(project.as_path());
    let mut deny = ctx.bounds.read_deny();
    deny.refuse_root(&root, "grep", "search")?;
    let via_rg = match ignore::find_rg().filter(|_| allow_rg) {
        Some(rg) => rg_search(&rg, &root, &q, top, &mut deny, &ctx.cancel, ctx.env)?,
        None => None,
    };
    let (matches, stopped) = match via_rg {
        Some(m) => m,
        None => {
            // A search that fell back to the walk counts afresh.
            deny.left_out = 0;
            walk_search(&root, &q, top, &mut deny, &ctx.cancel)?
        }
    };
    let left_out = deny.note();

    let mut files: Vec<(i64, PathBuf, Vec<MatchLine>)> = matches
        .into_iter()
        .map(|(p, mut lines)| {
            lines.sort_by_key(|l| l.0);
            let t = fs::metadata(&p).map(|m| mtime_ns(&m)).unwrap_or(i64::MIN);
            (t, p, lines)
        })
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total: usize = files.iter().map(|f| f.2.len()).sum();
    // A file stops being searched after MAX_MATCHES + 1 hits, so the total is then a lower bound.
    let capped = files.iter().any(|f| f.2.len() > MAX_MATCHES);
    if total == 0 {
        let mut content = "No files found".to_string();
        if stopped {
            content.push_str(" (the search was stopped before it finished)");
        }
        if let Some(note) = &left_out {
            content.push_str(&format!("\n\n{note}"));
        }
        return Ok(ToolOutput {
            content,
            is_error: false,
            metadata: json!({"matches": 0, "truncated": false}),
            ..Default::default()
        });
    }
    let shown = total.min(MAX_MATCHES);
    let mut content = if capped {
        format!("Found more than {MAX_MATCHES} matches")
    } else {
        format!("Found {total} matches")
    };
    if total > MAX_MATCHES {
        content.push_str(&format!(" (showing the first {MAX_MATCHES})"));
    }
    content.push('\n');
    let mut left = MAX_MATCHES;
    for (_, path, lines) in &files {
        if left == 0 {
            break;
        }
        content.push_str(&format!("{}:\n", path.display()));
        for (num, text) in lines.iter().take(left) {
            content.push_str(&format!(
                "  Line {num}: {}\n",
                truncate_line(text, MAX_LINE_CHARS)
            ));
            left -= 1;
        }
        content.push('\n');
    }
    if total > MAX_MATCHES {
        content.push_str(
            "(Results are truncated. Consider using a more specific pattern, path or include.)\n",
        );
    }
    if stopped {
        content
            .push_str("(The search was stopped before it finished; results may be incomplete.)\n");
    }
    if let Some(note) = &left_out {
        content.push_str(note);
        content.push('\n');
    }
    Ok(ToolOutput {
        content: content.trim_end().to_string(),
        is_error: false,
        metadata: json!({"matches": shown, "total": total, "truncated": total > MAX_MATCHES}),
        ..Default::default()
    })
}

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        true
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("Grep".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        let pattern = super::common::arg(input, "pattern").unwrap_or("");
        format!(
            "Search for {}{}",
            super::common::first_line(pattern, 80),
            super::common::within_arg(input, "path", cwd)
        )
        .trim_end()
        .to_string()
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        super::Location::of(input, "path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        format!(
            "Searches file contents for a regular expression and lists matching lines with their \
             line numbers, grouped by file, most recently modified files first.\n\
             \n\
             - `pattern`: a regular expression (Rust syntax: `fn\\s+main`, `log.*Error`); set \
             `literal_text` to true to search for the exact text instead (no escaping needed).\n\
             - `include`: only files whose name matches this glob (`*.rs`, `*.{{ts,tsx}}`).\n\
             - `path`: directory or file to search (default: the working directory).\n\
             - Files excluded by .gitignore or .crushignore, hidden files and binary files are \
             skipped. At most {MAX_MATCHES} matches are shown.\n\
             - To find files by name use glob."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (or text with literal_text)"},
                "path": {"type": "string", "description": "Directory or file to search (default: working directory)"},
                "include": {"type": "string", "description": "Glob of file names to search, e.g. *.js"},
                "literal_text": {
                    "type": "boolean",
                    "description": "Treat pattern as literal text rather than a regular expression"
                }
            },
            "required": ["pattern"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "pattern")?;
        opt_str(input, "include")?;
        opt_bool(input, "literal_text")?;
        let root = resolve_or_cwd(ctx, opt_str(input, "path")?)?;
        Ok(outside_project_permission(
            ctx,
            self.name(),
            "list",
            &root,
            "Search in",
        ))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        search(input, ctx, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{Fixture, within};

    fn setup() -> Fixture {
        let fx = Fixture::new();
        fx.write(".gitignore", "ignored/\n*.gen.md\n");
        fx.write("x.gen.md", "TODO generated\n");
        fx.write("docs/sub.md", "TODO docs\n");
        fx.age("docs/sub.md", 200);
        fx.write(".crushignore", "private.txt\n");
        fx.write("old.rs", "fn main() {}\n// TODO old\n");
        fx.write("new.rs", "// TODO new\nlet x = a.b;\n// TODO again\n");
        fx.write("notes.md", "TODO in markdown\n");
        fx.write("ignored/x.rs", "TODO hidden by gitignore\n");
        fx.write("private.txt", "TODO hidden by crushignore\n");
        fs::write(fx.path("bin.dat"), b"TODO\0binary").unwrap();
        fx.age("old.rs", 100);
        fx.age("notes.md", 50);
        fx
    }

    fn check(allow_rg: bool) {
        let fx = setup();
        let ctx = fx.ctx();
        let r = fx.root().display().to_string();
        let out = search(&json!({"pattern": "TODO"}), &ctx, allow_rg).unwrap();
        assert_eq!(
            out.content,
            format!(
                "Found 5 matches\n{r}/new.rs:\n  Line 1: // TODO new\n  Line 3: // TODO again\n\n\
                 {r}/notes.md:\n  Line 1: TODO in markdown\n\n{r}/old.rs:\n  Line 2: // TODO old\n\n\
                 {r}/docs/sub.md:\n  Line 1: TODO docs"
            )
        );
        let out = search(
            &json!({"pattern": "TODO", "include": "*.md"}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert_eq!(out.metadata["matches"], 2, "{}", out.content);
        let out = search(
            &json!({"pattern": "TODO", "include": "*.{md,rs}"}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert_eq!(out.metadata["matches"], 5, "{}", out.content);
        let out = search(
            &json!({"pattern": "TODO", "include": "docs/*.md"}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert_eq!(out.metadata["matches"], 1, "{}", out.content);
        let out = search(&json!({"pattern": "a.b"}), &ctx, allow_rg).unwrap();
        assert_eq!(out.metadata["matches"], 1);
        let out = search(
            &json!({"pattern": "a.b(", "literal_text": true}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert_eq!(out.content, "No files found");
        let out = search(
            &json!({"pattern": "fn\\s+main", "path": "old.rs"}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert!(
            out.content.contains("Line 1: fn main() {}"),
            "{}",
            out.content
        );
        assert!(search(&json!({"pattern": "("}), &ctx, allow_rg).is_err());
    }

    #[test]
    fn walk_fallback() {
        check(false);
    }

    #[test]
    fn ripgrep_when_available() {
        if ignore::find_rg().is_some() {
            check(true);
        }
    }

    #[test]
    fn symlinks_and_fifos_are_not_read() {
        let fx = Fixture::new();
        fx.write("outside/secret.txt", "TODO secret\n");
        fx.write("proj/mine.txt", "TODO mine\n");
        fx.symlink(&fx.path("outside/secret.txt"), "proj/leak");
        fx.symlink(&fx.path("outside"), "proj/leakdir");
        fx.mkfifo("proj/pipe");
        let proj = fx.path("proj");
        for allow_rg in [false, true] {
            let out = within(10, &proj, move |ctx| {
                search(&json!({"pattern": "TODO"}), ctx, allow_rg)
            })
            .unwrap();
            assert!(out.content.contains("TODO mine"), "{}", out.content);
            assert!(!out.content.contains("secret"), "{}", out.content);
            assert_eq!(out.metadata["matches"], 1);
        }
        let err = within(10, &proj, |ctx| {
            search(&json!({"pattern": "x", "path": "pipe"}), ctx, false)
        })
        .unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        // Naming the link itself resolves it: outside the project, so permission is needed.
        let ctx = fx.ctx_in(&proj);
        let req = Grep
            .permission(&json!({"pattern": "x", "path": "leak"}), &ctx)
            .unwrap()
            .expect("outside the project");
        assert_eq!(req.path, fx.path("outside/secret.txt"));
    }

    #[test]
    fn cap_and_permission() {
        let fx = Fixture::new();
        fx.write("many.txt", &"hit\n".repeat(150));
        let ctx = fx.ctx();
        let out = search(&json!({"pattern": "hit"}), &ctx, false).unwrap();
        assert_eq!(out.metadata["matches"], 100);
        assert!(out.content.contains("Results are truncated"));
        assert_eq!(out.content.matches("Line ").count(), 100);
        assert_eq!(
            Grep.permission(&json!({"pattern": "x"}), &ctx).unwrap(),
            None
        );
        assert!(
            Grep.permission(&json!({"pattern": "x", "path": "/tmp"}), &ctx)
                .unwrap()
                .is_some()
        );
    }
}
