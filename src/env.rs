//! How crush reads its process environment.

/// `1`, `true`, `yes`, `on` (any case, surrounding blanks ignored): how `CRUSH_*` switches in
/// the environment read as on.
pub fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_switches() {
        for v in ["1", "true", "TRUE", " yes ", "On"] {
            assert!(truthy(v), "{v}");
        }
        for v in ["", " ", "0", "false", "no", "off", "y", "enabled"] {
            assert!(!truthy(v), "{v}");
        }
    }
}
