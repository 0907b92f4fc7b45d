//! Command-line overrides of config fields: `--set path.to.field=value`.

use std::fmt;
use std::str::FromStr;

use anyhow::{anyhow, bail};
use serde_yaml_ng::{Mapping, Value};

/// One `--set path.to.field=value` flag. The path is a dot-separated list of mapping keys
/// (or list indexes); the value is parsed as YAML, so `5`, `true`, `60s`, `[1, 2]` and
/// `{a: 1}` all mean what they mean in a file, and an empty value means null. In a file (a
/// suite's `set:`) it is written as the flag's argument, `path.to.field=value`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Override {
    /// The flag's argument as given, for error messages.
    text: String,
    /// The keys from the root of the document to the field.
    path: Vec<String>,
    /// The new value of the field.
    value: Value,
}

impl FromStr for Override {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        let Some((path, raw)) = text.split_once('=') else {
            bail!("--set {text}: expected path.to.field=value");
        };
        let path: Vec<String> = path.trim().split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            bail!("--set {text}: empty field name in `{}`", path.join("."));
        }
        let value = serde_yaml_ng::from_str(raw)
            .map_err(|e| anyhow!("--set {text}: the value is not valid YAML: {e}"))?;
        Ok(Override {
            text: text.to_owned(),
            path,
            value,
        })
    }
}

impl TryFrom<String> for Override {
    type Error = anyhow::Error;

    fn try_from(text: String) -> anyhow::Result<Self> {
        text.parse()
    }
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--set {}", self.text)
    }
}

impl Override {
    /// Sets the field at `path` (dot-separated keys) to the number `value`, as
    /// `--set path=value` does.
    pub fn number(path: &str, value: u64) -> Override {
        Override {
            text: format!("{path}={value}"),
            path: path.split('.').map(str::to_owned).collect(),
            value: Value::from(value),
        }
    }

    /// Writes the value into `doc` at the path, creating missing mappings on the way.
    pub fn apply(&self, doc: &mut Value) -> anyhow::Result<()> {
        let mut node = doc;
        for (depth, key) in self.path.iter().enumerate() {
            if node.is_null() {
                *node = Value::Mapping(Mapping::new());
            }
            node = match node {
                Value::Mapping(map) => map.entry(Value::String(key.clone())).or_insert(Value::Null),
                Value::Sequence(items) => {
                    let len = items.len();
                    match key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                        Some(item) => item,
                        None => bail!(
                            "{self}: `{}` is a list of {len} items, `{key}` is not an index in it",
                            self.path[..depth].join(".")
                        ),
                    }
                }
                _ => bail!(
                    "{self}: `{}` is a single value, not a mapping with a field `{key}`",
                    self.path[..depth].join(".")
                ),
            };
        }
        *node = self.value.clone();
        Ok(())
    }

    /// The same flag with its value read as a number of seconds (`30` → `30s`), when the value
    /// is a non-negative number: how a bare number is read when the field is a duration.
    pub fn as_seconds(&self) -> Option<Override> {
        let secs = self.value.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
        Some(Override {
            value: Value::String(format!("{secs}s")),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(yaml: &str) -> Value {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn sets_nested_fields_and_creates_missing_mappings() {
        let mut d = doc("rate: 10\nnemesis:\n  interval: 10s\n");
        "nemesis.interval=5s"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap();
        "client.timeout=2s"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap();
        "rate=[1, 2]"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap();
        assert_eq!(
            d,
            doc("rate: [1, 2]\nnemesis:\n  interval: 5s\nclient:\n  timeout: 2s\n")
        );
    }

    #[test]
    fn indexes_into_lists() {
        let mut d = doc("weights: [1, 2, 3]\n");
        "weights.1=7"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap();
        assert_eq!(d, doc("weights: [1, 7, 3]\n"));
        let err = "weights.3=7"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set weights.3=7: `weights` is a list of 3 items, `3` is not an index in it"
        );
    }

    #[test]
    fn a_number_set_by_the_program_is_the_flag_a_person_would_give() {
        let flag: Override = "generator.concurrency=20".parse().unwrap();
        assert_eq!(Override::number("generator.concurrency", 20), flag);
        let from_file: Vec<Override> =
            serde_yaml_ng::from_str("[generator.concurrency=20]").unwrap();
        assert_eq!(from_file, [flag]);
        let err = serde_yaml_ng::from_str::<Vec<Override>>("[rate]").unwrap_err();
        assert!(err
            .to_string()
            .contains("--set rate: expected path.to.field=value"));
    }

    #[test]
    fn a_number_can_be_read_as_seconds() {
        let o: Override = "generator.time_limit=30".parse().unwrap();
        let mut d = doc("generator: {}\n");
        o.as_seconds().unwrap().apply(&mut d).unwrap();
        assert_eq!(d, doc("generator:\n  time_limit: 30s\n"));
        assert_eq!(o.as_seconds().unwrap().to_string(), o.to_string());
        assert!("a=2.5".parse::<Override>().unwrap().as_seconds().is_some());
        assert!("a=-1".parse::<Override>().unwrap().as_seconds().is_none());
        assert!("a=10s".parse::<Override>().unwrap().as_seconds().is_none());
    }

    #[test]
    fn rejects_malformed_flags() {
        let err = "rate".parse::<Override>().unwrap_err().to_string();
        assert_eq!(err, "--set rate: expected path.to.field=value");
        let err = "a..b=1".parse::<Override>().unwrap_err().to_string();
        assert_eq!(err, "--set a..b=1: empty field name in `a..b`");
        let err = "rate=[1".parse::<Override>().unwrap_err();
        assert!(err
            .to_string()
            .starts_with("--set rate=[1: the value is not valid YAML"));
        let mut d = doc("rate: 10\n");
        let err = "rate.max=1"
            .parse::<Override>()
            .unwrap()
            .apply(&mut d)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set rate.max=1: `rate` is a single value, not a mapping with a field `max`"
        );
    }
}
