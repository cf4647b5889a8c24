//! The language-server tools (crush(1) LANGUAGE SERVERS), named as Go Crush names them:
//! `lsp_diagnostics`, `lsp_references`, `lsp_definition`, `lsp_symbols`, `lsp_call_hierarchy`
//! and `lsp_restart` read and never ask; `lsp_rename` and `lsp_replace_symbol` write through the
//! same path as `edit` and ask as it does. `Lsp` is also what the file tools see of the servers
//! (`Diagnostics`): `view` opens a file, `edit`, `multiedit` and `write` get the diagnostics of
//! what they wrote, `bash` re-syncs files it may have changed.
//!
//! Symbols are named, not located: a word search over the files a server handles finds the
//! candidates, and the first one the server resolves wins.

mod read;
mod write;

use super::common::{open_regular, resolve};
use super::ignore::{self, Flow, WalkOptions};
use super::{Diagnostics, Tool, ToolCtx};
use crate::lsp::{Client, FileDiagnostics, Manager, RpcError, text};
use crate::tools::ToolError;
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Diagnostics listed in an edit's result.
const EDIT_CAP: usize = 10;
/// Diagnostics listed per section by lsp_diagnostics.
const TOOL_CAP: usize = 50;
/// Files larger than this are not searched for a symbol.
const MAX_SEARCH_BYTES: u64 = 1 << 20;
/// Candidate positions tried for one symbol.
const MAX_CANDIDATES: usize = 100;
/// The symbol search stops after this long.
const SEARCH_TIME: Duration = Duration::from_secs(5);

/// The session's language servers as the tools use them.
#[derive(Clone)]
pub(crate) struct Lsp(Arc<Manager>);

impl Lsp {
    pub(crate) fn new(manager: Arc<Manager>) -> Lsp {
        Lsp(manager)
    }

    pub(crate) fn manager(&self) -> &Manager {
        &self.0
    }

    /// The servers learn that `paths` changed; their diagnostics for them, formatted ("" when
    /// no server handles them or none reports a problem).
    pub(crate) fn changed_report(&self, paths: &[&Path], cancel: &AtomicBool) -> String {
        if !self.0.changed(paths, cancel) {
            return String::new();
        }
        file_report(paths, &self.0.diagnostics())
    }

    /// Every LSP tool, over no server: what the tools say of themselves (names, kinds,
    /// schemas), where no session's servers are at hand. Never run.
    pub(crate) fn described() -> Vec<Box<dyn Tool>> {
        let none = Manager::new(Path::new("/"), Vec::new(), Default::default(), false);
        let lsp = Lsp(Arc::new(none));
        read::tools(&lsp)
            .into_iter()
            .chain(write::tools(&lsp))
            .collect()
    }

    /// The LSP tools, offered when some server is configured or detected.
    pub(crate) fn tools(&self) -> Vec<Box<dyn Tool>> {
        if self.0.is_empty() {
            return Vec::new();
        }
        read::tools(self)
            .into_iter()
            .chain(write::tools(self))
            .collect()
    }
}

impl Diagnostics for Lsp {
    fn opened(&self, path: &Path) -> String {
        self.0.open(path);
        let all = self.0.diagnostics();
        if all
            .iter()
            .any(|(_, d)| d.path == path && !d.items.is_empty())
        {
            file_report(&[path], &all)
        } else {
            String::new()
        }
    }

    fn changed(&self, path: &Path, cancel: &AtomicBool) -> String {
        self.changed_report(&[path], cancel)
    }

    fn resync(&self) {
        self.0.resync();
    }
}

fn severity(s: u8) -> &'static str {
    match s {
        1 => "Error",
        2 => "Warn",
        3 => "Info",
        _ => "Hint",
    }
}

/// One diagnostic as Go Crush writes it:
/// `Error: /p/a.go:3:9 [gopls compiler][UndeclaredName] undefined: x`.
fn format_one(path: &Path, d: &crate::lsp::Diagnostic, server: &str) -> String {
    let source = if d.source.is_empty() {
        server.to_string()
    } else {
        format!("{server} {}", d.source)
    };
    let code = if d.code.is_empty() {
        String::new()
    } else {
        format!("[{}]", d.code)
    };
    let tags: Vec<&str> = d
        .tags
        .iter()
        .filter_map(|t| match t {
            1 => Some("unnecessary"),
            2 => Some("deprecated"),
            _ => None,
        })
        .collect();
    let tags = if tags.is_empty() {
        String::new()
    } else {
        format!(" ({})", tags.join(", "))
    };
    format!(
        "{}: {}:{}:{} [{source}]{code}{tags} {}",
        severity(d.severity),
        path.display(),
        d.line + 1,
        d.character + 1,
        d.message.replace('\n', " ")
    )
}

/// Formatted diagnostics, errors first, then by file and position.
fn lines(entries: &[(&str, &FileDiagnostics)], max_severity: u8) -> Vec<String> {
    let mut items: Vec<(u8, &Path, u64, u64, String)> = Vec::new();
    for (server, f) in entries {
        for d in f.items.iter().filter(|d| d.severity <= max_severity) {
            items.push((
                d.severity,
                &f.path,
                d.line,
                d.character,
                format_one(&f.path, d, server),
            ));
        }
    }
    items.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
    items.dedup_by(|a, b| a.4 == b.4);
    items.into_iter().map(|i| i.4).collect()
}

fn section(out: &mut String, tag: &str, items: &[String], cap: usize) {
    if items.is_empty() {
        return;
    }
    out.push_str(&format!("\n<{tag}>\n"));
    for l in items.iter().take(cap) {
        out.push_str(l);
        out.push('\n');
    }
    if items.len() > cap {
        out.push_str(&format!("... and {} more\n", items.len() - cap));
    }
    out.push_str(&format!("</{tag}>\n"));
}

fn count(entries: &[(&str, &FileDiagnostics)], severity: u8) -> usize {
    entries
        .iter()
        .map(|(_, f)| f.items.iter().filter(|d| d.severity == severity).count())
        .sum()
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// What an edit's result gets: the errors and warnings of `paths` (capped) and how many there
/// are in other files ("" when there are none anywhere).
pub(crate) fn file_report(paths: &[&Path], all: &[(String, FileDiagnostics)]) -> String {
    let (mine, others): (Vec<_>, Vec<_>) = all
        .iter()
        .map(|(s, f)| (s.as_str(), f))
        .partition(|(_, f)| paths.contains(&f.path.as_path()));
    let items = lines(&mine, 2);
    let (oe, ow) = (count(&others, 1), count(&others, 2));
    if items.is_empty() && oe + ow == 0 {
        return String::new();
    }
    let mut out = String::from("\n");
    section(&mut out, "file_diagnostics", &items, EDIT_CAP);
    out.push_str("\n<diagnostic_summary>\n");
    out.push_str(&format!(
        "{}: {}, {}\n",
        if paths.len() == 1 {
            "This file"
        } else {
            "These files"
        },
        plural(count(&mine, 1), "error"),
        plural(count(&mine, 2), "warning")
    ));
    out.push_str(&format!(
        "Other files: {}, {}{}\n",
        plural(oe, "error"),
        plural(ow, "warning"),
        if oe + ow > 0 {
            " (lsp_diagnostics lists them)"
        } else {
            ""
        }
    ));
    out.push_str("</diagnostic_summary>\n");
    out
}

/// What lsp_diagnostics prints: the file's diagnostics (when one is given) and the project's.
pub(crate) fn project_report(path: Option<&Path>, all: &[(String, FileDiagnostics)]) -> String {
    let (mine, others): (Vec<_>, Vec<_>) = all
        .iter()
        .map(|(s, f)| (s.as_str(), f))
        .partition(|(_, f)| Some(f.path.as_path()) == path);
    let (file_items, project_items) = (lines(&mine, 4), lines(&others, 4));
    let mut out = String::new();
    section(&mut out, "file_diagnostics", &file_items, TOOL_CAP);
    section(&mut out, "project_diagnostics", &project_items, TOOL_CAP);
    if file_items.is_empty() && project_items.is_empty() {
        return match path {
            Some(p) => format!("No problems reported for {}.\n", p.display()),
            // Not "the project is clean": pyright and others speak only of the files open.
            None => "No problems reported by the running language servers. Some servers report \
                     only files that were opened: pass a file's path to check that file.\n"
                .to_string(),
        };
    }
    out.push_str("\n<diagnostic_summary>\n");
    if path.is_some() {
        out.push_str(&format!(
            "Current file: {}, {}\n",
            plural(count(&mine, 1), "error"),
            plural(count(&mine, 2), "warning")
        ));
    }
    out.push_str(&format!(
        "Project: {}, {}\n",
        plural(count(&others, 1), "error"),
        plural(count(&others, 2), "warning")
    ));
    out.push_str("</diagnostic_summary>\n");
    out
}

/// A place where a symbol's name occurs.
#[derive(Clone, Debug)]
struct Candidate {
    path: PathBuf,
    /// 0-based.
    line: usize,
    /// Byte of the line where the name (its last segment) starts.
    byte: usize,
    line_text: String,
}

impl Candidate {
    /// The LSP `TextDocumentPositionParams` of the candidate for `client`.
    fn position(&self, client: &Client) -> Value {
        json!({
            "textDocument": {"uri": text::uri(&self.path)},
            "position": {"line": self.line,
                "character": client.encoding().column(&self.line_text, self.byte)},
        })
    }
}

/// Where the name starts in a qualified symbol (`Bar` in `foo.Bar`, `m` in `C::m`).
fn name_offset(symbol: &str) -> usize {
    if let Some(i) = symbol.rfind("::") {
        return i + 2;
    }
    symbol.rfind(['.', '\\']).map(|i| i + 1).unwrap_or(0)
}

/// A pattern for `symbol` as a whole word (a word boundary where it starts or ends with a word
/// character).
fn word_pattern(symbol: &str) -> String {
    let wordy = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    format!(
        "{}{}{}",
        if wordy(symbol.chars().next()) {
            r"\b"
        } else {
            ""
        },
        regex_lite::escape(symbol),
        if wordy(symbol.chars().next_back()) {
            r"\b"
        } else {
            ""
        }
    )
}

/// The text of a file worth searching (regular, not too large, not binary).
fn searchable(path: &Path) -> Option<String> {
    let (file, meta) = open_regular(path).ok()?;
    if meta.len() > MAX_SEARCH_BYTES {
        return None;
    }
    let mut data = Vec::new();
    file.take(MAX_SEARCH_BYTES).read_to_end(&mut data).ok()?;
    if super::common::looks_binary(&data) {
        return None;
    }
    Some(String::from_utf8_lossy(&data).into_owned())
}

/// Where `symbol` occurs as a whole word in the files under `within` that a server handles
/// (ignored files skipped; at most 100 places, 5 s).
fn candidates(
    lsp: &Manager,
    ctx: &ToolCtx,
    symbol: &str,
    within: &Path,
) -> Result<Vec<Candidate>, ToolError> {
    let symbol = symbol.trim();
    if symbol.is_empty() {
        return Err("symbol must not be empty".into());
    }
    let re = regex_lite::Regex::new(&word_pattern(symbol))
        .map_err(|e| format!("cannot search for '{symbol}': {e}"))?;
    let offset = name_offset(symbol);
    let mut found = Vec::new();
    let search = |path: &Path, found: &mut Vec<Candidate>| {
        if !lsp.handles(path) {
            return;
        }
        let Some(text) = searchable(path) else { return };
        for (i, line) in text.lines().enumerate() {
            for m in re.find_iter(line) {
                if found.len() >= MAX_CANDIDATES {
                    return;
                }
                found.push(Candidate {
                    path: path.to_path_buf(),
                    line: i,
                    byte: m.start() + offset,
                    line_text: line.trim_end_matches('\r').to_string(),
                });
            }
        }
    };
    if within.is_file() {
        search(within, &mut found);
    } else {
        let started = Instant::now();
        let opts = WalkOptions {
            top: Some(ctx.project_root.to_path_buf()),
            skip_names: vec!["node_modules".into(), "target".into()],
            ..Default::default()
        };
        ignore::walk(within, &opts, &mut |e| {
            if started.elapsed() > SEARCH_TIME
                || ctx.cancel.load(Ordering::Relaxed)
                || found.len() >= MAX_CANDIDATES
            {
                return Flow::Stop;
            }
            if !e.is_dir {
                search(&e.path, &mut found);
            }
            Flow::Continue
        });
    }
    if found.is_empty() {
        return Err(format!(
            "Symbol '{symbol}' not found in the files the language servers handle under {}",
            within.display()
        )
        .into());
    }
    Ok(found)
}

/// The directory (or file) a symbol is looked for in: `path`, else the working directory.
fn search_root(input: &Value, ctx: &ToolCtx) -> Result<PathBuf, ToolError> {
    Ok(match super::common::opt_str(input, "path")? {
        Some(p) => resolve(ctx, p)?,
        None => crate::paths::canonicalize_lenient(ctx.cwd),
    })
}

/// A request about the call's `symbol` (looked for under its `path`): each candidate in turn
/// until the server gives a non-empty answer (a word in a comment or string gives none).
/// `capability`: what the server must offer (capability, method, what it is for the user).
fn ask_about_symbol(
    lsp: &Manager,
    ctx: &ToolCtx,
    input: &Value,
    capability: (&str, &str, &str),
    mut ask: impl FnMut(&Client, &Candidate) -> Result<Option<Value>, RpcError>,
) -> Result<Option<(Arc<Client>, Candidate, Value)>, ToolError> {
    let (cap, method, what) = capability;
    let symbol = super::common::req_str(input, "symbol")?;
    let within = search_root(input, ctx)?;
    let found = candidates(lsp, ctx, symbol, &within)?;
    let mut last_err = None;
    let mut asked = 0;
    for cand in found {
        if ctx.cancel.load(Ordering::Relaxed) {
            return Err("canceled".into());
        }
        let client = lsp
            .client_for(&cand.path, &ctx.cancel)
            .map_err(|e| e.to_string())?;
        if !client.supports(cap, method) {
            return Err(format!(
                "the language server {} does not support {what} ({cap})",
                client.name()
            )
            .into());
        }
        asked += 1;
        match ask(&client, &cand) {
            Ok(Some(v)) => return Ok(Some((client, cand, v))),
            Ok(None) => {}
            Err(e @ RpcError::Server { .. }) => last_err = Some(e.to_string()),
            Err(e) => return Err(format!("{}: {e}", client.name()).into()),
        }
        // Each candidate is a round trip; a symbol the server knows is found among the first.
        if asked >= 20 {
            break;
        }
    }
    match last_err {
        Some(e) => Err(format!("the language server could not resolve '{symbol}': {e}").into()),
        None => Ok(None),
    }
}

/// A request's result unless it is null or an empty array.
fn non_empty(v: Value) -> Option<Value> {
    match &v {
        Value::Null => None,
        Value::Array(a) if a.is_empty() => None,
        _ => Some(v),
    }
}

/// (path, 0-based line, 0-based character) of a `Location` or `LocationLink`.
fn location(v: &Value) -> Option<(PathBuf, u64, u64)> {
    let (uri, range) = match v.get("targetUri") {
        Some(u) => (u, v.get("targetSelectionRange").or(v.get("targetRange"))?),
        None => (v.get("uri")?, v.get("range")?),
    };
    let start = range.get("start")?;
    Some((
        text::path_of(uri.as_str()?)?,
        start["line"].as_u64()?,
        start["character"].as_u64().unwrap_or(0),
    ))
}

/// Locations of a result (one, an array, or null), sorted and without duplicates.
fn locations(v: &Value) -> Vec<(PathBuf, u64, u64)> {
    let mut out: Vec<_> = match v {
        Value::Array(a) => a.iter().filter_map(location).collect(),
        Value::Object(_) => location(v).into_iter().collect(),
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    out
}

/// `SymbolKind` names.
fn kind_name(k: u64) -> &'static str {
    const NAMES: [&str; 26] = [
        "File",
        "Module",
        "Namespace",
        "Package",
        "Class",
        "Method",
        "Property",
        "Field",
        "Constructor",
        "Enum",
        "Interface",
        "Function",
        "Variable",
        "Constant",
        "String",
        "Number",
        "Boolean",
        "Array",
        "Object",
        "Key",
        "Null",
        "EnumMember",
        "Struct",
        "Event",
        "Operator",
        "TypeParameter",
    ];
    (k as usize)
        .checked_sub(1)
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("Symbol")
}

/// The warnings of the servers since the last call, for the agent to report.
pub(crate) fn take_warnings(lsp: &Lsp) -> Vec<String> {
    lsp.0.take_warnings()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::Diagnostic;

    fn diag(line: u64, severity: u8, msg: &str) -> Diagnostic {
        Diagnostic {
            line,
            character: 4,
            severity,
            source: "check".into(),
            code: if severity == 1 {
                "E1".into()
            } else {
                String::new()
            },
            message: msg.into(),
            tags: if severity == 4 { vec![1] } else { vec![] },
        }
    }

    fn fd(path: &str, items: Vec<Diagnostic>) -> FileDiagnostics {
        let mut f = FileDiagnostics::for_tests(Path::new(path));
        f.items = items;
        f
    }

    #[test]
    fn an_edit_gets_its_file_errors_and_warnings_and_a_count_of_the_rest() {
        let mut items: Vec<Diagnostic> = (0..12).map(|i| diag(i, 1, &format!("bad {i}"))).collect();
        items.push(diag(20, 2, "careful"));
        items.push(diag(21, 4, "unused"));
        let all = vec![
            ("fake".to_string(), fd("/p/a.fk", items)),
            (
                "fake".to_string(),
                fd("/p/b.fk", vec![diag(0, 1, "x"), diag(1, 3, "info")]),
            ),
        ];
        let r = file_report(&[Path::new("/p/a.fk")], &all);
        assert!(
            r.contains("Error: /p/a.fk:1:5 [fake check][E1] bad 0\n"),
            "{r}"
        );
        assert!(r.contains("... and 3 more"), "{r}");
        assert!(
            !r.contains("unused") && !r.contains("careful"),
            "capped, errors first: {r}"
        );
        assert!(r.contains("This file: 12 errors, 1 warning"), "{r}");
        assert!(
            r.contains("Other files: 1 error, 0 warnings (lsp_diagnostics"),
            "{r}"
        );
        assert_eq!(file_report(&[Path::new("/p/c.fk")], &all[..0]), "");
        let p = project_report(None, &all);
        assert!(
            p.contains("Hint: /p/a.fk:22:5 [fake check] (unnecessary) unused"),
            "{p}"
        );
        assert!(p.contains("Project: 13 errors, 1 warning"), "{p}");
        // Nothing reported is not called a clean project.
        let none = project_report(None, &all[..0]);
        assert!(none.contains("only files that were opened"), "{none}");
    }

    #[test]
    fn qualified_symbols_point_at_their_last_segment() {
        assert_eq!(name_offset("foo.Bar"), 4);
        assert_eq!(name_offset("C::m"), 3);
        assert_eq!(name_offset("plain"), 0);
        let re = regex_lite::Regex::new(&word_pattern("a.b$")).unwrap();
        assert!(re.is_match("x a.b$ y"));
        assert!(!re.is_match("x aXb$ y"));
        let re = regex_lite::Regex::new(&word_pattern("Bar")).unwrap();
        assert!(re.is_match("(Bar)") && !re.is_match("myBar"));
    }

    #[test]
    fn locations_and_links() {
        let v = json!([
            {"uri": "file:///p/b.fk", "range": {"start": {"line": 3, "character": 1}}},
            {"targetUri": "file:///p/a.fk", "targetRange": {"start": {"line": 9, "character": 0}},
             "targetSelectionRange": {"start": {"line": 1, "character": 2}}},
            {"uri": "file:///p/b.fk", "range": {"start": {"line": 3, "character": 1}}}
        ]);
        assert_eq!(
            locations(&v),
            [
                (PathBuf::from("/p/a.fk"), 1, 2),
                (PathBuf::from("/p/b.fk"), 3, 1)
            ]
        );
        assert!(locations(&Value::Null).is_empty());
        assert_eq!(kind_name(12), "Function");
        assert_eq!(kind_name(0), "Symbol");
    }
}
