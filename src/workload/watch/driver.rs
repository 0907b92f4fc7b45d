//! Runs a watch workload: writer slots change their keys until the time limit; watcher slots
//! keep their watches armed until the quiet period after it has passed too, then close their
//! sessions, saying whether they were connected. One ZooKeeper session per process; a
//! process whose request ended `info` or whose session expired is replaced.
//!
//! History (keys relative to the workload's root, the root itself `""`):
//! - `write` `k<i>` (value: the data) ok with `zxid` its mzxid; `create` / `delete` `k<i>/c`
//!   ok with `zxid` the child's czxid / the parent's pzxid read right after the delete (exact:
//!   only the key's writer slot changes its children); `fail` when refused.
//! - `watch` (value `{id, class}`) ok with `{id, class, exists}` and `zxid` the state the
//!   watch was set on (data and exist: the mzxid read; child: the pzxid; persistent and
//!   recursive: none, each followed by `read`s of the znodes it covers).
//! - `read` (value `{of: data|children}`) ok with `zxid` the mzxid or pzxid read.
//! - `event` ok with `{id, type}` and `zxid` the event's own zxid when the server sends one
//!   (ZooKeeper 3.9+, keeperd); `session` ok with the session's new state; `unwatch` ok with
//!   `{id}` when a persistent watch is given up at a disconnection (events in the gap may be
//!   lost: ZOOKEEPER-4698); `close` ok with `{connected}` when the process ends its session.
//!
//! Events received before a read's answer are recorded before that answer: the client hands
//! them over in the order the server sent them.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::stream::{self, BoxStream, SelectAll};
use futures::{FutureExt, StreamExt};
use rand::Rng;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zookeeper_client::{AddWatchMode, Client, EventType, SessionState, WatchedEvent};

use super::check::{Class, CHILD, ROOT};
use super::WatchConfig;
use crate::client::{Connect, Session};
use crate::client::{classify, setup_session, ClientOptions, NodeEndpoint, OpError, ProcessIds};
use crate::generator::{self, GeneratorConfig, Healed, Next, Slot, Target};
use crate::history::{Meta, OpType, Process, Recorder};
use crate::workload::{HerdMeter, HerdStats, Requests};

/// What a watch run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchRunSummary {
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// Writer slots.
    pub writers: usize,
    /// Watcher slots.
    pub watchers: usize,
    /// Watch notifications delivered and the requests watchers sent in reaction, per write
    /// (client side; a write is this workload's release).
    pub herd: HerdStats,
    /// The caller stopped the run before the time limit.
    pub cancelled: bool,
}

struct Shared {
    cfg: WatchConfig,
    root: String,
    options: ClientOptions,
    endpoints: Vec<NodeEndpoint>,
    recorder: Arc<Recorder>,
    ids: ProcessIds,
    meter: HerdMeter,
    next_id: AtomicU64,
}

/// `stampede test` for the watch workload: creates the keys, runs the writers for
/// `gen.time_limit` and the watchers for the quiet period after it too, while the nemesis
/// schedule starts and stops the target's nemeses; no fault is left active on return.
pub async fn run(
    gen: &GeneratorConfig,
    cfg: &WatchConfig,
    options: ClientOptions,
    target: Target,
) -> anyhow::Result<Healed<WatchRunSummary>> {
    gen.validate().map_err(anyhow::Error::msg)?;
    cfg.validate(gen.concurrency).map_err(anyhow::Error::msg)?;
    let servers = target.endpoints.len();
    let fewest = fewest_watchers_per_server(gen.concurrency, cfg.writers, servers);
    if options.connect == Connect::Node && fewest < 2 {
        tracing::warn!(
            "watch: {} watchers on {servers} servers leave a server with {fewest}: an event \
             sent to only one of a server's watchers cannot be seen (raise \
             generator.concurrency to {})",
            gen.concurrency - cfg.writers,
            cfg.writers + 2 * servers
        );
    }
    let root = crate::workload::run_path(&target.run_id, "watch")?;
    let client = setup_session(&target.endpoints, options.session_timeout).await?;
    for i in 0..cfg.keys {
        let path = format!("{root}/k{i}");
        crate::workload::paced::create(&client, &path, b"0").await?;
    }
    drop(client);
    let shared = Arc::new(Shared {
        cfg: *cfg,
        root,
        options,
        endpoints: target.endpoints,
        recorder: target.recorder.clone(),
        ids: ProcessIds::default(),
        meter: HerdMeter::default(),
        next_id: AtomicU64::new(0),
    });
    let (time_limit, quiet) = (gen.time_limit.0, gen.quiet_period.0);
    let slots = gen.concurrency;
    let work = |stop: watch::Receiver<bool>, _run_for| {
        let shared = shared.clone();
        async move {
            let start = Instant::now();
            let mut tasks = JoinSet::new();
            for slot in 0..slots {
                let (shared, stop) = (shared.clone(), stop.clone());
                let writer = slot < shared.cfg.writers;
                let deadline = match writer {
                    true => start + time_limit,
                    false => start + time_limit + quiet.max(Duration::from_secs(1)),
                };
                tasks.spawn(async move { run_slot(&shared, slot, writer, deadline, stop).await });
            }
            while let Some(joined) = tasks.join_next().await {
                let done = joined.context("a watch process panicked")?;
                done.context("recording a watch operation")?;
            }
            anyhow::Ok(())
        }
    };
    let cancel = target.cancel;
    let healed =
        generator::with_faults(gen, target.faults, target.recorder, cancel.clone(), work).await?;
    let summary = WatchRunSummary {
        processes: shared.ids.count(),
        writers: cfg.writers,
        watchers: gen.concurrency - cfg.writers,
        herd: shared.meter.stats(),
        cancelled: *cancel.borrow(),
    };
    Ok(Healed {
        summary,
        heal_failures: healed.heal_failures,
    })
}

/// The fewest watcher slots any one of `servers` holds, with `slots` slots of which the first
/// `writers` write, and slot `i` bound to server `i % servers`.
fn fewest_watchers_per_server(slots: usize, writers: usize, servers: usize) -> usize {
    (0..servers)
        .map(|server| {
            (writers..slots)
                .filter(|slot| slot % servers == server)
                .count()
        })
        .min()
        .unwrap_or(0)
}

async fn run_slot(
    shared: &Shared,
    slot: usize,
    writer: bool,
    deadline: Instant,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let s = Slot {
        ids: &shared.ids,
        endpoints: &shared.endpoints,
        options: &shared.options,
        slot,
        pause: Duration::ZERO,
    };
    let persistent = (slot - shared.cfg.writers.min(slot)) % 2 == 1;
    s.run(deadline, stop, &mut &*shared, |session, stop, shared| {
        let shared: &Shared = shared;
        let p = Proc::new(shared, session);
        match writer {
            true => Box::pin(write_round(shared, p, slot, deadline, stop.clone())),
            false => Box::pin(watch_round(shared, p, persistent, deadline, stop.clone())),
        }
    })
    .await
}

/// One process: its session and how it records.
struct Proc<'a> {
    shared: &'a Shared,
    session: &'a Session,
}

impl<'a> Proc<'a> {
    fn new(shared: &'a Shared, session: &'a Session) -> Proc<'a> {
        Proc { shared, session }
    }

    fn client(&self) -> &Client {
        &self.session.client
    }

    fn path(&self, key: &str) -> String {
        match key {
            ROOT => self.shared.root.clone(),
            k => format!("{}/{k}", self.shared.root),
        }
    }

    /// The key of an absolute `path` under the root.
    fn key(&self, path: &str) -> String {
        let rest = path.strip_prefix(&self.shared.root).unwrap_or(path);
        rest.trim_start_matches('/').to_string()
    }

    fn record(
        &self,
        kind: OpType,
        f: &str,
        key: &str,
        value: Value,
        zxid: Option<i64>,
        error: Option<String>,
    ) -> io::Result<()> {
        let meta = Meta {
            key: Some(key.to_string()),
            node: self.session.node.clone(),
            zxid,
            error,
            ..Meta::default()
        };
        let process = Process::Client(self.session.process);
        self.shared.recorder.record(kind, process, f, value, meta)?;
        Ok(())
    }

    /// Records the end of an operation that failed with `e`; `true` when it ended `info`.
    fn failed(&self, f: &str, key: &str, value: Value, e: &OpError) -> io::Result<bool> {
        let kind = classify(e);
        self.record(kind, f, key, value, None, Some(e.to_string()))?;
        Ok(kind == OpType::Info)
    }

    fn requests(&self) -> Requests<'_> {
        Requests::new(self.shared.options.op_timeout, &self.shared.meter)
    }
}

/// A writer's life: changes its keys until `deadline`; retired after an `info`.
async fn write_round(
    shared: &Shared,
    p: Proc<'_>,
    slot: usize,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) -> io::Result<Next> {
    let owned: Vec<usize> = (0..shared.cfg.keys)
        .filter(|i| i % shared.cfg.writers == slot)
        .collect();
    let mut n = 0u64;
    while Instant::now() < deadline && !*stop.borrow() {
        let (key, data_change) = {
            let mut rng = rand::thread_rng();
            (owned[rng.gen_range(0..owned.len())], rng.gen_bool(0.5))
        };
        shared.meter.released();
        n += 1;
        let info = match data_change {
            true => write(&p, key, n).await?,
            false => toggle_child(&p, key).await?,
        };
        if info {
            return Ok(Next::Retire);
        }
        tokio::select! {
            _ = generator::ended(&mut stop, deadline) => break,
            _ = tokio::time::sleep(shared.cfg.write_pause.0) => {}
        }
    }
    Ok(Next::End)
}

/// One `write` of key `i`; `true` when it ended `info`.
async fn write(p: &Proc<'_>, i: usize, n: u64) -> io::Result<bool> {
    let key = format!("k{i}");
    let data = format!("{}-{n}", p.session.process);
    p.record(OpType::Invoke, "write", &key, json!(data), None, None)?;
    let path = p.path(&key);
    match p
        .requests()
        .send(p.client().set_data(&path, data.as_bytes(), None))
        .await
    {
        Ok(stat) => p
            .record(
                OpType::Ok,
                "write",
                &key,
                json!(data),
                Some(stat.mzxid),
                None,
            )
            .map(|_| false),
        Err(e) => p.failed("write", &key, json!(data), &e),
    }
}

/// Creates key `i`'s child, or deletes it when it exists; `true` when it ended `info`.
async fn toggle_child(p: &Proc<'_>, i: usize) -> io::Result<bool> {
    let key = format!("k{i}/{CHILD}");
    let path = p.path(&key);
    let exists = match p.requests().send(p.client().check_stat(&path)).await {
        Ok(stat) => stat.is_some(),
        Err(_) => return Ok(true),
    };
    if !exists {
        p.record(OpType::Invoke, "create", &key, Value::Null, None, None)?;
        let options = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        return match p
            .requests()
            .send(p.client().create(&path, b"", &options))
            .await
        {
            Ok((stat, _)) => p
                .record(
                    OpType::Ok,
                    "create",
                    &key,
                    Value::Null,
                    Some(stat.czxid),
                    None,
                )
                .map(|_| false),
            Err(e) => p.failed("create", &key, Value::Null, &e),
        };
    }
    p.record(OpType::Invoke, "delete", &key, Value::Null, None, None)?;
    if let Err(e) = p.requests().send(p.client().delete(&path, None)).await {
        return p.failed("delete", &key, Value::Null, &e);
    }
    let parent = p.path(&format!("k{i}"));
    let pzxid = p
        .requests()
        .send(p.client().get_children(&parent))
        .await
        .ok();
    p.record(
        OpType::Ok,
        "delete",
        &key,
        Value::Null,
        pzxid.map(|(_, s)| s.pzxid),
        None,
    )?;
    Ok(false)
}

/// An event of watch `id`.
type Received = (u64, WatchedEvent);

/// A watcher's armed watches, as one stream of their events.
#[derive(Default)]
struct Armed {
    events: SelectAll<BoxStream<'static, Received>>,
    /// The persistent watches' ids (given up at a disconnection).
    persistent: Vec<u64>,
    /// The one-shot watches' (id, class, key).
    oneshot: Vec<(u64, Class, String)>,
}

enum Step {
    Go,
    Retire,
}

/// Gives up every persistent watch at a disconnection (ZooKeeper may lose their events across
/// a reconnection, ZOOKEEPER-4698), recording an `unwatch` for each.
fn give_up_persistent(p: &Proc<'_>, armed: &mut Armed) -> io::Result<()> {
    for id in std::mem::take(&mut armed.persistent) {
        p.record(OpType::Invoke, "unwatch", ROOT, json!({"id": id}), None, None)?;
        p.record(OpType::Ok, "unwatch", ROOT, json!({"id": id}), None, None)?;
    }
    armed.events = SelectAll::new();
    Ok(())
}

/// A watcher's life: arms its watches, re-arms each one-shot watch after its event, reads now
/// and then, until `deadline`; then closes its session, recording whether it was connected.
async fn watch_round(
    shared: &Shared,
    p: Proc<'_>,
    persistent: bool,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) -> io::Result<Next> {
    let mut armed = Armed::default();
    let mut state = p.client().state_watcher();
    let keys: Vec<String> = (0..shared.cfg.keys).map(|i| format!("k{i}")).collect();
    let arming = match persistent {
        true => arm_persistent(&p, &keys, &mut armed).await?,
        false => arm_oneshots(&p, &keys, &mut armed).await?,
    };
    if let Step::Retire = arming {
        return close(&p, Next::Retire).await;
    }
    let mut tick = tokio::time::interval(shared.cfg.read_every.0);
    let mut given_up = false;
    loop {
        tokio::select! {
            // Session changes first: a persistent watch is given up before any event that
            // came after a reconnection is taken as its own.
            biased;
            changed = state.changed() => {
                let name = format!("{changed:?}");
                p.record(OpType::Invoke, "session", "", Value::Null, None, None)?;
                p.record(OpType::Ok, "session", "", json!(name), None, None)?;
                match changed {
                    SessionState::Disconnected if persistent => {
                        give_up_persistent(&p, &mut armed)?;
                        given_up = true;
                    }
                    // The watcher only sees the latest state: a `Disconnected` followed at
                    // once by `SyncConnected` shows as the `SyncConnected` alone. The loop
                    // starts connected, so any `SyncConnected` is a reconnection.
                    SessionState::SyncConnected if persistent => {
                        if !std::mem::take(&mut given_up) {
                            give_up_persistent(&p, &mut armed)?;
                        }
                        if let Step::Retire = arm_persistent(&p, &keys, &mut armed).await? {
                            return close(&p, Next::Retire).await;
                        }
                    }
                    s if s.is_terminated() => return close(&p, Next::Retire).await,
                    _ => {}
                }
            }
            Some((id, event)) = armed.events.next() => {
                if event.event_type == EventType::Session {
                    continue;
                }
                record_event(&p, id, &event)?;
                let rearm = armed.oneshot.iter().position(|(w, _, _)| *w == id);
                if let Some(at) = rearm {
                    let (_, class, key) = armed.oneshot.remove(at);
                    if let Step::Retire = arm_oneshot(&p, class, &key, &mut armed, true).await? {
                        return close(&p, Next::Retire).await;
                    }
                }
            }
            _ = generator::ended(&mut stop, deadline) => return close(&p, Next::End).await,
            _ = tick.tick() => {
                let key = keys[rand::thread_rng().gen_range(0..keys.len())].clone();
                let of = if rand::thread_rng().gen_bool(0.5) { "data" } else { "children" };
                if let Step::Retire = read(&p, &key, of, &mut armed, false).await? {
                    return close(&p, Next::Retire).await;
                }
            }
        }
    }
}

fn record_event(p: &Proc<'_>, id: u64, event: &WatchedEvent) -> io::Result<()> {
    p.shared.meter.notified();
    let key = p.key(&event.path);
    let zxid = (event.zxid >= 0).then_some(event.zxid);
    let value = json!({"id": id, "type": format!("{:?}", event.event_type)});
    p.record(OpType::Invoke, "event", &key, Value::Null, None, None)?;
    p.record(OpType::Ok, "event", &key, value, zxid, None)
}

/// Records every event already received (before an answer that came after them).
fn drain(p: &Proc<'_>, armed: &mut Armed) -> io::Result<Vec<u64>> {
    let mut fired = Vec::new();
    while let Some(Some((id, event))) = armed.events.next().now_or_never() {
        if event.event_type != EventType::Session {
            record_event(p, id, &event)?;
            fired.push(id);
        }
    }
    Ok(fired)
}

/// Records the events already received, re-arming the one-shot watches among them later:
/// they go back to the list to be re-armed by the caller's loop.
fn drain_and_requeue(p: &Proc<'_>, armed: &mut Armed) -> io::Result<Vec<(Class, String)>> {
    let fired = drain(p, armed)?;
    let mut again = Vec::new();
    for id in fired {
        if let Some(at) = armed.oneshot.iter().position(|(w, _, _)| *w == id) {
            let (_, class, key) = armed.oneshot.remove(at);
            again.push((class, key));
        }
    }
    Ok(again)
}

/// A read of `key`'s data or children, without a watch.
async fn read(
    p: &Proc<'_>,
    key: &str,
    of: &str,
    armed: &mut Armed,
    reacting: bool,
) -> io::Result<Step> {
    let value = json!({"of": of});
    p.record(OpType::Invoke, "read", key, value.clone(), None, None)?;
    let path = p.path(key);
    let mut requests = p.requests();
    let answer = match of {
        "data" => requests
            .send(p.client().get_data(&path))
            .await
            .map(|(_, s)| s.mzxid),
        _ => requests
            .send(p.client().get_children(&path))
            .await
            .map(|(_, s)| s.pzxid),
    };
    if reacting {
        p.shared.meter.reacted();
    }
    let again = drain_and_requeue(p, armed)?;
    match answer {
        Ok(zxid) => p.record(OpType::Ok, "read", key, value, Some(zxid), None)?,
        Err(e) => {
            if p.failed("read", key, value, &e)? {
                return Ok(Step::Retire);
            }
        }
    }
    rearm_all(p, again, armed).await
}

async fn rearm_all(
    p: &Proc<'_>,
    again: Vec<(Class, String)>,
    armed: &mut Armed,
) -> io::Result<Step> {
    for (class, key) in again {
        if let Step::Retire = Box::pin(arm_oneshot(p, class, &key, armed, true)).await? {
            return Ok(Step::Retire);
        }
    }
    Ok(Step::Go)
}

async fn arm_oneshots(p: &Proc<'_>, keys: &[String], armed: &mut Armed) -> io::Result<Step> {
    for key in keys {
        for (class, key) in [
            (Class::Data, key.clone()),
            (Class::Child, key.clone()),
            (Class::Exist, format!("{key}/{CHILD}")),
        ] {
            if let Step::Retire = arm_oneshot(p, class, &key, armed, false).await? {
                return Ok(Step::Retire);
            }
        }
    }
    Ok(Step::Go)
}

fn next_id(p: &Proc<'_>) -> u64 {
    p.shared.next_id.fetch_add(1, Ordering::Relaxed)
}

/// Sets one one-shot watch of `class` on `key`.
async fn arm_oneshot(
    p: &Proc<'_>,
    class: Class,
    key: &str,
    armed: &mut Armed,
    reacting: bool,
) -> io::Result<Step> {
    let id = next_id(p);
    let value = json!({"id": id, "class": class.name()});
    p.record(OpType::Invoke, "watch", key, value.clone(), None, None)?;
    let path = p.path(key);
    let mut requests = p.requests();
    let client = p.client();
    let set = match class {
        Class::Data => requests
            .send(client.get_and_watch_data(&path))
            .await
            .map(|(_, s, w)| (Some(s.mzxid), w)),
        Class::Child => requests
            .send(client.get_and_watch_children(&path))
            .await
            .map(|(_, s, w)| (Some(s.pzxid), w)),
        _ => requests
            .send(client.check_and_watch_stat(&path))
            .await
            .map(|(s, w)| (s.map(|s| s.mzxid), w)),
    };
    if reacting {
        p.shared.meter.reacted();
    }
    let again = drain_and_requeue(p, armed)?;
    match set {
        Ok((zxid, watcher)) => {
            let done = json!({"id": id, "class": class.name(), "exists": zxid.is_some()});
            p.record(OpType::Ok, "watch", key, done, zxid, None)?;
            armed.oneshot.push((id, class, key.to_string()));
            armed
                .events
                .push(stream::once(watcher.changed().map(move |e| (id, e))).boxed());
        }
        Err(e) => {
            if p.failed("watch", key, value, &e)? {
                return Ok(Step::Retire);
            }
        }
    }
    rearm_all(p, again, armed).await
}

/// Sets a persistent watch on every key and a persistent-recursive one on the root, then reads
/// the data and children of every key (the state each watch's events start after).
async fn arm_persistent(p: &Proc<'_>, keys: &[String], armed: &mut Armed) -> io::Result<Step> {
    let mut watches: Vec<(Class, String)> = keys
        .iter()
        .map(|k| (Class::Persistent, k.clone()))
        .collect();
    watches.push((Class::Recursive, ROOT.to_string()));
    for (class, key) in watches {
        let id = next_id(p);
        let value = json!({"id": id, "class": class.name()});
        p.record(OpType::Invoke, "watch", &key, value.clone(), None, None)?;
        let mode = match class {
            Class::Recursive => AddWatchMode::PersistentRecursive,
            _ => AddWatchMode::Persistent,
        };
        let path = p.path(&key);
        match p.requests().send(p.client().watch(&path, mode)).await {
            Ok(watcher) => {
                drain(p, armed)?;
                let done = json!({"id": id, "class": class.name(), "exists": true});
                p.record(OpType::Ok, "watch", &key, done, None, None)?;
                armed.persistent.push(id);
                let events = stream::unfold(Some(watcher), move |w| async move {
                    let mut w = w?;
                    let e = w.changed().await;
                    let last =
                        e.event_type == EventType::Session && e.session_state.is_terminated();
                    Some(((id, e), (!last).then_some(w)))
                });
                armed.events.push(events.boxed());
            }
            Err(e) => {
                if p.failed("watch", &key, value, &e)? {
                    return Ok(Step::Retire);
                }
                return Ok(Step::Go);
            }
        }
    }
    for key in keys {
        for of in ["data", "children"] {
            if let Step::Retire = read(p, key, of, armed, false).await? {
                return Ok(Step::Retire);
            }
        }
    }
    Ok(Step::Go)
}

/// Ends the process: records whether its session was connected, and closes it.
async fn close(p: &Proc<'_>, next: Next) -> io::Result<Next> {
    let connected = p.client().state() == SessionState::SyncConnected;
    p.record(OpType::Invoke, "close", ROOT, Value::Null, None, None)?;
    p.record(
        OpType::Ok,
        "close",
        ROOT,
        json!({"connected": connected}),
        None,
        None,
    )?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::fewest_watchers_per_server;

    #[test]
    fn the_default_placement_puts_two_watchers_on_every_server_of_five() {
        // 12 slots, 2 writers: watchers 2..12 on servers 2,3,4,0,1,2,3,4,0,1.
        assert_eq!(fewest_watchers_per_server(12, 2, 5), 2);
        assert_eq!(fewest_watchers_per_server(12, 2, 3), 3);
        // The old default: 4 watchers on 5 servers, one server has none.
        assert_eq!(fewest_watchers_per_server(6, 2, 5), 0);
        assert_eq!(fewest_watchers_per_server(6, 2, 3), 1);
    }
}
