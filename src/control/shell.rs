//! Building shell command lines safely.

/// Quotes `word` for a POSIX shell.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Wraps `command` so that it runs as root: unchanged for root, through `sudo -n` otherwise.
pub fn as_root(user: &str, command: &str) -> String {
    if user == "root" {
        command.to_string()
    } else {
        format!("sudo -n sh -c {}", quote(command))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(quote("abc/def-1.2"), "abc/def-1.2");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
    }

    #[test]
    fn sudo_only_for_other_users() {
        assert_eq!(as_root("root", "id -u"), "id -u");
        assert_eq!(
            as_root("admin", "echo 'x'"),
            r"sudo -n sh -c 'echo '\''x'\'''"
        );
    }
}
