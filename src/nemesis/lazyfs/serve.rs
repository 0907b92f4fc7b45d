//! The layer's process on a node: mounts [`LazyFs`] and answers commands on a TCP port of
//! the node's loopback (`lose`: throw unsynced data away; `sync`: make everything durable;
//! one line in, one JSON line out, so that a shell can ask with bash's `/dev/tcp`), until the
//! mount is unmounted or the process gets SIGTERM or SIGINT. The port, picked free, is
//! written to a file.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;

use super::fs::{LazyFs, State};

/// Mounts a layer over `backing` at `mount` and serves it and its control port (written to
/// `port_file`) until it is unmounted (by `umount`, or here on SIGTERM/SIGINT).
pub fn run(backing: &Path, mount: &Path, port_file: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(backing.is_dir(), "{} is not a directory", backing.display());
    block_termination();
    let fs = LazyFs::new(backing.to_path_buf());
    let state = fs.state();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("stampede-lazyfs".into()),
        fuser::MountOption::Subtype("lazyfs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    config.acl = fuser::SessionACL::All;
    let mut session = fuser::Session::new(fs, mount, &config)
        .with_context(|| format!("cannot mount a layer at {}", mount.display()))?;
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot listen on loopback")?;
    let port = listener.local_addr()?.port();
    let tmp = port_file.with_extension("tmp");
    std::fs::write(&tmp, format!("{port}\n"))
        .and_then(|()| std::fs::rename(&tmp, port_file))
        .with_context(|| format!("cannot write {}", port_file.display()))?;
    std::thread::spawn(move || serve_commands(listener, state));
    let mut unmounter = session.unmount_callable();
    let mount_path = mount.to_path_buf();
    std::thread::spawn(move || {
        wait_for_termination();
        if unmounter.unmount().is_err() {
            lazy_unmount(&mount_path);
        }
    });
    let outcome = session.run();
    let _ = std::fs::remove_file(port_file);
    outcome.with_context(|| format!("serving the layer at {}", mount.display()))
}

fn serve_commands(listener: TcpListener, state: Arc<Mutex<State>>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let _ = answer(conn, &state);
    }
}

fn answer(conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    let reply = match line.trim() {
        "lose" => state
            .lose_unsynced()
            .map(|lost| serde_json::to_string(&lost).unwrap_or_default()),
        "sync" => state
            .sync_all()
            .map(|files| format!("{{\"files\":{files}}}")),
        other => Ok(format!("{{\"error\":\"unknown command {other:?}\"}}")),
    };
    let reply = reply.unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    (&conn).write_all(format!("{reply}\n").as_bytes())
}

/// Sends `command` to the layer whose port is in `port_file` and returns its answer (the
/// controller asks through the node's shell; this is the same exchange, for a trigger agent
/// on the node and for tests).
pub fn command(port_file: &Path, command: &str) -> anyhow::Result<String> {
    let port = std::fs::read_to_string(port_file)?;
    let mut conn = TcpStream::connect(("127.0.0.1", port.trim().parse::<u16>()?))?;
    conn.write_all(format!("{command}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&conn).read_line(&mut reply)?;
    Ok(reply.trim().to_string())
}

const TERMINATION: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the set they are given.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for signal in TERMINATION {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks SIGTERM and SIGINT in this thread and the threads it starts, so that one thread
/// can wait for them.
fn block_termination() {
    let set = termination_set();
    // SAFETY: a valid, initialised signal set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn wait_for_termination() {
    let set = termination_set();
    let mut signal = 0;
    // SAFETY: a valid signal set (blocked in every thread) and a place for the signal.
    unsafe { libc::sigwait(&set, &mut signal) };
}

fn lazy_unmount(mount: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(c) = std::ffi::CString::new(mount.as_os_str().as_bytes()) {
        // SAFETY: a valid C string.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}
