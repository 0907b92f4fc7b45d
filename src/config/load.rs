//! Reading a config file into its struct, with overrides, and writing the effective config.

use std::fs;
use std::path::Path;

use anyhow::{anyhow, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::Override;

/// Reads the YAML file at `path` into a `T`. A syntax error, an unknown key (with
/// `#[serde(deny_unknown_fields)]`) or a bad value is reported as
/// `file:line:column: field: sentence`.
pub fn load<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    load_with_overrides(path, &[])
}

/// Reads the YAML file at `path` into a `T`, then applies `overrides` in order. The file must
/// be valid on its own (errors name its line and column); an override that makes it invalid
/// is reported naming the flag, e.g. `--set rate=abc: rate: invalid type: ...`.
pub fn load_with_overrides<T: DeserializeOwned>(
    path: &Path,
    overrides: &[Override],
) -> anyhow::Result<T> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut config: T = serde_yaml_ng::from_str(&text).map_err(|e| {
        let at = match e.location() {
            Some(l) => format!("{}:{}:{}", path.display(), l.line(), l.column()),
            None => path.display().to_string(),
        };
        anyhow!("{at}: {}", without_location(&e))
    })?;
    if overrides.is_empty() {
        return Ok(config);
    }
    let mut doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    for o in overrides {
        o.apply(&mut doc)?;
        config = match from_doc(&doc) {
            Ok(config) => config,
            // A bare number on the command line is seconds when the field is a duration.
            Err(e) => match o.as_seconds() {
                Some(seconds) => {
                    seconds.apply(&mut doc)?;
                    from_doc(&doc).map_err(|_| anyhow!("{o}: {}", without_location(&e)))?
                }
                None => return Err(anyhow!("{o}: {}", without_location(&e))),
            },
        };
    }
    Ok(config)
}

/// Reads a parsed YAML value (a section of a file) into a `T` through text, so that
/// serde_yaml_ng names the failing field; the error is its sentence without the location (a
/// line of the section's own text, not of the file).
pub fn from_section<T: DeserializeOwned>(value: &serde_yaml_ng::Value) -> Result<T, String> {
    from_doc(value).map_err(|e| without_location(&e))
}

/// Reads `doc` into a `T` through text (not `from_value`), which makes serde_yaml_ng name the
/// failing field.
fn from_doc<T: DeserializeOwned>(doc: &serde_yaml_ng::Value) -> Result<T, serde_yaml_ng::Error> {
    let merged = serde_yaml_ng::to_string(doc)?;
    serde_yaml_ng::from_str(&merged)
}

/// Writes `config` as YAML to `path`, e.g. the effective config as `test.yaml` in the results.
pub fn save<T: Serialize>(path: &Path, config: &T) -> anyhow::Result<()> {
    let text = serde_yaml_ng::to_string(config)
        .with_context(|| format!("serializing the config for {}", path.display()))?;
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The error's sentence without the ` at line L column C` that serde_yaml_ng appends, since
/// callers put the location (or the flag) in front.
fn without_location(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    match e.location() {
        Some(l) => text.replacen(
            &format!(" at line {} column {}", l.line(), l.column()),
            "",
            1,
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde::Deserialize;

    use super::*;
    use crate::config::Duration;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        rate: f64,
        time_limit: Duration,
        #[serde(default)]
        nemesis: Nested,
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Nested {
        #[serde(default)]
        kinds: Vec<String>,
        #[serde(default)]
        interval: Option<Duration>,
    }

    const GOOD: &str = "rate: 10\ntime_limit: 60s\nnemesis:\n  kinds: [partition]\n";

    fn file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let path = dir.path().join("sample.yaml");
        fs::write(&path, text).unwrap();
        path
    }

    fn sets(flags: &[&str]) -> Vec<Override> {
        flags.iter().map(|f| f.parse().unwrap()).collect()
    }

    #[test]
    fn loads_a_valid_file() {
        let dir = tempfile::tempdir().unwrap();
        let s: Sample = load(&file(&dir, GOOD)).unwrap();
        assert_eq!(s.rate, 10.0);
        assert_eq!(s.time_limit, "1m".parse().unwrap());
        assert_eq!(s.nemesis.kinds, ["partition"]);
    }

    #[test]
    fn unknown_key_names_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(
            &dir,
            "rate: 10\ntime_limit: 60s\nnemesis:\n  intervall: 5s\n",
        );
        let err = load::<Sample>(&path).unwrap_err().to_string();
        let expected = format!(
            "{}:4:3: nemesis: unknown field `intervall`, expected `kinds` or `interval`",
            path.display()
        );
        assert_eq!(err, expected);
    }

    #[test]
    fn bad_value_and_syntax_error_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir, "rate: fast\ntime_limit: 60s\n");
        let err = load::<Sample>(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}:1:7: rate: invalid type: string \"fast\"",
                path.display()
            )),
            "{err}"
        );
        let path = file(
            &dir,
            "rate: 10\ntime_limit: 60s\nnemesis: {kinds: [partition}\n",
        );
        let err = load::<Sample>(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:3:", path.display())), "{err}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = load::<Sample>(Path::new("/nonexistent/x.yaml")).unwrap_err();
        assert_eq!(err.to_string(), "reading /nonexistent/x.yaml");
    }

    #[test]
    fn overrides_apply_on_top_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let flags = sets(&["rate=25.5", "nemesis.interval=10s", "time_limit=2m"]);
        let s: Sample = load_with_overrides(&file(&dir, GOOD), &flags).unwrap();
        assert_eq!(s.rate, 25.5);
        assert_eq!(s.time_limit, "2m".parse().unwrap());
        assert_eq!(s.nemesis.interval, Some("10s".parse().unwrap()));
        assert_eq!(s.nemesis.kinds, ["partition"]);
    }

    #[test]
    fn a_bare_number_set_on_a_duration_is_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let flags = sets(&["time_limit=30", "rate=7", "nemesis.interval=1.5"]);
        let s: Sample = load_with_overrides(&file(&dir, GOOD), &flags).unwrap();
        assert_eq!(s.time_limit, "30s".parse().unwrap());
        assert_eq!(s.rate, 7.0);
        assert_eq!(s.nemesis.interval, Some("1500ms".parse().unwrap()));
        let err = load_with_overrides::<Sample>(&file(&dir, GOOD), &sets(&["time_limit=-3"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--set time_limit=-3: time_limit: invalid duration `-3`"),
            "{err}"
        );
    }

    #[test]
    fn bad_override_names_the_flag_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir, GOOD);
        let err = load_with_overrides::<Sample>(&path, &sets(&["rate=abc"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--set rate=abc: rate: invalid type: string \"abc\", expected f64"
        );
        let err = load_with_overrides::<Sample>(&path, &sets(&["nemesis.interval=soon"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "--set nemesis.interval=soon: nemesis.interval: invalid duration `soon`"
            ),
            "{err}"
        );
        let err = load_with_overrides::<Sample>(&path, &sets(&["rate=1", "nemesis.kind=x"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--set nemesis.kind=x: nemesis: unknown field `kind`, expected `kinds` or `interval`"
        );
    }

    #[test]
    fn saved_config_loads_back_to_the_same_value() {
        let dir = tempfile::tempdir().unwrap();
        let flags = sets(&["nemesis.interval=1m 30s"]);
        let s: Sample = load_with_overrides(&file(&dir, GOOD), &flags).unwrap();
        let out = dir.path().join("test.yaml");
        save(&out, &s).unwrap();
        let text = fs::read_to_string(&out).unwrap();
        assert!(text.contains("time_limit: 1m\n"), "{text}");
        assert!(text.contains("interval: 1m 30s\n"), "{text}");
        assert_eq!(load::<Sample>(&out).unwrap(), s);
    }
}
