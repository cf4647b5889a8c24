//! crush: parse flags, dispatch, map errors to exit codes.

use crush::app::AppError;
use crush::cli::Command;
use crush::commands::{self, hooks as hooks_cmd, sessions, stats};
use crush::{app, catalog, cli, docs, repl, run};
use std::io::Write;
use std::process::ExitCode;

/// Prints command output to stdout; a closed stdout is not an error.
fn print(s: &str) -> Result<i32, AppError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(AppError::Runtime(format!("cannot write to stdout: {e}"))),
    }
}

fn dispatch(cli: cli::Cli) -> Result<i32, AppError> {
    let g = &cli.global;
    match &cli.command {
        Command::Version => print(&format!("crush {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Help(cmd) => {
            print(&cli::help_text(cmd.as_deref()).map_err(|e| AppError::Usage(e.0))?)
        }
        Command::Generate(kind) => print(&docs::generate(kind).map_err(AppError::Usage)?),
        Command::Run(args) => run::run(g, args),
        Command::SessionsList { json } => print(&sessions::list(g, *json)?),
        Command::SessionsShow { id, json } => print(&sessions::show(g, id, *json)?),
        Command::Stats { json } => print(&stats::report(g, *json)?),
        Command::HooksList { tool } => print(&hooks_cmd::list(g, tool.as_deref())?),
        Command::HooksTest(args) => {
            let (text, code) = hooks_cmd::test(g, args)?;
            print(&text)?;
            Ok(code)
        }
        Command::SessionsExport { id, format } => print(&sessions::export(g, id, *format)?),
        Command::SessionsDelete { id } => print(&sessions::delete(g, id)?),
        Command::SessionsRename { id, title } => print(&sessions::rename(g, id, title)?),
        Command::Projects { json } => print(&commands::projects::projects(*json)?),
        Command::Logs { follow, tail } => commands::logs::logs(g, *follow, *tail),
        Command::Dirs => print(&commands::config::dirs(&app::load_config(g)?)),
        Command::ConfigShow { origin, json } => print(&commands::config::config_show(
            &app::load_config(g)?,
            *origin,
            *json,
        )),
        Command::Trust { revoke } => {
            print(&commands::config::trust(&app::working_dir(g)?, *revoke)?)
        }
        Command::Models { query, json } => {
            let loaded = app::load_config(g)?;
            print(&commands::models::models(&loaded, query.as_deref(), *json)?)
        }
        Command::UpdateProviders { source } => {
            print(&catalog::update_providers_command(source.as_deref())?)
        }
        Command::Repl(args) => repl::run(g, args),
    }
}

fn main() -> ExitCode {
    let cli = match cli::parse_from(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("crush: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("crush: {e}");
            e.exit_code()
        }
    };
    crush::signal::cleanup();
    ExitCode::from(code as u8)
}
