//! `stampede check` on the fixture histories in `tests/fixtures/checker/<case>/`: each folder's
//! `args` file holds the flags, and each file's name says the verdict it must get
//! (`valid-*` exits 0, `invalid-*` exits 1).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stampede(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .output()
        .expect("stampede runs")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checker")
}

fn last_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_fixture_gets_the_verdict_its_name_states() {
    let mut checked = 0;
    for case in std::fs::read_dir(fixtures()).unwrap() {
        let dir = case.unwrap().path();
        let Ok(args) = std::fs::read_to_string(dir.join("args")) else {
            continue;
        };
        let args: Vec<&str> = args.split_whitespace().collect();
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            let (code, verdict) = if name.starts_with("valid-") {
                (0, "verdict: valid")
            } else if name.starts_with("invalid-") {
                (1, "verdict: INVALID")
            } else {
                continue;
            };
            let mut all = vec!["check", file.to_str().unwrap()];
            all.extend(&args);
            let out = stampede(&all);
            assert_eq!(
                out.status.code(),
                Some(code),
                "{name}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                last_line(&out).starts_with(verdict),
                "{name}: {}",
                last_line(&out)
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "only {checked} fixtures found");
}

#[test]
fn a_results_folder_is_checked_and_the_verdict_written_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let history = fixtures().join("versioned-register/invalid-lost-write.jsonl");
    std::fs::copy(&history, dir.path().join("history.jsonl")).unwrap();
    let json = dir.path().join("results.json");
    let out = stampede(&[
        "check",
        dir.path().to_str().unwrap(),
        "--output",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("smallest failing window"), "{stdout}");
    let result: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(result["valid"], serde_json::json!(false));
    assert_eq!(result["model"], "versioned-register");
    assert_eq!(result["keys"]["r"]["valid"], serde_json::json!(false));
    assert_eq!(result["counts"]["write"]["ok"], 2);
    assert!(result["keys"]["r"]["counterexample"]["window"]
        .as_array()
        .is_some_and(|w| !w.is_empty()));
}

#[test]
fn bad_input_is_a_one_line_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.jsonl");
    let good =
        std::fs::read_to_string(fixtures().join("versioned-register/valid-write-kept.jsonl"))
            .unwrap();
    std::fs::write(&file, format!("{good}{{\"index\": 6, \"type\": \"ok\"\n")).unwrap();
    let out = stampede(&["check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("history.jsonl") && err.contains("line 7"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let out = stampede(&["check", file.to_str().unwrap(), "--model", "queue"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown model \"queue\""));

    let out = stampede(&["check", dir.path().join("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));
}

#[test]
fn initial_value_and_time_limit_flags_apply() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.jsonl");
    std::fs::write(
        &file,
        "{\"index\":0,\"time\":0,\"type\":\"invoke\",\"process\":1,\"f\":\"read\",\"value\":null}\n\
         {\"index\":1,\"time\":1,\"type\":\"ok\",\"process\":1,\"f\":\"read\",\"value\":4}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    assert_eq!(
        stampede(&["check", f, "--model", "register"]).status.code(),
        Some(1)
    );
    assert_eq!(
        stampede(&["check", f, "--model", "register", "--initial", "4"])
            .status
            .code(),
        Some(0)
    );
    let out = stampede(&["check", f, "--model", "register", "--initial", "four"]);
    assert_eq!(out.status.code(), Some(2));

    // Thirty overlapping writes, then a read nobody wrote: every order of the writes must be
    // tried before the search can say no, far longer than the limit.
    let mut lines: Vec<String> = Vec::new();
    let mut op = |kind: &str, p: u64, f: &str, value: &str| {
        let i = lines.len();
        lines.push(format!(
            "{{\"index\":{i},\"time\":{i},\"type\":\"{kind}\",\"process\":{p},\"f\":\"{f}\",\"value\":{value}}}"
        ));
    };
    for p in 0..30 {
        op("invoke", p, "write", &p.to_string());
    }
    for p in 0..30 {
        op("ok", p, "write", &p.to_string());
    }
    op("invoke", 99, "read", "null");
    op("ok", 99, "read", "-1");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = stampede(&["check", f, "--model", "register", "--time-limit", "300ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        last_line(&out).starts_with("verdict: unknown"),
        "{}",
        last_line(&out)
    );
    let out = stampede(&["check", f, "--time-limit", "soon"]);
    assert_eq!(out.status.code(), Some(2));
}
