//! URL paths and query strings, and the one way a URL becomes a file: inside the results
//! folder or refused.

use std::path::{Path, PathBuf};

/// Why a path was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path tries to leave the results folder (`..`, an absolute path, a symlink out).
    Forbidden,
    /// Nothing is there, or the path is malformed.
    NotFound,
}

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`, for query strings);
/// malformed escapes or text that is not UTF-8 give `None`.
pub fn decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `text` made safe for one URL path segment or query value.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A relative path encoded segment by segment, keeping its slashes.
pub fn encode_path(rel: &str) -> String {
    rel.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// The value of `key` in a query string (`a=1&b=2`), decoded; empty values count as absent.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| decode(k, true).as_deref() == Some(key))
        .and_then(|(_, v)| decode(v, true))
        .filter(|v| !v.is_empty())
}

/// Whether a raw (still encoded) URL path has a `.` or `..` segment once decoded, or
/// characters no results path has; such a request is refused whatever it asks for.
pub fn is_traversal(raw_path: &str) -> bool {
    let Some(decoded) = decode(raw_path, false) else {
        return true;
    };
    decoded.contains('\0')
        || decoded.contains('\\')
        || decoded.split('/').any(|s| s == ".." || s == ".")
}

/// The file or folder `rel` (a decoded path relative to the results folder) names, if it is
/// inside `root` (which must be canonical) after following symlinks.
pub fn resolve(root: &Path, rel: &str) -> Result<PathBuf, Refusal> {
    let rel = rel.strip_suffix('/').unwrap_or(rel);
    if rel.is_empty() {
        return Ok(root.to_path_buf());
    }
    let mut path = root.to_path_buf();
    for segment in rel.split('/') {
        match segment {
            "" | "." | ".." => return Err(Refusal::Forbidden),
            s if s.contains(['\0', '\\']) => return Err(Refusal::Forbidden),
            s => path.push(s),
        }
    }
    let real = std::fs::canonicalize(&path).map_err(|_| Refusal::NotFound)?;
    if real.starts_with(root) {
        Ok(real)
    } else {
        Err(Refusal::Forbidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_encoding_round_trip() {
        assert_eq!(decode("a%20b%2Fc", false).as_deref(), Some("a b/c"));
        assert_eq!(decode("a+b", true).as_deref(), Some("a b"));
        assert_eq!(decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(decode("%zz", false), None);
        assert_eq!(decode("%2", false), None);
        assert_eq!(decode("%ff", false), None, "not UTF-8");
        let odd = "run name/ü&=?#";
        assert_eq!(decode(&encode(odd), false).as_deref(), Some(odd));
        assert_eq!(
            query_param("workload=register&nemesis=&db=zoo+keeper", "db").as_deref(),
            Some("zoo keeper")
        );
        assert_eq!(query_param("workload=register&nemesis=", "nemesis"), None);
    }

    #[test]
    fn traversal_is_seen_through_encodings() {
        for bad in [
            "/../etc/passwd",
            "/files/%2e%2e/%2E%2E/etc/passwd",
            "/files/..%2f..%2fetc",
            "/files/a/./b",
            "/files/%00",
            "/files/..%5c..",
            "/%zz",
        ] {
            assert!(is_traversal(bad), "{bad}");
        }
        for good in [
            "/",
            "/files/register/2026/latency-raw.png",
            "/files/a..b/c",
            "/files/%252e%252e",
        ] {
            assert!(!is_traversal(good), "{good}");
        }
    }

    #[test]
    fn resolution_stays_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("results");
        std::fs::create_dir_all(root.join("t/1")).unwrap();
        std::fs::write(root.join("t/1/results.json"), "{}").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink("t/1", root.join("latest")).unwrap();
        std::os::unix::fs::symlink("../secret", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        assert_eq!(
            resolve(&root, "t/1/results.json").unwrap(),
            root.join("t/1/results.json")
        );
        assert_eq!(
            resolve(&root, "latest/results.json").unwrap(),
            root.join("t/1/results.json")
        );
        assert_eq!(resolve(&root, "").unwrap(), root);
        assert_eq!(resolve(&root, "escape"), Err(Refusal::Forbidden));
        assert_eq!(resolve(&root, "etc/passwd"), Err(Refusal::Forbidden));
        assert_eq!(resolve(&root, "../secret"), Err(Refusal::Forbidden));
        assert_eq!(resolve(&root, "/etc/passwd"), Err(Refusal::Forbidden));
        assert_eq!(resolve(&root, "t//1"), Err(Refusal::Forbidden));
        assert_eq!(resolve(&root, "t/2"), Err(Refusal::NotFound));
    }
}
