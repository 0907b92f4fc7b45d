//! The nemesis schedule: faults started and healed in turn during the main phase, each call
//! recorded as a `start-<kind>` / `stop-<kind>` operation of the `"nemesis"` process (in every
//! history the schedule serves: workloads run together share one), and a guard that heals
//! every fault when the run ends, however it ends.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::pace::Pace;
use super::stop::Stop;
use super::GeneratorConfig;
use crate::history::{Meta, OpType, Process, Recorder};
use crate::nemesis::Nemesis;

/// Attempts at healing one nemesis before its failure is reported.
const HEAL_ATTEMPTS: u32 = 3;
/// Pause between healing attempts.
const HEAL_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The shortest wait before a fault when the schedule is behind its plan (or the interval,
/// when shorter).
const CATCH_UP_GAP: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
enum Action {
    Start,
    Stop,
}

/// Records one nemesis operation in every history of `recorders`; fails if one cannot be
/// written, after trying them all.
fn record_all(
    recorders: &[Arc<Recorder>],
    kind: OpType,
    f: &str,
    value: &Value,
    meta: &Meta,
) -> io::Result<()> {
    let mut first_error = None;
    for recorder in recorders {
        let recorded = recorder.record(kind, Process::NEMESIS, f, value.clone(), meta.clone());
        if let Err(e) = recorded {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Calls `action` on `nemesis` and records it in every history of `recorders` as an invoke
/// and an `info` completion holding the returned value (or the error's text). Returns the
/// error's text if the call failed; fails only if a history cannot be written.
async fn call(
    recorders: &[Arc<Recorder>],
    nemesis: &dyn Nemesis,
    action: Action,
) -> io::Result<Result<(), String>> {
    let f = match action {
        Action::Start => format!("start-{}", nemesis.kind()),
        Action::Stop => format!("stop-{}", nemesis.kind()),
    };
    let target = match (action, nemesis.target()) {
        (Action::Start, target) if !target.is_empty() => serde_json::json!({ "target": target }),
        _ => Value::Null,
    };
    record_all(recorders, OpType::Invoke, &f, &target, &Meta::default())?;
    let result = match action {
        Action::Start => nemesis.start().await,
        Action::Stop => nemesis.stop().await,
    };
    match result {
        Ok(value) => {
            record_all(recorders, OpType::Info, &f, &value, &Meta::default())?;
            Ok(Ok(()))
        }
        Err(e) => {
            let error = format!("{e:#}");
            tracing::warn!("{f} failed: {error}");
            let meta = Meta {
                error: Some(error.clone()),
                ..Meta::default()
            };
            record_all(recorders, OpType::Info, &f, &Value::Null, &meta)?;
            Ok(Err(format!("{f}: {error}")))
        }
    }
}

/// Runs the schedule until `stop` is raised: wait `interval`, start the next nemesis (in
/// turn), wait `duration`, stop it, and again. Fault `k` is due `interval` after the end of
/// fault `k - 1`'s `duration` as planned (`(k + 1) * interval + k * duration` from the
/// start): time lost to slow starts and stops is made up by shorter waits (down to
/// [`CATCH_UP_GAP`]), so a package's last fault is not pushed out by its first. A fault still
/// active when `stop` is raised is left to [`HealGuard::heal`]. With an `end` (the time limit
/// that raises `stop`), no fault is started that would, by its own slowest start so far (or
/// the quickest start of any for one not started yet), still be starting at the end: a start
/// cannot be cut short, so one that overran the end would push the heal, and the healed tail
/// the workloads are judged on, past their run.
pub async fn schedule(
    nemeses: &[Arc<dyn Nemesis>],
    recorders: &[Arc<Recorder>],
    interval: Duration,
    duration: Duration,
    end: Option<Instant>,
    mut stop: Stop,
) -> io::Result<()> {
    if nemeses.is_empty() {
        return Ok(());
    }
    let began_at = Instant::now();
    let mut starts: Vec<Option<Duration>> = vec![None; nemeses.len()];
    let turns = nemeses.iter().enumerate().cycle();
    for (k, (i, nemesis)) in (0u32..).zip(turns) {
        let due = began_at + interval * (k + 1) + duration * k;
        let wait_until = due.max(Instant::now() + interval.min(CATCH_UP_GAP));
        tokio::select! {
            _ = stop.wait() => return Ok(()),
            _ = tokio::time::sleep_until(wait_until) => {}
        }
        let quickest = starts.iter().flatten().min().copied();
        let estimate = starts[i].or(quickest).unwrap_or_default();
        if end.is_some_and(|end| Instant::now() + estimate > end) {
            tracing::info!("no fault started after this: its start takes about {estimate:?}");
            stop.wait().await;
            return Ok(());
        }
        let began = Instant::now();
        // A start that fails may still have done part of its work: the stop below undoes it.
        let _ = call(recorders, nemesis.as_ref(), Action::Start).await?;
        let took = began.elapsed();
        starts[i] = Some(starts[i].map_or(took, |slowest| slowest.max(took)));
        tokio::select! {
            _ = stop.wait() => return Ok(()),
            _ = tokio::time::sleep(duration) => {}
        }
        let _ = call(recorders, nemesis.as_ref(), Action::Stop).await?;
    }
    Ok(())
}

/// Runs the schedule for at most `cfg.time_limit`, at the pace of `cfg` fitted to the
/// nemeses ([`Pace::fitted`]: each comes within the limit), ended early when `cancel` is
/// raised or `end` completes. A fault still active then is left to [`HealGuard::heal`].
pub async fn schedule_for(
    nemeses: &[Arc<dyn Nemesis>],
    recorders: &[Arc<Recorder>],
    cfg: &GeneratorConfig,
    cancel: watch::Receiver<bool>,
    end: impl std::future::Future<Output = ()>,
) -> io::Result<()> {
    let (abort_tx, abort_rx) = watch::channel(false);
    let stop = Stop::new(cancel, abort_rx);
    let pace = Pace::of_run(nemeses.len(), cfg);
    let (interval, duration) = (pace.interval, pace.duration);
    let time_limit = Instant::now() + cfg.time_limit.0;
    let schedule = schedule(
        nemeses,
        recorders,
        interval,
        duration,
        Some(time_limit),
        stop,
    );
    let ended = async {
        tokio::select! {
            _ = tokio::time::sleep_until(time_limit) => {}
            _ = end => {}
        }
        let _ = abort_tx.send(true);
    };
    let (scheduled, ()) = tokio::join!(schedule, ended);
    scheduled
}

/// Heals every nemesis when the run ends: [`HealGuard::heal`] on every normal path, and on
/// drop (the run's future dropped, or a panic) a best-effort heal spawned on the runtime.
pub struct HealGuard {
    nemeses: Vec<Arc<dyn Nemesis>>,
    recorders: Vec<Arc<Recorder>>,
    armed: bool,
}

impl HealGuard {
    /// A guard over `nemeses`, recording its heals in every history of `recorders`.
    pub fn new(nemeses: Vec<Arc<dyn Nemesis>>, recorders: Vec<Arc<Recorder>>) -> HealGuard {
        HealGuard {
            nemeses,
            recorders,
            armed: true,
        }
    }

    /// Stops every nemesis (recorded like any stop; power losses first), retrying a failing
    /// one a few times, and returns the heals that still failed. A failure to write the
    /// history does not stop it from healing the rest.
    pub async fn heal(mut self) -> Vec<String> {
        self.armed = false;
        heal_all(&self.nemeses, &self.recorders).await
    }
}

async fn heal_all(nemeses: &[Arc<dyn Nemesis>], recorders: &[Arc<Recorder>]) -> Vec<String> {
    let mut failures = Vec::new();
    // Machines that lost power come back first: every other heal needs them answering.
    let mut ordered: Vec<&Arc<dyn Nemesis>> = nemeses.iter().collect();
    let machine = |n: &&Arc<dyn Nemesis>| {
        let kind = crate::nemesis::kind(n.kind());
        kind.and_then(|k| k.heal_stage()) == Some(crate::nemesis::HealStage::Machine)
    };
    ordered.sort_by_key(|n| !machine(n));
    for nemesis in ordered {
        let mut last = String::new();
        for attempt in 1..=HEAL_ATTEMPTS {
            match call(recorders, nemesis.as_ref(), Action::Stop).await {
                Ok(Ok(())) => {
                    last.clear();
                    break;
                }
                Ok(Err(e)) => last = e,
                Err(e) => {
                    // The history cannot be written; heal without recording.
                    last = match nemesis.stop().await {
                        Ok(_) => format!("stop-{}: healed but not recorded: {e}", nemesis.kind()),
                        Err(stop_err) => format!("stop-{}: {stop_err:#}", nemesis.kind()),
                    };
                    break;
                }
            }
            if attempt < HEAL_ATTEMPTS {
                tokio::time::sleep(HEAL_RETRY_DELAY).await;
            }
        }
        if !last.is_empty() {
            tracing::error!("could not heal: {last}");
            failures.push(last);
        }
    }
    failures
}

impl Drop for HealGuard {
    fn drop(&mut self) {
        if !self.armed || self.nemeses.is_empty() {
            return;
        }
        let nemeses = std::mem::take(&mut self.nemeses);
        let recorders = std::mem::take(&mut self.recorders);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                tracing::warn!("run ended abruptly: healing every nemesis");
                runtime.spawn(async move { heal_all(&nemeses, &recorders).await });
            }
            Err(_) => tracing::error!(
                "run ended outside a runtime: faults may be left; run `stampede heal`"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use serde_json::json;

    use super::*;

    /// A nemesis whose `stop` fails its first `failing_stops` calls.
    struct FlakyHeal {
        failing_stops: u32,
        stops: AtomicU32,
    }

    #[async_trait::async_trait]
    impl Nemesis for FlakyHeal {
        fn kind(&self) -> &str {
            "pause"
        }
        async fn start(&self) -> anyhow::Result<Value> {
            Ok(json!("paused"))
        }
        async fn stop(&self) -> anyhow::Result<Value> {
            let n = self.stops.fetch_add(1, Ordering::SeqCst) + 1;
            anyhow::ensure!(n > self.failing_stops, "ssh: connection refused");
            Ok(json!({ "resumed": ["n1"] }))
        }
    }

    fn flaky(failing_stops: u32) -> Arc<FlakyHeal> {
        Arc::new(FlakyHeal {
            failing_stops,
            stops: AtomicU32::new(0),
        })
    }

    /// A nemesis whose start takes 400 ms.
    #[derive(Default)]
    struct SlowStart {
        starts: AtomicU32,
    }

    #[async_trait::async_trait]
    impl Nemesis for SlowStart {
        fn kind(&self) -> &str {
            "sequence"
        }
        async fn start(&self) -> anyhow::Result<Value> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok(json!("started"))
        }
        async fn stop(&self) -> anyhow::Result<Value> {
            Ok(json!("healed"))
        }
    }

    #[tokio::test]
    async fn no_fault_starts_that_would_still_be_starting_at_the_time_limit() {
        // 100 ms, a start until about 500 ms, 100 ms, its stop, 100 ms: a second start begun
        // at about 700 ms would run to 1100 ms, past the 1 s limit, and delay the heal.
        let ms = |n| crate::config::Duration(Duration::from_millis(n));
        let cfg = GeneratorConfig {
            time_limit: ms(1000),
            nemesis_interval: ms(100),
            nemesis_duration: ms(100),
            ..GeneratorConfig::default()
        };
        let slow = Arc::new(SlowStart::default());
        let nemeses: Vec<Arc<dyn Nemesis>> = vec![slow.clone()];
        let recorder = Arc::new(Recorder::in_memory());
        let (_keep, cancel) = watch::channel(false);
        let begun = Instant::now();
        let never = std::future::pending::<()>();
        schedule_for(
            &nemeses,
            std::slice::from_ref(&recorder),
            &cfg,
            cancel,
            never,
        )
        .await
        .unwrap();
        assert_eq!(slow.starts.load(Ordering::SeqCst), 1);
        let ended = begun.elapsed();
        assert!(ended >= Duration::from_millis(1000), "ended at {ended:?}");
        let fs: Vec<String> = recorder.ops().iter().map(|o| o.f.clone()).collect();
        assert_eq!(
            fs,
            [
                "start-sequence",
                "start-sequence",
                "stop-sequence",
                "stop-sequence"
            ]
        );
    }

    #[tokio::test]
    async fn healing_retries_and_reports_what_stays_broken() {
        let recorder = Arc::new(Recorder::in_memory());
        let (recovers, broken) = (flaky(1), flaky(u32::MAX));
        let nemeses: Vec<Arc<dyn Nemesis>> = vec![recovers.clone(), broken.clone()];
        let failures = HealGuard::new(nemeses, vec![recorder.clone()]).heal().await;
        assert_eq!(failures, ["stop-pause: ssh: connection refused"]);
        assert_eq!(recovers.stops.load(Ordering::SeqCst), 2);
        assert_eq!(broken.stops.load(Ordering::SeqCst), HEAL_ATTEMPTS);
        let ops = recorder.ops();
        assert_eq!(
            ops.len() as u32,
            2 * (2 + HEAL_ATTEMPTS),
            "each stop is an invoke and an info"
        );
        assert!(ops
            .iter()
            .all(|o| o.process == Process::NEMESIS && o.f == "stop-pause"));
        assert_eq!(ops[1].error.as_deref(), Some("ssh: connection refused"));
        assert_eq!(
            (ops[3].kind, &ops[3].value),
            (OpType::Info, &json!({ "resumed": ["n1"] }))
        );
        assert!(ops[3].error.is_none());
    }
}
