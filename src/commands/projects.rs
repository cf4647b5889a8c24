//! `crush projects [--json]`: the projects crush has run in.

use crate::app::AppError;
use crate::store;
use serde_json::json;

/// `crush projects [--json]`.
pub(crate) fn projects(json_out: bool) -> Result<String, AppError> {
    let global = crate::paths::global_data_dir();
    let list = store::projects::list(&global).map_err(|e| {
        AppError::Runtime(format!(
            "cannot read {}: {e}",
            global.join("projects.json").display()
        ))
    })?;
    if json_out {
        return Ok(format!("{}\n", json!({ "projects": list })));
    }
    if list.is_empty() {
        crate::ewriteln!("No projects tracked yet.");
        return Ok(String::new());
    }
    let mut out = String::new();
    for p in list {
        out.push_str(&format!(
            "{}\t{}\t{}\n",
            p.path, p.data_dir, p.last_accessed
        ));
    }
    Ok(out)
}
