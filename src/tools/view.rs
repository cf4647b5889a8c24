//! The `view` tool: reads a text file with line numbers and records the read.

use super::ToolError;
use super::common::{
    display_path, looks_binary, mtime_ns, open_regular, opt_u64, outside_project_permission,
    req_str, resolve, truncate_line,
};
use super::image::{self, MAX_IMAGE_BYTES, mime_for_extension};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use serde_json::{Value, json};
use std::fs;
use std::io::Read;
use std::path::Path;

pub(crate) struct View;

pub(crate) const MAX_FILE_BYTES: u64 = 200 * 1024;
pub(crate) const DEFAULT_LIMIT: u64 = 200;
pub(crate) const MAX_LINE_CHARS: usize = 2000;

/// Up to five names in the file's directory that resemble the missing name.
fn similar_names(path: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy().to_lowercase();
    let stem = name.split('.').next().unwrap_or(&name).to_string();
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let l = n.to_lowercase();
            let similar = l.contains(&name)
                || name.contains(&l)
                || (!stem.is_empty() && l.split('.').next() == Some(stem.as_str()));
            similar.then(|| dir.join(&n).display().to_string())
        })
        .collect();
    out.sort();
    out.truncate(5);
    out
}

impl Tool for View {
    fn name(&self) -> &'static str {
        "view"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    fn read_only(&self) -> bool {
        true
    }

    fn for_sub_agents(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("Read".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        match super::common::shown_arg(input, "file_path", cwd) {
            Some(p) => format!("Read {p}"),
            None => "Read".into(),
        }
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        let mut loc = super::Location::of(input, "file_path", cwd);
        if let Some(l) = loc.as_mut() {
            l.line = input.get("offset").and_then(Value::as_u64).map(|o| o + 1);
        }
        loc.into_iter().collect()
    }

    fn preview(&self) -> super::Preview {
        super::Preview::LineRange
    }

    fn description(&self) -> String {
        format!(
            "Reads a text file and shows it with line numbers (`     1|text`).\n\
             \n\
             - `file_path`: absolute or relative to the working directory.\n\
             - `offset`: 0-based line to start at; `limit`: number of lines (default \
             {DEFAULT_LIMIT}). Use them to page through long files.\n\
             - Lines longer than {MAX_LINE_CHARS} characters are cut. Files over {} KB and binary \
             files are refused; for a directory use ls.\n\
             - PNG, JPEG, GIF and WebP images (up to {} MB) are returned as images when the model \
             takes them, else described in one line.\n\
             - You must view a file before changing it with edit, multiedit or write; view it again \
             if it changed since.",
            MAX_FILE_BYTES / 1024,
            MAX_IMAGE_BYTES / (1024 * 1024)
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to read"},
                "offset": {
                    "type": "integer",
                    "description": "0-based line number to start reading from"
                },
                "limit": {
                    "type": "integer",
                    "description": format!("Number of lines to read (default {DEFAULT_LIMIT})")
                }
            },
            "required": ["file_path"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let raw = req_str(input, "file_path")?;
        let path = resolve(ctx, raw)?;
        opt_u64(input, "offset")?;
        opt_u64(input, "limit")?;
        // A skill's files are read without asking (crush(1) SKILLS AND COMMANDS).
        if raw.starts_with(BUILTIN_SKILLS) || ctx.skills.contains(&path) {
            return Ok(None);
        }
        Ok(outside_project_permission(
            ctx,
            self.name(),
            "read",
            &path,
            "Read",
        ))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        view(input, ctx)
    }
}

/// Where the built-in skills are (their texts are in the binary).
pub(crate) const BUILTIN_SKILLS: &str = "crush://skills/";

/// `lines[offset..end]` numbered as view shows them.
fn numbered(lines: &[&str], offset: usize, end: usize) -> String {
    let mut out = String::new();
    for (i, line) in lines[offset..end].iter().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&format!(
            "{:>6}|{}\n",
            offset + i + 1,
            truncate_line(line, MAX_LINE_CHARS)
        ));
    }
    out
}

/// A built-in skill's file, whole.
fn builtin_skill(raw: &str, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let Some(text) = ctx.skills.builtin(raw) else {
        let known: Vec<&str> = ctx.skills.builtin.iter().map(|(l, _)| l.as_str()).collect();
        return Err(format!(
            "no built-in skill file {raw}; the built-in skills are: {}",
            known.join(", ")
        )
        .into());
    };
    let lines: Vec<&str> = text.lines().collect();
    Ok(ToolOutput {
        content: format!("<file>\n{}</file>\n", numbered(&lines, 0, lines.len())),
        metadata: json!({"file_path": raw, "lines": lines.len(), "total_lines": lines.len()}),
        ..Default::default()
    })
}

fn view(input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let raw = req_str(input, "file_path")?;
    if raw.starts_with(BUILTIN_SKILLS) {
        return builtin_skill(raw, ctx);
    }
    let path = resolve(ctx, raw)?;
    let offset = opt_u64(input, "offset")?.unwrap_or(0) as usize;
    let limit = match opt_u64(input, "limit")? {
        // A skill's file is read whole (it is at most MAX_FILE_BYTES).
        Some(0) | None if ctx.skills.contains(&path) => u64::MAX,
        Some(0) | None => DEFAULT_LIMIT,
        Some(l) => l,
    } as usize;
    // Not fs::metadata/fs::read: a FIFO or device would block the read, and `path` is resolved,
    // so a symlink left in it was swapped in after the permission check.
    let (mut file, meta) = match open_regular(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let similar = similar_names(&path);
            let mut msg = format!("file not found: {}", path.display());
            if !similar.is_empty() {
                msg.push_str("\n\nDid you mean one of these?\n");
                msg.push_str(&similar.join("\n"));
            }
            return Err(msg.into());
        }
        Err(_) if path.is_dir() => {
            return Err(format!(
                "{} is a directory; use the ls tool to list its contents",
                path.display()
            )
            .into());
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return Err(format!("{e}; view only reads regular text files").into());
        }
        Err(e) => return Err(format!("cannot access {}: {e}", path.display()).into()),
    };
    if mime_for_extension(&path).is_some() {
        return view_image(ctx, &path, file, meta.len());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "file is too large ({} bytes; the maximum is {} bytes). Use grep to find the relevant \
             part, or bash with head/sed to read a section",
            meta.len(),
            MAX_FILE_BYTES
        )
        .into());
    }
    let mut data = Vec::new();
    // One byte more than the limit: a file that grew since the check is still refused.
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "file is too large (more than {MAX_FILE_BYTES} bytes). Use grep to find the relevant \
             part, or bash with head/sed to read a section"
        )
        .into());
    }
    if let Some(files) = ctx.files
        && let Some(text) = files.read(&path)
    {
        // The editor's buffer, unsaved changes included, under the same limits as the disk.
        data = text
            .map_err(|e| format!("cannot read {} in the editor: {e}", path.display()))?
            .into_bytes();
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "file is too large (more than {MAX_FILE_BYTES} bytes in the editor). Use grep to \
                 find the relevant part, or bash with head/sed to read a section"
            )
            .into());
        }
    }
    if looks_binary(&data) {
        return Err(format!(
            "{} looks like a binary file; view only reads text files",
            path.display()
        )
        .into());
    }
    let text = String::from_utf8_lossy(&data);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if offset > 0 && offset >= total {
        return Err(
            format!("offset {offset} is beyond the end of the file ({total} lines)").into(),
        );
    }
    let end = offset.saturating_add(limit).min(total);
    let shown = &lines[offset.min(end)..end];
    let mut out = String::from("<file>\n");
    out.push_str(&numbered(&lines, offset, end));
    if total == 0 {
        out.push_str("(empty file)\n");
    }
    if end < total {
        out.push_str(&format!(
            "\n(File has more lines ({total} in total). Use the offset parameter to read beyond \
             line {end})\n"
        ));
    }
    out.push_str("</file>\n");
    if let Some(d) = ctx.diagnostics {
        out.push_str(&d.opened(&path));
    }
    ctx.reads.record_read(&path, mtime_ns(&meta));
    Ok(ToolOutput {
        content: out,
        is_error: false,
        metadata: json!({
            "file_path": path.display().to_string(),
            "display_path": display_path(ctx, &path),
            "lines": end - offset.min(end),
            "total_lines": total,
        }),
        image: None,
        structured: json!({"type": "text", "file": {
            "filePath": path.display().to_string(),
            "content": shown.join("\n"),
            "numLines": shown.len(),
            "startLine": offset + 1,
            "totalLines": total,
        }}),
    })
}

/// An image file: the image itself for a model that takes images (checked to be what its name
/// says, and no larger than the limit), else one line describing it.
fn view_image(
    ctx: &ToolCtx,
    path: &Path,
    file: fs::File,
    len: u64,
) -> Result<ToolOutput, ToolError> {
    if len > MAX_IMAGE_BYTES {
        return Err(format!(
            "{} is too large to send ({len} bytes; images are sent up to {MAX_IMAGE_BYTES} bytes)",
            path.display()
        )
        .into());
    }
    let mut data = Vec::new();
    file.take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mime = image::check(path, &data)?;
    let shown = display_path(ctx, path);
    let about = image::describe(&shown, mime, &data);
    let metadata = json!({
        "file_path": path.display().to_string(),
        "display_path": shown,
        "mime_type": mime,
        "bytes": data.len(),
    });
    if !ctx.images {
        return Ok(ToolOutput {
            content: format!(
                "Image file {about}: this model does not take images, so its content cannot be \
                 shown. Ask the user to describe it, or to switch to a model that supports images."
            ),
            metadata,
            ..Default::default()
        });
    }
    Ok(ToolOutput {
        content: format!("Image file {about}"),
        metadata,
        image: Some(image::encode(mime, &data)),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ReadTracker;
    use crate::tools::testutil::Out;
    use crate::tools::testutil::{Fixture, within};

    #[test]
    fn numbering_offset_limit() {
        let fx = Fixture::new();
        let text: String = (1..=300).map(|i| format!("line {i}\n")).collect();
        let p = fx.write("f.txt", &text);
        let ctx = fx.ctx();
        let out = View.run(&json!({"file_path": "f.txt"}), &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content
                .starts_with("<file>\n     1|line 1\n     2|line 2\n")
        );
        assert!(out.content.contains("   200|line 200\n"));
        assert!(!out.content.contains("line 201"));
        assert!(out.content.contains("beyond line 200"));
        assert!(out.content.ends_with("</file>\n"));
        let meta = fs::metadata(&p).unwrap();
        assert_eq!(fx.reads.last_read(&p), Some(mtime_ns(&meta)));

        let out = View
            .run(&json!({"file_path": p, "offset": 10, "limit": 3}), &ctx)
            .out();
        assert_eq!(
            out.content,
            "<file>\n    11|line 11\n    12|line 12\n    13|line 13\n\n(File has more lines (300 in \
             total). Use the offset parameter to read beyond line 13)\n</file>\n"
        );
        let out = View
            .run(&json!({"file_path": "f.txt", "offset": 298}), &ctx)
            .out();
        assert!(out.content.contains("   300|line 300\n</file>"));
        let out = View
            .run(&json!({"file_path": "f.txt", "offset": 300}), &ctx)
            .out();
        assert!(out.is_error);
        let out = View
            .run(
                &json!({"file_path": "f.txt", "offset": 299, "limit": u64::MAX}),
                &ctx,
            )
            .out();
        assert!(out.content.contains("   300|line 300\n</file>"));
    }

    #[test]
    fn refusals_and_suggestions() {
        let fx = Fixture::new();
        fx.write("config.json", "{}");
        fs::write(fx.path("bin.dat"), b"abc\0def").unwrap();
        fs::write(fx.path("big.txt"), vec![b'a'; 300 * 1024]).unwrap();
        fs::create_dir(fx.path("dir")).unwrap();
        fx.write("long.txt", &"x".repeat(5000));
        let ctx = fx.ctx();
        let out = View.run(&json!({"file_path": "config.yaml"}), &ctx).out();
        assert!(out.is_error);
        assert!(out.content.contains("Did you mean"));
        assert!(out.content.contains("config.json"));
        assert!(
            View.run(&json!({"file_path": "bin.dat"}), &ctx)
                .out()
                .content
                .contains("binary")
        );
        assert!(
            View.run(&json!({"file_path": "big.txt"}), &ctx)
                .out()
                .content
                .contains("too large")
        );
        assert!(
            View.run(&json!({"file_path": "dir"}), &ctx)
                .out()
                .content
                .contains("ls")
        );
        let out = View.run(&json!({"file_path": "long.txt"}), &ctx).out();
        assert!(out.content.contains("[line truncated]"));
        assert!(out.content.len() < 2100);
    }

    #[test]
    fn permission_outside_project_only() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        assert_eq!(
            View.permission(&json!({"file_path": "a.txt"}), &ctx)
                .unwrap(),
            None
        );
        let req = View
            .permission(&json!({"file_path": "/etc/hostname"}), &ctx)
            .unwrap()
            .unwrap();
        assert_eq!(req.action, "read");
        assert!(View.permission(&json!({}), &ctx).is_err());
    }

    #[test]
    fn symlinks_fifos_and_devices() {
        let fx = Fixture::new();
        fx.write("outside/secret.txt", "secret\n");
        fx.write("proj/a.txt", "a\n");
        fx.symlink(&fx.path("outside/secret.txt"), "proj/leak");
        fx.symlink(&fx.path("outside/none.txt"), "proj/dangling");
        fx.mkfifo("proj/pipe");
        let proj = fx.path("proj");
        let ctx = fx.ctx_in(&proj);
        let req = View
            .permission(&json!({"file_path": "leak"}), &ctx)
            .unwrap()
            .expect("a symlink out of the project needs permission");
        assert_eq!(req.action, "read");
        assert_eq!(req.path, fx.path("outside/secret.txt"));
        assert!(req.description.contains("outside/secret.txt"));
        let req = View
            .permission(&json!({"file_path": "dangling"}), &ctx)
            .unwrap()
            .expect("a dangling symlink out of the project needs permission");
        assert_eq!(req.path, fx.path("outside/none.txt"));
        assert_eq!(
            View.permission(&json!({"file_path": "a.txt"}), &ctx)
                .unwrap(),
            None
        );

        let out = within(10, &proj, |ctx| {
            View.run(&json!({"file_path": "pipe"}), ctx).out()
        });
        assert!(out.is_error);
        assert!(
            out.content.contains("is a FIFO, not a regular file"),
            "{}",
            out.content
        );
        let out = within(10, &proj, |ctx| {
            View.run(&json!({"file_path": "/dev/zero"}), ctx).out()
        });
        assert!(out.content.contains("is a device"), "{}", out.content);
        let out = within(10, &proj, |ctx| {
            View.run(&json!({"file_path": "dangling"}), ctx).out()
        });
        assert!(out.content.starts_with("file not found"), "{}", out.content);
    }

    #[test]
    fn images_are_images_for_a_vision_model_and_a_line_for_the_others() {
        let fx = Fixture::new();
        let png = crate::tools::image::tests::png(4, 3);
        std::fs::write(fx.path("shot.png"), &png).unwrap();
        std::fs::write(fx.path("fake.png"), "just text").unwrap();
        std::fs::write(
            fx.path("big.gif"),
            [b"GIF89a".to_vec(), vec![0; MAX_IMAGE_BYTES as usize]].concat(),
        )
        .unwrap();
        let ctx = fx.ctx();
        let out = View.run(&json!({"file_path": "shot.png"}), &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            "Image file shot.png (image/png, 4x3, 33 bytes)"
        );
        let img = out.image.unwrap();
        assert_eq!(img.mime_type, "image/png");
        assert_eq!(crate::llm::base64_decode(&img.data).unwrap(), png);
        let text_ctx = ToolCtx {
            images: false,
            ..fx.ctx()
        };
        let out = View.run(&json!({"file_path": "shot.png"}), &text_ctx).out();
        assert!(!out.is_error && out.image.is_none());
        assert!(
            out.content.contains("does not take images"),
            "{}",
            out.content
        );
        let out = View.run(&json!({"file_path": "fake.png"}), &ctx).out();
        assert!(
            out.is_error && out.content.contains("is not a PNG"),
            "{}",
            out.content
        );
        let out = View.run(&json!({"file_path": "big.gif"}), &ctx).out();
        assert!(
            out.is_error && out.content.contains("too large"),
            "{}",
            out.content
        );
    }
}
