//! How crush reads its process environment.

/// `1`, `true`, `yes`, `on` (any case, surrounding blanks ignored): how `CRUSH_*` switches in
/// the environment read as on.
pub fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// The variable `name` read as a number of seconds (fractions allowed), if it is one.
pub fn seconds(name: &str) -> Option<std::time::Duration> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(std::time::Duration::from_secs_f64)
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
