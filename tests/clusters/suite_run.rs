//! Integration test of `stampede suite`: a 2 workloads × 2 nemeses suite runs unattended on a
//! local cluster of its own and leaves summary.json, junit.xml and index.html that agree with
//! each other and with the tests' own results folders; a test that errors does not stop the
//! suite, and a signal stops it after the test it came in.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{keeperd_binary, text, Running, TestCluster};

fn a_two_by_two_suite_runs_unattended_and_reports_consistently(cluster: &TestCluster) {
    let work = &cluster.work;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let suite = work.join("two-by-two.yaml");
    std::fs::write(
        &suite,
        format!(
            "name: two-by-two\nworkloads: [{}, {}]\nnemeses: [none, partition]\ntime_limit: 6s\nset:\n  - generator.quiet_period=2s\n  - generator.nemesis_interval=2s\n  - generator.nemesis_duration=4s\n",
            root.join("workloads/register.yaml").display(),
            root.join("suites/fixtures/register-writes.yaml").display()
        ),
    )
    .unwrap();
    let out = cluster.stampede(&["suite", "two-by-two.yaml"]);
    let dir: PathBuf = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("suite: ").map(PathBuf::from))
        .unwrap_or_else(|| panic!("no suite line: {}", text(&out)));
    assert!(
        dir.starts_with(std::fs::canonicalize(work.join("results/suites/two-by-two")).unwrap()),
        "{}",
        dir.display()
    );

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["finished"], true);
    let tests = summary["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 4, "{summary:#}");
    let mut combos: Vec<(String, String)> = tests
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["nemesis"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    combos.sort();
    let names: Vec<&str> = combos.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "register-none-zookeeper",
            "register-partition-zookeeper",
            "register-writes-none-zookeeper",
            "register-writes-partition-zookeeper"
        ]
    );
    for t in tests {
        assert_eq!(t["verdict"], "valid", "{t:#}\n{}", text(&out));
        assert_eq!(t["exit_code"], 0);
        let results = dir.join(t["results"].as_str().unwrap());
        let verdict: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(results.join("results.json")).unwrap())
                .unwrap();
        assert_eq!(
            verdict["valid"], true,
            "the summary agrees with the test's results.json"
        );
        let config = std::fs::read_to_string(results.join("test.yaml")).unwrap();
        assert!(config.contains(&format!("name: {}", t["name"].as_str().unwrap())));
        assert!(
            config.contains("time_limit: 6s"),
            "the suite's time limit reached the test"
        );
        if t["name"].as_str().unwrap().starts_with("register-writes") {
            assert!(
                config.contains("read: 0"),
                "the second workload file was used"
            );
        }
        if t["nemesis"] == "partition" {
            let history = std::fs::read_to_string(results.join("history.jsonl")).unwrap();
            assert!(
                history.contains("\"start-partition\""),
                "the partition nemesis ran"
            );
        }
    }
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 4);
    assert!(
        junit.contains("tests=\"4\" failures=\"0\" errors=\"0\""),
        "{junit}"
    );
    assert!(!junit.contains("<failure") && !junit.contains("<error"));
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert_eq!(index.matches("data-verdict=\"valid\"").count(), 4);
    for t in tests {
        assert!(index.contains(&format!(
            "href=\"{}/timeline.html\"",
            t["results"].as_str().unwrap()
        )));
    }
}

fn a_suite_goes_on_after_a_test_that_errors(cluster: &TestCluster) {
    let work = &cluster.work;
    let suite = work.join("broken.yaml");
    std::fs::write(&suite, "workloads: [register]\nnemeses: [no-such-nemesis, none]\ntime_limit: 3s\nset: [generator.quiet_period=1s]\n").unwrap();
    let out = cluster.stampede(&["suite", "broken.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an errored test makes the suite exit 2: {}",
        text(&out)
    );
    let dir = std::fs::canonicalize(work.join("results/suites/broken/latest")).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let tests = summary["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2, "the suite went on: {summary:#}");
    assert_eq!(tests[0]["verdict"], "error");
    assert!(
        tests[0]["error"]
            .as_str()
            .unwrap()
            .contains("no-such-nemesis"),
        "{}",
        tests[0]["error"]
    );
    assert_eq!(tests[0]["results"], serde_json::Value::Null);
    assert_eq!(tests[1]["verdict"], "valid", "{}", text(&out));
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<error ").count(), 1, "{junit}");
}

fn a_keeperd_suite_uploads_the_binary_it_is_given(cluster: &TestCluster) {
    let work = &cluster.work;
    std::fs::write(
        work.join("keeperd.yaml"),
        "name: on-keeperd\nworkloads: [register]\nnemeses: [none]\ndbs: [keeperd]\ntime_limit: 3s\nset: [generator.quiet_period=1s]\n",
    )
    .unwrap();
    let missing = cluster.stampede(&[
        "suite",
        "keeperd.yaml",
        "--keeperd-binary",
        "no-such-keeperd",
    ]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(
        err.trim().lines().count(),
        1,
        "a missing binary is one line: {err}"
    );
    assert!(
        err.contains("--keeperd-binary no-such-keeperd: no such file"),
        "{err}"
    );
    assert!(
        !work.join("results/suites/on-keeperd").exists(),
        "nothing started before the error"
    );
    let binary = keeperd_binary();
    let out = cluster.stampede(&["suite", "keeperd.yaml", "--keeperd-binary", &binary]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("building keeperd"),
        "the given binary was used, not a cargo build: {}",
        text(&out)
    );
}

/// SIGINT in the second test's run (the first has run, judged and left its catcher set to end
/// the process): that test stops, is healed and judged `unknown`; the suite starts no further
/// test, writes its reports unfinished and exits 2.
fn a_signal_stops_the_suite_after_the_test_it_came_in(cluster: &TestCluster) {
    std::fs::write(
        cluster.work.join("stopped.yaml"),
        "name: stopped\nworkloads: [register]\nnemeses: [none]\nrepetitions: 3\n\
         time_limit: 20s\nset: [generator.quiet_period=1s]\n",
    )
    .unwrap();
    let mut run = Running::start(cluster, &["suite", "stopped.yaml"]);
    run.wait_until(Duration::from_secs(240), |seen| {
        let second = seen
            .iter()
            .skip_while(|l| !l.ends_with("test 2/3: register-none-zookeeper #2"));
        second.skip(1).any(|l| l.starts_with("progress: run ["))
    });
    run.signal("INT");
    let (code, stdout, stderr) = run.finish(Duration::from_secs(120));
    let said = format!("{stdout}{}", stderr.join("\n"));
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("suite stopped: stopped by SIGINT: no further test starts"),
        "{said}"
    );
    assert!(!said.contains("test 3/3"), "no third test started: {said}");
    let dir = std::fs::canonicalize(cluster.work.join("results/suites/stopped/latest")).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["finished"], false, "{summary:#}");
    let tests = summary["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2, "{summary:#}");
    assert_eq!(tests[0]["verdict"], "valid", "{summary:#}");
    assert_eq!(tests[1]["verdict"], "unknown", "{summary:#}");
    let line = tests[1]["verdict_line"].as_str().unwrap();
    assert!(line.contains("interrupted by SIGINT"), "{line}");
    assert!(
        line.contains("run lock released"),
        "the nodes were cleaned: {line}"
    );
    assert!(
        common::our_servers(cluster).is_empty(),
        "no server left running"
    );
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "a_two_by_two_suite_runs_unattended_and_reports_consistently",
            a_two_by_two_suite_runs_unattended_and_reports_consistently,
        ),
        (
            "a_suite_goes_on_after_a_test_that_errors",
            a_suite_goes_on_after_a_test_that_errors,
        ),
        (
            "a_keeperd_suite_uploads_the_binary_it_is_given",
            a_keeperd_suite_uploads_the_binary_it_is_given,
        ),
        (
            "a_signal_stops_the_suite_after_the_test_it_came_in",
            a_signal_stops_the_suite_after_the_test_it_came_in,
        ),
    ];
    common::Group {
        name: "suite_run",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
