//! `projects.json` in the global data dir: known projects, most recent first, written atomically.

use std::path::Path;

/// Records that `project` (with data dir `data_dir`) was used now. Safe when several processes
/// write at once (temp file + rename under a lock file).
#[allow(unused_variables)]
pub fn touch(global_data: &Path, project: &Path, data_dir: &Path) -> std::io::Result<()> {
    todo!()
}
