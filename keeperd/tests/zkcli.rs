//! Apache ZooKeeper's own command-line client (zkCli.sh from Debian's
//! zookeeper package) against keeperd, commands fed on stdin: against a
//! standalone server, and against a 3-server ensemble with the two
//! sessions on different members.

mod common;

use common::ensemble::Ensemble;
use common::Server;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";

fn zkcli(addr: &str, commands: &str) -> String {
    let mut child = Command::new(ZKCLI)
        .args(["-server", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zkCli.sh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(commands.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // zkCli prints results on stdout and confirmations/errors on stderr.
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_has(out: &str, needle: &str) {
    assert!(
        out.contains(needle),
        "zkCli output lacks {needle:?}:\n{out}"
    );
}

fn ensure_zkcli() {
    if !std::path::Path::new(ZKCLI).exists() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "zookeeper"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{ZKCLI} missing and apt-get install zookeeper failed");
    }
}

/// The first session's commands go to `first`, the second's to `second`.
fn create_read_list_set_delete_ephemeral_sequential_watch(first_addr: &str, second_addr: &str) {
    let first = zkcli(
        first_addr,
        "create /cli hello\nget /cli\nls /\ncreate -e /cli/eph e\ncreate -s /cli/seq- a\ncreate -s /cli/seq- b\nls /cli\n\
         get -w /cli\nset /cli world\nget -s /cli\nls -w /cli\ndelete /cli/seq-0000000002\nls /cli\ncreate /cli/eph again\nquit\n",
    );
    assert_has(&first, "Created /cli\n");
    assert_has(&first, "hello\n");
    assert_has(&first, "[cli, zookeeper]");
    assert_has(&first, "Created /cli/eph");
    assert_has(&first, "Created /cli/seq-0000000001");
    assert_has(&first, "Created /cli/seq-0000000002");
    assert_has(&first, "[eph, seq-0000000001, seq-0000000002]");
    assert_has(
        &first,
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/cli",
    );
    assert_has(&first, "world\ncZxid = 0x");
    assert_has(&first, "dataVersion = 1\n");
    assert_has(&first, "cversion = 3\n");
    assert_has(&first, "numChildren = 3\n");
    assert_has(
        &first,
        "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/cli",
    );
    assert_has(&first, "[eph, seq-0000000001]");
    assert_has(&first, "Node already exists: /cli/eph");

    // The first session closed: its ephemeral is gone.
    let second = zkcli(
        second_addr,
        "sync /cli\nls /cli\nget /cli\ndelete /cli\ndelete /cli/seq-0000000001\ndelete /cli\nls /\nget /cli\nquit\n",
    );
    assert_has(&second, "[seq-0000000001]");
    assert_has(&second, "world\n");
    assert_has(&second, "Node not empty: /cli");
    assert_has(&second, "[zookeeper]");
    assert_has(&second, "Node does not exist: /cli");
}

#[test]
fn zkcli_against_a_standalone_server() {
    ensure_zkcli();
    let server = Server::start("zkcli", "");
    create_read_list_set_delete_ephemeral_sequential_watch(&server.addr(), &server.addr());
}

#[test]
fn zkcli_against_an_ensemble_through_two_members() {
    ensure_zkcli();
    let e = Ensemble::start("zkcli", 3, 0, "");
    let leader = e.wait_serving(Duration::from_secs(20));
    let follower = (1..=3).find(|i| *i != leader).unwrap();
    create_read_list_set_delete_ephemeral_sequential_watch(&e.addr(follower), &e.addr(leader));
}
