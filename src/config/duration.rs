//! A span of time written the way people write it in a config file: `60s`, `500ms`, `2m`.

use std::fmt;
use std::str::FromStr;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A [`std::time::Duration`] read from and written to YAML as text with units, such as `60s`,
/// `500ms`, `2m` or `1m 30s` (the `humantime` notation). In a file a bare number is rejected,
/// since its unit would be a guess; on the command line ([`Duration::parse_cli`]) it is seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl FromStr for Duration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim())
            .map(Duration)
            .map_err(|e| format!("invalid duration `{s}` ({e}): write a number with a unit, like 60s, 500ms or 2m"))
    }
}

impl Duration {
    /// Reads a duration given on the command line: a bare number is seconds (`30`, `2.5`), as
    /// Jepsen's `--time-limit` is; anything else is read as in a file (`30s`, `500ms`, `1m 30s`).
    pub fn parse_cli(s: &str) -> Result<Duration, String> {
        let text = s.trim();
        match text.parse::<f64>() {
            Ok(secs) if secs.is_finite() && secs >= 0.0 => {
                Ok(Duration(std::time::Duration::from_secs_f64(secs)))
            }
            Ok(_) => Err(format!(
                "invalid duration `{s}`: a number of seconds must be finite and not negative"
            )),
            Err(_) => text.parse(),
        }
    }

    /// [`Duration::parse_cli`] as a [`std::time::Duration`], for command-line flags.
    pub fn parse_cli_std(s: &str) -> Result<std::time::Duration, String> {
        Duration::parse_cli(s).map(|d| d.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl de::Visitor<'_> for Visitor {
            type Value = Duration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with a unit, like 60s, 500ms or 2m")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                s.parse().map_err(E::custom)
            }
        }

        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        d: Duration,
    }

    fn parse(yaml: &str) -> Result<Holder, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_common_units() {
        assert_eq!(parse("d: 60s").unwrap().d.0, Std::from_secs(60));
        assert_eq!(parse("d: 500ms").unwrap().d.0, Std::from_millis(500));
        assert_eq!(parse("d: 2m").unwrap().d.0, Std::from_secs(120));
        assert_eq!(parse("d: 1m 30s").unwrap().d.0, Std::from_secs(90));
    }

    #[test]
    fn rejects_numbers_without_unit_and_garbage() {
        let err = parse("d: 60").unwrap_err();
        assert!(
            err.starts_with("d: invalid duration `60` (time unit needed"),
            "{err}"
        );
        let err = parse("d: soon").unwrap_err();
        assert!(err.contains("invalid duration `soon`"), "{err}");
        assert!(err.contains("line 1 column 4"), "{err}");
    }

    #[test]
    fn on_the_command_line_a_bare_number_is_seconds() {
        let cli = |s| Duration::parse_cli(s).map(|d| d.0);
        assert_eq!(cli("30"), Ok(Std::from_secs(30)));
        assert_eq!(cli(" 2.5 "), Ok(Std::from_millis(2500)));
        assert_eq!(cli("0"), Ok(Std::ZERO));
        assert_eq!(cli("30s"), Ok(Std::from_secs(30)));
        assert_eq!(cli("500ms"), Ok(Std::from_millis(500)));
        assert_eq!(cli("1m 30s"), Ok(Std::from_secs(90)));
        assert!(cli("-5").unwrap_err().contains("not negative"));
        assert!(cli("inf").is_err());
        assert!(cli("soon").unwrap_err().contains("invalid duration `soon`"));
    }

    #[test]
    fn serializes_back_to_text_that_parses_to_the_same_value() {
        for text in ["500ms", "2m", "1h", "1m 30s", "250us"] {
            let d: Duration = text.parse().unwrap();
            let yaml = serde_yaml_ng::to_string(&Holder { d }).unwrap();
            assert_eq!(yaml, format!("d: {text}\n"));
            assert_eq!(parse(&yaml).unwrap().d, d);
        }
    }
}
