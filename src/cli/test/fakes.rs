//! `stampede test` run in process on fake machines ([`FakeMachines`]) with a fake database
//! and the fake workload, under tokio's paused time: the harness's own rules (what makes a
//! verdict unknown, refusals before anything starts, the run lock, heal and teardown whatever
//! ends a run) checked in milliseconds, deterministically. The same plan, claim, engine and
//! judging as a real run; only the machines, the database and the workload are fakes.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::control::fake::{FakeMachines, Sent, Server};
use crate::control::test_nodes;
use crate::db::fake::FakeDb;
use crate::nemesis::Interrupts;
use crate::workload::fake::FakeWrites;

/// The seed of a fake run's random choices when its flags give none: every fake run makes
/// the same choices, and a failing one replays.
const FAKE_SEED: u64 = 1;

/// `stampede test` with `flags`, its results under `results`.
fn args(flags: &[impl AsRef<str>], results: &Path) -> TestArgs {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: TestArgs,
    }
    let results = results.display().to_string();
    let argv = ["stampede", "--results", &results].into_iter();
    let argv = argv.chain(flags.iter().map(AsRef::as_ref));
    <Wrap as clap::Parser>::try_parse_from(argv).unwrap().args
}

/// Plans `args` as `stampede test` does (workload files, overrides, nemesis package), the
/// workloads swapped for the fake one paced by their files, on three nodes of `machines`
/// running the fake database.
fn plan_on(machines: &Arc<FakeMachines>, args: &TestArgs) -> anyhow::Result<Plan> {
    let files = load_workloads(args)?
        .into_iter()
        .map(|loaded| Loaded {
            workload: Box::new(FakeWrites {
                generator: loaded.file.generator.clone(),
            }),
            ..loaded
        })
        .collect();
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let nemesis_config = nemesis::load_package(&nemesis_path, false, None)?;
    let control = Control::on_machines(test_nodes(3), machines.clone());
    Plan::assemble(
        files,
        (nemesis_path, nemesis_config),
        control,
        Arc::new(FakeDb),
        args.seed.unwrap_or(FAKE_SEED),
    )
}

/// Runs `stampede test` with `flags` on the fake machines: each workload's outcome, and the
/// folder the results went to.
async fn run_on(
    machines: &Arc<FakeMachines>,
    flags: &[impl AsRef<str>],
) -> (Vec<MemberOutcome>, tempfile::TempDir) {
    let (_never, interrupts) = Interrupts::manual();
    run_stopped_by(machines, flags, interrupts).await
}

/// Runs as [`run_on`] does, stopped by the signals `interrupts` raises (raised by hand: the
/// fakes never see the process's own).
async fn run_stopped_by(
    machines: &Arc<FakeMachines>,
    flags: &[impl AsRef<str>],
    interrupts: Interrupts,
) -> (Vec<MemberOutcome>, tempfile::TempDir) {
    let results = tempfile::tempdir().unwrap();
    let args = args(flags, results.path());
    let plan = plan_on(machines, &args).unwrap();
    let progress = Progress::new(plan.files[0].file.generator.time_limit.0);
    let (control, db) = (&plan.control, plan.db.as_ref());
    let claim = engine::claim_with(control, db, Scope::Everything, interrupts);
    let claim = claim.await.unwrap();
    let outcomes = run_claimed(claim, plan, &args, progress).await.unwrap();
    (outcomes, results)
}

/// Interrupts whose SIGINT `machines` raise when the first command containing `text` comes,
/// which then takes `hold` to answer.
fn sigint_on(machines: &FakeMachines, text: &str, hold: Duration) -> Interrupts {
    let (raise, interrupts) = Interrupts::manual();
    machines.when(text, hold, move || {
        let _ = raise.send(Some("SIGINT"));
    });
    interrupts
}

/// The history of the run of `outcome`.
fn history(outcome: &MemberOutcome) -> Vec<serde_json::Value> {
    let history = std::fs::read_to_string(outcome.folder.join("history.jsonl")).unwrap();
    history
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Writes the nemesis package `yaml` as `<name>.yaml` into `dir`; returns its path.
fn package(dir: &tempfile::TempDir, name: &str, yaml: &str) -> String {
    let path = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

/// Writes a package of one fault of `kind` aimed at `target` into `dir`; returns its path.
fn one_fault(dir: &tempfile::TempDir, kind: &str, target: &str) -> String {
    let yaml = format!("faults:\n  - kind: {kind}\n    target: {target}\n");
    package(dir, &format!("{kind}-{target}"), &yaml)
}

/// The flags of a run under the nemesis package `package` for `time_limit`, a fault every
/// `interval` lasting `duration`.
fn scheduled(package: &str, time_limit: &str, interval: &str, duration: &str) -> Vec<String> {
    let interval = format!("generator.nemesis_interval={interval}");
    let duration = format!("generator.nemesis_duration={duration}");
    let flags = ["--nemesis", package, "--time-limit", time_limit];
    let flags = flags
        .into_iter()
        .chain(["--set", &interval, "--set", &duration]);
    flags.map(String::from).collect()
}

/// Runs the nemesis package `yaml` on `machines` for a time limit, a fault every interval
/// lasting a duration (`pace`, as [`scheduled`] takes them), as [`run_on`] does.
async fn run_package(
    machines: &Arc<FakeMachines>,
    yaml: &str,
    pace: [&str; 3],
) -> (Vec<MemberOutcome>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let package = package(&dir, "package", yaml);
    let [time_limit, interval, duration] = pace;
    run_on(
        machines,
        &scheduled(&package, time_limit, interval, duration),
    )
    .await
}

/// The run's `results.json`.
fn results(outcome: &MemberOutcome) -> serde_json::Value {
    let text = std::fs::read(outcome.folder.join("results.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// Every node torn down, its server gone and its run lock released.
fn assert_left_clean(machines: &FakeMachines) {
    for node in ["n1", "n2", "n3"] {
        assert!(!machines.is_set_up(node), "{node} torn down");
        assert_eq!(machines.server(node), Server::Gone, "{node}");
        assert!(!machines.is_locked(node), "{node}'s run lock released");
    }
}

/// A run whose package has faults but none took effect is unknown, not valid: here the first
/// fault would come after the time limit.
#[tokio::test(start_paused = true)]
async fn a_run_no_fault_reached_is_unknown() {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let mut flags = scheduled(&one_fault(&dir, "kill", "minority"), "4", "1m", "10s");
    flags.extend(["--set".into(), "generator.quiet_period=1s".into()]);
    let (outcomes, _results) = run_on(&machines, &flags).await;
    let [outcome] = outcomes.as_slice() else {
        panic!("{outcomes:?}")
    };
    assert_eq!(outcome.exit_code, 2, "{outcome:?}");
    let line = &outcome.verdict_line;
    assert!(
        line.starts_with("verdict: unknown (no fault took effect: none started within the run)"),
        "{line}"
    );
    let results = results(outcome);
    assert_eq!(results["valid"], "unknown");
    assert_eq!(results["exposure"]["planned"], true);
    assert!(!machines
        .sent()
        .iter()
        .any(|s| s.command.contains("kill -KILL $pid")));
    assert_left_clean(&machines);
}

/// A scheduled fault that fails to start leaves the run unknown: the server a pause aims at
/// crashes before the pause is due. The run still ends healed and torn down.
#[tokio::test(start_paused = true)]
async fn a_run_whose_fault_failed_to_start_is_unknown() {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let package = one_fault(&dir, "pause", "n2");
    let mut flags = scheduled(&package, "14", "8s", "3s");
    flags.extend(["--set".into(), "generator.quiet_period=1s".into()]);
    let crashing = machines.clone();
    let crash = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(crashing.server("n2"), Server::Running, "set up by then");
        crashing.crash("n2");
    });
    let (outcomes, _results) = run_on(&machines, &flags).await;
    crash.await.unwrap();
    let line = &outcomes[0].verdict_line;
    assert_eq!(outcomes[0].exit_code, 2, "{line}");
    assert!(
        line.starts_with(
            "verdict: unknown (1 of 1 fault starts did not take effect; first: start-pause: no \
             fake server was running on n2 to pause)"
        ),
        "{line}"
    );
    // Due at 8 s, the pause looked for n2's server, found none, and signalled nothing.
    let sent = machines.sent();
    let probed = |s: &&Sent| s.node == "n2" && s.command.ends_with("then echo yes; fi");
    let at_8s = sent
        .iter()
        .filter(probed)
        .any(|s| s.at == Duration::from_secs(8));
    assert!(at_8s, "{sent:?}");
    assert!(!sent.iter().any(|s| s.command.contains("kill -STOP $pid")));
    assert_left_clean(&machines);
}

/// A nemesis package with a mistyped target, kind or duration is refused with one line naming
/// its file and line, before anything starts: no command sent, no results folder.
#[tokio::test(start_paused = true)]
async fn a_mistyped_package_is_refused_before_anything_starts() {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    for (name, yaml, line, says) in [
        (
            "typo-target",
            "faults:\n  - kind: partition\n    target: halves\n  - kind: kill\n    target: sideways\n",
            5,
            "faults[1].target: unknown target \"sideways\"",
        ),
        (
            "typo-kind",
            "# a comment\nfaults:\n  - kind: partiton\n",
            3,
            "faults[0].kind: unknown nemesis kind \"partiton\"",
        ),
        (
            "typo-duration",
            "faults:\n  - kind: clock\n    clock: {mode: strobe, period: 2}\n",
            3,
            "faults[0].clock.period: invalid duration `2`",
        ),
    ] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let file = file.display().to_string();
        let results = dir.path().join("results");
        let args = args(&["--name", name, "--nemesis", &file], &results);
        let error = format!("{:#}", plan_on(&machines, &args).err().unwrap());
        assert_eq!(error.lines().count(), 1, "one line: {error}");
        assert!(
            error.starts_with(&format!("{file}:{line}")) && error.contains(says),
            "{error}"
        );
        assert!(!results.exists(), "no run was started");
    }
    assert!(machines.sent().is_empty(), "no node was touched");
}

/// A second run on nodes in use is refused at once, naming the holder, and makes no folder;
/// the first run goes on undisturbed to its end and leaves the nodes clean.
#[tokio::test(start_paused = true)]
async fn a_second_run_on_the_nodes_is_refused() {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let package = one_fault(&dir, "kill", "minority");
    let flags = scheduled(&package, "10s", "1s", "3s");
    let first = {
        let machines = machines.clone();
        tokio::spawn(async move { run_on(&machines, &flags).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(machines.is_set_up("n1"), "the first run is under way");
    let results = tempfile::tempdir().unwrap();
    let second = args(&[] as &[&str], results.path());
    let plan = plan_on(&machines, &second).unwrap();
    let progress = Progress::new(Duration::from_secs(10));
    let error = claim_and_run(plan, &second, progress).await.err().unwrap();
    let error = format!("{error:#}");
    let pid = std::process::id().to_string();
    assert!(
        error.contains("another run holds this cluster: pid ") && error.contains(&pid),
        "{error}"
    );
    assert!(
        std::fs::read_dir(results.path()).unwrap().next().is_none(),
        "no folder"
    );
    let (outcomes, _results) = first.await.unwrap();
    let line = &outcomes[0].verdict_line;
    assert!(!line.contains("aborted"), "{line}");
    // Unknown only for the replicas, which no fake server can show.
    let exposed = "verdict: unknown under 3 kills (minority, 7 s faulted); 300 of 300 writes";
    assert!(line.starts_with(exposed), "{line}");
    assert_left_clean(&machines);
}

/// A fault armed on a log line that never comes makes the run unknown: the fault never fired.
#[tokio::test(start_paused = true)]
async fn a_trigger_that_never_fires_makes_the_run_unknown() {
    let machines = FakeMachines::new();
    let yaml = "faults:\n  - kind: pause\n    target: n1\n    trigger: {pattern: \"no server ever logs this\"}\n";
    let (outcomes, _results) = run_package(&machines, yaml, ["9s", "2s", "2s"]).await;
    let line = &outcomes[0].verdict_line;
    assert_eq!(outcomes[0].exit_code, 2, "{line}");
    assert!(
        line.starts_with(
            "verdict: unknown (2 of 2 fault starts did not take effect; first: start-pause: \
             trigger armed on n1 never fired); 280 of 280 writes completed"
        ),
        "{line}"
    );
    assert_left_clean(&machines);
}

/// A database that fails to set up aborts the run before its workloads, saying why, and the
/// nodes are still torn down and their locks released.
#[tokio::test(start_paused = true)]
async fn a_failed_setup_aborts_the_run_and_leaves_the_nodes_clean() {
    let machines = FakeMachines::new();
    machines.fail("fake-db setup", "no space left on device");
    let (outcomes, _results) = run_on(&machines, &["--nemesis", "kill"]).await;
    let line = &outcomes[0].verdict_line;
    assert_eq!(outcomes[0].exit_code, 2, "{line}");
    assert!(
        line.starts_with("verdict: unknown (aborted: setup failed: ")
            && line.contains("no space left on device"),
        "{line}"
    );
    assert!(
        line.contains("fake removed from 3 nodes, run lock released"),
        "{line}"
    );
    assert_left_clean(&machines);
}

/// Each fault started in the run of `outcome`, in order: its kind and the nodes it hit.
fn faults_started(outcome: &MemberOutcome) -> Vec<(String, serde_json::Value)> {
    history(outcome)
        .into_iter()
        .filter(|op| op["process"] == "nemesis" && op["type"] == "info")
        .filter_map(|op| {
            let kind = op["f"].as_str()?.strip_prefix("start-")?.to_string();
            Some((kind, op["value"]["nodes"].clone()))
        })
        .collect()
}

/// The faults a run of a random mix starts, and the nodes they hit, with `seed`.
async fn choices_with(seed: u64) -> Vec<(String, serde_json::Value)> {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let yaml = "order: random\nfaults:\n  - {kind: kill, target: one}\n  - {kind: pause, target: minority}\n";
    let package = package(&dir, "mix", yaml);
    let mut flags = scheduled(&package, "12s", "1s", "1s");
    flags.extend(["--seed".into(), seed.to_string()]);
    let (outcomes, _results) = run_on(&machines, &flags).await;
    let started = faults_started(&outcomes[0]);
    let config = std::fs::read_to_string(outcomes[0].folder.join("test.yaml")).unwrap();
    assert!(config.contains(&format!("seed: {seed}")), "{config}");
    assert_left_clean(&machines);
    started
}

/// The seed decides the nemesis's choices (a random mix's next fault, the nodes each hits):
/// the same seed makes the same ones, in the same order; other seeds make others.
#[tokio::test(start_paused = true)]
async fn the_same_seed_makes_the_same_fault_choices() {
    let first = choices_with(42).await;
    assert!(first.len() >= 4, "several faults started: {first:?}");
    assert_eq!(choices_with(42).await, first);
    let mut others = Vec::new();
    for seed in 1..=3 {
        others.push(choices_with(seed).await);
    }
    assert!(
        others.iter().any(|o| *o != first),
        "seeds 1 to 3 all chose as 42 did: {first:?}"
    );
}

/// SIGINT while the database is being set up stops the run before any workload starts, and
/// every node is left clean: nothing healed is left, the database removed, the lock released.
#[tokio::test(start_paused = true)]
async fn an_interrupt_during_setup_stops_the_run_and_leaves_the_nodes_clean() {
    let machines = FakeMachines::new();
    let interrupts = sigint_on(&machines, "fake-db setup", Duration::from_secs(1));
    let (outcomes, _results) = run_stopped_by(&machines, &["--nemesis", "kill"], interrupts).await;
    let line = &outcomes[0].verdict_line;
    assert_eq!(outcomes[0].exit_code, 2, "{line}");
    let aborted = "verdict: unknown (aborted: interrupted by SIGINT during setup; cleaned: \
                   faults healed on 3 nodes, fake removed from 3 nodes, run lock released";
    assert!(line.starts_with(aborted), "{line}");
    assert_eq!(history(&outcomes[0]), Vec::<serde_json::Value>::new());
    assert_left_clean(&machines);
}

/// SIGINT while a server is paused stops the run at once: the paused server is resumed
/// before the database is torn down, and every node is left clean.
#[tokio::test(start_paused = true)]
async fn an_interrupt_mid_fault_heals_it_before_the_teardown() {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let flags = scheduled(&one_fault(&dir, "pause", "one"), "60s", "1s", "30s");
    let interrupts = sigint_on(&machines, "kill -STOP $pid", Duration::ZERO);
    let (outcomes, _results) = run_stopped_by(&machines, &flags, interrupts).await;
    let line = &outcomes[0].verdict_line;
    assert_eq!(outcomes[0].exit_code, 2, "{line}");
    let aborted = "verdict: unknown (aborted: interrupted by SIGINT; cleaned: faults healed on \
                   3 nodes, fake removed from 3 nodes, run lock released";
    assert!(line.starts_with(aborted), "{line}");
    let sent = machines.sent();
    let at = |node: &str, text: &str| {
        sent.iter()
            .position(|s| s.node == node && s.command.contains(text))
    };
    let paused = sent
        .iter()
        .find(|s| s.command.contains("kill -STOP $pid"))
        .unwrap();
    let node = paused.node.as_str();
    let resumed = at(node, "kill -CONT").expect("the paused server was resumed");
    let torn_down = at(node, "fake-db teardown").expect("the database was torn down");
    assert!(
        resumed < torn_down,
        "resumed before the teardown: {sent:#?}"
    );
    let last = history(&outcomes[0])
        .iter()
        .filter_map(|op| op["time"].as_u64())
        .max();
    assert!(
        last < Some(10_000_000_000),
        "the run stopped early: the last op at {last:?} ns"
    );
    assert_left_clean(&machines);
}

/// Five faults in turn, each on targets the fakes can pick.
const FIVE_FAULTS: &str = "faults:\n  - {kind: kill, target: minority}\n  - {kind: pause, target: one}\n  - {kind: kill, target: n2}\n  - {kind: pause, target: all}\n  - {kind: kill, target: all}\n";

/// Runs the five faults at the workloads' default pace (a fault every 20 s) for
/// `time_limit`: the kinds started, in order, and the verdict line.
async fn five_faults_for(time_limit: &str) -> (Vec<String>, String) {
    let machines = FakeMachines::new();
    let dir = tempfile::tempdir().unwrap();
    let package = package(&dir, "five", FIVE_FAULTS);
    let flags = ["--nemesis", &package, "--time-limit", time_limit];
    let (outcomes, _results) = run_on(&machines, &flags).await;
    assert_left_clean(&machines);
    let started = faults_started(&outcomes[0])
        .into_iter()
        .map(|(kind, _)| kind);
    (started.collect(), outcomes[0].verdict_line.clone())
}

/// The default pace would reach two of five faults in 40 s: the pace is fitted so that every
/// one comes, in order, within the limit.
#[tokio::test(start_paused = true)]
async fn every_fault_of_a_package_comes_within_the_time_limit() {
    let (started, line) = five_faults_for("40s").await;
    assert_eq!(started, ["kill", "pause", "kill", "pause", "kill"]);
    for part in [
        "kill (minority",
        "pause (one",
        "kill (n2",
        "pause (all",
        "kill (all",
    ] {
        assert!(line.contains(part), "{part} acted: {line}");
    }
}

/// A limit too short for every fault of the package even at the shortest pace (a quick smoke
/// run) keeps the pace asked: one fault in 20 s.
#[tokio::test(start_paused = true)]
async fn a_limit_too_short_for_the_package_keeps_the_pace_asked() {
    let (started, line) = five_faults_for("20s").await;
    assert_eq!(started, ["kill"]);
    assert!(
        line.contains("1 kill (minority") && !line.contains("pause"),
        "{line}"
    );
}

/// A fault whose start is slow (here the first kill's, 10 s) does not push the package's last
/// fault out: the waits after it are shortened to make the time up, and every fault comes
/// within the limit.
#[tokio::test(start_paused = true)]
async fn a_slow_start_is_made_up_by_shorter_waits() {
    let machines = FakeMachines::new();
    machines.when("kill -KILL", Duration::from_secs(10), || {});
    let dir = tempfile::tempdir().unwrap();
    let package = package(&dir, "five", FIVE_FAULTS);
    let flags = ["--nemesis", &package, "--time-limit", "40s"];
    let (outcomes, _results) = run_on(&machines, &flags).await;
    assert_left_clean(&machines);
    let started: Vec<String> = faults_started(&outcomes[0])
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(started, ["kill", "pause", "kill", "pause", "kill"]);
}

/// A slow partition aimed at one server slows the links between it and every other server,
/// both ways, and no link between the others (a follower made to lag behind its leader).
#[tokio::test(start_paused = true)]
async fn a_slow_partition_aimed_at_one_server_slows_its_links_alone() {
    let machines = FakeMachines::new();
    let yaml = "faults:\n  - kind: packet\n    target: n2\n    netem: {delay: 1s, jitter: 0ms, slow_partition: true}\n";
    let (outcomes, _results) = run_package(&machines, yaml, ["6s", "1s", "2s"]).await;
    let started: Vec<serde_json::Value> = history(&outcomes[0])
        .into_iter()
        .filter(|op| op["f"] == "start-packet" && op["type"] == "info")
        .map(|op| op["value"]["slow"].clone())
        .collect();
    assert!(!started.is_empty(), "the fault started");
    for slow in &started {
        assert_eq!(
            *slow,
            serde_json::json!({"n1": ["n2"], "n2": ["n1", "n3"], "n3": ["n2"]}),
            "{started:?}"
        );
    }
    assert_left_clean(&machines);
}
