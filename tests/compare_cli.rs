//! `stampede compare` on the stored runs in `tests/fixtures/compare/`: the table on stdout, the
//! plots written where asked, and a one-line error for a folder that holds no run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stampede(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .output()
        .expect("stampede runs")
}

fn fixture(name: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare");
    path.join(name).display().to_string()
}

#[test]
fn compare_prints_a_row_per_run_and_writes_the_plots() {
    let dir = tempfile::tempdir().unwrap();
    let png = |name: &str| dir.path().join(name).display().to_string();
    let (plot, herd, recipes) = (png("c.png"), png("h.png"), png("r.png"));
    let out = stampede(&[
        "compare",
        &fixture("lock-sequential-partition"),
        &fixture("register-none"),
        &fixture("election-fair-kill"),
        "--plot",
        &plot,
        "--herd",
        &herd,
        "--recipes",
        &recipes,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("2026-11-21T"))
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows[0].contains("lock-sequential") && rows[0].contains("4.0/20.0"));
    assert!(rows[2].starts_with("3  register-none"), "{stdout}");
    assert!(
        rows[3].contains("election-fair") && rows[3].contains("6.0/300.0"),
        "failover of the election run: {stdout}"
    );
    for path in [&plot, &herd, &recipes] {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{path}");
    }
}

#[test]
fn a_folder_without_runs_is_named_in_a_one_line_error() {
    let missing = fixture("no-results");
    let out = stampede(&["compare", &missing, "--plot", "/nonexistent/c.png"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&missing) && stderr.contains("no results.json"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
