//! The LSP tools that only read: lsp_diagnostics, lsp_references, lsp_definition, lsp_symbols,
//! lsp_call_hierarchy and lsp_restart. None asks for permission.

use super::{Lsp, Manager, ask_about_symbol, kind_name, locations, non_empty, project_report};
use crate::lsp::text;
use crate::tools::common::{display_path, opt_str, req_str, resolve};
use crate::tools::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::path::Path;

pub(super) fn tools(lsp: &Lsp) -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(DiagnosticsTool(lsp.clone())),
        Box::new(References(lsp.clone())),
        Box::new(Definition(lsp.clone())),
        Box::new(Symbols(lsp.clone())),
        Box::new(CallHierarchy(lsp.clone())),
        Box::new(Restart(lsp.clone())),
    ]
}

fn text_output(content: String) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput {
        content,
        ..Default::default()
    })
}

const SYMBOL_DESC: &str =
    "The symbol name to look for (a function, method, type or variable; `Type.method` works)";
const PATH_DESC: &str = "The directory (or file) to look in; defaults to the working directory";

pub(super) struct DiagnosticsTool(Lsp);

impl Tool for DiagnosticsTool {
    fn name(&self) -> &'static str {
        "lsp_diagnostics"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Read
    }

    fn read_only(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Get the language servers' errors, warnings and hints for a file or for the whole \
         project. With `file_path`, the file is sent to its servers and their fresh diagnostics \
         are waited for; without it, the files the servers have open are re-read and every \
         diagnostic they report is listed."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string",
                    "description": "The file to get diagnostics for (leave empty for the whole project)"}
            },
            "required": []
        })
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        opt_str(input, "file_path")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let m = self.0.manager();
        match opt_str(input, "file_path")? {
            Some(p) => {
                let path = resolve(ctx, p)?;
                if !path.is_file() {
                    return Err(format!("file not found: {}", path.display()).into());
                }
                if !m.changed(&[path.as_path()], &ctx.cancel) {
                    return Err(format!(
                        "no language server handles {} (servers: {})",
                        path.display(),
                        m.names().join(", ")
                    )
                    .into());
                }
                text_output(project_report(Some(&path), &m.diagnostics()))
            }
            None => {
                m.start_for_project(&ctx.cancel);
                if m.running().is_empty() {
                    return text_output(
                        "No language server is running for the project: servers start when a \
                         file of their type is viewed or edited (or give file_path)."
                            .into(),
                    );
                }
                text_output(project_report(None, &m.diagnostics()))
            }
        }
    }
}

fn symbol_schema(extra: Value, required: &[&str]) -> Value {
    let mut props = json!({
        "symbol": {"type": "string", "description": SYMBOL_DESC},
        "path": {"type": "string", "description": PATH_DESC},
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut props, extra) {
        p.extend(e);
    }
    json!({"type": "object", "properties": props, "required": required})
}

pub(super) struct References(Lsp);

impl Tool for References {
    fn name(&self) -> &'static str {
        "lsp_references"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Find all references to a symbol by name through the language server: more accurate \
         than grep for code symbols (it skips comments, strings and other symbols of the same \
         name). Returns the files and line:column of each reference."
            .into()
    }

    fn schema(&self) -> Value {
        symbol_schema(json!({}), &["symbol"])
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "symbol")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let symbol = req_str(input, "symbol")?;
        let found = ask_about_symbol(
            self.0.manager(),
            ctx,
            input,
            (
                "referencesProvider",
                "textDocument/references",
                "references",
            ),
            |c, cand| {
                let mut params = cand.position(c);
                params["context"] = json!({"includeDeclaration": true});
                c.request("textDocument/references", params).map(non_empty)
            },
        )?;
        let Some((_, _, result)) = found else {
            return text_output(format!("No references found for symbol '{symbol}'"));
        };
        let locs = locations(&result);
        let mut files: Vec<(&Path, Vec<(u64, u64)>)> = Vec::new();
        for (p, l, c) in &locs {
            match files.last_mut() {
                Some((fp, v)) if *fp == p.as_path() => v.push((*l, *c)),
                _ => files.push((p, vec![(*l, *c)])),
            }
        }
        let mut out = format!(
            "Found {} reference(s) in {} file(s):\n\n",
            locs.len(),
            files.len()
        );
        for (p, refs) in files {
            out.push_str(&format!("{} ({} reference(s)):\n", p.display(), refs.len()));
            for (l, c) in refs {
                out.push_str(&format!("  Line {}, Column {}\n", l + 1, c + 1));
            }
            out.push('\n');
        }
        text_output(out)
    }
}

/// Lines `line - 3 ..= line + 3` of `path`, the target marked.
fn source_context(path: &Path, line: usize) -> String {
    let Ok(text) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let (start, end) = (line.saturating_sub(3), (line + 4).min(lines.len()));
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        let mark = if i == line { "> " } else { "  " };
        out.push_str(&format!("{mark}{:>4} | {}\n", i + 1, l));
    }
    out
}

pub(super) struct Definition(Lsp);

impl Tool for Definition {
    fn name(&self) -> &'static str {
        "lsp_definition"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        true
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Find the definition of a symbol by name through the language server. Prefer it over \
         grep to find where something is defined: it is language-aware and skips matches in \
         comments, strings and partial identifiers. Returns the file, line and the lines \
         around it. Complements lsp_references (which finds the uses)."
            .into()
    }

    fn schema(&self) -> Value {
        symbol_schema(json!({}), &["symbol"])
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "symbol")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let symbol = req_str(input, "symbol")?;
        let found = ask_about_symbol(
            self.0.manager(),
            ctx,
            input,
            (
                "definitionProvider",
                "textDocument/definition",
                "go to definition",
            ),
            |c, cand| {
                c.request("textDocument/definition", cand.position(c))
                    .map(non_empty)
            },
        )?;
        let Some((_, _, result)) = found else {
            return Err(format!("No definition found for symbol '{symbol}'").into());
        };
        let locs = locations(&result);
        let mut out = format!("Found {} definition(s):\n\n", locs.len());
        let mut meta = Value::Null;
        for (p, l, _) in &locs {
            out.push_str(&format!("{}:{}\n", p.display(), l + 1));
            let ctx_lines = source_context(p, *l as usize);
            if meta.is_null() {
                meta = json!({"file_path": p.display().to_string(), "line": l + 1});
            }
            out.push_str(&ctx_lines);
            out.push('\n');
        }
        Ok(ToolOutput {
            content: out,
            is_error: false,
            metadata: meta,
            ..Default::default()
        })
    }
}

/// Document symbols as an outline, children indented.
fn outline(symbols: &[Value], depth: usize, out: &mut String) {
    for s in symbols {
        let name = s["name"].as_str().unwrap_or("?");
        let kind = kind_name(s["kind"].as_u64().unwrap_or(0));
        let range = if s.get("location").is_some() {
            &s["location"]["range"]
        } else {
            &s["range"]
        };
        let (a, b) = (
            range["start"]["line"].as_u64().unwrap_or(0) + 1,
            range["end"]["line"].as_u64().unwrap_or(0) + 1,
        );
        let lines = if a == b {
            format!("line {a}")
        } else {
            format!("lines {a}-{b}")
        };
        out.push_str(&format!("{}{kind} {name} ({lines})\n", "  ".repeat(depth)));
        if let Some(children) = s["children"].as_array() {
            outline(children, depth + 1, out);
        }
    }
}

pub(super) struct Symbols(Lsp);

impl Tool for Symbols {
    fn name(&self) -> &'static str {
        "lsp_symbols"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        true
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "List the symbols (functions, types, methods, ...) of a file as an outline with their \
         line ranges, through the language server: use it before editing an unfamiliar file, or \
         to find the exact name for lsp_replace_symbol. Without `file_path`, searches the whole \
         workspace for symbols matching `query`."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to list the symbols of"},
                "query": {"type": "string",
                    "description": "Without file_path: the symbols of the whole workspace whose name matches this"}
            },
            "required": []
        })
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        if opt_str(input, "file_path")?.is_none() && opt_str(input, "query")?.is_none() {
            return Err(
                "give file_path (the symbols of a file) or query (a workspace search)".into(),
            );
        }
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let m = self.0.manager();
        if let Some(p) = opt_str(input, "file_path")? {
            let path = resolve(ctx, p)?;
            if !path.is_file() {
                return Err(format!("file not found: {}", path.display()).into());
            }
            let c = m
                .client_for(&path, &ctx.cancel)
                .map_err(|e| e.to_string())?;
            if !c.supports("documentSymbolProvider", "textDocument/documentSymbol") {
                return Err(format!(
                    "the language server {} does not support document symbols (documentSymbolProvider)",
                    c.name()
                )
                .into());
            }
            let r = c
                .request(
                    "textDocument/documentSymbol",
                    json!({"textDocument": {"uri": text::uri(&path)}}),
                )
                .map_err(|e| format!("{}: {e}", c.name()))?;
            let symbols = r.as_array().cloned().unwrap_or_default();
            if symbols.is_empty() {
                return text_output(format!("No symbols found in {}", display_path(ctx, &path)));
            }
            let mut out = String::new();
            outline(&symbols, 0, &mut out);
            return text_output(out);
        }
        let query = opt_str(input, "query")?.unwrap_or("");
        workspace_symbols(m, ctx, query)
    }
}

fn workspace_symbols(m: &Manager, ctx: &ToolCtx, query: &str) -> Result<ToolOutput, ToolError> {
    m.start_idle(&ctx.cancel);
    let running = m.running();
    if running.is_empty() {
        return Err(
            "no language server is running for the project: view a file of the project \
                    first, or give file_path"
                .into(),
        );
    }
    let mut out = String::new();
    let mut n = 0;
    for c in running {
        if !c.supports("workspaceSymbolProvider", "workspace/symbol") {
            continue;
        }
        let r = c
            .request("workspace/symbol", json!({"query": query}))
            .map_err(|e| format!("{}: {e}", c.name()))?;
        for s in r.as_array().into_iter().flatten().take(200) {
            let loc = &s["location"];
            let path = loc["uri"].as_str().and_then(text::path_of);
            let line = loc["range"]["start"]["line"].as_u64().map(|l| l + 1);
            out.push_str(&format!(
                "{} {}",
                kind_name(s["kind"].as_u64().unwrap_or(0)),
                s["name"].as_str().unwrap_or("?")
            ));
            if let Some(cn) = s["containerName"].as_str().filter(|c| !c.is_empty()) {
                out.push_str(&format!(" (in {cn})"));
            }
            match (path, line) {
                (Some(p), Some(l)) => out.push_str(&format!(" — {}:{l}\n", display_path(ctx, &p))),
                (Some(p), None) => out.push_str(&format!(" — {}\n", display_path(ctx, &p))),
                _ => out.push('\n'),
            }
            n += 1;
        }
    }
    if n == 0 {
        return text_output(format!("No workspace symbols match '{query}'"));
    }
    text_output(out)
}

pub(super) struct CallHierarchy(Lsp);

impl Tool for CallHierarchy {
    fn name(&self) -> &'static str {
        "lsp_call_hierarchy"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Search
    }

    fn read_only(&self) -> bool {
        true
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Show the call hierarchy of a function or method: its incoming calls (who calls it) or \
         outgoing calls (what it calls), with files and line numbers, through the language \
         server. Use it before a refactoring to see what it touches, or to trace how execution \
         flows."
            .into()
    }

    fn schema(&self) -> Value {
        symbol_schema(
            json!({"direction": {"type": "string", "enum": ["incoming", "outgoing"],
                "description": "'incoming' (who calls this) or 'outgoing' (what this calls)"}}),
            &["symbol", "direction"],
        )
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "symbol")?;
        direction(input)?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let symbol = req_str(input, "symbol")?;
        let incoming = direction(input)?;
        let found = ask_about_symbol(
            self.0.manager(),
            ctx,
            input,
            (
                "callHierarchyProvider",
                "textDocument/prepareCallHierarchy",
                "call hierarchy",
            ),
            |c, cand| {
                c.request("textDocument/prepareCallHierarchy", cand.position(c))
                    .map(non_empty)
            },
        )?;
        let Some((client, _, items)) = found else {
            return Err(format!("No call hierarchy information for '{symbol}'").into());
        };
        let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
            return Err(format!("No call hierarchy information for '{symbol}'").into());
        };
        let (method, key, noun) = if incoming {
            ("callHierarchy/incomingCalls", "from", "caller")
        } else {
            ("callHierarchy/outgoingCalls", "to", "callee")
        };
        let calls = client
            .request(method, json!({"item": item}))
            .map_err(|e| format!("{}: {e}", client.name()))?;
        let calls = calls.as_array().cloned().unwrap_or_default();
        let mut out = format!(
            "Call hierarchy for '{}':\n\n",
            item["name"].as_str().unwrap_or(symbol)
        );
        if calls.is_empty() {
            out.push_str(&format!(
                "No {} calls found.\n",
                if incoming { "incoming" } else { "outgoing" }
            ));
        } else {
            out.push_str(&format!("{} {noun}(s):\n\n", calls.len()));
            for c in &calls {
                let it = &c[key];
                let path = it["uri"]
                    .as_str()
                    .and_then(text::path_of)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let line = it["range"]["start"]["line"].as_u64().unwrap_or(0) + 1;
                out.push_str(&format!(
                    "  {path}:{line} — {}\n",
                    it["name"].as_str().unwrap_or("?")
                ));
            }
        }
        text_output(out)
    }
}

fn direction(input: &Value) -> Result<bool, ToolError> {
    match req_str(input, "direction")? {
        "incoming" => Ok(true),
        "outgoing" => Ok(false),
        _ => Err("direction must be 'incoming' or 'outgoing'".into()),
    }
}

pub(super) struct Restart(Lsp);

impl Tool for Restart {
    fn name(&self) -> &'static str {
        "lsp_restart"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Execute
    }

    /// It stops and starts language servers.
    fn read_only(&self) -> bool {
        false
    }

    fn description(&self) -> String {
        "Restart one language server by name, or every one that was started; use it when \
         diagnostics look stale or a server stopped answering (also one that failed earlier in \
         the session)."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string",
                    "description": "The server to restart (leave empty for all that were started)"}
            },
            "required": []
        })
    }

    fn permission(
        &self,
        input: &Value,
        _: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        opt_str(input, "name")?;
        Ok(None)
    }

    fn run(&self, input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let results = self
            .0
            .manager()
            .restart(opt_str(input, "name")?)
            .map_err(|e| e.to_string())?;
        if results.is_empty() {
            return text_output("No LSP clients to restart".into());
        }
        let ok: Vec<&str> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| n.as_str())
            .collect();
        let failed: Vec<String> = results
            .iter()
            .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n} ({e})")))
            .collect();
        let mut out = String::new();
        if !ok.is_empty() {
            out.push_str(&format!(
                "Successfully restarted {} LSP client(s): {}\n",
                ok.len(),
                ok.join(", ")
            ));
        }
        if !failed.is_empty() {
            out.push_str(&format!(
                "Failed to restart {} LSP client(s): {}\n",
                failed.len(),
                failed.join(", ")
            ));
            return Err(out.into());
        }
        text_output(out)
    }
}
