//! `crush sandbox [--mode M] [--network] -- COMMAND...`: any command in the sandbox the model's
//! commands get (crush(1) SECURITY, sandbox), its stdin, stdout and stderr the terminal's.

use crate::app::{self, AppError, Global};
use crate::config::sandbox::{self as settings, Flags};
use crate::exit::ExitCode;
use crate::sandbox::Sandbox;
use std::os::unix::process::{CommandExt, ExitStatusExt};

/// Runs `argv` confined; crush exits with its status (128 + signal when a signal ended it).
/// Returns only with an error.
pub(crate) fn run(
    global: &Global,
    mode: Option<&str>,
    network: bool,
    argv: &[String],
) -> Result<ExitCode, AppError> {
    let loaded = app::load_config(global)?;
    let flags = Flags {
        mode: Some(mode.unwrap_or("workspace-write").to_string()),
        network,
        auto: false,
    };
    let config = |e: settings::SettingsError| AppError::Config(e.to_string());
    let mode = settings::mode(&loaded, &flags).map_err(config)?;
    let (Some(policy), Some((prog, args))) = (
        settings::policy(&loaded, mode, &flags).map_err(config)?,
        argv.split_first(),
    ) else {
        return Err(AppError::Usage(
            "usage: crush sandbox [--mode read-only|workspace-write] [--network] -- COMMAND [ARG...]"
                .into(),
        ));
    };
    let sandbox = Sandbox::new(policy).map_err(|e| AppError::Config(e.to_string()))?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args).current_dir(&loaded.cwd).envs(sandbox.env());
    // SAFETY: `apply` only makes syscalls on what was prepared before the fork.
    unsafe {
        cmd.pre_exec(move || sandbox.apply());
    }
    let status = cmd
        .status()
        .map_err(|e| AppError::Runtime(format!("cannot run {prog}: {e}")))?;
    crate::sandbox::remove_tmpdir();
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    // The command's own status, which no `ExitCode` names.
    std::process::exit(code.clamp(0, 255))
}
