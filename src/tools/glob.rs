//! The `glob` tool: files whose path matches a glob pattern, newest first. Uses `rg --files` when
//! ripgrep is on PATH, else a walk; both honour `.gitignore` and `.crushignore`.

use super::ToolError;
use super::common::{
    inside_project, mtime_ns, opt_str, outside_project_permission, req_str, resolve_or_cwd,
};
use super::confine::ReadDeny;
use super::ignore::{self, CrushIgnoreFilter, Flow, GlobSet, WalkOptions};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use crate::paths::canonicalize_lenient;
use crate::proc::{self, Spec};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(crate) struct Glob;

pub(crate) const MAX_RESULTS: usize = 100;
pub(crate) const SEARCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether a pattern asks for hidden files explicitly (`.github/**`, `**/.env`).
pub(crate) fn wants_hidden(pattern: &str) -> bool {
    pattern.starts_with('.') && !pattern.starts_with("./") || pattern.contains("/.")
}

/// Sorts paths by modification time, newest first (then by path).
pub(crate) fn sort_newest_first(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut with_time: Vec<(i64, PathBuf)> = paths
        .into_iter()
        .map(|p| {
            let t = fs::metadata(&p).map(|m| mtime_ns(&m)).unwrap_or(i64::MIN);
            (t, p)
        })
        .collect();
    with_time.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    with_time.into_iter().map(|(_, p)| p).collect()
}

/// Files under `root` matching `pattern`, listed by `rg --files`; None when rg cannot run.
fn rg_files(
    rg: &Path,
    root: &Path,
    pattern: &str,
    top: Option<&Path>,
    deny: &mut ReadDeny,
    cancel: &std::sync::Arc<AtomicBool>,
    env: &crate::env::Overlay,
) -> Option<(Vec<PathBuf>, bool)> {
    let mut argv = vec![
        rg.display().to_string(),
        "--files".into(),
        "--no-messages".into(),
        "--no-require-git".into(),
    ];
    if wants_hidden(pattern) {
        argv.extend(["--hidden".into(), "--glob".into(), "!.git".into()]);
    }
    // No --glob: rg's globs override ignore files, so the pattern is applied here instead.
    let mut spec = Spec::exec(argv, root);
    spec.env = env.vars();
    spec.timeout = Some(SEARCH_TIMEOUT);
    spec.cancel = Some(cancel.clone());
    spec.output_cap = 32 * 1024 * 1024;
    let r = proc::run(&spec).ok()?;
    if r.exit_code.is_some_and(|c| c > 1) && r.stdout.is_empty() {
        return None;
    }
    let set = GlobSet::new(pattern);
    let mut filter = top.map(CrushIgnoreFilter::new);
    let files = r
        .stdout_text()
        .lines()
        .map(|l| l.trim_start_matches("./"))
        .filter(|l| !l.is_empty() && set.matches(l))
        .map(|l| root.join(l))
        .filter(|p| p.is_file())
        .filter(|p| filter.as_mut().is_none_or(|f| !f.ignored(p, false)))
        .filter(|p| !deny.skip_found(root, p))
        .collect();
    Some((files, r.timed_out || r.canceled))
}

/// Files under `root` matching `pattern` through the ignore-aware walk.
pub(crate) fn walk_files(
    root: &Path,
    pattern: &str,
    top: Option<&Path>,
    deny: &mut ReadDeny,
    cancel: &AtomicBool,
) -> (Vec<PathBuf>, bool) {
    let set = GlobSet::new(pattern);
    let opts = WalkOptions {
        hidden: wants_hidden(pattern),
        top: top.map(Path::to_path_buf),
        ..Default::default()
    };
    let started = Instant::now();
    let mut stopped = false;
    let mut files = Vec::new();
    let mut n = 0usize;
    ignore::walk(root, &opts, &mut |e| {
        n += 1;
        if n.is_multiple_of(256)
            && (started.elapsed() > SEARCH_TIMEOUT || cancel.load(Ordering::Relaxed))
        {
            stopped = true;
            return Flow::Stop;
        }
        if e.is_dir {
            if deny.skip(&e.path, true) {
                return Flow::Skip;
            }
        } else if set.matches(&e.rel) && !deny.skip(&e.path, false) {
            files.push(e.path.clone());
        }
        Flow::Continue
    });
    (files, stopped)
}

fn find(input: &Value, ctx: &ToolCtx, allow_rg: bool) -> Result<ToolOutput, ToolError> {
    let pattern = req_str(input, "pattern")?;
    let root = resolve_or_cwd(ctx, opt_str(input, "path")?)?;
    if !root.is_dir() {
        return Err(format!("directory not found: {}", root.display()).into());
    }
    let project = canonicalize_lenient(ctx.project_root);
    let top = inside_project(ctx, &root).then_some(project.as_path());
    let mut deny = ctx.bounds.read_deny();
    deny.refuse_root(&root, "glob", "search")?;
    let found = match ignore::find_rg().filter(|_| allow_rg) {
        Some(rg) => rg_files(&rg, &root, pattern, top, &mut deny, &ctx.cancel, ctx.env),
        None => None,
    };
    let (files, stopped) = match found {
        Some(f) => f,
        None => {
            // A search that fell back to the walk counts afresh.
            deny.left_out = 0;
            walk_files(&root, pattern, top, &mut deny, &ctx.cancel)
        }
    };
    let total = files.len();
    let mut files = sort_newest_first(files);
    let truncated = total > MAX_RESULTS;
    files.truncate(MAX_RESULTS);
    let mut content = if files.is_empty() {
        "No files found".to_string()
    } else {
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    if truncated {
        content.push_str(&format!(
            "\n\n(Results are truncated: showing the {MAX_RESULTS} most recently modified of \
             {total} files. Use a more specific path or pattern.)"
        ));
    }
    if stopped {
        content.push_str(
            "\n\n(The search was stopped before it finished; results may be incomplete.)",
        );
    }
    if let Some(note) = deny.note() {
        content.push_str(&format!("\n\n{note}"));
    }
    Ok(ToolOutput {
        content,
        is_error: false,
        metadata: json!({"count": files.len(), "total": total, "truncated": truncated}),
        image: None,
        structured: json!({
            "filenames": files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "numFiles": files.len(),
            "truncated": truncated,
        }),
    })
}

impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
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
        Some("Glob".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        format!(
            "Find {}{}",
            super::common::arg(input, "pattern").unwrap_or(""),
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
            "Finds files by name or path pattern, newest first.\n\
             \n\
             - `pattern`: a glob. `*` matches within one path segment, `**` across directories, \
             `?` one character, `[abc]` a set, `{{a,b}}` alternatives. A pattern without `/` \
             matches file names at any depth (`*.rs`); with `/` it matches the path relative to \
             `path` (`src/**/*.ts`).\n\
             - `path`: directory to search (default: the working directory).\n\
             - Files excluded by .gitignore or .crushignore, and hidden files (unless the pattern \
             names them), are skipped. At most {MAX_RESULTS} results, most recently modified \
             first.\n\
             - To search file contents use grep."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. **/*.rs"},
                "path": {"type": "string", "description": "Directory to search (default: working directory)"}
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
        let root = resolve_or_cwd(ctx, opt_str(input, "path")?)?;
        Ok(outside_project_permission(
            ctx,
            self.name(),
            "list",
            &root,
            "Search files in",
        ))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        find(input, ctx, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;

    fn setup() -> Fixture {
        let fx = Fixture::new();
        fx.write(".gitignore", "ignored/\n*.gen.rs\n");
        fx.write(".crushignore", "private/\n");
        fx.write("src/old.rs", "");
        fx.write("src/new.rs", "");
        fx.write("src/deep/x.rs", "");
        fx.write("src/a.gen.rs", "");
        fx.write("ignored/i.rs", "");
        fx.write("private/p.rs", "");
        fx.write("README.md", "");
        fx.write(".github/ci.yml", "");
        fx.age("src/old.rs", 100);
        fx.age("src/deep/x.rs", 50);
        fx
    }

    fn names(out: &ToolOutput, fx: &Fixture) -> Vec<String> {
        out.content
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| {
                l.strip_prefix(&format!("{}/", fx.root().display()))
                    .unwrap_or(l)
                    .to_string()
            })
            .collect()
    }

    fn check(allow_rg: bool) {
        let fx = setup();
        let ctx = fx.ctx();
        let out = find(&json!({"pattern": "**/*.rs"}), &ctx, allow_rg).unwrap();
        assert_eq!(
            names(&out, &fx),
            ["src/new.rs", "src/deep/x.rs", "src/old.rs"]
        );
        let out = find(
            &json!({"pattern": "*.rs", "path": "src/deep"}),
            &ctx,
            allow_rg,
        )
        .unwrap();
        assert_eq!(names(&out, &fx), ["src/deep/x.rs"]);
        let out = find(&json!({"pattern": "src/*.rs"}), &ctx, allow_rg).unwrap();
        assert_eq!(names(&out, &fx), ["src/new.rs", "src/old.rs"]);
        let out = find(&json!({"pattern": "*.{md,yml}"}), &ctx, allow_rg).unwrap();
        assert_eq!(names(&out, &fx), ["README.md"]);
        let out = find(&json!({"pattern": ".github/*.yml"}), &ctx, allow_rg).unwrap();
        assert_eq!(names(&out, &fx), [".github/ci.yml"]);
        let out = find(&json!({"pattern": "*.zig"}), &ctx, allow_rg).unwrap();
        assert_eq!(out.content, "No files found");
    }

    #[test]
    fn walk_fallback_honours_ignores_and_sorts() {
        check(false);
    }

    #[test]
    fn ripgrep_when_available() {
        if ignore::find_rg().is_some() {
            check(true);
        }
    }

    #[test]
    fn truncation_and_permission() {
        let fx = Fixture::new();
        for i in 0..105 {
            fx.write(&format!("f{i}.txt"), "");
        }
        let ctx = fx.ctx();
        let out = find(&json!({"pattern": "*.txt"}), &ctx, false).unwrap();
        assert_eq!(out.metadata["count"], 100);
        assert_eq!(out.structured["numFiles"], 100);
        assert_eq!(out.structured["truncated"], true);
        assert!(out.content.contains("Results are truncated"));
        assert_eq!(
            Glob.permission(&json!({"pattern": "*"}), &ctx).unwrap(),
            None
        );
        assert_eq!(
            Glob.permission(&json!({"pattern": "*", "path": "/"}), &ctx)
                .unwrap()
                .unwrap()
                .action,
            "list"
        );
        assert!(
            Glob.run(&json!({"pattern": "*", "path": "missing"}), &ctx)
                .out()
                .is_error
        );
    }
}
