//! `crush skills list` (crush(1) SKILLS AND COMMANDS): every skill and custom command found,
//! where, and why any was rejected, ignored or disabled.

use crate::app::{self, AppError, Global};
use serde_json::json;

/// The text (or with `json` the document) of `crush skills list`.
pub(crate) fn list(g: &Global, json_out: bool) -> Result<String, AppError> {
    let loaded = app::load_config(g)?;
    let (skills, commands) = app::load_skills(&loaded);
    if json_out {
        let doc = json!({"skills": skills.list_json(), "commands": commands.list_json()});
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
    }
    let mut out = String::from("Skills:\n");
    out.push_str(&indent(&skills.list_text()));
    out.push_str("\nCustom commands:\n");
    let c = commands.list_text();
    out.push_str(&indent(if c.is_empty() { "None found.\n" } else { &c }));
    Ok(out)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}
