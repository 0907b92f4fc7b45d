//! `stampede check` on the fixture histories in `tests/fixtures/checker/<case>/` (stampede's
//! own format) and `tests/fixtures/jepsen/<case>/` (Jepsen's formats; see its README): each
//! folder's `args` file holds the flags, and each file's name says the verdict it must get
//! (`valid-*` exits 0, `invalid-*` exits 1), alone and with its folder checked in one run;
//! and `stampede check` on run folders written by an earlier stampede
//! (`tests/fixtures/before-redesign/`) and on hand-made run folders of the workloads judged by
//! their own checkers (`tests/fixtures/runs/`). Nothing is judged from nothing: a history
//! without a client operation is an error, a run that did not finish is never valid, and a
//! folder is either a results folder or a folder of histories, never both.

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

fn jepsen_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jepsen")
}

/// One fixture folder: its path, its flags, and its files with whether each must be valid.
type Case = (PathBuf, Vec<String>, Vec<(PathBuf, bool)>);

/// Every fixture case.
fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for root in [fixtures(), jepsen_fixtures()] {
        for case in std::fs::read_dir(root).unwrap() {
            let dir = case.unwrap().path();
            let Ok(args) = std::fs::read_to_string(dir.join("args")) else {
                continue;
            };
            let args = args.split_whitespace().map(str::to_string).collect();
            let mut files = Vec::new();
            for file in std::fs::read_dir(&dir).unwrap() {
                let file = file.unwrap().path();
                let name = file.file_name().unwrap().to_string_lossy().to_string();
                if name.starts_with("valid-") {
                    files.push((file, true));
                } else if name.starts_with("invalid-") {
                    files.push((file, false));
                }
            }
            files.sort();
            cases.push((dir, args, files));
        }
    }
    cases
}

fn last_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

fn verdict_of(valid: bool) -> (i32, &'static str) {
    match valid {
        true => (0, "verdict: valid"),
        false => (1, "verdict: INVALID"),
    }
}

#[test]
fn every_fixture_gets_the_verdict_its_name_states() {
    let mut checked = 0;
    for (_, args, files) in cases() {
        for (file, valid) in files {
            let (code, verdict) = verdict_of(valid);
            let mut all = vec!["check", file.to_str().unwrap()];
            all.extend(args.iter().map(String::as_str));
            let out = stampede(&all);
            let name = file.display();
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
    assert!(checked >= 60, "only {checked} fixtures found");
}

#[test]
fn each_fixture_folder_checked_in_one_run_gives_a_line_per_file_and_a_summary() {
    for (dir, args, files) in cases() {
        let mut all = vec!["check", dir.to_str().unwrap()];
        all.extend(args.iter().map(String::as_str));
        let out = stampede(&all);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), files.len() + 1, "{}: {stdout}", dir.display());
        let worst = files.iter().any(|(_, valid)| !valid);
        assert_eq!(out.status.code(), Some(i32::from(worst)), "{stdout}");
        for ((file, valid), line) in files.iter().zip(&lines) {
            let prefix = format!("{}: {}", file.display(), verdict_of(*valid).1);
            assert!(line.starts_with(&prefix), "{line}");
        }
        let invalid = files.iter().filter(|(_, valid)| !valid).count();
        let summary = format!(
            "{} histories: {} valid, {invalid} INVALID, 0 unknown, 0 errors",
            files.len(),
            files.len() - invalid
        );
        assert!(lines[files.len()].starts_with(&summary), "{stdout}");
    }
}

#[test]
fn a_history_that_does_not_parse_is_its_own_error_line_and_the_rest_still_run() {
    let edn = fixtures().join("edn");
    let valid = jepsen_fixtures().join("cas-register/invalid-list-read-goes-back.edn");
    let out = stampede(&["check", edn.to_str().unwrap(), valid.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}"))
            .to_string()
    };
    assert!(line("malformed-type.edn").contains(": error: line 4: unknown op :type :done"));
    assert!(line("malformed-unclosed.edn").contains(": error: line 3, column 1:"));
    assert!(line("register-lines.edn").contains(": verdict: valid"));
    assert!(line("invalid-list-read-goes-back.edn").contains(": verdict: INVALID"));
    assert!(
        last_line(&out).starts_with("5 histories: 2 valid, 1 INVALID, 0 unknown, 2 errors"),
        "{stdout}"
    );
}

#[test]
fn a_results_folder_checked_with_a_model_writes_results_and_timeline_to_the_output_folder() {
    let dir = tempfile::tempdir().unwrap();
    let history = fixtures().join("versioned-register/invalid-lost-write.jsonl");
    std::fs::copy(&history, dir.path().join("history.jsonl")).unwrap();
    std::fs::copy(
        finished_register_run().join("test.yaml"),
        dir.path().join("test.yaml"),
    )
    .unwrap();
    let output = dir.path().join("out");
    let out = stampede(&[
        "check",
        dir.path().to_str().unwrap(),
        "--model",
        "versioned-register",
        "--output",
        output.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("smallest failing window"), "{stdout}");
    let taken = format!(
        "checking {}: a results folder (its history.jsonl checked against the model given)\n",
        dir.path().display()
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), taken);
    let timeline = std::fs::read_to_string(output.join("timeline.html")).unwrap();
    assert!(
        timeline.contains("<h2>Marked operations</h2>"),
        "the counterexample is outlined"
    );
    let json = output.join("results.json");
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
fn a_folder_is_searched_all_the_way_down_passing_over_links_and_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let cases = jepsen_fixtures().join("cas-register");
    let nested = dir.path().join("a/b");
    std::fs::create_dir_all(&nested).unwrap();
    for (name, to) in [
        ("valid-spaces-aligned.log", dir.path().join("one.log")),
        ("invalid-list-read-goes-back.edn", nested.join("two.edn")),
    ] {
        std::fs::copy(cases.join(name), to).unwrap();
    }
    std::fs::write(dir.path().join("notes.md"), "not a history").unwrap();
    std::os::unix::fs::symlink(&nested, dir.path().join("latest")).unwrap();
    let out = stampede(&["check", dir.path().to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(stdout.contains("a/b/two.edn: verdict: INVALID"), "{stdout}");
    assert!(stdout.contains("one.log: verdict: valid"), "{stdout}");
    let empty = tempfile::tempdir().unwrap();
    let out = stampede(&["check", empty.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a folder without history files"));
}

#[test]
fn several_histories_write_their_outputs_into_a_subfolder_each() {
    let dir = tempfile::tempdir().unwrap();
    let cases = jepsen_fixtures().join("cas-register");
    let bad = cases.join("invalid-list-read-goes-back.edn");
    let good = cases.join("valid-spaces-aligned.log");
    let output = dir.path().join("out");
    let out = stampede(&[
        "check",
        bad.to_str().unwrap(),
        good.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    for name in [
        "invalid-list-read-goes-back.edn",
        "valid-spaces-aligned.log",
    ] {
        let sub = output.join(name);
        assert!(sub.join("results.json").is_file(), "{}", sub.display());
        assert!(sub.join("timeline.html").is_file(), "{}", sub.display());
    }
    let result: serde_json::Value = serde_json::from_slice(
        &std::fs::read(output.join("invalid-list-read-goes-back.edn/results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["model"], "cas-register");
    let window = &result["keys"][""]["counterexample"]["window"];
    assert!(window.as_array().is_some_and(|w| w.len() <= 3), "{window}");
}

#[test]
fn a_nil_read_tells_nothing_in_jepsen_histories_unless_asked() {
    let file = jepsen_fixtures().join("cas-register/valid-list-nil-read-nemesis.edn");
    let f = file.to_str().unwrap();
    assert_eq!(
        stampede(&["check", f, "--initial", "0"]).status.code(),
        Some(0)
    );
    let out = stampede(&["check", f, "--initial", "0", "--nil-read", "value"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("read -> ok null"));
    let out = stampede(&["check", f, "--nil-read", "maybe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected any or value"));
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

/// Drops every `elapsed_ms` (how long a checker took, which varies with the machine's load)
/// from a `results.json`.
fn without_checking_time(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("elapsed_ms");
            map.values_mut().for_each(without_checking_time);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(without_checking_time),
        _ => {}
    }
}

/// The folders of `tests/fixtures/<group>/`, each with the run folders in it.
fn run_folders(group: &str) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let root = fixtures().parent().unwrap().join(group);
    let dirs = |dir: &Path| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
        entries.filter(|p| p.is_dir()).collect()
    };
    dirs(&root)
        .into_iter()
        .map(|d| (d.clone(), dirs(&d)))
        .collect()
}

/// `stampede check` on a copy of run folder `run` in `scratch` (a check rewrites a results
/// folder in place), with `files` copied: its output and the `results.json` it wrote. A
/// hand-made run folder (`files` without `results.json`) stands for a finished run: its copy
/// gets the `results.json` a run's controller writes once it healed, nothing in it that a
/// check reads back (not aborted, no replicas compared, no summary).
fn check_copy(run: &Path, scratch: &Path, files: &[&str]) -> (Output, serde_json::Value) {
    let copy = scratch.join(run.file_name().unwrap());
    std::fs::create_dir_all(&copy).unwrap();
    for file in files {
        std::fs::copy(run.join(file), copy.join(file)).unwrap();
    }
    if !files.contains(&"results.json") {
        std::fs::write(copy.join("results.json"), r#"{"valid": "unknown"}"#).unwrap();
    }
    let out = stampede(&["check", copy.to_str().unwrap()]);
    let results = std::fs::read(copy.join("results.json")).unwrap();
    (out, serde_json::from_slice(&results).unwrap())
}

/// Run folders stampede wrote before its workloads took one shape (`test.yaml` in the first
/// layout, a section per workload with the session fields in each), one per workload, each
/// run on a 3-node ZooKeeper under kills: judged again, each `results.json` is the same in
/// every field — verdict, verdict line, exposure, the checkers' reports, the run's summary
/// and the figures — but the time the checkers took (the stored results of the lock,
/// election, queue and barrier runs were judged again once the contention report joined
/// them: the only change was that report, added to `results.json` and the verdict line, all
/// valid).
#[test]
fn runs_written_before_the_redesign_are_judged_the_same() {
    let scratch = std::env::temp_dir().join(format!("stampede-before-{}", std::process::id()));
    let mut judged = 0;
    for (test, runs) in run_folders("before-redesign") {
        for run in runs {
            let copy = scratch.join(test.file_name().unwrap());
            std::fs::create_dir_all(&copy).unwrap();
            for file in ["history.jsonl", "test.yaml"] {
                std::fs::copy(run.join(file), copy.join(file)).unwrap();
            }
            // Of the stored results only what a check reads back stays: why the run stopped
            // early (it did not) and the run's own summary; every judged field is cleared.
            let stored: serde_json::Value =
                serde_json::from_slice(&std::fs::read(run.join("results.json")).unwrap()).unwrap();
            let kept = serde_json::json!({
                "schema": stored["schema"],
                "valid": "unknown",
                "aborted": stored["aborted"],
                "run": stored.get("run").cloned().unwrap_or(serde_json::Value::Null),
            });
            std::fs::write(copy.join("results.json"), kept.to_string()).unwrap();
            let out = stampede(&["check", copy.to_str().unwrap()]);
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(0), "{said}");
            let read = |dir: &Path| -> serde_json::Value {
                let mut results =
                    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap())
                        .unwrap();
                without_checking_time(&mut results);
                results
            };
            assert_eq!(read(&copy), read(&run), "{}", run.display());
            judged += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(judged, 5, "one run per workload of the time");
}

/// A hand-made run folder in `tests/fixtures/runs/<workload>/`: its path, the exit code and
/// verdict word its name states, and the anomaly class an invalid one must report.
struct RunCase {
    dir: PathBuf,
    code: i32,
    verdict: &'static str,
    anomaly: Option<String>,
}

/// Every hand-made run folder.
fn run_cases() -> Vec<RunCase> {
    let mut cases = Vec::new();
    for dir in run_folders("runs").into_iter().flat_map(|(_, runs)| runs) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let (code, verdict) = match name.split('-').next() {
            Some("valid") => (0, "valid"),
            Some("invalid") => (1, "INVALID"),
            Some("unknown") => (2, "unknown"),
            _ => panic!("{}: name does not state a verdict", dir.display()),
        };
        let anomaly = std::fs::read_to_string(dir.join("anomaly"))
            .ok()
            .map(|a| a.trim().to_string());
        assert_eq!(
            anomaly.is_some(),
            code == 1,
            "{}: anomaly file",
            dir.display()
        );
        cases.push(RunCase {
            dir,
            code,
            verdict,
            anomaly,
        });
    }
    cases.sort_by(|a, b| a.dir.cmp(&b.dir));
    cases
}

/// Each hand-made run folder, checked from a copy (a results folder is rewritten in place),
/// exits with the code its name states, says that verdict on its line and in `results.json`,
/// and an invalid one names its anomaly class.
#[test]
fn every_run_fixture_gets_the_verdict_its_name_states() {
    let scratch = std::env::temp_dir().join(format!("stampede-runs-{}", std::process::id()));
    let mut workloads = std::collections::BTreeSet::new();
    let cases = run_cases();
    for case in &cases {
        let (out, results) = check_copy(&case.dir, &scratch, &["history.jsonl", "test.yaml"]);
        let name = case.dir.display();
        let line = last_line(&out);
        assert_eq!(out.status.code(), Some(case.code), "{name}: {line}");
        let said = format!("verdict: {} ", case.verdict);
        assert!(line.starts_with(&said), "{name}: {line}");
        if let Some(anomaly) = &case.anomaly {
            assert!(
                line.contains(anomaly.as_str()),
                "{name}: no {anomaly} in {line}"
            );
        }
        let valid = match case.code {
            0 => serde_json::json!(true),
            1 => serde_json::json!(false),
            _ => serde_json::json!("unknown"),
        };
        assert_eq!(results["valid"], valid, "{name}");
        workloads.insert(case.dir.parent().unwrap().to_path_buf());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(workloads.len() >= 5, "only {workloads:?}");
    assert!(cases.len() >= 38, "only {} run fixtures", cases.len());
}

/// The contention fixtures (`tests/fixtures/contention/`, see its README): each run folder,
/// judged again, gets the verdict its name states, with the anomaly class its case names
/// (`passed-over`, `starved`) counted in `results.json`; the unfair lock's starved waits are a
/// figure; and every judged run, lock or election, reports its queue positions.
#[test]
fn contention_fixtures_get_their_verdicts_and_anomaly_classes() {
    let scratch = std::env::temp_dir().join(format!("stampede-contention-{}", std::process::id()));
    let mut judged = 0;
    for (case, runs) in run_folders("contention") {
        let class = match case.file_name().unwrap().to_str().unwrap() {
            "passed-over" => ("passed-over", 1),
            "starved-fair" | "election-starved" => ("starved", 1),
            _ => ("starved", 3),
        };
        for run in runs {
            let name = run.file_name().unwrap().to_string_lossy().to_string();
            let files = ["history.jsonl", "test.yaml", "results.json"];
            let (out, results) = check_copy(&run, &scratch, &files);
            let valid = name.starts_with("valid-");
            let (code, verdict) = verdict_of(valid);
            assert_eq!(out.status.code(), Some(code), "{name}: {}", last_line(&out));
            assert!(
                last_line(&out).starts_with(verdict),
                "{name}: {}",
                last_line(&out)
            );
            let contention = &results["contention"];
            let counted = contention["counts"][class.0].as_u64().unwrap_or(0);
            match (valid, name.contains("single-node")) {
                (false, _) => assert_eq!(counted, class.1, "{name}: {contention}"),
                (true, true) => {
                    assert_eq!(counted, 0, "unfair: {contention}");
                    assert_eq!(contention["starved"], 3, "a figure: {contention}");
                }
                (true, false) => assert_eq!(contention["counts"], serde_json::json!({})),
            }
            let positions = contention["positions"].as_object().unwrap();
            assert!(!positions.is_empty(), "{name}: {contention}");
            judged += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(judged, 10, "every contention fixture");
}

/// The watch checker on the hand-made runs of `tests/fixtures/watch/` (each folder a run:
/// `test.yaml`, `history.jsonl`, and a `NOTE` saying what it stands for): `valid-*` exits 0;
/// `invalid-<kind>-<class>-*` exits 1 with that anomaly counted for that class in
/// `results.json` and on the verdict line, and nothing else. Judged in a copy: a run folder
/// is rewritten in place.
#[test]
fn watch_runs_are_judged_per_anomaly_class() {
    let work = std::env::temp_dir().join(format!("stampede-watch-fixtures-{}", std::process::id()));
    let mut judged = (0, 0);
    let root = fixtures().parent().unwrap().join("watch");
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let (out, results) = check_copy(&case, &work, &["test.yaml", "history.jsonl"]);
        let line = last_line(&out);
        let by_class = &results["watch"]["by_class"];
        match name.strip_prefix("invalid-") {
            None => {
                assert_eq!(out.status.code(), Some(0), "{name}: {line}");
                assert!(line.starts_with("verdict: valid"), "{name}: {line}");
                assert_eq!(by_class, &serde_json::json!({}), "{name}");
                judged.0 += 1;
            }
            Some(rest) => {
                let mut parts = rest.split('-');
                let (kind, class) = (parts.next().unwrap(), parts.next().unwrap());
                assert_eq!(out.status.code(), Some(1), "{name}: {line}");
                assert!(line.starts_with("verdict: INVALID"), "{name}: {line}");
                assert!(
                    line.contains(&format!("({class}: 1 {kind})")),
                    "{name}: {line}"
                );
                assert_eq!(
                    by_class,
                    &serde_json::json!({ class: { kind: 1 } }),
                    "{name}"
                );
                judged.1 += 1;
            }
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
    assert!(judged.0 >= 8 && judged.1 >= 7, "{judged:?}");
}

/// The stored run of the register workload under kills (`tests/fixtures/before-redesign/`),
/// a finished run: `test.yaml`, `history.jsonl` and the `results.json` its controller wrote.
fn finished_register_run() -> PathBuf {
    let (_, runs) = run_folders("before-redesign")
        .into_iter()
        .find(|(test, _)| test.ends_with("register-kill"))
        .unwrap();
    runs[0].clone()
}

/// `stampede check` on a history without a client operation (an empty file, a blank one,
/// only the nemesis's operations) is an error naming the file and why, alone or beside a
/// history that still gets its verdict.
#[test]
fn nothing_is_judged_from_a_history_without_client_operations() {
    let dir = tempfile::tempdir().unwrap();
    let nemesis_only = "{\"index\":0,\"time\":0,\"type\":\"info\",\"process\":\"nemesis\",\"f\":\"start-kill\",\"value\":null}\n\
         {\"index\":1,\"time\":5,\"type\":\"info\",\"process\":\"nemesis\",\"f\":\"stop-kill\",\"value\":null}\n";
    let cases = [
        ("empty.jsonl", "", "the history is empty"),
        ("blank.jsonl", "  \n\n\t\n", "the history is empty"),
        (
            "faults.jsonl",
            nemesis_only,
            "the history holds only 2 nemesis operations",
        ),
    ];
    let mut all = vec!["check".to_string()];
    for (name, text, why) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let f = file.to_str().unwrap();
        let out = stampede(&["check", f]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("error: {f}: no operations to judge ({why})\n")
        );
        assert!(out.stdout.is_empty(), "{name}: no verdict");
        all.push(f.to_string());
    }
    let valid = fixtures().join("versioned-register/valid-open-write-at-end.jsonl");
    all.push(valid.to_str().unwrap().to_string());
    let out = stampede(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    for ((name, _, why), line) in cases.iter().zip(&lines) {
        let file = dir.path().join(name);
        let said = format!("{}: error: no operations to judge ({why})", file.display());
        assert_eq!(*line, said);
    }
    assert!(
        lines[3].contains("valid-open-write-at-end.jsonl: verdict: valid"),
        "{stdout}"
    );
    assert!(
        lines[4].starts_with("4 histories: 1 valid, 0 INVALID, 0 unknown, 3 errors"),
        "{stdout}"
    );
}

/// A results folder whose run did not finish (its controller was killed before the heal and
/// the replica comparison, so it wrote no `results.json`) is never valid: unknown when its
/// checkers find nothing, and so again after the check wrote a `results.json` into it (which
/// says so); INVALID when its history shows an anomaly.
#[test]
fn a_run_that_did_not_finish_is_at_best_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let finished = finished_register_run();
    let run = dir.path().join("killed");
    std::fs::create_dir(&run).unwrap();
    for file in ["history.jsonl", "test.yaml"] {
        std::fs::copy(finished.join(file), run.join(file)).unwrap();
    }
    let unfinished = "verdict: unknown (the run did not finish: no results.json: its controller \
                      stopped before the heal and the replica comparison); ";
    for judging in ["first", "again"] {
        let out = stampede(&["check", run.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{judging}: {}", last_line(&out));
        assert!(
            last_line(&out).starts_with(unfinished),
            "{judging}: {}",
            last_line(&out)
        );
        let taken = format!(
            "checking {}: a results folder (judged as its run did)\n",
            run.display()
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), taken);
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("results.json")).unwrap()).unwrap();
        assert_eq!(results["valid"], "unknown", "{judging}");
        assert_eq!(
            results["unfinished"],
            "no results.json: its controller stopped before the heal and the replica comparison",
            "{judging}"
        );
    }

    // The same run with a read of a value nobody wrote: an anomaly is a fact, finished or not.
    let anomalous = dir.path().join("killed-anomalous");
    std::fs::create_dir(&anomalous).unwrap();
    std::fs::copy(finished.join("test.yaml"), anomalous.join("test.yaml")).unwrap();
    let mut history = std::fs::read_to_string(finished.join("history.jsonl")).unwrap();
    let next = history.lines().count();
    for (i, (kind, value)) in [("invoke", "null"), ("ok", "-7")].into_iter().enumerate() {
        history.push_str(&format!(
            "{{\"index\":{},\"time\":{},\"type\":\"{kind}\",\"process\":5,\"f\":\"read\",\
             \"value\":{value},\"key\":\"4\",\"node\":\"n2\",\"zxid\":8589934641,\"version\":28}}\n",
            next + i,
            20_000_000_000u64 + i as u64
        ));
    }
    std::fs::write(anomalous.join("history.jsonl"), history).unwrap();
    let out = stampede(&["check", anomalous.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", last_line(&out));
    assert!(
        last_line(&out).starts_with("verdict: INVALID under "),
        "{}",
        last_line(&out)
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(anomalous.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["valid"], false);
    assert!(
        results["unfinished"].is_string(),
        "{}",
        results["unfinished"]
    );
}

/// A folder without `test.yaml` is a folder of histories even when one of them is named
/// `history.jsonl`: every file in it is checked, `check` says it took it so, and nothing is
/// written into it (with `--output`, everything goes there instead).
#[test]
fn a_folder_with_a_history_jsonl_among_other_histories_checks_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let histories = dir.path().join("histories");
    std::fs::create_dir(&histories).unwrap();
    let cases = fixtures().join("versioned-register");
    for (name, to) in [
        ("valid-open-write-at-end.jsonl", "history.jsonl"),
        ("invalid-write-answered-no-node.jsonl", "other.jsonl"),
    ] {
        std::fs::copy(cases.join(name), histories.join(to)).unwrap();
    }
    let files = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
    };
    let h = histories.to_str().unwrap();
    let output = dir.path().join("out");
    for with_output in [false, true] {
        let mut args = vec!["check", h];
        if with_output {
            args.extend(["--output", output.to_str().unwrap()]);
        }
        let out = stampede(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("checking {h}: a folder of 2 histories\n")
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        assert!(
            lines[0].starts_with(&format!("{h}/history.jsonl: verdict: valid")),
            "{stdout}"
        );
        assert!(
            lines[1].starts_with(&format!("{h}/other.jsonl: verdict: INVALID")),
            "{stdout}"
        );
        assert_eq!(
            files(&histories),
            ["history.jsonl", "other.jsonl"],
            "nothing written into the folder"
        );
    }
    assert_eq!(files(&output), ["histories", "other.jsonl"]);
    assert_eq!(
        files(&output.join("histories")),
        ["results.json", "timeline.html"]
    );
}
