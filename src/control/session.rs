//! One authenticated SSH session to a node, and running one command on it (blocking code,
//! run on tokio's blocking pool by [`super::Control`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use ssh2::{CheckResult, KnownHostFileKind, Session};

use super::Node;

/// How host keys are checked against the known_hosts file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// The host must be listed with a matching key.
    Strict,
    /// An unlisted host is added on first contact; a listed host must match (local cluster only).
    AcceptNew,
}

/// How to authenticate and verify hosts.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Private key file; `None` tries the usual files in `~/.ssh`, then the agent.
    pub key: Option<PathBuf>,
    /// The known_hosts file that host keys are checked against.
    pub known_hosts: PathBuf,
    /// Strict, or accept-new.
    pub policy: HostKeyPolicy,
    /// Limit for the TCP connect and the SSH handshake.
    pub connect_timeout: Duration,
}

/// Where a failure happened, which decides whether retrying is safe.
#[derive(Debug)]
pub enum Failure {
    /// Before the command was sent: retrying cannot run it twice.
    BeforeSend(anyhow::Error),
    /// After the command was sent: it may have run.
    AfterSend(anyhow::Error),
}

/// What a finished command left.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status (-1 when the command was killed by a signal).
    pub status: i32,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// The controller's wall clock when the input was sent (once the command said it was
    /// ready, when asked to wait for that).
    pub input_sent: Option<std::time::SystemTime>,
    /// The controller's wall clock when the first output after the input arrived.
    pub answered: Option<std::time::SystemTime>,
}

impl Output {
    /// Standard output as text, trimmed.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }

    /// Standard error as text, trimmed.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// Opens and authenticates a session to `node`.
pub fn connect(node: &Node, opts: &SshOptions) -> anyhow::Result<Session> {
    let addr = (node.host.as_str(), node.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", node.host))?
        .next()
        .ok_or_else(|| anyhow!("no address for {}", node.host))?;
    let tcp = TcpStream::connect_timeout(&addr, opts.connect_timeout)
        .with_context(|| format!("cannot connect to {}:{}", node.host, node.port))?;
    tcp.set_nodelay(true).ok();
    let mut session = Session::new().context("cannot create an SSH session")?;
    session.set_tcp_stream(tcp);
    session.set_timeout(opts.connect_timeout.as_millis() as u32);
    session.handshake().context("SSH handshake failed")?;
    check_host_key(&session, node, opts)?;
    authenticate(&session, node, opts)?;
    session.set_keepalive(true, 10);
    Ok(session)
}

fn check_host_key(session: &Session, node: &Node, opts: &SshOptions) -> anyhow::Result<()> {
    let (key, key_type) = session
        .host_key()
        .ok_or_else(|| anyhow!("the server sent no host key"))?;
    let mut known = session.known_hosts()?;
    if opts.known_hosts.exists() {
        known
            .read_file(&opts.known_hosts, KnownHostFileKind::OpenSSH)
            .with_context(|| format!("cannot read known_hosts {}", opts.known_hosts.display()))?;
    }
    match known.check_port(&node.host, node.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => bail!(
            "host key of {}:{} does not match {} (a different machine, or it was reinstalled)",
            node.host,
            node.port,
            opts.known_hosts.display()
        ),
        CheckResult::NotFound | CheckResult::Failure if opts.policy == HostKeyPolicy::AcceptNew => {
            let entry = known_hosts_name(&node.host, node.port);
            known.add(&entry, key, "added by stampede", key_type.into())?;
            known.write_file(&opts.known_hosts, KnownHostFileKind::OpenSSH)?;
            Ok(())
        }
        _ => bail!(
            "host {}:{} is not in {} (add its key, e.g. with ssh-keyscan)",
            node.host,
            node.port,
            opts.known_hosts.display()
        ),
    }
}

/// The name a host has in a known_hosts file: `host`, or `[host]:port` off port 22.
fn known_hosts_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

fn authenticate(session: &Session, node: &Node, opts: &SshOptions) -> anyhow::Result<()> {
    match &opts.key {
        Some(key) => {
            session
                .userauth_pubkey_file(&node.user, None, key, None)
                .with_context(|| {
                    format!("key {} was refused for user {}", key.display(), node.user)
                })?;
        }
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"));
            let tried = ["id_ed25519", "id_ecdsa", "id_rsa"]
                .iter()
                .map(|n| home.join(".ssh").join(n));
            for key in tried.filter(|k| k.exists()) {
                if session
                    .userauth_pubkey_file(&node.user, None, &key, None)
                    .is_ok()
                {
                    return Ok(());
                }
            }
            session.userauth_agent(&node.user).with_context(|| {
                format!(
                    "no key in ~/.ssh nor the agent was accepted for user {} (pass --ssh-key)",
                    node.user
                )
            })?;
        }
    }
    if !session.authenticated() {
        bail!("authentication as {} failed", node.user);
    }
    Ok(())
}

/// Runs `command` in `session`, feeding `stdin` (when `await_ready`, only once the command has
/// printed its first line on standard output, so that it is surely running and waiting for
/// it), until it exits or `deadline` passes.
pub fn run(
    session: &Session,
    command: &str,
    stdin: &[u8],
    await_ready: bool,
    deadline: Instant,
) -> Result<Output, Failure> {
    let remaining = |d: Instant| {
        d.saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    session.set_blocking(true);
    session.set_timeout(remaining(deadline).as_millis() as u32);
    let mut channel = session
        .channel_session()
        .map_err(|e| Failure::BeforeSend(e.into()))?;
    channel
        .exec(command)
        .map_err(|e| Failure::BeforeSend(e.into()))?;
    let after = |e: anyhow::Error| Failure::AfterSend(e);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 32 * 1024];
    while await_ready && !stdout.contains(&b'\n') {
        match channel.read(&mut buf) {
            Ok(0) => return Err(after(anyhow!("the command ended before it was ready"))),
            Ok(n) => stdout.extend_from_slice(&buf[..n]),
            Err(e) => {
                return Err(after(
                    anyhow!(e).context("waiting for the command to be ready"),
                ))
            }
        }
    }
    let input_sent = Some(std::time::SystemTime::now());
    if !stdin.is_empty() {
        channel
            .write_all(stdin)
            .map_err(|e| after(anyhow!(e).context("cannot send input")))?;
    }
    channel.send_eof().map_err(|e| after(e.into()))?;
    let mut answered = None;
    session.set_blocking(false);
    loop {
        let mut progressed = false;
        for (stream, sink) in [(0, &mut stdout), (1, &mut stderr)] {
            match channel.stream(stream).read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    answered.get_or_insert_with(std::time::SystemTime::now);
                    sink.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    session.set_blocking(true);
                    return Err(after(
                        anyhow!(e).context("connection lost while reading output"),
                    ));
                }
            }
        }
        if channel.eof() && !progressed {
            break;
        }
        if Instant::now() >= deadline {
            session.set_blocking(true);
            return Err(after(anyhow!("timed out")));
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    session.set_blocking(true);
    session.set_timeout(remaining(deadline).as_millis() as u32);
    channel.wait_close().map_err(|e| after(e.into()))?;
    let status = channel.exit_status().map_err(|e| after(e.into()))?;
    let killed = channel
        .exit_signal()
        .ok()
        .and_then(|s| s.exit_signal)
        .is_some();
    Ok(Output {
        status: if killed { -1 } else { status },
        stdout,
        stderr,
        input_sent,
        answered,
    })
}

/// Whether a path looks usable as a private key file.
pub fn check_key_file(key: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(key)
        .with_context(|| format!("cannot read SSH key {}", key.display()))?;
    if !text.contains("PRIVATE KEY") {
        bail!("{} is not a private key file", key.display());
    }
    Ok(())
}
