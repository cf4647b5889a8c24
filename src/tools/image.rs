//! Images for vision models: the four formats every provider takes (PNG, JPEG, GIF, WebP),
//! recognised by their content (an extension can lie), measured from their headers, and
//! encoded for the `image` carrier of a tool result or an attachment.

use std::path::Path;

/// The largest image sent to a model (Anthropic takes 5 MB of base64; 3 MB of bytes is ~4 MB).
pub(crate) const MAX_IMAGE_BYTES: u64 = 3 * 1024 * 1024;

/// The image type an extension claims, if it names one of the four.
pub(crate) fn mime_for_extension(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// The image type of `data`, from its signature.
pub(crate) fn sniff(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn be16(d: &[u8], i: usize) -> Option<u32> {
    Some(u32::from(*d.get(i)?) << 8 | u32::from(*d.get(i + 1)?))
}

fn le16(d: &[u8], i: usize) -> Option<u32> {
    Some(u32::from(*d.get(i)?) | u32::from(*d.get(i + 1)?) << 8)
}

fn le24(d: &[u8], i: usize) -> Option<u32> {
    Some(le16(d, i)? | u32::from(*d.get(i + 2)?) << 16)
}

/// Width and height from the image's header, when it can be read.
pub(crate) fn dimensions(data: &[u8]) -> Option<(u32, u32)> {
    match sniff(data)? {
        "image/png" => {
            let w = u32::from_be_bytes(data.get(16..20)?.try_into().ok()?);
            let h = u32::from_be_bytes(data.get(20..24)?.try_into().ok()?);
            Some((w, h))
        }
        "image/gif" => Some((le16(data, 6)?, le16(data, 8)?)),
        "image/webp" => match data.get(12..16)? {
            b"VP8 " => Some((le16(data, 26)? & 0x3fff, le16(data, 28)? & 0x3fff)),
            b"VP8L" => {
                let b = u32::from_le_bytes(data.get(21..25)?.try_into().ok()?);
                Some(((b & 0x3fff) + 1, ((b >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(data, 24)? + 1, le24(data, 27)? + 1)),
            _ => None,
        },
        _ => {
            // JPEG: walk the segments to a start-of-frame marker.
            let mut i = 2;
            while i + 9 < data.len() {
                if data[i] != 0xff {
                    return None;
                }
                let marker = data[i + 1];
                let len = be16(data, i + 2)? as usize;
                if matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc) {
                    return Some((be16(data, i + 7)?, be16(data, i + 5)?));
                }
                i += 2 + len;
            }
            None
        }
    }
}

/// `name (image/png, 800x600, 12345 bytes)`.
pub(crate) fn describe(name: &str, mime: &str, data: &[u8]) -> String {
    match dimensions(data) {
        Some((w, h)) => format!("{name} ({mime}, {w}x{h}, {} bytes)", data.len()),
        None => format!("{name} ({mime}, {} bytes)", data.len()),
    }
}

/// An image as the carrier holds it (base64).
pub(crate) fn encode(mime: &str, data: &[u8]) -> super::Image {
    super::Image {
        mime_type: mime.to_string(),
        data: crate::mcp::wire::base64(data),
    }
}

/// Why bytes cannot be sent as an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadImage {
    /// Named like an image (the type its extension claims, or "an image"), not one.
    NotAnImage {
        path: std::path::PathBuf,
        claimed: &'static str,
    },
    /// Larger than `MAX_IMAGE_BYTES` (its size).
    TooLarge {
        path: std::path::PathBuf,
        len: usize,
    },
}

impl std::fmt::Display for BadImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadImage::NotAnImage { path, claimed } => write!(
                f,
                "{} is named like {claimed} but its content is not a PNG, JPEG, GIF or WebP image",
                path.display()
            ),
            BadImage::TooLarge { path, len } => write!(
                f,
                "{} is too large to send ({len} bytes; images are sent up to {MAX_IMAGE_BYTES} bytes)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for BadImage {}

impl From<BadImage> for super::ToolError {
    fn from(e: BadImage) -> super::ToolError {
        super::ToolError::RespondToModel(e.to_string())
    }
}

/// Checks that `data`, read from `path`, is an image (whatever its extension says) no larger
/// than the limit; its type.
pub(crate) fn check(path: &Path, data: &[u8]) -> Result<&'static str, BadImage> {
    let Some(mime) = sniff(data) else {
        return Err(BadImage::NotAnImage {
            path: path.to_path_buf(),
            claimed: mime_for_extension(path).unwrap_or("an image"),
        });
    };
    if data.len() as u64 > MAX_IMAGE_BYTES {
        return Err(BadImage::TooLarge {
            path: path.to_path_buf(),
            len: data.len(),
        });
    }
    Ok(mime)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 3x2 PNG (header only: enough for sniffing and dimensions).
    pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
        let mut d = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        d.extend(w.to_be_bytes());
        d.extend(h.to_be_bytes());
        d.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        d
    }

    #[test]
    fn formats_are_known_by_content_and_measured() {
        assert_eq!(sniff(&png(3, 2)), Some("image/png"));
        assert_eq!(dimensions(&png(3, 2)), Some((3, 2)));
        let gif = b"GIF89a\x05\x00\x07\x00rest".to_vec();
        assert_eq!(
            (sniff(&gif), dimensions(&gif)),
            (Some("image/gif"), Some((5, 7)))
        );
        // A JPEG: SOI, an APP0 segment, then SOF0 with height 10 and width 20.
        let jpeg = [
            0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00,
            0x0a, 0x00, 0x14, 0x03, 0, 0, 0, 0,
        ];
        assert_eq!(
            (sniff(&jpeg), dimensions(&jpeg)),
            (Some("image/jpeg"), Some((20, 10)))
        );
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend([0u8; 8]);
        webp.extend([0x3f, 0, 0, 0x1f, 0, 0]);
        assert_eq!(
            (sniff(&webp), dimensions(&webp)),
            (Some("image/webp"), Some((64, 32)))
        );
        assert_eq!(sniff(b"hello"), None);
        assert_eq!(
            describe("a.png", "image/png", &png(3, 2)),
            "a.png (image/png, 3x2, 33 bytes)"
        );
        assert_eq!(encode("image/png", b"hi").data, "aGk=");
    }

    #[test]
    fn an_image_that_is_not_what_its_name_says_is_refused() {
        let e = check(Path::new("x.png"), b"not an image").unwrap_err();
        assert!(
            e.to_string().contains("x.png is named like image/png but"),
            "{e}"
        );
        // A JPEG named .png is a JPEG.
        assert_eq!(
            check(Path::new("x.png"), &[0xff, 0xd8, 0xff, 0]),
            Ok("image/jpeg")
        );
        let big = [png(1, 1), vec![0; MAX_IMAGE_BYTES as usize]].concat();
        assert!(
            check(Path::new("b.png"), &big)
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
        assert_eq!(mime_for_extension(Path::new("A.JPG")), Some("image/jpeg"));
        assert_eq!(mime_for_extension(Path::new("a.svg")), None);
    }
}
