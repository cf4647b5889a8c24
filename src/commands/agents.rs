//! `crush agents list` (crush(1) AGENTS): every agent file found, where, with its tools and
//! model, and why any is not used; and `crush debug prompt`, the system prompt a session sends.

use crate::app::{self, AppError, Global};

/// The text (or with `json` the document) of `crush agents list`. Model aliases are checked
/// against the large model when one can be resolved.
pub(crate) fn list(g: &Global, json_out: bool) -> Result<String, AppError> {
    let loaded = app::load_config(g)?;
    let active = loaded.resolve_model(g.model.as_deref(), false).ok();
    let (found, models) = crate::agent::subagent::custom_agents(&loaded, active.as_ref());
    if json_out {
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&found.list_json(&models)).unwrap_or_default()
        ));
    }
    Ok(found.list_text(&models))
}

/// `crush debug prompt`: the exact system prompt a new session would send, and on `err` the
/// tools it offers (MCP servers' instructions, which arrive once they start, excepted).
pub(crate) fn debug_prompt(g: &Global, err: &mut dyn std::io::Write) -> Result<String, AppError> {
    let loaded = app::load_config(g)?;
    let model = loaded.resolve_model(g.model.as_deref(), false)?;
    let (skills, _) = app::load_skills(&loaded);
    let lsp = app::language_servers(&loaded);
    let (system, tools) = crate::agent::prompt_of_session(&loaded, &model, &skills, lsp.as_ref());
    let _ = writeln!(err, "crush: tools offered: {}", tools.join(", "));
    if loaded.config.mcp.as_object().is_some_and(|m| !m.is_empty()) {
        let _ = writeln!(
            err,
            "crush: MCP servers' instructions, when they send any, follow the prompt"
        );
    }
    Ok(system)
}
