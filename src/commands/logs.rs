//! `crush logs [-f] [-t N]`.

use crate::app::{AppError, Global, load_config};
use crate::exit::ExitCode;

/// `crush logs [-f] [-t N]`: the project's log, pretty-printed.
pub(crate) fn logs(global: &Global, follow: bool, tail: usize) -> Result<ExitCode, AppError> {
    use std::io::Write as _;
    let loaded = load_config(global)?;
    let p = crate::log::path(&loaded.data_dir);
    if !p.exists() {
        return Err(AppError::Usage(format!(
            "no log yet at {} (crush writes it once it has run in this project)",
            p.display()
        )));
    }
    let io = |e: std::io::Error| AppError::Runtime(format!("{}: {e}", p.display()));
    let lines = crate::log::tail(&p, tail).map_err(io)?;
    let stdout = std::io::stdout();
    let terminal = std::io::IsTerminal::is_terminal(&stdout);
    let mut out = stdout.lock();
    let closed = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    for l in &lines {
        if let Err(e) = writeln!(out, "{}", crate::log::shown(l, terminal)) {
            return if closed(&e) {
                Ok(ExitCode::Success)
            } else {
                Err(io(e))
            };
        }
    }
    if follow {
        let stop = crate::signal::interrupt_flag();
        match crate::log::follow(&p, &mut out, terminal, &|| {
            stop.load(std::sync::atomic::Ordering::SeqCst)
        }) {
            Err(e) if !closed(&e) => return Err(io(e)),
            _ => {}
        }
    }
    Ok(crate::signal::terminating().map_or(ExitCode::Success, ExitCode::from_signal))
}
