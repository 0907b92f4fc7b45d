//! Runs the ephemeral workload: each process slot opens sessions one after another, each
//! bound to one server (the slots and their sessions spread over the servers); a session
//! creates its ephemerals (every second one ephemeral-sequential), holds them, and ends:
//! closed by its client, or, every `cut_every`-th session, cut off behind a loopback proxy
//! ([`CutProxy`]) so that it expires while the servers stay healthy (the proxy lets it
//! through again after the session timeout and the slack, so the client hears that it
//! expired, or reconnects when it did not); every second cut lasts half the session timeout
//! instead, which the session must outlive. Meanwhile every server's view is polled
//! ([`super::poll`]); after the run, once every fault is healed and every session's deadline
//! has passed, every server is polled once more.
//!
//! History conventions (sessions named `0x…`, [`session_name`]):
//! - `open` invoked `{"via": "node"|"proxy"}`, `ok` `{"session", "timeout_ms"}` (the
//!   session timeout its server negotiated); `fail`/`info` with the error.
//! - `create` invoked `{"session", "path", "mode"}` (`ephemeral`, `ephemeral-sequential`),
//!   `ok` `{"session", "path"}` with the path created and its czxid as `zxid`.
//! - `close` invoked `{"session"}`, `ok` when the client saw the session closed, `info`
//!   otherwise; `cut` invoked and `ok` `{"session", "for_ms"}` around the proxy dropping its
//!   traffic (for that long).
//! - `session` (each session's watcher, a process of its own) invoked and `ok`
//!   `{"session", "state"}` for each state the client reports: `connected`, `disconnected`,
//!   `read-only`, `expired`, `closed`, `auth-failed`.
//! - `poll` by each server's poller, keyed by the server, invoked null or `"final"`, `ok`
//!   `{"nodes": {path: owner}, "pzxid"}` (the directory's pzxid as that server had it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, SessionState, StateWatcher};

use super::poll::{session_name, Poller};
use super::EphemeralConfig;
use crate::client::cut_proxy::CutProxy;
use crate::client::{classify, setup_session, ClientOptions, NodeEndpoint, OpError, ProcessIds};
use crate::generator::{ended, DriverRun};
use crate::history::{fault_intervals, Meta, OpType, Process, Recorder};
use crate::workload::paced;

/// What an ephemeral run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EphemeralRunSummary {
    /// Process ids handed out (sessions, their watchers, pollers).
    pub processes: u64,
    /// Sessions opened.
    pub sessions: u64,
    /// Sessions closed by their client.
    pub closed: u64,
    /// Sessions cut off.
    pub cut: u64,
    /// Ephemerals created.
    pub created: u64,
    /// Servers that answered no final poll within the settle bound.
    pub unread: Vec<String>,
    /// The caller stopped the run early (no final polls then).
    pub cancelled: bool,
}

/// What the slots share.
struct Slots {
    cfg: EphemeralConfig,
    options: ClientOptions,
    endpoints: Vec<NodeEndpoint>,
    dir: String,
    recorder: Arc<Recorder>,
    ids: Arc<ProcessIds>,
    /// Sessions begun, over all slots (every `cut_every`-th is cut).
    begun: AtomicU64,
    /// When the last session ended.
    last_end: Mutex<Instant>,
}

/// How one session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Close,
    /// Cut off until it expires, or (`short`) for half its timeout, which it must outlive.
    Cut { short: bool },
}

/// What the sessions of one slot did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sessions: u64,
    closed: u64,
    cut: u64,
    created: u64,
}

impl Tally {
    fn plus(self, o: Tally) -> Tally {
        Tally {
            sessions: self.sessions + o.sessions,
            closed: self.closed + o.closed,
            cut: self.cut + o.cut,
            created: self.created + o.created,
        }
    }
}

/// How long the final polls wait at most for every fault to be healed.
const HEAL_WAIT: Duration = Duration::from_secs(120);

/// When the last fault recorded was healed, once no fault is in effect (or after
/// [`HEAL_WAIT`], or when `cancel` turns true): a fault that may have acted after a session
/// ended moves its deadline past the fault's heal (see [`super::check`]), so the final polls
/// wait for the heal too.
async fn last_heal(recorder: &Recorder, cancel: &watch::Receiver<bool>) -> Instant {
    let give_up = Instant::now() + HEAL_WAIT;
    loop {
        let faults = fault_intervals(&recorder.ops());
        if faults.iter().all(|f| f.healed) || Instant::now() >= give_up || *cancel.borrow() {
            let end = faults.iter().map(|f| f.end).max().unwrap_or(0);
            return recorder.instant_of(end);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs the ephemeral workload as the module's doc says, for `run.time_limit`, then polls
/// every server after the settle unless `cancel` turned true.
pub async fn run(
    run: DriverRun<EphemeralConfig>,
    recorder: Arc<Recorder>,
    cancel: watch::Receiver<bool>,
) -> anyhow::Result<EphemeralRunSummary> {
    anyhow::ensure!(!run.endpoints.is_empty(), "no ZooKeeper node to connect to");
    let dir = crate::workload::run_path(&run.run_id, "ephemeral")?;
    let setup = setup_session(&run.endpoints, run.options.session_timeout).await?;
    paced::create(&setup, &dir, b"").await?;
    drop(setup);

    let ids = Arc::new(ProcessIds::default());
    let (stop_polls, polls_stopped) = watch::channel(false);
    let mut polling = JoinSet::new();
    for endpoint in &run.endpoints {
        let op_timeout = run.options.op_timeout;
        let poller = Poller::new(
            endpoint.clone(),
            &dir,
            op_timeout,
            recorder.clone(),
            ids.clone(),
        );
        polling.spawn(poller.poll_until(run.cfg.poll.0, polls_stopped.clone()));
    }
    let slots = Arc::new(Slots {
        cfg: run.cfg,
        options: run.options,
        endpoints: run.endpoints.clone(),
        dir,
        recorder,
        ids: ids.clone(),
        begun: AtomicU64::new(0),
        last_end: Mutex::new(Instant::now()),
    });
    let end = Instant::now() + run.time_limit;
    let sessions = async {
        let mut tasks = JoinSet::new();
        for slot in 0..run.slots {
            let (slots, cancel) = (slots.clone(), cancel.clone());
            tasks.spawn(async move { slots.run_slot(slot, end, cancel).await });
        }
        let mut tally = Tally::default();
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            match joined.map_err(anyhow::Error::from).and_then(|r| Ok(r?)) {
                Ok(t) => tally = tally.plus(t),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let _ = stop_polls.send(true);
        first_error.map_or(Ok(tally), Err)
    };
    let tally = sessions.await;
    let mut pollers = Vec::new();
    while let Some(poller) = polling.join_next().await {
        pollers.push(poller??);
    }
    let tally = tally?;

    let cancelled = *cancel.borrow();
    let mut unread = Vec::new();
    if !cancelled {
        let last_end = *slots.last_end.lock().unwrap_or_else(|p| p.into_inner());
        let mut stop = cancel.clone();
        let healed = last_heal(&slots.recorder, &stop).await;
        let settled = last_end.max(healed) + run.options.session_timeout + slots.cfg.slack.0;
        ended(&mut stop, settled).await;
        let mut finals = JoinSet::new();
        for poller in pollers {
            finals.spawn(poller.final_poll(slots.cfg.settle.0));
        }
        while let Some(unanswered) = finals.join_next().await {
            unread.extend(unanswered??);
        }
        unread.sort();
    }
    Ok(EphemeralRunSummary {
        processes: ids.count(),
        sessions: tally.sessions,
        closed: tally.closed,
        cut: tally.cut,
        created: tally.created,
        unread,
        cancelled,
    })
}

impl Slots {
    /// Runs sessions one after another in slot `slot` until `end` (or the cancel signal);
    /// returns once every session it opened has ended.
    async fn run_slot(
        self: Arc<Slots>,
        slot: usize,
        end: Instant,
        mut cancel: watch::Receiver<bool>,
    ) -> std::io::Result<Tally> {
        let mut tally = Tally::default();
        let mut tails = JoinSet::new();
        while Instant::now() < end && !*cancel.borrow() {
            let n = self.begun.fetch_add(1, Ordering::Relaxed);
            let cut_every = u64::from(self.cfg.cut_every);
            let ending = match cut_every > 0 && n % cut_every == cut_every - 1 {
                true => Ending::Cut {
                    short: (n / cut_every) % 2 == 1,
                },
                false => Ending::Close,
            };
            let endpoint = &self.endpoints[(slot + n as usize) % self.endpoints.len()];
            let Some(open) = self.open(endpoint, ending).await? else {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            };
            tally.sessions += 1;
            tally.created += self.create_all(&open).await?;
            let hold = async {
                tokio::time::sleep(self.cfg.hold.0).await;
            };
            tokio::select! {
                _ = hold => {}
                _ = ended(&mut cancel, end) => {}
            }
            match ending {
                Ending::Close => {
                    tally.closed += 1;
                    self.close(open).await?;
                }
                Ending::Cut { short } => {
                    tally.cut += 1;
                    let slots = self.clone();
                    tails.spawn(async move { slots.cut(open, short).await });
                }
            }
        }
        while let Some(tail) = tails.join_next().await {
            tail.map_err(std::io::Error::other)??;
        }
        Ok(tally)
    }

    fn record(
        &self,
        kind: OpType,
        process: u64,
        f: &str,
        value: Value,
        meta: Meta,
    ) -> std::io::Result<()> {
        self.recorder
            .record(kind, Process::Client(process), f, value, meta)
            .map(|_| ())
    }

    /// Opens a session to `endpoint` (through a proxy of its own when it is to be cut), with
    /// a watcher recording its states; `None` when it could not be opened.
    async fn open(&self, endpoint: &NodeEndpoint, ending: Ending) -> std::io::Result<Option<Open>> {
        let process = self.ids.next();
        let node = Some(endpoint.name.clone());
        let meta = || Meta {
            node: node.clone(),
            ..Meta::default()
        };
        let (proxy, address, via) = match ending {
            Ending::Cut { .. } => {
                let proxy = CutProxy::bind(endpoint.address()).await?;
                let address = format!("127.0.0.1:{}", proxy.port());
                (Some(proxy), address, "proxy")
            }
            Ending::Close => (None, endpoint.address(), "node"),
        };
        self.record(
            OpType::Invoke,
            process,
            "open",
            json!({ "via": via }),
            meta(),
        )?;
        let connector = Client::connector()
            .with_session_timeout(self.options.session_timeout)
            .with_fail_eagerly()
            .connect(&address);
        let opened = match tokio::time::timeout(self.options.op_timeout, connector).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(OpError::Zk(e)),
            Err(_) => Err(OpError::Deadline(self.options.op_timeout)),
        };
        let client = match opened {
            Ok(client) => client,
            Err(e) => {
                let failed = Meta {
                    error: Some(e.to_string()),
                    ..meta()
                };
                self.record(classify(&e), process, "open", Value::Null, failed)?;
                return Ok(None);
            }
        };
        let session = session_name(client.session_id().0);
        let timeout_ms = client.session_timeout().as_millis() as u64;
        let value = json!({ "session": session, "timeout_ms": timeout_ms });
        self.record(OpType::Ok, process, "open", value, meta())?;
        let (done, watching) = watch::channel(false);
        let watcher = tokio::spawn(watch_states(
            client.state_watcher(),
            self.recorder.clone(),
            self.ids.next(),
            session.clone(),
            node.clone(),
            watching,
        ));
        Ok(Some(Open {
            process,
            session,
            node,
            client,
            proxy,
            done,
            watcher,
        }))
    }

    /// Creates the session's ephemerals, stopping at the first that does not end `ok`;
    /// how many were created.
    async fn create_all(&self, open: &Open) -> std::io::Result<u64> {
        let mut created = 0;
        for k in 0..self.cfg.nodes {
            let (mode, name, suffix) = match k % 2 {
                0 => (CreateMode::Ephemeral, "ephemeral", ""),
                _ => (CreateMode::EphemeralSequential, "ephemeral-sequential", "-"),
            };
            let path = format!("{}/{}-{k}{suffix}", self.dir, open.session);
            let invoked = json!({ "session": open.session, "path": path, "mode": name });
            self.record(OpType::Invoke, open.process, "create", invoked, open.meta())?;
            let options = mode.with_acls(Acls::anyone_all());
            let creating = open.client.create(&path, b"", &options);
            let answer = tokio::time::timeout(self.options.op_timeout, creating).await;
            match answer.map_err(|_| OpError::Deadline(self.options.op_timeout)) {
                Ok(Ok((stat, sequence))) => {
                    let path = match mode {
                        CreateMode::EphemeralSequential => format!("{path}{sequence}"),
                        _ => path,
                    };
                    let value = json!({ "session": open.session, "path": path });
                    let meta = Meta {
                        zxid: Some(stat.czxid),
                        ..open.meta()
                    };
                    self.record(OpType::Ok, open.process, "create", value, meta)?;
                    created += 1;
                }
                Ok(Err(e)) => return self.failed_create(open, OpError::Zk(e), created),
                Err(e) => return self.failed_create(open, e, created),
            }
        }
        Ok(created)
    }

    fn failed_create(&self, open: &Open, e: OpError, created: u64) -> std::io::Result<u64> {
        let value = json!({ "session": open.session });
        let meta = Meta {
            error: Some(e.to_string()),
            ..open.meta()
        };
        self.record(classify(&e), open.process, "create", value, meta)?;
        Ok(created)
    }

    /// Closes the session: drops its client, which asks the server to close it, and waits
    /// for the client to see it closed.
    async fn close(&self, open: Open) -> std::io::Result<()> {
        let value = json!({ "session": open.session });
        self.record(
            OpType::Invoke,
            open.process,
            "close",
            value.clone(),
            open.meta(),
        )?;
        let states = open.client.state_watcher();
        let (process, meta) = (open.process, open.meta());
        let finish = open.finish();
        let state = tokio::time::timeout(self.options.op_timeout, terminal(states)).await;
        match state {
            Ok(SessionState::Closed) => self.record(OpType::Ok, process, "close", value, meta)?,
            other => {
                let error = match other {
                    Ok(state) => format!("the session ended {}", state_name(state)),
                    Err(_) => OpError::Deadline(self.options.op_timeout).to_string(),
                };
                let meta = Meta {
                    error: Some(error),
                    ..meta
                };
                self.record(OpType::Info, process, "close", value, meta)?;
            }
        }
        finish.await;
        self.ended();
        Ok(())
    }

    /// Cuts the session off behind its proxy for the session timeout and the slack (or, when
    /// `short`, half the timeout, which it must outlive), then lets it through: the client
    /// hears that it expired, or reconnects (then it is closed).
    async fn cut(self: Arc<Slots>, open: Open, short: bool) -> std::io::Result<()> {
        let length = match short {
            true => self.options.session_timeout / 2,
            false => self.options.session_timeout + self.cfg.slack.0,
        };
        let value = json!({ "session": open.session, "for_ms": length.as_millis() as u64 });
        self.record(
            OpType::Invoke,
            open.process,
            "cut",
            value.clone(),
            open.meta(),
        )?;
        open.set_cut(true);
        self.record(OpType::Ok, open.process, "cut", value, open.meta())?;
        self.ended();
        tokio::time::sleep(length).await;
        open.set_cut(false);
        let mut states = open.client.state_watcher();
        let heard = async {
            let mut state = states.state();
            while !(state.is_terminated() || state == SessionState::SyncConnected) {
                state = states.changed().await;
            }
            state
        };
        let heard = tokio::time::timeout(self.options.op_timeout, heard).await;
        match heard {
            Ok(SessionState::SyncConnected) => self.close(open).await,
            _ => {
                open.finish().await;
                Ok(())
            }
        }
    }

    /// Notes that a session just ended.
    fn ended(&self) {
        *self.last_end.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

/// An open session: its process, name, client, proxy and state watcher.
struct Open {
    process: u64,
    session: String,
    node: Option<String>,
    client: Client,
    proxy: Option<CutProxy>,
    done: watch::Sender<bool>,
    watcher: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Open {
    fn meta(&self) -> Meta {
        Meta {
            key: Some(self.session.clone()),
            node: self.node.clone(),
            ..Meta::default()
        }
    }

    /// Cuts (`true`) or restores (`false`) its proxy's link, when it has one.
    fn set_cut(&self, cut: bool) {
        if let Some(proxy) = &self.proxy {
            proxy.set_cut(cut);
        }
    }

    /// Drops the client now; awaited, stops the watcher (once it recorded the latest state)
    /// and drops the proxy.
    fn finish(self) -> impl std::future::Future<Output = ()> {
        let Open {
            client,
            proxy,
            done,
            watcher,
            ..
        } = self;
        drop(client);
        async move {
            let _ = done.send(true);
            let _ = watcher.await;
            drop(proxy);
        }
    }
}

/// The state a session's states end in (closed, expired, auth failed).
async fn terminal(mut states: StateWatcher) -> SessionState {
    let mut state = states.state();
    while !state.is_terminated() {
        state = states.changed().await;
    }
    state
}

/// A session state's name in the history.
fn state_name(state: SessionState) -> &'static str {
    match state {
        SessionState::Disconnected => "disconnected",
        SessionState::SyncConnected => "connected",
        SessionState::ConnectedReadOnly => "read-only",
        SessionState::Expired => "expired",
        SessionState::Closed => "closed",
        SessionState::AuthFailed => "auth-failed",
    }
}

/// Records every state session `session` reports, as `session` by `process`, until it ends
/// or `done` turns true.
async fn watch_states(
    mut states: StateWatcher,
    recorder: Arc<Recorder>,
    process: u64,
    session: String,
    node: Option<String>,
    mut done: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut last = states.state();
    loop {
        let state = tokio::select! {
            state = states.changed() => state,
            _ = done.wait_for(|d| *d) => {
                // A last change may have come with the signal.
                let state = states.state();
                if state != last {
                    record_state(&recorder, process, &session, &node, state)?;
                }
                return Ok(());
            }
        };
        record_state(&recorder, process, &session, &node, state)?;
        if state.is_terminated() {
            return Ok(());
        }
        last = state;
    }
}

/// Records that session `session` reported `state`, as `session` by `process`.
fn record_state(
    recorder: &Recorder,
    process: u64,
    session: &str,
    node: &Option<String>,
    state: SessionState,
) -> std::io::Result<()> {
    let value = json!({ "session": session, "state": state_name(state) });
    for kind in [OpType::Invoke, OpType::Ok] {
        let meta = Meta {
            key: Some(session.to_string()),
            node: node.clone(),
            ..Meta::default()
        };
        recorder.record(
            kind,
            Process::Client(process),
            "session",
            value.clone(),
            meta,
        )?;
    }
    Ok(())
}
