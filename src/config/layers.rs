//! The ten layers of crush(1) CONFIGURATION, found, gated by trust, run and folded into one value,
//! with the origin (layer, file:line) of every leaf.
//!
//! 1 built-in defaults · 2 global state (Go Crush's `<global data>/crush.json`, then
//! `state.json`) · 3 workspace state (`<project data>/state.json`) · 4 global `crush.json` ·
//! 5 global `crushrc` · 6 project `crush.json` · 7 project `crushrc` · 8 project `.crush.json` ·
//! 9 project `.crushrc` · 10 runtime (flags, `CRUSH_*` variables, session-only commands).
//! Project files are looked up from the project root (git worktree root) down to the working
//! directory; within one layer a file nearer the working directory wins.
//!
//! JSON layers merge (objects recursively, arrays concatenated, scalars replaced). A crushrc's
//! records are applied one by one to the value accumulated so far. The workspace state lives in
//! the data directory, which the layers above it decide: the fold runs once without it to find
//! the data directory, and again with it when that file has anything in it (records are
//! replayed, scripts are not run twice). State cannot move the data directory.

use super::claude::{self, ClaudeHooks};
use super::crushrc;
use super::pos::{self, Positions};
use super::trust::{self, Source};
use super::{
    Config, ConfigError, Layer, LayerKind, Loaded, Origin, Origins, commands, json, state,
};
use crate::paths;
use crate::rcshell::{self, Record};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// How to load.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoadOptions {
    pub cwd: PathBuf,
    /// `-D DIR`.
    pub data_dir: Option<PathBuf>,
    /// The command-line layer (already JSON).
    pub runtime: Value,
    /// `--trust`: trust the project for this invocation.
    pub trust: bool,
    /// `--no-project-hooks`: the project's own hooks are left out, trusted or not.
    pub no_project_hooks: bool,
}

/// Whether `path` (`["options", "debug"]`) is a key of the schema crush knows.
#[cfg(test)]
pub(crate) fn is_known_key(path: &[&str]) -> bool {
    use super::schema_keys::{Shape, TOP};
    let mut shape = &TOP;
    for seg in path {
        shape = match shape {
            Shape::Keys(keys) => match keys.iter().find(|(k, _)| k == seg) {
                Some((_, s)) => s,
                None => return false,
            },
            Shape::Named(s) | Shape::Items(s) => s,
            Shape::Any | Shape::Inert(_) => return true,
        };
    }
    !path.is_empty()
}

/// The built-in defaults (layer 1).
pub(crate) fn defaults() -> Value {
    json!({"options": {
        "debug": false,
        "progress": true,
        "auto_lsp": true,
        "max_steps": 100,
        "request_idle_timeout": 120,
        "initialize_as": "AGENTS.md"
    }})
}

/// A file of a layer, read but not yet run.
enum Found {
    Json { value: Value, pos: Positions },
    Crushrc { text: String },
}

struct FoundFile {
    kind: LayerKind,
    path: PathBuf,
    found: Found,
}

/// One step of the fold.
#[derive(Clone)]
enum Body {
    Json { value: Value, pos: Positions },
    Records(Vec<Record>),
}

#[derive(Clone)]
struct Step {
    kind: LayerKind,
    path: Option<PathBuf>,
    detail: Option<String>,
    body: Body,
}

/// The value being built and where each leaf came from.
#[derive(Default, Clone)]
pub(crate) struct Fold {
    pub acc: Value,
    pub origins: Origins,
    /// `--no-project-hooks`: the `hook add` calls of project crushrc files are dropped.
    skip_project_hook_adds: bool,
    /// Warnings of the records applied (`file:line: ...`): removals of what is not defined.
    warnings: Vec<String>,
    /// Checks each project crushrc against what was trusted just before it runs.
    guard: crate::guard::Guard,
}

impl Fold {
    fn new() -> Fold {
        Fold {
            acc: Value::Object(Map::new()),
            origins: Origins::new(),
            skip_project_hook_adds: false,
            warnings: Vec::new(),
            guard: Default::default(),
        }
    }

    /// Replaces the value by `new`, keeping the origins of what did not change; changed or new
    /// leaves get `mk(pointer in the layer)`.
    pub(crate) fn commit(&mut self, new: Value, mk: &dyn Fn(Option<&str>) -> Origin) {
        let mut origins = Origins::new();
        track(
            Some(&self.acc),
            &new,
            Some(""),
            "",
            Some(""),
            &self.origins,
            &mut origins,
            mk,
        );
        self.acc = new;
        self.origins = origins;
    }

    fn json(&mut self, step: &Step, value: &Value, positions: &Positions) {
        let mut new = self.acc.clone();
        json::merge(&mut new, value.clone());
        let (kind, path, detail) = (step.kind, step.path.clone(), step.detail.clone());
        self.commit(new, &|lp| Origin {
            kind,
            file: path.clone(),
            line: lp.and_then(|p| pos::line_of(positions, p)),
            detail: detail.clone(),
        });
    }

    /// Applies records in order; the first failing one is the error (`file:line: message`).
    /// A warning a file already had (every `option ui` line's) is given once, at its first line.
    fn records(&mut self, kind: LayerKind, recs: &[Record]) -> Result<(), ConfigError> {
        let mut seen: Vec<(Option<PathBuf>, String)> = Vec::new();
        for r in recs {
            let mut new = self.acc.clone();
            let out = commands::apply(&mut new, &r.args).map_err(|source| ConfigError::Record {
                place: r.place(),
                source,
            })?;
            if let Some(w) = out.warning {
                let key = (r.file.clone(), w);
                if !seen.contains(&key) {
                    self.warnings.push(format!("{}: {}", r.place(), key.1));
                    seen.push(key);
                }
            }
            let (file, line) = (r.file.clone(), r.line);
            self.commit(new, &|_| Origin {
                kind,
                file: file.clone(),
                line,
                detail: None,
            });
        }
        Ok(())
    }
}

fn copy_subtree(from: &Origins, to: &mut Origins, p_old: &str, p_new: &str) {
    for (k, o) in from.range(p_old.to_string()..) {
        let rest = match k.strip_prefix(p_old) {
            Some(r) if r.is_empty() || r.starts_with('/') => r,
            Some(_) => continue,
            None => break,
        };
        to.insert(format!("{p_new}{rest}"), o.clone());
    }
}

fn mark_new(
    v: &Value,
    ptr: &str,
    lp: Option<&str>,
    out: &mut Origins,
    mk: &dyn Fn(Option<&str>) -> Origin,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let lp2 = lp.map(|l| pos::child(l, k));
                mark_new(x, &pos::child(ptr, k), lp2.as_deref(), out, mk);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                let lp2 = lp.map(|l| format!("{l}/{i}"));
                mark_new(x, &format!("{ptr}/{i}"), lp2.as_deref(), out, mk);
            }
        }
        _ => {
            out.insert(ptr.to_string(), mk(lp));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn track(
    old: Option<&Value>,
    new: &Value,
    p_old: Option<&str>,
    p_new: &str,
    lp: Option<&str>,
    old_o: &Origins,
    out: &mut Origins,
    mk: &dyn Fn(Option<&str>) -> Origin,
) {
    match (old, p_old) {
        (Some(o), Some(po)) if o == new => copy_subtree(old_o, out, po, p_new),
        (Some(Value::Object(om)), Some(po)) if new.is_object() && !om.is_empty() => {
            let Value::Object(nm) = new else { return };
            if nm.is_empty() {
                out.insert(p_new.to_string(), mk(lp));
            }
            for (k, v) in nm {
                let lp2 = lp.map(|l| pos::child(l, k));
                track(
                    om.get(k),
                    v,
                    Some(&pos::child(po, k)),
                    &pos::child(p_new, k),
                    lp2.as_deref(),
                    old_o,
                    out,
                    mk,
                );
            }
        }
        (Some(Value::Array(oa)), Some(po)) if new.is_array() && !oa.is_empty() => {
            let Value::Array(na) = new else { return };
            if na.is_empty() {
                out.insert(p_new.to_string(), mk(lp));
                return;
            }
            let appended = na.len() >= oa.len() && na[..oa.len()] == oa[..];
            let mut used = vec![false; oa.len()];
            for (i, v) in na.iter().enumerate() {
                let pn = format!("{p_new}/{i}");
                if appended && i < oa.len() {
                    copy_subtree(old_o, out, &format!("{po}/{i}"), &pn);
                    continue;
                }
                if appended {
                    let lp2 = lp.map(|l| format!("{l}/{}", i - oa.len()));
                    mark_new(v, &pn, lp2.as_deref(), out, mk);
                    continue;
                }
                match (0..oa.len()).find(|&j| !used[j] && oa[j] == *v) {
                    Some(j) => {
                        used[j] = true;
                        copy_subtree(old_o, out, &format!("{po}/{j}"), &pn);
                    }
                    None => {
                        let lp2 = lp.map(|l| format!("{l}/{i}"));
                        mark_new(v, &pn, lp2.as_deref(), out, mk);
                    }
                }
            }
        }
        _ => mark_new(new, p_new, lp, out, mk),
    }
}

fn read_json_file(
    kind: LayerKind,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<FoundFile>, ConfigError> {
    let Some(text) = json::read_text(path)? else {
        return Ok(None);
    };
    let value = json::parse_object(path, &text)?;
    let pos = pos::positions(&text);
    warnings.extend(super::schema_keys::check(path, &value, &pos));
    Ok(Some(FoundFile {
        kind,
        path: path.to_path_buf(),
        found: Found::Json { value, pos },
    }))
}

fn read_state(path: &Path, warnings: &mut Vec<String>) -> Value {
    match state::read(path) {
        Ok(v) => v,
        Err(w) => {
            warnings.push(w.to_string());
            json!({})
        }
    }
}

/// A state file and the lines of its keys (for `config show --origin`).
fn read_state_with_positions(path: &Path, warnings: &mut Vec<String>) -> (Value, Positions) {
    let value = read_state(path, warnings);
    let pos = match crate::fsutil::read_config(path) {
        Ok(Some(b)) => pos::positions(&String::from_utf8_lossy(&b)),
        _ => Positions::new(),
    };
    (value, pos)
}

/// The project's config files, in layer order (root first within a layer).
fn find_project_files(
    cwd: &Path,
    project_root: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<FoundFile>, ConfigError> {
    let mut dirs = paths::dirs_up_to(cwd, project_root);
    dirs.reverse();
    let mut out = Vec::new();
    out.extend(read_claude_mcp(project_root)?);
    for (kind, name) in [
        (LayerKind::ProjectJson, "crush.json"),
        (LayerKind::ProjectCrushrc, "crushrc"),
        (LayerKind::ProjectDotJson, ".crush.json"),
        (LayerKind::ProjectDotCrushrc, ".crushrc"),
    ] {
        for d in &dirs {
            let p = d.join(name);
            if matches!(kind, LayerKind::ProjectJson | LayerKind::ProjectDotJson) {
                out.extend(read_json_file(kind, &p, warnings)?);
            } else if let Some(text) = json::read_text(&p)? {
                out.push(FoundFile {
                    kind,
                    path: p,
                    found: Found::Crushrc { text },
                });
            }
        }
    }
    Ok(out)
}

/// The `.env` file of the working directory, if any (Go Crush loads it at start-up). One that
/// cannot be read is a warning, not a failure.
fn find_dotenv(cwd: &Path, warnings: &mut Vec<String>) -> Option<(PathBuf, String)> {
    let p = cwd.join(".env");
    match json::read_text(&p) {
        Ok(t) => t.map(|t| (p, t)),
        Err(e) => {
            warnings.push(format!("{e}; the .env file is not loaded"));
            None
        }
    }
}

/// Claude Code's `<project root>/.mcp.json`, read as the first (lowest) project `crush.json`
/// holding its servers, so it is trust-gated like every project file.
fn read_claude_mcp(project_root: &Path) -> Result<Option<FoundFile>, ConfigError> {
    let path = project_root.join(".mcp.json");
    let Some(text) = json::read_text(&path)? else {
        return Ok(None);
    };
    let raw = json::parse_object(&path, &text)?;
    let pos = pos::positions(&text)
        .into_iter()
        .filter_map(|(k, line)| {
            let rest = k.strip_prefix("/mcpServers")?;
            Some((format!("/mcp{rest}"), line))
        })
        .collect();
    Ok(Some(FoundFile {
        kind: LayerKind::ProjectJson,
        path,
        found: Found::Json {
            value: super::mcp::from_claude(&raw),
            pos,
        },
    }))
}

/// What the project would run, without running anything (for `crush trust` and the REPL's
/// first-start question).
pub(crate) fn review_project(cwd: &Path) -> Result<trust::Review, ConfigError> {
    let project_root = paths::project_root(cwd);
    let mut warnings = Vec::new();
    let files = find_project_files(cwd, &project_root, &mut warnings)?;
    let dotenv = find_dotenv(cwd, &mut warnings);
    let global_json = read_json_file(
        LayerKind::GlobalJson,
        &paths::global_config_dir().join("crush.json"),
        &mut warnings,
    )?;
    let claude = claude_project_files(cwd, &project_root, global_json.as_ref(), &files)?;
    let gstate = read_state(&state::global_path(), &mut warnings);
    Ok(review_files(
        &project_root,
        cwd,
        &files,
        dotenv.as_ref(),
        &claude,
        &gstate,
        false,
    ))
}

/// The project's Claude Code settings files, unless the JSON files turn Claude Code's files
/// off (`options.claude_code_hooks: false`).
fn claude_project_files(
    cwd: &Path,
    project_root: &Path,
    global_json: Option<&FoundFile>,
    project: &[FoundFile],
) -> Result<Vec<ClaudeHooks>, ConfigError> {
    let values = global_json
        .into_iter()
        .chain(project)
        .filter_map(|f| match &f.found {
            Found::Json { value, .. } => Some(value),
            Found::Crushrc { .. } => None,
        });
    if claude::enabled_in(values) {
        claude::project_files(cwd, project_root)
    } else {
        Ok(Vec::new())
    }
}

fn review_files(
    project_root: &Path,
    cwd: &Path,
    files: &[FoundFile],
    dotenv: Option<&(PathBuf, String)>,
    claude: &[ClaudeHooks],
    gstate: &Value,
    once: bool,
) -> trust::Review {
    let mut sources: Vec<(LayerKind, PathBuf, Source)> = files
        .iter()
        .map(|f| {
            let src = match &f.found {
                Found::Json { value, .. } => Source::Json(value),
                Found::Crushrc { text } => Source::Crushrc(text),
            };
            (f.kind, f.path.clone(), src)
        })
        .collect();
    sources.extend(claude.iter().map(|c| {
        (
            LayerKind::ProjectJson,
            c.path.clone(),
            Source::ClaudeSettings {
                hooks: &c.hooks,
                permissions: &c.permissions,
            },
        )
    }));
    if let Some((p, text)) = dotenv {
        // The `.env` goes into the process environment: the runtime, in layer terms.
        sources.push((LayerKind::Runtime, p.clone(), Source::DotEnv(text)));
    }
    trust::review(project_root, cwd, &sources, gstate, once)
}

/// `CRUSH_*` environment overrides (crush(1) ENVIRONMENT) as a runtime layer value.
fn env_overrides() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (var, key) in [
        (
            "CRUSH_DISABLE_PROVIDER_AUTO_UPDATE",
            "disable_provider_auto_update",
        ),
        (
            "CRUSH_DISABLE_DEFAULT_PROVIDERS",
            "disable_default_providers",
        ),
        ("CRUSH_DISABLE_METRICS", "disable_metrics"),
        ("DO_NOT_TRACK", "disable_metrics"),
    ] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            out.push((
                var.to_string(),
                json!({"options": {key: crate::env::truthy(&v)}}),
            ));
        }
    }
    out
}

fn models_of(v: &Value) -> rcshell::Models {
    rcshell::Models {
        large: commands::current_model(v, "large").unwrap_or_default(),
        small: commands::current_model(v, "small").unwrap_or_default(),
    }
}

/// Continues the fold `f` over `steps`, running crushrc scripts where a step is a script;
/// scripts are replaced by their records in `steps` so a second fold replays them.
fn fold(mut f: Fold, steps: &mut [Step], scripts: &mut Vec<String>) -> Result<Fold, ConfigError> {
    for step in steps.iter_mut() {
        match &step.body {
            Body::Json { value, pos } => {
                let (value, pos) = (value.clone(), pos.clone());
                f.json(step, &value, &pos);
            }
            Body::Records(recs) if !recs.is_empty() || step.detail.is_some() => {
                f.records(step.kind, recs)?;
            }
            Body::Records(_) => {
                // A script not yet run: run it against what is accumulated so far, unless it
                // changed since it was reviewed.
                let path = step.path.clone().unwrap_or_default();
                f.guard
                    .check(crate::guard::What::Crushrc, &path.to_string_lossy())?;
                let out = crushrc::run(&path, &models_of(&f.acc))?;
                if !out.output.trim().is_empty() {
                    scripts.push(out.output);
                }
                let mut records = out.records;
                if f.skip_project_hook_adds
                    && matches!(
                        step.kind,
                        LayerKind::ProjectCrushrc | LayerKind::ProjectDotCrushrc
                    )
                {
                    records.retain(|r| !r.args.starts_with(&["hook".into(), "add".into()]));
                }
                f.records(step.kind, &records)?;
                step.body = Body::Records(records);
                step.detail = Some("ran".into());
            }
        }
    }
    Ok(f)
}

/// What a crushrc adds on its own (its records applied to an empty value), for `Layer.value`.
fn compiled(recs: &[Record]) -> Value {
    let mut v = json!({});
    for r in recs {
        let _ = commands::apply(&mut v, &r.args);
    }
    v
}

/// Every file of the layers, read before anything runs: nothing runs before the trust decision.
struct Files {
    system_json: Option<FoundFile>,
    global_json: Option<FoundFile>,
    global_rc: Option<PathBuf>,
    project: Vec<FoundFile>,
    dotenv: Option<(PathBuf, String)>,
    claude_project: Vec<ClaudeHooks>,
    legacy_state: Value,
    global_state: Value,
}

impl Files {
    fn read(
        cwd: &Path,
        project_root: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Files, ConfigError> {
        let system_json = read_json_file(LayerKind::System, &paths::system_config(), warnings)?;
        let gdir = paths::global_config_dir();
        let global_json =
            read_json_file(LayerKind::GlobalJson, &gdir.join("crush.json"), warnings)?;
        let global_rc = gdir.join("crushrc");
        let global_rc = json::read_text(&global_rc)?.map(|_| global_rc);
        let project = find_project_files(cwd, project_root, warnings)?;
        let dotenv = find_dotenv(cwd, warnings);
        let claude_project =
            claude_project_files(cwd, project_root, global_json.as_ref(), &project)?;
        let legacy_state = read_state(&state::legacy_global_path(), warnings);
        let global_state = read_state(&state::global_path(), warnings);
        Ok(Files {
            system_json,
            global_json,
            global_rc,
            project,
            dotenv,
            claude_project,
            legacy_state,
            global_state,
        })
    }

    /// Leaves out what an untrusted project may not run or set, and the project's own hooks
    /// under `--no-project-hooks`.
    fn gate(&mut self, allowed: bool, no_project_hooks: bool) {
        if !allowed {
            self.claude_project.clear();
            self.project
                .retain(|f| matches!(f.found, Found::Json { .. }));
            for f in &mut self.project {
                if let Found::Json { value, .. } = &mut f.found {
                    trust::restrict(value);
                }
            }
        }
        if no_project_hooks {
            self.claude_project.clear();
            for f in &mut self.project {
                if let Found::Json {
                    value: Value::Object(m),
                    ..
                } = &mut f.found
                {
                    m.remove("hooks");
                }
            }
        }
    }

    /// The steps of the fold in layer order, without the workspace state, and the index where
    /// the workspace state goes.
    fn into_steps(self, opts: &LoadOptions) -> (Vec<Step>, usize) {
        let mut steps = vec![json_step(LayerKind::Defaults, None, None, defaults())];
        steps.extend(self.system_json.map(file_step));
        for (path, v) in [
            (state::legacy_global_path(), self.legacy_state),
            (state::global_path(), self.global_state),
        ] {
            let mut value = state::config_view(&v);
            if let Some(Value::Object(o)) = value.get_mut("options") {
                o.remove("data_directory");
            }
            if value.as_object().is_some_and(|m| !m.is_empty()) {
                steps.push(json_step(LayerKind::GlobalState, Some(path), None, value));
            }
        }
        let workspace_at = steps.len();
        steps.extend(self.global_json.map(file_step));
        if let Some(p) = self.global_rc {
            steps.push(Step {
                kind: LayerKind::GlobalCrushrc,
                path: Some(p),
                detail: None,
                body: Body::Records(vec![]),
            });
        }
        steps.extend(self.project.into_iter().map(file_step));
        steps.extend(runtime_steps(opts));
        (steps, workspace_at)
    }
}

/// A step of a JSON value that has no positions of its own.
fn json_step(kind: LayerKind, path: Option<PathBuf>, detail: Option<String>, value: Value) -> Step {
    Step {
        kind,
        path,
        detail,
        body: Body::Json {
            value,
            pos: Positions::new(),
        },
    }
}

/// The step of a file read; a crushrc is run when the fold reaches it.
fn file_step(f: FoundFile) -> Step {
    Step {
        kind: f.kind,
        path: Some(f.path),
        detail: None,
        body: match f.found {
            Found::Json { value, pos } => Body::Json { value, pos },
            Found::Crushrc { .. } => Body::Records(vec![]),
        },
    }
}

/// The runtime layer: the command line (with `-D DIR` made absolute), then each `CRUSH_*`
/// variable.
fn runtime_steps(opts: &LoadOptions) -> Vec<Step> {
    let mut runtime = opts.runtime.clone();
    if !runtime.is_object() {
        runtime = json!({});
    }
    if let Some(d) = &opts.data_dir {
        let abs = paths::resolve(&opts.cwd, &d.to_string_lossy());
        json::merge(
            &mut runtime,
            json!({"options": {"data_directory": abs.to_string_lossy()}}),
        );
    }
    let mut steps = vec![json_step(
        LayerKind::Runtime,
        None,
        Some("command line".into()),
        runtime,
    )];
    for (var, value) in env_overrides() {
        steps.push(json_step(
            LayerKind::Runtime,
            None,
            Some(format!("environment {var}")),
            value,
        ));
    }
    steps
}

/// The `.env`'s variables when the project is trusted. The `.env` sets only what the
/// environment does not have already (as Go Crush).
fn dotenv_vars(
    dotenv: Option<&(PathBuf, String)>,
    allowed: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let Some((path, text)) = dotenv.filter(|_| allowed) else {
        return Ok(Vec::new());
    };
    Ok(super::dotenv::parse_checked(text, &super::expand::env_var)
        .map_err(|source| ConfigError::DotEnv {
            path: path.clone(),
            source,
        })?
        .into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none() && !location_var(k, path, warnings))
        .collect())
}

/// Folds `steps` from `start`, and again with the workspace state when the data directory the
/// layers decide has any (see the module docs). Returns the fold and that data directory.
fn fold_layers(
    steps: &mut Vec<Step>,
    workspace_at: usize,
    start: Fold,
    cwd: &Path,
    project_root: &Path,
    warnings: &mut Vec<String>,
    scripts: &mut Vec<String>,
) -> Result<(Fold, PathBuf), ConfigError> {
    // The layers below the workspace state (defaults, global state) hold no scripts: folded
    // once, and kept for the second fold that the workspace state may need.
    let below_workspace = fold(start, &mut steps[..workspace_at], scripts)?;
    let folded = fold(below_workspace.clone(), &mut steps[workspace_at..], scripts)?;
    let data_dir = data_dir_of(&folded.acc, cwd, project_root);
    let workspace = workspace_steps(&data_dir, warnings);
    if workspace.is_empty() {
        return Ok((folded, data_dir));
    }
    steps.splice(workspace_at..workspace_at, workspace);
    // Scripts are not run again: their records are replayed over the new layers.
    let folded = fold(below_workspace, &mut steps[workspace_at..], scripts)?;
    Ok((folded, data_dir))
}

/// Workspace state: Go Crush's `<data dir>/crush.json` (where its UI writes the models chosen in
/// the project), then ours; a file with nothing crush may take from it has no step.
fn workspace_steps(data_dir: &Path, warnings: &mut Vec<String>) -> Vec<Step> {
    let mut workspace = Vec::new();
    for wpath in [
        state::legacy_workspace_path(data_dir),
        state::workspace_path(data_dir),
    ] {
        let (value, pos) = read_state_with_positions(&wpath, warnings);
        let mut wvalue = state::config_view(&value);
        workspace_only_allowed(&wpath, &mut wvalue, warnings);
        if wvalue.as_object().is_some_and(|m| !m.is_empty()) {
            workspace.push(Step {
                kind: LayerKind::WorkspaceState,
                path: Some(wpath),
                detail: None,
                body: Body::Json { value: wvalue, pos },
            });
        }
    }
    workspace
}

/// Claude Code's hooks (the user's, the plugins', the project's `project` files), unless the
/// configuration turns them off.
fn claude_hooks_of(
    config: &Config,
    project: Vec<ClaudeHooks>,
    project_root: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<ClaudeHooks>, ConfigError> {
    if config.options.claude_code_hooks == Some(false) {
        return Ok(Vec::new());
    }
    claude::collect(
        &config.options.claude_plugins,
        project,
        project_root,
        warnings,
    )
}

/// The layers as `Loaded` shows them: one per step, a crushrc as what it adds on its own, the
/// runtime steps merged into one.
fn layers_of(steps: &[Step]) -> Vec<Layer> {
    let mut layers: Vec<Layer> = Vec::new();
    for s in steps {
        let value = match &s.body {
            Body::Json { value, .. } => value.clone(),
            Body::Records(r) => compiled(r),
        };
        match layers.last_mut() {
            Some(last) if s.kind == LayerKind::Runtime && last.kind == LayerKind::Runtime => {
                json::merge(&mut last.value, value)
            }
            _ => layers.push(Layer {
                kind: s.kind,
                path: s.path.clone(),
                value,
            }),
        }
    }
    layers
}

/// Loads all ten layers (see the module docs).
pub(crate) fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    let cwd = opts.cwd.as_path();
    let project_root = paths::project_root(cwd);
    let mut warnings = Vec::new();

    let mut files = Files::read(cwd, &project_root, &mut warnings)?;
    let review = review_files(
        &project_root,
        cwd,
        &files.project,
        files.dotenv.as_ref(),
        &files.claude_project,
        &files.global_state,
        opts.trust || trust::env_trusts(),
    );
    let dotenv_vars = dotenv_vars(files.dotenv.as_ref(), review.allowed(), &mut warnings)?;
    files.gate(review.allowed(), opts.no_project_hooks);
    let claude_project = std::mem::take(&mut files.claude_project);
    let (mut steps, workspace_at) = files.into_steps(opts);

    let mut scripts = Vec::new();
    let guard = review.guard();
    let start = Fold {
        skip_project_hook_adds: opts.no_project_hooks,
        guard: guard.clone(),
        ..Fold::new()
    };
    let (mut folded, data_dir) = fold_layers(
        &mut steps,
        workspace_at,
        start,
        cwd,
        &project_root,
        &mut warnings,
        &mut scripts,
    )?;

    warnings.append(&mut folded.warnings);
    let config = to_config(&folded.acc, &folded.origins)?;
    let claude_hooks = claude_hooks_of(&config, claude_project, &project_root, &mut warnings)?;
    let (claude_rules, rule_errors) =
        super::claude_rules::ClaudeRules::from_files(&claude_hooks, cwd);
    warnings.extend(rule_errors.iter().map(ToString::to_string));
    let catalog_settings = crate::catalog::Settings {
        debug: config.options.debug,
        ..crate::catalog::Settings::from_env(config.options.disable_provider_auto_update)
    };
    let env_vars = expand_env_map(&config, &folded.origins, &dotenv_vars)?;
    let env = overlay(&dotenv_vars, &env_vars, &mut warnings);
    Ok(Loaded {
        config,
        layers: layers_of(&steps),
        warnings,
        cwd: cwd.to_path_buf(),
        project_root,
        data_dir,
        merged: folded.acc,
        origins: folded.origins,
        trust: review,
        guard,
        env,
        script_output: scripts,
        claude_hooks,
        claude_rules,
        catalog: crate::catalog::Lazy::new(catalog_settings),
    })
}

/// A workspace state file lives in the project's data directory, which a repository can ship: it
/// may set only what an untrusted project may (crush writes nothing else there), the rest is
/// ignored with a warning (crush(1) SECURITY).
fn workspace_only_allowed(path: &Path, v: &mut Value, warnings: &mut Vec<String>) {
    let skipped = trust::split_untrusted(v);
    if !skipped.is_empty() {
        let keys: Vec<String> = skipped.iter().map(|(p, _)| pos::dotted(p)).collect();
        warnings.push(format!(
            "{}: ignored {} (a workspace file may set only what an untrusted project may)",
            path.display(),
            keys.join(", ")
        ));
    }
}

fn data_dir_of(v: &Value, cwd: &Path, project_root: &Path) -> PathBuf {
    match v
        .pointer("/options/data_directory")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
        Some(d) => paths::resolve(project_root, d),
        None => {
            let _ = cwd;
            project_root.join(".crush")
        }
    }
}

/// The typed configuration. A value of the wrong type is reported with the file:line that set
/// it, its key path and the type expected: `crush.json:3: options.debug: expected a boolean, got
/// string "yes"`.
fn to_config(merged: &Value, origins: &Origins) -> Result<Config, ConfigError> {
    check_env_maps(merged, origins)?;
    serde_json::from_value::<Config>(merged.clone()).map_err(|e| {
        let (ptr, msg) = culprit(merged).unwrap_or_else(|| (String::new(), e.to_string()));
        let at = origins
            .range(ptr.clone()..)
            .find(|(k, _)| k.starts_with(&ptr))
            .map(|(_, o)| format!("{}: ", o.place()))
            .unwrap_or_default();
        let key = if ptr.is_empty() {
            "invalid configuration".to_string()
        } else {
            pos::dotted(&ptr)
        };
        ConfigError::File(format!("{at}{key}: {}", type_message(&msg)))
    })
}

/// Whether `v` deserializes as a `Config`; serde's error if not.
fn check_config(v: &Value) -> Result<(), serde_json::Error> {
    serde_json::from_value::<Config>(v.clone()).map(drop)
}

/// `v` reduced to the path down to `ptr` and the value there (an array on the way keeps only
/// that element), so that what is checked is that value alone, with defaults for the rest.
fn only(v: &Value, ptr: &str) -> Value {
    let mut segs = ptr.split('/').skip(1);
    match segs.next() {
        None => v.clone(),
        Some(seg) => {
            let key = seg.replace("~1", "/").replace("~0", "~");
            let rest: String = ptr[seg.len() + 1..].to_string();
            match v {
                Value::Object(m) => {
                    let inner = m.get(&key).map(|x| only(x, &rest)).unwrap_or(Value::Null);
                    json!({ key: inner })
                }
                Value::Array(a) => {
                    let inner = key
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| a.get(i))
                        .map(|x| only(x, &rest))
                        .unwrap_or(Value::Null);
                    Value::Array(vec![inner])
                }
                other => other.clone(),
            }
        }
    }
}

/// The deepest key of `v` whose value alone does not deserialize (removing it fixes the whole,
/// or, with several faults, it fails on its own), with serde's message for it.
fn culprit(v: &Value) -> Option<(String, String)> {
    let mut msg = check_config(v).err()?.to_string();
    let mut ptr = String::new();
    loop {
        let children: Vec<String> = match v.pointer(&ptr) {
            Some(Value::Object(m)) => m.keys().map(|k| pos::child(&ptr, k)).collect(),
            Some(Value::Array(a)) => (0..a.len()).map(|i| format!("{ptr}/{i}")).collect(),
            _ => return Some((ptr, msg)),
        };
        let removal_fixes = |c: &String| {
            let mut trial = v.clone();
            pos::remove(&mut trial, c, false) && check_config(&trial).is_ok()
        };
        let next = children
            .iter()
            .find(|c| removal_fixes(c))
            .or_else(|| children.iter().find(|c| check_config(&only(v, c)).is_err()));
        match next {
            Some(c) => {
                if let Err(m) = check_config(&only(v, c)) {
                    msg = m.to_string();
                }
                ptr = c.clone();
            }
            None => return Some((ptr, msg)),
        }
    }
}

/// serde's "invalid type: string \"yes\", expected a boolean" as "expected a boolean, got
/// string \"yes\"" (other messages as they are).
fn type_message(msg: &str) -> String {
    let msg = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    match msg
        .strip_prefix("invalid type: ")
        .and_then(|r| r.rsplit_once(", expected "))
    {
        Some((got, want)) => format!("expected {want}, got {got}"),
        None => msg.to_string(),
    }
}

/// The top-level `env` map, expanded in key order (a value may use an earlier key).
fn expand_env_map(
    config: &Config,
    origins: &Origins,
    dotenv: &[(String, String)],
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in &config.env {
        let lookup = |name: &str| {
            out.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .or_else(|| super::expand::env_var(name))
                .or_else(|| {
                    dotenv
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                })
        };
        let val = super::expand::expand(v, &lookup).map_err(|source| ConfigError::Env {
            place: place_of(origins, &pos::child("/env", k)),
            key: k.clone(),
            source,
        })?;
        if let Some(why) = env_problem(k, &val) {
            let at = place_of(origins, &pos::child("/env", k));
            return Err(ConfigError::File(format!("{at}: env.{k}: {why}")));
        }
        out.push((k.clone(), val));
    }
    Ok(out)
}

/// The `.env`'s variables, then the `env` map's, as the session's environment overlay. The
/// loader refuses names and values no environment can hold with their file:line; one that gets
/// here all the same is left out with a warning.
fn overlay(
    dotenv: &[(String, String)],
    env: &[(String, String)],
    warnings: &mut Vec<String>,
) -> crate::env::Overlay {
    let mut vars = Vec::new();
    for (k, v) in dotenv.iter().chain(env) {
        match env_problem(k, v) {
            Some(why) => warnings.push(format!("{}: {why}; not set", crate::visible::line(k))),
            None => vars.push((k.clone(), v.clone())),
        }
    }
    crate::env::Overlay::new(vars)
}

/// Whether `name` is one of crush's location variables, which a `.env` cannot set (crush(1)
/// CONFIGURATION): they were read before it, and half-moved files are worse than none. Warns.
fn location_var(name: &str, dotenv: &Path, warnings: &mut Vec<String>) -> bool {
    let found = paths::LOCATION_VARS.contains(&name);
    if found {
        warnings.push(format!(
            "{}: {name} not set: crush's location variables cannot be set from a .env",
            dotenv.display()
        ));
    }
    found
}

/// The file:line (or layer) that set the value at `ptr`.
fn place_of(origins: &Origins, ptr: &str) -> String {
    origins
        .get(ptr)
        .map(|o| o.place())
        .unwrap_or_else(|| "config".into())
}

/// Why `name=value` cannot be put in a process environment (setting it would abort crush or
/// set another variable): a name must not be empty nor hold `=` or NUL, a value must not hold
/// NUL (crush(1) CONFIGURATION).
pub(crate) fn env_problem(name: &str, value: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("an environment variable needs a name")
    } else if name.contains('=') {
        Some("an environment variable's name cannot hold '='")
    } else if name.contains('\0') {
        Some("an environment variable's name cannot hold a NUL byte")
    } else if value.contains('\0') {
        Some("the value holds a NUL byte, which no environment variable can")
    } else {
        None
    }
}

/// Every map of environment variables (`env`, each `mcp` and `lsp` server's `env`) holds only
/// what an environment can: else an error naming the file:line that set the variable.
fn check_env_maps(merged: &Value, origins: &Origins) -> Result<(), ConfigError> {
    let mut maps: Vec<(String, &Map<String, Value>)> = Vec::new();
    if let Some(Value::Object(m)) = merged.get("env") {
        maps.push(("/env".into(), m));
    }
    for section in ["mcp", "lsp"] {
        for (name, server) in merged
            .get(section)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(Value::Object(m)) = server.get("env") {
                let at = pos::child(&pos::child("", section), name);
                maps.push((format!("{at}/env"), m));
            }
        }
    }
    for (ptr, m) in maps {
        for (k, v) in m {
            if let Some(why) = env_problem(k, v.as_str().unwrap_or("")) {
                let ptr = pos::child(&ptr, k);
                return Err(ConfigError::File(format!(
                    "{}: {}: {why}",
                    place_of(origins, &ptr),
                    crate::visible::line(&pos::dotted(&ptr))
                )));
            }
        }
    }
    Ok(())
}

/// Re-derives the typed configuration from a changed merged value (session-only commands).
pub(crate) fn retype(merged: &Value) -> Result<Config, ConfigError> {
    to_config(merged, &Origins::new())
}

/// Applies one session-only command to the runtime layer of `loaded`.
pub(crate) fn apply_runtime(
    loaded: &mut Loaded,
    args: &[String],
    detail: String,
) -> Result<commands::Outcome, ConfigError> {
    let mut new = loaded.merged.clone();
    let out = commands::apply(&mut new, args)?;
    let config = retype(&new)?;
    let mut f = Fold {
        acc: std::mem::take(&mut loaded.merged),
        origins: std::mem::take(&mut loaded.origins),
        ..Fold::new()
    };
    f.commit(new, &|_| Origin {
        kind: LayerKind::Runtime,
        file: None,
        line: None,
        detail: Some(detail.clone()),
    });
    loaded.merged = f.acc;
    loaded.origins = f.origins;
    loaded.config = config;
    match loaded
        .layers
        .iter_mut()
        .find(|l| l.kind == LayerKind::Runtime)
    {
        Some(l) => {
            let _ = commands::apply(&mut l.value, args);
        }
        None => loaded.layers.push(Layer {
            kind: LayerKind::Runtime,
            path: None,
            value: compiled(&[Record {
                file: None,
                line: None,
                args: args.to_vec(),
            }]),
        }),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(kind: LayerKind, line: Option<u32>) -> Origin {
        Origin {
            kind,
            file: Some("/f".into()),
            line,
            detail: None,
        }
    }

    #[test]
    fn origins_follow_merges_and_commands() {
        let mut f = Fold::new();
        let pos =
            pos::positions("{\n\"options\": {\n\"context_paths\": [\n\"a\"\n], \"debug\": true}}");
        let step = Step {
            kind: LayerKind::GlobalJson,
            path: Some("/g.json".into()),
            detail: None,
            body: Body::Records(vec![]),
        };
        f.json(
            &step,
            &json!({"options": {"context_paths": ["a"], "debug": true}}),
            &pos,
        );
        assert_eq!(f.origins["/options/context_paths/0"].line, Some(4));
        assert_eq!(f.origins["/options/debug"].line, Some(5));
        let step2 = Step {
            kind: LayerKind::ProjectJson,
            path: Some("/p.json".into()),
            ..step.clone()
        };
        let pos2 = pos::positions("{\"options\": {\"context_paths\": [\n\"b\"]}}");
        f.json(&step2, &json!({"options": {"context_paths": ["b"]}}), &pos2);
        // The appended element maps to element 0 of the second file, line 2.
        assert_eq!(
            f.origins["/options/context_paths/0"].kind,
            LayerKind::GlobalJson
        );
        assert_eq!(
            f.origins["/options/context_paths/1"].kind,
            LayerKind::ProjectJson
        );
        assert_eq!(f.origins["/options/context_paths/1"].line, Some(2));
        // A command that removes the first element keeps the second one's origin.
        let mut new = f.acc.clone();
        new["options"]["context_paths"] = json!(["b"]);
        f.commit(new, &|_| origin(LayerKind::ProjectCrushrc, Some(9)));
        assert_eq!(
            f.origins["/options/context_paths/0"].kind,
            LayerKind::ProjectJson
        );
        assert!(!f.origins.contains_key("/options/context_paths/1"));
        assert_eq!(f.origins["/options/debug"].kind, LayerKind::GlobalJson);
        // Records: file:line of the call.
        let recs = vec![Record {
            file: Some("/p/crushrc".into()),
            line: Some(3),
            args: vec!["option".into(), "debug".into(), "false".into()],
        }];
        f.records(LayerKind::ProjectCrushrc, &recs).unwrap();
        assert_eq!(f.origins["/options/debug"].place(), "/p/crushrc:3");
        let bad = vec![Record {
            file: Some("/p/crushrc".into()),
            line: Some(4),
            args: vec!["option".into(), "max-steps".into(), "lots".into()],
        }];
        let e = f
            .records(LayerKind::ProjectCrushrc, &bad)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/p/crushrc:4: option: max-steps: 'lots'"),
            "{e}"
        );
        // An unknown key is a warning with the call's place, and the load goes on.
        let unknown = vec![Record {
            file: Some("/p/crushrc".into()),
            line: Some(5),
            args: vec!["option".into(), "nope".into(), "1".into()],
        }];
        f.records(LayerKind::ProjectCrushrc, &unknown).unwrap();
        assert!(
            f.warnings
                .iter()
                .any(|w| w.starts_with("/p/crushrc:5: unknown key 'nope' ignored")),
            "{:?}",
            f.warnings
        );
    }

    #[test]
    fn a_wrong_type_names_its_key_and_what_was_expected() {
        let v = json!({"options": {"debug": "yes", "progress": true},
            "providers": {"p": {"base_url": "u", "models": [{"id": "a"}, {"id": "b", "context_window": "big"}]}}});
        let (ptr, msg) = culprit(&v).unwrap();
        assert_eq!(ptr, "/options/debug", "{msg}");
        assert_eq!(type_message(&msg), "expected a boolean, got string \"yes\"");
        let v = json!({"providers": {"p": {"base_url": "u", "models": [{"id": "a"}, {"id": "b", "context_window": "big"}]}}});
        assert_eq!(
            culprit(&v).unwrap().0,
            "/providers/p/models/1/context_window"
        );
        let mut origins = Origins::new();
        origins.insert(
            "/providers/p/models/1/context_window".into(),
            origin(LayerKind::ProjectJson, Some(7)),
        );
        let e = to_config(&v, &origins).unwrap_err().to_string();
        assert!(
            e.starts_with("/f:7: providers.p.models[1].context_window: expected u64, got string"),
            "{e}"
        );
        let e = to_config(&json!({"options": 3}), &Origins::new())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "options: expected struct Options, got integer `3`");
        assert!(culprit(&json!({"options": {"debug": true}})).is_none());
    }
}
