//! A span of time written the way people write it in a config file: `60s`, `500ms`, `2m`.

use std::fmt;
use std::str::FromStr;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A [`std::time::Duration`] read from and written to YAML as text with units, such as `60s`,
/// `500ms`, `2m` or `1m 30s` (the `humantime` notation). A bare number is rejected, since its
/// unit would be a guess.
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
    fn serializes_back_to_text_that_parses_to_the_same_value() {
        for text in ["500ms", "2m", "1h", "1m 30s", "250us"] {
            let d: Duration = text.parse().unwrap();
            let yaml = serde_yaml_ng::to_string(&Holder { d }).unwrap();
            assert_eq!(yaml, format!("d: {text}\n"));
            assert_eq!(parse(&yaml).unwrap().d, d);
        }
    }
}
