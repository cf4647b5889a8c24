//! The `ls` tool: a tree listing of a directory that honours `.gitignore` and `.crushignore`.

use super::ToolError;
use super::common::{inside_project, opt_str, opt_u64, outside_project_permission, resolve_or_cwd};
use super::confine::ReadDeny;
use super::ignore::{self, Flow, GlobSet, WalkOptions};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use serde_json::{Value, json};
use std::path::Path;

pub(crate) struct Ls;

pub(crate) const MAX_ENTRIES: usize = 1000;
/// Directories never listed (besides hidden ones and ignored paths).
const SKIPPED_DIRS: &[&str] = &["node_modules", "__pycache__"];

fn ignore_patterns(input: &Value) -> Result<Vec<GlobSet>, ToolError> {
    match input.get("ignore") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(GlobSet::new)
                    .ok_or_else(|| "`ignore` must be an array of glob patterns".into())
            })
            .collect(),
        Some(Value::String(s)) => Ok(vec![GlobSet::new(s)]),
        Some(_) => Err("`ignore` must be an array of glob patterns".into()),
    }
}

/// The listing of `root` (entries as (relative path, is_dir)) and whether it was truncated;
/// what `deny` covers is left out (and counted there).
pub(crate) fn list(
    root: &Path,
    top: Option<&Path>,
    depth: Option<usize>,
    ignore: &[GlobSet],
    deny: &mut ReadDeny,
    max: usize,
) -> (Vec<(String, bool)>, bool) {
    let opts = WalkOptions {
        hidden: false,
        max_depth: depth,
        skip_names: SKIPPED_DIRS.iter().map(|s| s.to_string()).collect(),
        top: top.map(Path::to_path_buf),
    };
    let mut entries = Vec::new();
    let mut truncated = false;
    ignore::walk(root, &opts, &mut |e| {
        if ignore.iter().any(|g| g.matches(&e.rel)) || deny.skip(&e.path, e.is_dir) {
            return Flow::Skip;
        }
        if entries.len() >= max {
            truncated = true;
            return Flow::Stop;
        }
        entries.push((e.rel.clone(), e.is_dir));
        Flow::Continue
    });
    entries.sort_by(|a, b| a.0.split('/').cmp(b.0.split('/')));
    (entries, truncated)
}

fn render(root: &Path, entries: &[(String, bool)]) -> String {
    let mut out = format!("- {}/\n", root.display().to_string().trim_end_matches('/'));
    for (rel, is_dir) in entries {
        let depth = rel.matches('/').count() + 1;
        let name = rel.rsplit('/').next().unwrap_or(rel);
        out.push_str(&"  ".repeat(depth));
        out.push_str("- ");
        out.push_str(name);
        if *is_dir {
            out.push('/');
        }
        out.push('\n');
    }
    out
}

impl Tool for Ls {
    fn name(&self) -> &'static str {
        "ls"
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
        Some("LS".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        let p = super::common::shown_arg(input, "path", cwd).unwrap_or_else(|| ".".into());
        format!("List {p}")
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        super::Location::of(input, "path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        format!(
            "Lists a directory as a tree (directories end with `/`).\n\
             \n\
             - `path`: the directory (default: the working directory).\n\
             - `depth`: how many levels to descend (default: all, breadth first).\n\
             - `ignore`: glob patterns of names or paths to leave out (e.g. [\"*.log\", \"dist\"]).\n\
             - Hidden files, node_modules and whatever .gitignore or .crushignore exclude are not \
             shown. At most {MAX_ENTRIES} entries; use a narrower path, depth, or glob to find \
             specific files."
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: working directory)"},
                "ignore": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Glob patterns to leave out"
                },
                "depth": {"type": "integer", "description": "Maximum depth to descend"}
            }
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let path = resolve_or_cwd(ctx, opt_str(input, "path")?)?;
        ignore_patterns(input)?;
        opt_u64(input, "depth")?;
        Ok(outside_project_permission(
            ctx,
            self.name(),
            "list",
            &path,
            "List",
        ))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let parsed = (|| -> Result<_, ToolError> {
            Ok((
                resolve_or_cwd(ctx, opt_str(input, "path")?)?,
                ignore_patterns(input)?,
                opt_u64(input, "depth")?
                    .filter(|d| *d > 0)
                    .map(|d| d as usize),
            ))
        })();
        let (path, ignore, depth) = parsed?;
        if !path.exists() {
            return Err(ToolError::from(format!(
                "directory not found: {}",
                path.display()
            )));
        }
        if !path.is_dir() {
            return Err(ToolError::from(format!(
                "{} is a file, not a directory; use view to read it",
                path.display()
            )));
        }
        let root = crate::paths::canonicalize_lenient(ctx.project_root);
        let top = inside_project(ctx, &path).then_some(root.as_path());
        let mut deny = ctx.bounds.read_deny();
        deny.refuse_root(&path, "ls", "list")?;
        let (entries, truncated) = list(&path, top, depth, &ignore, &mut deny, MAX_ENTRIES);
        let mut content = String::new();
        if truncated {
            content.push_str(&format!(
                "There are more than {MAX_ENTRIES} files and directories in {}. Use a more \
                 specific path, the depth parameter, or glob to find files. The first \
                 {MAX_ENTRIES} entries are shown:\n\n",
                path.display()
            ));
        }
        content.push_str(&render(&path, &entries));
        if entries.is_empty() {
            content.push_str("(empty)\n");
        }
        if let Some(note) = deny.note() {
            content.push_str(&format!("\n{note}\n"));
        }
        Ok(ToolOutput {
            content,
            is_error: false,
            metadata: json!({"count": entries.len(), "truncated": truncated}),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;

    #[test]
    fn tree_honours_ignores() {
        let fx = Fixture::new();
        fx.write(".gitignore", "build/\n*.tmp\n");
        fx.write("src/main.rs", "");
        fx.write("src/a-b.rs", "");
        fx.write("src/util/x.rs", "");
        fx.write("build/out.bin", "");
        fx.write("notes.tmp", "");
        fx.write("README.md", "");
        fx.write("skip.log", "");
        fx.write("node_modules/m/index.js", "");
        let ctx = fx.ctx();
        let out = Ls.run(&json!({"ignore": ["*.log"]}), &ctx).out();
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            format!(
                "- {}/\n  - README.md\n  - src/\n    - a-b.rs\n    - main.rs\n    - util/\n      - x.rs\n",
                fx.root().display()
            )
        );
        let out = Ls.run(&json!({"path": "src", "depth": 1}), &ctx).out();
        assert!(out.content.contains("  - util/\n"));
        assert!(!out.content.contains("x.rs"));
        assert!(Ls.run(&json!({"path": "README.md"}), &ctx).out().is_error);
        assert!(Ls.run(&json!({"path": "nope"}), &ctx).out().is_error);
    }

    #[test]
    fn cap_and_permission() {
        let fx = Fixture::new();
        for i in 0..30 {
            fx.write(&format!("d{i}/f.txt"), "");
        }
        let (entries, truncated) = list(fx.root(), None, None, &[], &mut ReadDeny::default(), 40);
        assert!(truncated);
        assert_eq!(entries.len(), 40);
        // Breadth first: all top-level directories come before their contents.
        assert_eq!(entries.iter().filter(|(r, _)| !r.contains('/')).count(), 30);
        let ctx = fx.ctx();
        assert_eq!(Ls.permission(&json!({}), &ctx).unwrap(), None);
        let req = Ls.permission(&json!({"path": "/"}), &ctx).unwrap().unwrap();
        assert_eq!(req.action, "list");
    }
}
