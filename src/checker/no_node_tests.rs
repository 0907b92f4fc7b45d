//! The versioned-register model on the server's refusals that are facts about the state, on
//! the fixture histories that must be rejected and their valid twins: `no-node` answers (the
//! register's znode absent) and, with `--failed-cas mismatch`, `bad-version` answers.

use std::path::Path;

use super::formats::jsonl;
use super::models::FailedCas;
use super::result::Validity;
use super::{check_history, CheckOptions};

/// The verdicts of each fixture in `tests/fixtures/checker/<dir>` whose name mentions one of
/// `about`, under `failed_cas`, with the verdict its name states (`valid-` or `invalid-`).
fn verdicts(dir: &str, about: &[&str], failed_cas: FailedCas) -> Vec<(String, Validity, Validity)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checker")
        .join(dir);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !about.iter().any(|a| name.contains(a)) {
            continue;
        }
        let ops = jsonl::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let opts = CheckOptions {
            failed_cas,
            ..CheckOptions::default()
        };
        let got = check_history(&ops, &opts).expect("well formed").valid;
        let named = match name.starts_with("valid-") {
            true => Validity::Valid,
            false => Validity::Invalid,
        };
        found.push((name, named, got));
    }
    found
}

#[test]
fn no_node_answers_are_absences_whatever_a_failed_cas_tells() {
    let about = ["no-node", "answered", "refused"];
    for failed_cas in [FailedCas::Ignore, FailedCas::Mismatch] {
        let checked = verdicts("versioned-register", &about, failed_cas);
        assert!(checked.len() >= 6, "{checked:?}");
        for (name, named, got) in checked {
            assert_eq!(got, named, "{name} with {failed_cas:?}");
        }
    }
}

#[test]
fn only_a_bad_version_answer_is_a_mismatch() {
    let dir = "versioned-register-failed-cas-mismatch";
    let checked = verdicts(dir, &["version", "refused"], FailedCas::Mismatch);
    assert_eq!(checked.len(), 3, "{checked:?}");
    for (name, named, got) in checked {
        assert_eq!(got, named, "{name}");
    }
    for (name, _, got) in verdicts(dir, &["version", "refused"], FailedCas::Ignore) {
        assert_eq!(
            got,
            Validity::Valid,
            "{name} tells nothing when a failed cas is ignored"
        );
    }
}
