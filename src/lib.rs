//! crush: a terminal AI coding assistant. `main` parses the flags, dispatches the command and
//! maps the outcome to an exit code; everything else lives in these modules (private to the
//! crate), one per concept, in layers: a module uses only modules of lower layers (`LAYERS`,
//! checked by a test). ARCHITECTURE.md describes each layer.

#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::print_stderr,
        clippy::print_stdout
    )
)]

mod acp;
mod activity;
mod agent;
mod agents;
mod app;
mod aws;
mod catalog;
mod cli;
mod commands;
mod complete;
mod config;
mod docs;
mod env;
mod exit;
mod fsutil;
mod guard;
mod hooks;
mod jq;
mod llm;
mod log;
mod login;
mod lsp;
mod mcp;
mod net;
mod paths;
mod proc;
mod rcshell;
mod repl;
mod run;
mod sandbox;
#[doc(hidden)]
pub mod sha256;
mod signal;
mod skills;
mod stdio;
mod store;
mod text;
mod time;
mod tools;
mod visible;
mod wildcard;

/// The crate's SHA-256, SigV4 and event-stream code, for the tests' fake AWS server, which
/// signs-checks and frames with the very code crush uses (each is checked against published
/// vectors by its unit tests).
#[doc(hidden)]
pub mod wire {
    pub use crate::aws::{eventstream, sigv4};
    pub use crate::sha256;
}

use app::AppError;
use cli::Command;
use commands::{hooks as hooks_cmd, sessions, stats};
use exit::ExitCode;
use std::io::Write;

/// Prints command output to stdout; a closed stdout is not an error. On a terminal, control
/// characters (a session's stored text is the model's) are shown, not acted on.
fn print(s: &str) -> Result<ExitCode, AppError> {
    use std::io::IsTerminal;
    let s = if std::io::stdout().is_terminal() {
        visible::text(s)
    } else {
        std::borrow::Cow::Borrowed(s)
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(ExitCode::Success),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::Success),
        Err(e) => Err(AppError::Runtime(format!("cannot write to stdout: {e}"))),
    }
}

fn dispatch(cli: cli::Cli) -> Result<ExitCode, AppError> {
    let g = &cli.global;
    match &cli.command {
        Command::Version => print(&format!("crush {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Help(cmd) => {
            print(&cli::help_text(cmd.as_deref()).map_err(|e| AppError::Usage(e.to_string()))?)
        }
        Command::Generate(kind) => {
            print(&docs::generate(kind).map_err(|e| AppError::Usage(e.to_string()))?)
        }
        Command::Run(args) => run::run(g, args),
        Command::Init(args) => run::init(g, args),
        Command::SessionsList { json } => print(&sessions::list(g, *json)?),
        Command::SessionsShow { id, json } => print(&sessions::show(g, id, *json)?),
        Command::Stats(args) => print(&stats::report(g, args)?),
        Command::HooksList { tool } => print(&hooks_cmd::list(g, tool.as_deref())?),
        Command::HooksTest(args) => {
            let (text, code) = hooks_cmd::test(g, args)?;
            print(&text)?;
            Ok(code)
        }
        Command::LspList { json } => print(&commands::lsp::list(g, *json)?),
        Command::McpList { json } => print(&commands::mcp::list(g, *json)?),
        Command::SkillsList { json } => print(&commands::skills::list(g, *json)?),
        Command::AgentsList { json } => print(&commands::agents::list(g, *json)?),
        Command::DebugPrompt => print(&commands::agents::debug_prompt(
            g,
            &mut std::io::stderr().lock(),
        )?),
        Command::McpLogin { name } => print(&commands::mcp::login(g, name)?),
        Command::Login { name, token_stdin } => print(&match name {
            Some(n) => commands::login::login(n, *token_stdin)?,
            None => commands::login::list()?,
        }),
        Command::Logout { name } => print(&commands::login::logout(name)?),
        Command::SessionsExport { id, format } => print(&sessions::export(g, id, *format)?),
        Command::SessionsLast { json } => print(&sessions::last(g, *json)?),
        Command::SessionsDiff { id } => print(&sessions::diff(g, id)?),
        Command::SessionsDelete { id, json } => print(&sessions::delete(g, id, *json)?),
        Command::SessionsRename { id, title, json } => {
            print(&sessions::rename(g, id, title, *json)?)
        }
        Command::Projects { json } => print(&commands::projects::projects(*json)?),
        Command::Logs { follow, tail } => commands::logs::logs(g, *follow, *tail),
        Command::Dirs => print(&commands::config::dirs(&app::load_config(g)?)),
        Command::ConfigShow { origin, json } => print(&commands::config::config_show(
            &app::load_config(g)?,
            *origin,
            *json,
        )),
        Command::ConfigCheck => {
            let (text, code) = commands::config::config_check(&app::load_config_quietly(g)?);
            print(&text)?;
            Ok(code)
        }
        Command::SandboxCheck => print(&sandbox::check_report()),
        Command::SandboxRun {
            mode,
            network,
            argv,
        } => commands::sandbox::run(g, mode.as_deref(), *network, argv),
        Command::Trust { revoke } => {
            print(&commands::config::trust(&app::working_dir(g)?, *revoke)?)
        }
        Command::Models { query, all, json } => {
            use commands::models::Shape;
            use std::io::IsTerminal;
            let loaded = app::load_config(g)?;
            let shape = match (*json, std::io::stdout().is_terminal()) {
                (true, _) => Shape::Json,
                (false, true) => Shape::Table,
                (false, false) => Shape::Ids,
            };
            let (text, hint) = commands::models::models(&loaded, query.as_deref(), *all, shape)?;
            if let Some(h) = hint {
                crate::ewriteln!("crush: {h}");
            }
            print(&text)
        }
        Command::UpdateProviders { source } => {
            print(&catalog::update_providers_command(source.as_deref())?)
        }
        Command::Repl(args) => repl::run(g, args),
        Command::Acp => acp::run(g),
    }
}

/// The binary's entry.
pub fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == proc::job::SERVER_ARG) {
        proc::job::serve();
    }
    // `crush __jq`, or a link named jq: the jq hooks get (crush(1) HOOKS).
    if let Some(code) = jq::as_jq(&std::env::args_os().collect::<Vec<_>>()) {
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    proc::hide_environment();
    // Fixed before any configuration (whose `env` may change variables) is read.
    rcshell::run_dir();
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == complete::ARG)
    {
        let words: Vec<String> = std::env::args_os()
            .skip(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let _ = print(&complete::answer(&words));
        app::close_stores();
        return ExitCode::Success.into();
    }
    let cli = match cli::parse_from(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            crate::ewriteln!("crush: {e}");
            return ExitCode::Usage.into();
        }
    };
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // An error may quote a project file, a server or a model: shown, never acted on.
            crate::ewriteln!("crush: {}", visible::text(&e.to_string()));
            e.exit_code()
        }
    };
    app::close_stores();
    signal::cleanup();
    code.into()
}

/// The layers, lowest first. A module may use the modules of the layers before its own, never
/// one of its own layer or above (tests excepted).
#[cfg(test)]
const LAYERS: &[&[&str]] = &[
    &["wildcard"],
    &[
        "time", "env", "exit", "paths", "sha256", "visible", "fsutil", "stdio", "sandbox", "jq",
        "text",
    ],
    &["log", "net", "proc", "activity"],
    &["signal", "rcshell", "guard"],
    &["aws", "login"],
    &["llm"],
    &["store", "mcp", "lsp"],
    &["tools"],
    &["catalog"],
    &["config"],
    &["hooks", "skills"],
    &["agents"],
    &["agent"],
    &["app"],
    &["commands"],
    &["run", "repl", "acp"],
    &["cli"],
    &["docs", "complete"],
];

#[cfg(test)]
mod tests {
    use super::LAYERS;
    use std::path::Path;

    fn layer(module: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&module))
    }

    /// `src` without its test-only items: each `#[cfg(test)]` and the item after it, to its
    /// `;` or to the `}` that closes its first `{` (braces inside strings and comments are
    /// rare enough in this code base that counting them all is close enough for a lint).
    fn strip_tests(src: &str) -> String {
        let mut out = String::with_capacity(src.len());
        let mut rest = src;
        while let Some(at) = rest.find("#[cfg(test)]") {
            out.push_str(&rest[..at]);
            let item = &rest[at + "#[cfg(test)]".len()..];
            let mut depth = 0usize;
            let mut end = item.len();
            for (i, c) in item.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    ';' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            rest = &item[end..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn test_items_are_stripped_wherever_they_are() {
        let src = "use a;\n#[cfg(test)]\nuse crate::x;\nfn keep() {}\n#[cfg(test)]\nmod t { fn f() { crate::y } }\nfn after() { crate::z }\n";
        let code = strip_tests(src);
        assert!(
            !code.contains("crate::x") && !code.contains("crate::y"),
            "{code}"
        );
        assert!(
            code.contains("fn keep") && code.contains("crate::z"),
            "{code}"
        );
    }

    /// The modules `crate::` paths in `src` name (test-only items left out).
    fn uses(src: &str) -> Vec<String> {
        let code = strip_tests(src);
        let code = code.as_str();
        let path = regex_lite::Regex::new(r"crate::([a-z_]+)").unwrap();
        let group = regex_lite::Regex::new(r"use crate::\{([^}]*)\}").unwrap();
        let mut out: Vec<String> = path.captures_iter(code).map(|c| c[1].to_string()).collect();
        for g in group.captures_iter(code) {
            for item in g[1].split(',') {
                let name = item.trim().split("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    out.push(name.to_string());
                }
            }
        }
        out
    }

    fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }

    #[test]
    fn no_module_uses_its_own_layer_or_a_higher_one() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        let mut wrong = Vec::new();
        let mut unplaced = Vec::new();
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap();
            let module = rel
                .iter()
                .next()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            let name = rel.file_name().unwrap().to_string_lossy();
            if ["lib", "main"].contains(&module.as_str()) || name == "tests.rs" {
                continue;
            }
            let Some(own) = layer(&module) else {
                unplaced.push(module);
                continue;
            };
            for used in uses(&std::fs::read_to_string(f).unwrap()) {
                if let Some(l) = layer(&used)
                    && used != module
                    && l >= own
                {
                    wrong.push(format!("{}: {module} uses {used}", rel.display()));
                }
            }
        }
        assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
        wrong.sort();
        wrong.dedup();
        assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    }

    /// The functions of `src` (test-only items left out) longer than `max` lines, as
    /// `name (lines)`: from a line declaring `fn` to the `}` at its indentation.
    fn long_functions(src: &str, max: usize) -> Vec<String> {
        let code = strip_tests(src);
        let decl =
            regex_lite::Regex::new(r"^(\s*)(?:pub(?:\([a-z]+\))? )?fn ([a-z_0-9]+)").unwrap();
        let lines: Vec<&str> = code.lines().collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let Some(c) = decl.captures(line) else {
                continue;
            };
            if line.trim_end().ends_with(';') {
                continue;
            }
            let end = format!("{}}}", &c[1]);
            if let Some(n) = lines[i + 1..].iter().position(|l| l.trim_end() == end)
                && n + 2 > max
            {
                out.push(format!("{} ({} lines)", &c[2], n + 2));
            }
        }
        out
    }

    /// The turn, the REPL, the configuration and the command line stay readable: no function
    /// of the agent (the step loop, one tool call, ...), the REPL (a slash command, the sink,
    /// the editor), the configuration (loading the layers, a crushrc command, trust) or the
    /// command line grows past about 120 lines.
    #[test]
    fn no_agent_repl_config_or_cli_function_is_longer_than_120_lines() {
        let mut files = Vec::new();
        for dir in ["src/agent", "src/repl", "src/config", "src/cli"] {
            walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut files);
        }
        let mut long = Vec::new();
        for f in &files {
            for l in long_functions(&std::fs::read_to_string(f).unwrap(), 120) {
                long.push(format!("{}: {l}", f.display()));
            }
        }
        assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
    }

    #[test]
    fn the_length_check_counts_a_function_to_its_closing_brace() {
        let body = "    x();\n".repeat(119);
        let src = format!(
            "fn short() {{\n}}\nimpl A {{\n    pub(super) fn long() {{\n{body}    }}\n}}\n"
        );
        assert_eq!(long_functions(&src, 120), ["long (121 lines)"]);
        assert!(long_functions(&src, 121).is_empty());
    }

    #[test]
    fn the_check_sees_both_forms_of_use() {
        let u = uses("use crate::{agent::Agent, store};\nfn f() { crate::llm::x(); }");
        assert_eq!(u, ["llm", "agent", "store"]);
    }
}
