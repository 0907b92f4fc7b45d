//! The zookeeper-client crate (0.11.2) against real keeperd processes, across
//! every request type keeperd serves, including the crate's lock recipe:
//! each test runs against a standalone server and against a 3-server
//! ensemble through one of its followers.

mod common;

use common::{mntr_value, Deployment, Kind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zk::{Acls, AddWatchMode, Client, CreateMode, Error, EventType, LockPrefix};
use zookeeper_client as zk;

async fn connect(server: &Deployment) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(5))
        .connect(&server.addr())
        .await
        .unwrap()
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// Fails unless `watcher` is already resolved (the event arrived before whatever the caller awaited).
async fn already_fired(watcher: zk::OneshotWatcher) -> zk::WatchedEvent {
    let changed = watcher.changed();
    tokio::pin!(changed);
    tokio::select! {
        biased;
        e = &mut changed => e,
        _ = std::future::ready(()) => panic!("watch event did not arrive before the response"),
    }
}

async fn crud_stat_and_versions(kind: Kind) {
    let server = Deployment::start(kind, "crud", "");
    let c = connect(&server).await;
    let (stat, _) = c.create("/a", b"hello", &persistent()).await.unwrap();
    assert_eq!(
        (stat.czxid, stat.mzxid, stat.version, stat.data_length),
        (stat.czxid, stat.czxid, 0, 5)
    );
    let (data, got) = c.get_data("/a").await.unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(got, stat);
    assert_eq!(
        c.create("/a", b"", &persistent()).await.unwrap_err(),
        Error::NodeExists
    );
    assert_eq!(
        c.create("/x/y", b"", &persistent()).await.unwrap_err(),
        Error::NoNode
    );
    assert_eq!(
        c.set_data("/a", b"v2", Some(7)).await.unwrap_err(),
        Error::BadVersion
    );
    let s2 = c.set_data("/a", b"v2", Some(0)).await.unwrap();
    assert_eq!(s2.version, 1);
    assert!(s2.mzxid > stat.mzxid, "zxids increase");
    assert!(s2.mtime >= stat.mtime);
    c.create("/a/b", b"", &persistent()).await.unwrap();
    c.create("/a/b/c", b"", &persistent()).await.unwrap();
    let (children, pstat) = c.get_children("/a").await.unwrap();
    assert_eq!(children, vec!["b".to_string()]);
    assert_eq!(
        (pstat.num_children, pstat.cversion, pstat.version),
        (1, 1, 1)
    );
    assert_eq!(c.count_descendants_number("/a").await.unwrap(), 2);
    assert_eq!(c.delete("/a", None).await.unwrap_err(), Error::NotEmpty);
    assert_eq!(
        c.delete("/a/b/c", Some(3)).await.unwrap_err(),
        Error::BadVersion
    );
    c.delete("/a/b/c", Some(0)).await.unwrap();
    let after = c.check_stat("/a/b").await.unwrap().unwrap();
    assert!(after.pzxid > after.czxid, "pzxid moves on child delete");
    c.delete("/a/b", None).await.unwrap();
    assert_eq!(c.check_stat("/a/b").await.unwrap(), None);
    assert_eq!(c.get_data("/a/b").await.unwrap_err(), Error::NoNode);
    c.sync("/a").await.unwrap();
    let mut root = c.list_children("/").await.unwrap();
    root.sort();
    assert_eq!(root, vec!["a".to_string(), "zookeeper".to_string()]);
}

async fn reads_see_the_writes_before_them(kind: Kind) {
    let server = Deployment::start(kind, "pipelined", "");
    let c = connect(&server).await;
    let other = connect(&server).await;
    c.create("/p", b"", &persistent()).await.unwrap();
    for round in 0..20 {
        // Writes and reads sent back to back on one session (the crate sends
        // in call order): no read may be answered from before its write.
        let mut pairs = Vec::new();
        for i in 0..50 {
            let value = format!("{round}-{i}").into_bytes();
            let set = c.set_data("/p", &value, None);
            pairs.push((value, set, c.get_data("/p"), c.check_stat("/p")));
        }
        let mut last = None;
        for (value, set, get, exists) in pairs {
            let stat = set.await.unwrap();
            let (data, got) = get.await.unwrap();
            assert_eq!((data, got), (value.clone(), stat), "round {round}");
            assert_eq!(exists.await.unwrap(), Some(stat));
            last = Some(value);
        }
        // Once a write is acknowledged, another session reads it too.
        assert_eq!(Some(other.get_data("/p").await.unwrap().0), last);
    }
}

async fn create_modes_sequence_ephemeral_container_ttl(kind: Kind) {
    let server = Deployment::start(kind, "modes", "containerCheckIntervalMs=100");
    let c = connect(&server).await;
    c.create("/p", b"", &persistent()).await.unwrap();
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let (_, s0) = c.create("/p/n-", b"", &seq).await.unwrap();
    c.create("/p/plain", b"", &persistent()).await.unwrap();
    let (_, s2) = c.create("/p/n-", b"", &seq).await.unwrap();
    assert_eq!(
        (s0.to_string(), s2.to_string()),
        ("0000000000".to_string(), "0000000002".to_string())
    );
    assert!(c.check_stat("/p/n-0000000002").await.unwrap().is_some());
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let (stat, _) = c.create("/p/e", b"", &eph).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id().0);
    assert_eq!(
        c.create("/p/e/child", b"", &persistent())
            .await
            .unwrap_err(),
        Error::NoChildrenForEphemerals
    );
    let (_, es) = c
        .create(
            "/p/es-",
            b"",
            &CreateMode::EphemeralSequential.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    assert_eq!(es.to_string(), "0000000004");
    let mut eph_list = c.list_ephemerals("/").await.unwrap();
    eph_list.sort();
    assert_eq!(
        eph_list,
        vec!["/p/e".to_string(), "/p/es-0000000004".to_string()]
    );

    // A container goes once its last child is deleted.
    c.create(
        "/box",
        b"",
        &CreateMode::Container.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    c.create("/box/item", b"", &persistent()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        c.check_stat("/box").await.unwrap().is_some(),
        "container with a child stays"
    );
    c.delete("/box/item", None).await.unwrap();
    wait_gone(&c, "/box").await;

    // A TTL node goes once it has been unmodified for its TTL.
    let ttl = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_millis(300));
    let (tstat, _) = c.create("/ttl", b"", &ttl).await.unwrap();
    assert_eq!(tstat.ephemeral_owner as u64 >> 56, 0xff);
    wait_gone(&c, "/ttl").await;

    // The 1 MB data limit: just under is fine, above is refused.
    let big = vec![7u8; 1024 * 1024 - 1];
    c.create("/big", &big, &persistent()).await.unwrap();
    assert_eq!(c.get_data("/big").await.unwrap().0.len(), big.len());
    let c2 = connect(&server).await;
    assert!(c2
        .set_data("/big", &vec![0u8; 1024 * 1024 + 1], None)
        .await
        .is_err());
    assert_eq!(
        c.get_data("/big").await.unwrap().0.len(),
        big.len(),
        "oversized write not applied"
    );
}

async fn wait_gone(c: &Client, path: &str) {
    for _ in 0..50 {
        if c.check_stat(path).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} was never reaped");
}

async fn ephemerals_removed_on_close_and_expiry(kind: Kind) {
    let server = Deployment::start(kind, "ephemeral", "");
    let observer = connect(&server).await;
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

    let closing = connect(&server).await;
    closing.create("/closed", b"", &eph).await.unwrap();
    let (_, watcher) = observer.check_and_watch_stat("/closed").await.unwrap();
    drop(closing);
    let e = tokio::time::timeout(Duration::from_secs(5), watcher.changed())
        .await
        .unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDeleted, "/closed")
    );

    // A detached client leaves its session open on drop: it must expire.
    let expiring = Client::connector()
        .with_session_timeout(Duration::from_secs(1))
        .with_connection_timeout(Duration::from_secs(5))
        .with_detached()
        .connect(&server.addr())
        .await
        .unwrap();
    assert_eq!(expiring.session_timeout(), Duration::from_secs(1));
    expiring.create("/expiring", b"", &eph).await.unwrap();
    let (_, watcher) = observer.check_and_watch_stat("/expiring").await.unwrap();
    drop(expiring);
    let e = tokio::time::timeout(Duration::from_secs(5), watcher.changed())
        .await
        .unwrap();
    assert_eq!(e.event_type, EventType::NodeDeleted);
}

async fn session_timeout_is_negotiated_within_bounds(kind: Kind) {
    let server = Deployment::start(kind, "timeout", "");
    // The client gives session creation no longer than the timeout it asks for (its own
    // deadline, whatever connection timeout is set), and an ensemble commits the session
    // through the leader first, which on a loaded machine can take longer than that. What is
    // tested is the negotiated timeout, so ask for one below the minimum but not far below,
    // and let a client-side deadline that ran out try again.
    let mut low = None;
    for _ in 0..5 {
        match Client::connector()
            .with_session_timeout(Duration::from_millis(800))
            .connect(&server.addr())
            .await
        {
            Ok(client) => {
                low = Some(client);
                break;
            }
            Err(Error::Timeout) => continue,
            Err(e) => panic!("connecting with a low session timeout: {e}"),
        }
    }
    let low = low.expect("five connections asking for 800 ms all timed out");
    assert_eq!(low.session_timeout(), Duration::from_millis(1000));
    let high = Client::connector()
        .with_session_timeout(Duration::from_secs(100))
        .connect(&server.addr())
        .await
        .unwrap();
    assert_eq!(high.session_timeout(), Duration::from_secs(30));
}

async fn reconnect_resumes_session(kind: Kind) {
    let server = Deployment::start(kind, "reconnect", "");
    let first = Client::connector()
        .with_session_timeout(Duration::from_secs(5))
        .with_detached()
        .connect(&server.addr())
        .await
        .unwrap();
    first
        .create(
            "/mine",
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let session = first.session().clone();
    let id = first.session_id();
    drop(first);
    let again = Client::connector()
        .with_session(session)
        .connect(&server.addr())
        .await
        .unwrap();
    assert_eq!(again.session_id(), id);
    let (_, stat) = again.get_data("/mine").await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0);
}

async fn multi_is_all_or_nothing_and_multi_read(kind: Kind) {
    let server = Deployment::start(kind, "multi", "");
    let c = connect(&server).await;
    c.create("/m", b"0", &persistent()).await.unwrap();
    let mut w = c.new_multi_writer();
    w.add_check_version("/m", 0).unwrap();
    w.add_create("/m/a", b"a", &persistent()).unwrap();
    w.add_set_data("/m", b"1", Some(0)).unwrap();
    w.add_create("/m/tmp", b"", &persistent()).unwrap();
    w.add_delete("/m/tmp", None).unwrap();
    let results = w.commit().await.unwrap();
    assert_eq!(results.len(), 5);
    let (_, ma) = c.get_data("/m/a").await.unwrap();
    let (_, m) = c.get_data("/m").await.unwrap();
    assert_eq!(ma.czxid, m.mzxid, "one zxid for the whole multi");

    let mut w = c.new_multi_writer();
    w.add_create("/m/b", b"", &persistent()).unwrap();
    w.add_set_data("/m", b"2", Some(99)).unwrap();
    w.add_delete("/m/a", None).unwrap();
    match w.commit().await.unwrap_err() {
        zk::MultiWriteError::OperationFailed { index, source } => {
            assert_eq!((index, source), (1, Error::BadVersion))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        c.check_stat("/m/b").await.unwrap(),
        None,
        "failed multi left no trace"
    );
    assert!(c.check_stat("/m/a").await.unwrap().is_some());
    assert_eq!(c.get_data("/m").await.unwrap().0, b"1");

    let mut r = c.new_multi_reader();
    r.add_get_data("/m").unwrap();
    r.add_get_children("/m").unwrap();
    r.add_get_data("/nope").unwrap();
    let got = r.commit().await.unwrap();
    match &got[..] {
        [zk::MultiReadResult::Data { data, .. }, zk::MultiReadResult::Children { children }, zk::MultiReadResult::Error { err }] =>
        {
            assert_eq!(data, b"1");
            assert_eq!(children, &vec!["a".to_string()]);
            assert_eq!(*err, Error::NoNode);
        }
        _ => panic!("unexpected multi read results"),
    }
}

async fn one_shot_watches_fire_before_the_response(kind: Kind) {
    let server = Deployment::start(kind, "watch", "");
    let c = connect(&server).await;
    let other = connect(&server).await;
    c.create("/w", b"", &persistent()).await.unwrap();

    let (_, _, data_watch) = c.get_and_watch_data("/w").await.unwrap();
    let (_, _, child_watch) = c.get_and_watch_children("/w").await.unwrap();
    let (_, exist_watch) = c.check_and_watch_stat("/w/new").await.unwrap();
    c.set_data("/w", b"x", None).await.unwrap();
    let e = already_fired(data_watch).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/w")
    );
    c.create("/w/new", b"", &persistent()).await.unwrap();
    assert_eq!(
        already_fired(exist_watch).await.event_type,
        EventType::NodeCreated
    );
    assert_eq!(
        already_fired(child_watch).await.event_type,
        EventType::NodeChildrenChanged
    );

    // A change by another session reaches the watcher before a later read of it returns.
    let (_, _, w2) = c.get_and_watch_data("/w/new").await.unwrap();
    other.delete("/w/new", None).await.unwrap();
    assert_eq!(c.check_stat("/w/new").await.unwrap(), None);
    assert_eq!(already_fired(w2).await.event_type, EventType::NodeDeleted);
    let mntr = server.four("mntr");
    assert!(
        mntr_value(&mntr, "zk_cnt_node_changed_watch_count")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1,
        "{mntr}"
    );
    assert_eq!(
        mntr_value(&mntr, "zk_max_node_deleted_watch_count").unwrap(),
        "1"
    );
}

async fn persistent_and_recursive_watches_and_removal(kind: Kind) {
    let server = Deployment::start(kind, "persist", "");
    let c = connect(&server).await;
    let other = connect(&server).await;
    c.create("/pw", b"", &persistent()).await.unwrap();
    let mut pw = c.watch("/pw", AddWatchMode::Persistent).await.unwrap();
    let mut rw = c
        .watch("/pw", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let wchs = server.four("wchs");
    // Persistent: one data and one child registration; recursive adds a mode to the data one.
    assert!(wchs.contains("Total watches:2"), "{wchs}");
    other.set_data("/pw", b"1", None).await.unwrap();
    other.create("/pw/kid", b"", &persistent()).await.unwrap();
    other.set_data("/pw/kid", b"2", None).await.unwrap();
    let e = next(&mut pw).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/pw")
    );
    let e = next(&mut pw).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeChildrenChanged, "/pw")
    );
    let kinds: Vec<_> = [
        next(&mut rw).await,
        next(&mut rw).await,
        next(&mut rw).await,
    ]
    .into_iter()
    .map(|e| (e.event_type, e.path))
    .collect();
    assert_eq!(
        kinds,
        vec![
            (EventType::NodeDataChanged, "/pw".to_string()),
            (EventType::NodeCreated, "/pw/kid".to_string()),
            (EventType::NodeDataChanged, "/pw/kid".to_string())
        ]
    );
    drop(pw);
    drop(rw);
    for _ in 0..50 {
        if server.four("wchs").contains("Total watches:0") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("watches not removed: {}", server.four("wchs"));
}

async fn next(w: &mut zk::PersistentWatcher) -> zk::WatchedEvent {
    tokio::time::timeout(Duration::from_secs(5), w.changed())
        .await
        .unwrap()
}

async fn watches_survive_a_server_restart_via_set_watches(kind: Kind) {
    let mut server = Deployment::start(kind, "setwatches", "");
    let c = connect(&server).await;
    let (stat, _) = c.create("/sw", b"", &persistent()).await.unwrap();
    let (_, _, watcher) = c.get_and_watch_data("/sw").await.unwrap();
    server.restart();
    let other = connect(&server).await;
    other
        .set_data("/sw", b"after", Some(stat.version))
        .await
        .unwrap();
    let e = tokio::time::timeout(Duration::from_secs(10), watcher.changed())
        .await
        .expect("watch re-registered after reconnect");
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/sw")
    );
    assert_eq!(c.get_data("/sw").await.unwrap().0, b"after");
}

async fn acls_digest_auth_and_error_codes(kind: Kind) {
    let server = Deployment::start(kind, "acl", "");
    let bob = Client::connector()
        .with_auth("digest", b"bob:secret")
        .connect(&server.addr())
        .await
        .unwrap();
    let anon = connect(&server).await;
    assert_eq!(
        anon.create(
            "/c",
            b"",
            &CreateMode::Persistent.with_acls(Acls::creator_all())
        )
        .await
        .unwrap_err(),
        Error::InvalidAcl
    );
    bob.create(
        "/private",
        b"p",
        &CreateMode::Persistent.with_acls(Acls::creator_all()),
    )
    .await
    .unwrap();
    assert_eq!(anon.get_data("/private").await.unwrap_err(), Error::NoAuth);
    assert_eq!(
        anon.set_data("/private", b"x", None).await.unwrap_err(),
        Error::NoAuth
    );
    assert_eq!(
        anon.create("/private/kid", b"", &persistent())
            .await
            .unwrap_err(),
        Error::NoAuth
    );
    assert_eq!(bob.get_data("/private").await.unwrap().0, b"p");
    let (acl, _) = bob.get_acl("/private").await.unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].scheme(), "digest");
    assert!(acl[0].id().starts_with("bob:"));
    anon.auth("digest", b"bob:secret").await.unwrap();
    assert_eq!(anon.get_data("/private").await.unwrap().0, b"p");
    let users = anon.list_auth_users().await.unwrap();
    assert!(
        users
            .iter()
            .any(|u| u.scheme() == "digest" && u.user().starts_with("bob:")),
        "{users:?}"
    );

    bob.create(
        "/ro",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_read()),
    )
    .await
    .unwrap();
    let other = connect(&server).await;
    assert_eq!(
        other.set_data("/ro", b"x", None).await.unwrap_err(),
        Error::NoAuth
    );
    assert_eq!(
        other
            .set_acl("/ro", &Acls::anyone_all(), None)
            .await
            .unwrap_err(),
        Error::NoAuth
    );
    let stat = bob
        .set_acl("/private", &Acls::anyone_all(), Some(0))
        .await
        .unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(
        bob.set_acl("/private", &Acls::anyone_all(), Some(0))
            .await
            .unwrap_err(),
        Error::BadVersion
    );
    assert_eq!(other.get_data("/private").await.unwrap().0, b"p");
}

async fn builtin_lock_excludes_and_hands_over(kind: Kind) {
    let server = Deployment::start(kind, "lock", "");
    let setup = connect(&server).await;
    setup.create("/locks", b"", &persistent()).await.unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let addr = server.addr();
        let (inside, max_inside) = (inside.clone(), max_inside.clone());
        tasks.push(tokio::spawn(async move {
            let c = Client::connector()
                .with_session_timeout(Duration::from_secs(5))
                .connect(&addr)
                .await
                .unwrap();
            for _ in 0..3 {
                let lock = c
                    .lock(
                        LockPrefix::new_shared("/locks/lock-").unwrap(),
                        b"",
                        Acls::anyone_all(),
                    )
                    .await
                    .unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                drop(lock);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");
    // Curator-style prefix on the same client API.
    let c = connect(&server).await;
    let lock = c
        .lock(
            LockPrefix::new_curator("/locks", "latch-").unwrap(),
            b"",
            Acls::anyone_all(),
        )
        .await
        .unwrap();
    assert!(lock.lock_path().starts_with("/locks/_c_"));
}

async fn four_letter_words_and_whitelist(kind: Kind) {
    let server = Deployment::start(kind, "fourlw", "");
    let c = connect(&server).await;
    c.create("/f", b"", &persistent()).await.unwrap();
    let (_, _, _w) = c.get_and_watch_data("/f").await.unwrap();
    assert_eq!(server.four("ruok"), "imok");
    let srvr = server.four("srvr");
    assert!(
        srvr.contains(&format!("Mode: {}", kind.mode())) && srvr.contains("Node count: 5"),
        "{srvr}"
    );
    assert!(server.four("stat").contains("Clients:"));
    let mntr = server.four("mntr");
    assert_eq!(
        mntr_value(&mntr, "zk_watch_count").as_deref(),
        Some("1"),
        "{mntr}"
    );
    assert_eq!(mntr_value(&mntr, "zk_znode_count").as_deref(), Some("5"));
    for k in [
        "node_created",
        "node_deleted",
        "node_changed",
        "node_children",
    ] {
        for s in ["avg", "min", "max", "cnt", "sum"] {
            assert!(
                mntr_value(&mntr, &format!("zk_{s}_{k}_watch_count")).is_some(),
                "missing {s} {k}"
            );
        }
    }
    assert!(server
        .four("wchs")
        .contains("1 connections watching 1 paths"));
    assert!(server
        .four("cons")
        .contains(&format!("sid={:#x}", c.session_id().0)));
    assert!(server
        .four("conf")
        .contains(&format!("clientPort={}", server.port())));

    let strict = Deployment::start(kind, "fourlw-strict", "4lw.commands.whitelist=srvr, ruok");
    assert!(strict.four("srvr").contains("Zookeeper version"));
    assert_eq!(
        strict.four("mntr"),
        "mntr is not executed because it is not in the whitelist.\n"
    );
}

/// Runs each test against a standalone server and an ensemble.
macro_rules! against_both {
    ($($test:ident),* $(,)?) => {
        $(
            mod $test {
                use super::Kind;

                #[tokio::test(flavor = "multi_thread")]
                async fn standalone() {
                    super::$test(Kind::Standalone).await
                }

                #[tokio::test(flavor = "multi_thread")]
                async fn ensemble() {
                    super::$test(Kind::Ensemble).await
                }
            }
        )*
    };
}

against_both!(
    crud_stat_and_versions,
    reads_see_the_writes_before_them,
    create_modes_sequence_ephemeral_container_ttl,
    ephemerals_removed_on_close_and_expiry,
    session_timeout_is_negotiated_within_bounds,
    reconnect_resumes_session,
    multi_is_all_or_nothing_and_multi_read,
    one_shot_watches_fire_before_the_response,
    persistent_and_recursive_watches_and_removal,
    watches_survive_a_server_restart_via_set_watches,
    acls_digest_auth_and_error_codes,
    builtin_lock_excludes_and_hands_over,
    four_letter_words_and_whitelist
);
