//! kill -9 of a loaded keeperd, restart, and every acknowledged write is
//! there; a corrupted log makes keeperd refuse to start.

mod common;

use common::Server;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zk::{Acls, Client, CreateMode};
use zookeeper_client as zk;

/// Acknowledged state: created paths with their data, and per-writer last acked counter value.
#[derive(Default)]
struct Acked {
    created: HashMap<String, Vec<u8>>,
    counters: HashMap<String, (i32, Vec<u8>)>,
}

async fn load(addr: String, round: usize, writer: usize, acked: Arc<Mutex<Acked>>) {
    let Ok(c) = Client::connector()
        .with_session_timeout(Duration::from_secs(5))
        .connect(&addr)
        .await
    else {
        return;
    };
    let counter = format!("/d/counter-{writer}");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let _ = c.create(&counter, b"0", &opts).await;
    for k in 0u32.. {
        let path = format!("/d/r{round}-w{writer}-{k}");
        let data = format!("{writer}:{k}").into_bytes();
        match c.create(&path, &data, &opts).await {
            Ok(_) => {
                acked.lock().unwrap().created.insert(path, data);
            }
            Err(_) => return,
        }
        let value = k.to_string().into_bytes();
        match c.set_data(&counter, &value, None).await {
            Ok(stat) => {
                acked
                    .lock()
                    .unwrap()
                    .counters
                    .insert(counter.clone(), (stat.version, value));
            }
            Err(_) => return,
        }
    }
}

async fn run_and_kill(server: &mut Server, round: usize, acked: &Arc<Mutex<Acked>>) {
    let mut tasks = Vec::new();
    for w in 0..8 {
        tasks.push(tokio::spawn(load(server.addr(), round, w, acked.clone())));
    }
    // Let the load run, then kill -9 in the middle of it.
    let start = acked.lock().unwrap().created.len();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if acked.lock().unwrap().created.len() > start + 1500 {
            break;
        }
    }
    server.kill9();
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(20), t).await;
    }
}

async fn verify(server: &Server, acked: &Acked) {
    let c = Client::connect(&server.addr()).await.unwrap();
    for (path, data) in &acked.created {
        let got = c
            .get_data(path)
            .await
            .unwrap_or_else(|e| panic!("acknowledged {path} lost: {e}"));
        assert_eq!(&got.0, data, "{path}");
    }
    for (path, (version, value)) in &acked.counters {
        let (data, stat) = c.get_data(path).await.unwrap();
        assert!(
            stat.version >= *version,
            "{path}: acknowledged version {version} lost, found {}",
            stat.version
        );
        if stat.version == *version {
            assert_eq!(&data, value);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_load_loses_no_acknowledged_write() {
    // A small snapCount makes snapshots and log rolls happen during the load.
    let mut server = Server::start("kill9", "snapCount=300");
    Client::connect(&server.addr())
        .await
        .unwrap()
        .create(
            "/d",
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let acked = Arc::new(Mutex::new(Acked::default()));
    for round in 0..3 {
        run_and_kill(&mut server, round, &acked).await;
        server.spawn();
        let done = acked
            .lock()
            .unwrap()
            .created
            .keys()
            .filter(|p| p.starts_with(&format!("/d/r{round}-")))
            .count();
        assert!(done > 100, "round {round} made too little progress: {done}");
        let snapshot = std::mem::take(&mut *acked.lock().unwrap());
        verify(&server, &snapshot).await;
        *acked.lock().unwrap() = snapshot;
    }
    let snapshots = std::fs::read_dir(server.dir.join("data"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("snapshot.")
        })
        .count();
    assert!(snapshots >= 1, "no snapshot was taken");
}

#[tokio::test]
async fn corrupt_log_refuses_to_start() {
    let mut server = Server::start("corrupt", "");
    let c = Client::connect(&server.addr()).await.unwrap();
    for i in 0..20 {
        c.create(
            &format!("/n{i}"),
            b"payload",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    drop(c);
    server.kill9();
    let data = server.dir.join("data");
    let segment = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    // Flip a byte in the middle of the records (the segment is padded with zeros after them).
    let middle = bytes.iter().rposition(|b| *b != 0).unwrap() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&segment, &bytes).unwrap();
    let (code, stderr) = server.run_to_exit();
    assert_ne!(code, 0);
    assert!(
        stderr.contains("corrupt transaction log") && stderr.contains("refusing to start"),
        "{stderr}"
    );
}
