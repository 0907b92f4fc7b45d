//! ZooKeeper's own Java client and its lock recipe (org.apache.zookeeper.recipes.lock.WriteLock,
//! from Debian's zookeeper package) against keeperd: a standalone server, and a 3-server
//! ensemble with each client on a different member. Compiles tests/java/LockCheck.java with javac.

mod common;

use common::ensemble::Ensemble;
use common::Server;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/zookeeper-recipes-lock.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Compiles LockCheck into `dir/classes` and runs it against `servers`.
fn write_lock_recipe(dir: &Path, servers: &[String]) {
    let missing: Vec<_> = JARS.iter().filter(|j| !Path::new(j).exists()).collect();
    assert!(
        missing.is_empty(),
        "missing {missing:?}: apt-get install -y zookeeper"
    );
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let classpath = JARS.join(":");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/LockCheck.java");
    let javac = Command::new("javac")
        .args(["-nowarn", "-cp", &classpath, "-d"])
        .arg(&classes)
        .arg(&source)
        .output()
        .expect("run javac");
    assert!(
        javac.status.success(),
        "javac failed: {}",
        String::from_utf8_lossy(&javac.stderr)
    );
    let run = Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", classes.display()))
        .arg("LockCheck")
        .args(servers)
        .output()
        .expect("run java");
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && out.contains("DONE"),
        "java lock check failed:\n{out}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        11,
        "{out}"
    );
}

#[test]
fn java_write_lock_recipe_standalone() {
    let server = Server::start("java", "");
    write_lock_recipe(&server.dir, &[server.addr()]);
}

#[test]
fn java_write_lock_recipe_on_an_ensemble() {
    let e = Ensemble::start("java", 3, 0, "");
    e.wait_serving(Duration::from_secs(20));
    let dir: PathBuf = e.member(1).dir.clone();
    write_lock_recipe(&dir, &[e.addr(1), e.addr(2), e.addr(3)]);
}
