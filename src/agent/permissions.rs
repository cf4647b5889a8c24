//! Whether a tool call that needs permission may run without asking.
//!
//! Order: Claude Code's deny rules (refuse, whatever follows), `--yolo`, Claude Code's ask then
//! allow rules, then `permissions.allowed_tools` (`tool` or `tool:action`), then grants the
//! user gave for this session. A bash grant covers that exact command only (Go Crush grants every
//! command in the directory: a known complaint); a grant for a file tool covers that tool in
//! that directory.

use crate::config::claude_rules::{ClaudeRules, Effect, Rule};
use crate::tools::confine::Zone;
use crate::tools::{PermissionRequest, RunMode, Tool};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Grant {
    Command(String),
    ToolInDir {
        tool: String,
        dir: PathBuf,
    },
    /// Writing this one file (write, edit, multiedit): the file `/init` is asked to write.
    File(PathBuf),
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Permissions {
    pub yolo: bool,
    /// The auto approval mode (crush(1) SECURITY, sandbox): the project root, inside which the
    /// file tools write without asking; bash runs without asking (it is sandboxed).
    pub auto: Option<PathBuf>,
    pub allowed_tools: Vec<String>,
    /// Claude Code's allow, ask and deny rules (`claude_rules`).
    pub claude: std::sync::Arc<ClaudeRules>,
    session: Vec<Grant>,
    /// Said with every refusal hint when the project's own `permissions` setting was skipped
    /// because the project is not trusted (crush(1) SECURITY).
    pub untrusted_note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allowed,
    /// The user would have to be asked.
    Ask,
}

fn dir_of(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.to_path_buf()
    } else {
        p.parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| p.to_path_buf())
    }
}

impl Permissions {
    pub(crate) fn new(yolo: bool, allowed_tools: Vec<String>) -> Permissions {
        Permissions {
            yolo,
            auto: None,
            allowed_tools,
            claude: Default::default(),
            session: Vec::new(),
            untrusted_note: None,
        }
    }

    /// These permissions with Claude Code's rules.
    pub(crate) fn with_claude(mut self, rules: std::sync::Arc<ClaudeRules>) -> Permissions {
        self.claude = rules;
        self
    }

    /// The deny rule of Claude Code's settings that refuses this call, whatever else allows it
    /// (`--yolo` included).
    pub(crate) fn denied(&self, tool: &dyn Tool, input: &Value, cwd: &Path) -> Option<&Rule> {
        self.claude
            .matching(Effect::Deny, &claude_names(tool), input, cwd)
    }

    /// `check`, with Claude Code's rules for this call: an ask rule asks unless `--yolo`; an
    /// allow rule allows what `check` would (not guarded files or crush's data).
    pub(crate) fn check_call(
        &self,
        req: &PermissionRequest,
        tool: &dyn Tool,
        input: &Value,
        cwd: &Path,
    ) -> Decision {
        if req.zone >= Zone::Guarded || self.yolo {
            return self.check(req);
        }
        let names = claude_names(tool);
        if self
            .claude
            .matching(Effect::Ask, &names, input, cwd)
            .is_some()
        {
            return Decision::Ask;
        }
        if self
            .claude
            .matching(Effect::Allow, &names, input, cwd)
            .is_some()
        {
            return Decision::Allowed;
        }
        self.check(req)
    }

    /// Claude Code's name for how permissions are decided (a hook's `permission_mode`):
    /// `bypassPermissions` with `--yolo`, else `default`.
    pub(crate) fn mode(&self) -> &'static str {
        if self.yolo {
            "bypassPermissions"
        } else {
            "default"
        }
    }

    pub(crate) fn check(&self, req: &PermissionRequest) -> Decision {
        let file_granted = || {
            self.session
                .iter()
                .any(|g| matches!(g, Grant::File(f) if req.action == "write" && f == &req.path))
        };
        match req.zone {
            // crush's own data: asked every time, --yolo included.
            Zone::CrushData => return Decision::Ask,
            // Guarded files: only --yolo or the user's answer for that very file.
            Zone::Guarded if self.yolo || file_granted() => return Decision::Allowed,
            Zone::Guarded => return Decision::Ask,
            Zone::Project | Zone::Outside => {}
        }
        if self.yolo || self.auto_allows(req) {
            return Decision::Allowed;
        }
        let with_action = format!("{}:{}", req.tool, req.action);
        // An allowed tool writes inside the project; outside only where a path rule says.
        let outside_write = req.zone == Zone::Outside && matches!(req.action, "write" | "download");
        let allowed = self.allowed_tools.iter().any(|a| match path_rule(a) {
            Some((tool, pattern)) => tool == req.tool && pattern_matches(pattern, &req.path),
            None => !outside_write && (a == &req.tool || a == &with_action),
        });
        if allowed {
            return Decision::Allowed;
        }
        let granted = self.session.iter().any(|g| match g {
            Grant::Command(c) => req.runs == RunMode::Command && c == &req.description,
            Grant::ToolInDir { tool, dir } => tool == &req.tool && dir == &dir_of(&req.path),
            Grant::File(f) => req.action == "write" && f == &req.path,
        });
        if granted {
            Decision::Allowed
        } else {
            Decision::Ask
        }
    }

    /// Whether the auto approval mode covers `req`: any command (bash), and the writing tools
    /// inside the project. The network tools and writes elsewhere still ask.
    fn auto_allows(&self, req: &PermissionRequest) -> bool {
        if self.auto.is_none() {
            return false;
        }
        // The zone is placed before the rules run: inside the project, not guarded.
        req.runs == RunMode::Command
            || (matches!(req.action, "write" | "download") && req.zone == Zone::Project)
    }

    /// "Always, for this session". A guarded file is granted alone; crush's own data never.
    pub(crate) fn grant_for_session(&mut self, req: &PermissionRequest) {
        let g = match req.zone {
            Zone::CrushData => return,
            Zone::Guarded => Grant::File(req.path.clone()),
            _ if req.runs == RunMode::Command => Grant::Command(req.description.clone()),
            _ => Grant::ToolInDir {
                tool: req.tool.clone(),
                dir: dir_of(&req.path),
            },
        };
        if !self.session.contains(&g) {
            self.session.push(g);
        }
    }

    /// Lets the file tools write `file` (absolute and canonical, as the tools resolve it)
    /// without asking, for the rest of the session.
    pub(crate) fn allow_file(&mut self, file: PathBuf) {
        let g = Grant::File(file);
        if !self.session.contains(&g) {
            self.session.push(g);
        }
    }

    /// How a user allows this call without being asked, for messages; what trust would change
    /// when the project's own permissions were skipped.
    pub(crate) fn hint(&self, req: &PermissionRequest) -> String {
        let hint = Self::how_to_allow(req);
        match &self.untrusted_note {
            Some(note) => format!("{hint}; {note}"),
            None => hint,
        }
    }

    fn how_to_allow(req: &PermissionRequest) -> String {
        match req.zone {
            Zone::CrushData => {
                return "nothing allows it without a question: it is crush's own data; answer it in the interactive REPL".to_string();
            }
            Zone::Guarded => {
                return "crush or git runs or reads this file as configuration, so only --yolo or an answer in the interactive REPL allows writing it".to_string();
            }
            Zone::Outside if matches!(req.action, "write" | "download") => {
                return format!(
                    "run with --yolo, or allow its place in crush.json: \"permissions\": {{\"allowed_tools\": [\"{}:{}/**\"]}}",
                    req.tool,
                    req.path.parent().unwrap_or(&req.path).display()
                );
            }
            _ => {}
        }
        format!(
            "run with --yolo, or allow it in crush.json: \"permissions\": {{\"allowed_tools\": [\"{}\"]}} (or \"{}:{}\")",
            req.tool, req.tool, req.action
        )
    }
}

/// The names Claude Code's rules may give `tool`.
fn claude_names(tool: &dyn Tool) -> Vec<String> {
    tool.claude_names()
}

/// A path-scoped rule of `allowed_tools`: `TOOL:PATTERN` or `TOOL(PATTERN)` where the pattern
/// is absolute or starts with `~/` (`write:~/notes/**`, Claude Code's `Edit(~/notes/**)`
/// shape). None: a plain `TOOL` or `TOOL:ACTION` entry.
fn path_rule(entry: &str) -> Option<(&str, &str)> {
    let (tool, pattern) = match entry.strip_suffix(')').and_then(|e| e.split_once('(')) {
        Some(tp) => tp,
        None => entry.split_once(':')?,
    };
    (pattern.starts_with('/') || pattern.starts_with("~/")).then_some((tool, pattern))
}

/// Whether the glob `pattern` (absolute or `~/`; `*` within a name, `**` across directories)
/// matches the absolute `path`.
fn pattern_matches(pattern: &str, path: &Path) -> bool {
    let abs = crate::paths::normalize(&crate::paths::resolve(Path::new("/"), pattern));
    let pattern = abs.to_string_lossy();
    let path = path.to_string_lossy();
    crate::tools::ignore::Glob::new(pattern.trim_start_matches('/'))
        .matches(path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_allows_bash_and_writes_inside_the_project_only() {
        let mut p = Permissions::new(false, vec![]);
        let inside = req("write", "write", "", "/p/src/a.rs");
        assert_eq!(p.check(&inside), Decision::Ask);
        p.auto = Some(PathBuf::from("/p"));
        assert_eq!(p.check(&inside), Decision::Allowed);
        for (tool, action, path, want) in [
            ("bash", "execute", "/p", Decision::Allowed),
            ("edit", "write", "/etc/passwd", Decision::Ask),
            ("write", "write", "/pother/x", Decision::Ask),
            ("fetch", "fetch", "/p", Decision::Ask),
        ] {
            assert_eq!(
                p.check(&req(tool, action, "make", path)),
                want,
                "{tool} {path}"
            );
        }
    }

    fn req(tool: &str, action: &'static str, desc: &str, path: &str) -> PermissionRequest {
        PermissionRequest {
            tool: tool.into(),
            action,
            path: PathBuf::from(path),
            description: desc.into(),
            diff: None,
            // As the agent places it: the project is /p.
            zone: if Path::new(path).starts_with("/p") {
                Zone::Project
            } else {
                Zone::Outside
            },
            runs: if tool == "bash" {
                RunMode::Command
            } else {
                RunMode::InProcess
            },
            ..Default::default()
        }
    }

    #[test]
    fn allow_rules() {
        let p = Permissions::new(false, vec!["bash".into(), "write:write".into()]);
        assert_eq!(
            p.check(&req("bash", "execute", "rm x", "/p")),
            Decision::Allowed
        );
        assert_eq!(
            p.check(&req("write", "write", "f", "/p/f")),
            Decision::Allowed
        );
        assert_eq!(p.check(&req("edit", "write", "f", "/p/f")), Decision::Ask);
        assert_eq!(
            Permissions::new(true, vec![]).check(&req("edit", "write", "f", "/p/f")),
            Decision::Allowed
        );
    }

    #[test]
    fn session_grant_for_bash_covers_only_that_command() {
        let mut p = Permissions::new(false, vec![]);
        let r = req("bash", "execute", "make test", "/p");
        p.grant_for_session(&r);
        assert_eq!(p.check(&r), Decision::Allowed);
        assert_eq!(
            p.check(&req("bash", "execute", "rm -rf /", "/p")),
            Decision::Ask
        );
    }

    #[test]
    fn a_file_grant_covers_writing_that_file_only() {
        let mut p = Permissions::new(false, vec![]);
        p.allow_file(PathBuf::from("/p/AGENTS.md"));
        for (tool, action, path, want) in [
            ("write", "write", "/p/AGENTS.md", Decision::Allowed),
            ("edit", "write", "/p/AGENTS.md", Decision::Allowed),
            ("write", "write", "/p/other.md", Decision::Ask),
            ("bash", "execute", "/p/AGENTS.md", Decision::Ask),
        ] {
            assert_eq!(
                p.check(&req(tool, action, "d", path)),
                want,
                "{tool} {path}"
            );
        }
    }

    #[test]
    fn session_grant_for_file_tools_covers_the_directory() {
        let mut p = Permissions::new(false, vec![]);
        p.grant_for_session(&req("edit", "write", "a", "/p/src/a.rs"));
        assert_eq!(
            p.check(&req("edit", "write", "b", "/p/src/b.rs")),
            Decision::Allowed
        );
        assert_eq!(
            p.check(&req("edit", "write", "c", "/p/c.rs")),
            Decision::Ask
        );
        assert_eq!(
            p.check(&req("write", "write", "b", "/p/src/b.rs")),
            Decision::Ask
        );
    }
}
