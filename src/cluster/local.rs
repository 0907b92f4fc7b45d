//! Running commands on the controller's own machine (the local cluster's plumbing only).

use std::process::Command;

use anyhow::{bail, Context};

/// Runs `program args...` locally and returns its trimmed standard output; a non-zero exit
/// is an error that names the command and carries its standard error.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run `{program}` (is it installed?)"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("`{program} {}` failed: {}", args.join(" "), stderr.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether `program args...` exits with status 0 (its output is discarded).
pub fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Whether a program is on the PATH (or at an absolute path).
pub fn has_program(program: &str) -> bool {
    if program.starts_with('/') {
        return std::path::Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// Whether a process with this pid is alive (a zombie counts as dead).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// The pid in `pid_file`, if that process is alive and its command line contains `marker`
/// (so that a pid reused by another process is never taken for ours).
pub fn pid_in_file(pid_file: &std::path::Path, marker: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid_alive(pid) && pid_cmdline(pid).contains(marker)).then_some(pid)
}

/// Sends SIGKILL to `pid` (which the caller has checked is the process it means) and waits
/// up to `limit` for it to be gone; returns whether it is.
pub fn kill_and_wait(pid: u32, limit: std::time::Duration) -> bool {
    // SAFETY: kill has no memory-safety preconditions; the caller vouches for the pid.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let deadline = std::time::Instant::now() + limit;
    while pid_alive(pid) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// The command line of a process, with arguments joined by spaces.
pub fn pid_cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            String::from_utf8_lossy(&raw)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Makes the bridge `name` with the address `addr` (`A.B.C.D/24`) if missing, and sets it up.
pub fn ensure_bridge(name: &str, addr: &str) -> anyhow::Result<()> {
    if !succeeds("ip", &["link", "show", name]) {
        run("ip", &["link", "add", name, "type", "bridge"])?;
    }
    if !run("ip", &["-4", "addr", "show", "dev", name])?.contains(addr) {
        run("ip", &["addr", "add", addr, "dev", name])?;
    }
    run("ip", &["link", "set", name, "up"])?;
    Ok(())
}

/// Makes the tap `name` on `bridge` if missing, and sets it up.
pub fn ensure_tap(name: &str, bridge: &str) -> anyhow::Result<()> {
    if !succeeds("ip", &["link", "show", name]) {
        run("ip", &["tuntap", "add", "dev", name, "mode", "tap"])?;
    }
    run("ip", &["link", "set", name, "master", bridge])?;
    run("ip", &["link", "set", name, "up"])?;
    Ok(())
}

/// Removes the link `name` (a bridge, tap or veth) if it exists.
pub fn remove_link(name: &str) -> anyhow::Result<()> {
    if succeeds("ip", &["link", "show", name]) {
        run("ip", &["link", "del", name])?;
    }
    Ok(())
}
