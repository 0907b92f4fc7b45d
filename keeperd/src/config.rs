//! Server configuration in ZooKeeper's zoo.cfg style: `key=value` lines,
//! `#` comments. Unknown keys are ignored (a real zoo.cfg has many), bad
//! values are errors naming the file, line and key.
//!
//! An ensemble is configured as in ZooKeeper: one
//! `server.N=host:quorumPort:electionPort[:participant|:observer]` line per
//! server (a `;[clientAddress:]clientPort` tail is kept for `/zookeeper/config`), the
//! server's own
//! `N` in `<dataDir>/myid`, and `initLimit` / `syncLimit` in ticks. With no
//! server lines, or a single participant and no observer, keeperd runs
//! standalone as before.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Everything keeperd reads from its config file.
#[derive(Debug, Clone)]
pub struct Config {
    /// Port clients connect to (clientPort).
    pub client_port: u16,
    /// Address to bind (clientPortAddress), default 0.0.0.0.
    pub client_port_address: IpAddr,
    /// Directory of the transaction log and snapshots (dataDir).
    pub data_dir: PathBuf,
    /// Basic time unit in ms (tickTime).
    pub tick_time: u32,
    /// Lowest session timeout granted, ms (minSessionTimeout, default 2 ticks).
    pub min_session_timeout: u32,
    /// Highest session timeout granted, ms (maxSessionTimeout, default 20 ticks).
    pub max_session_timeout: u32,
    /// Four-letter words served (4lw.commands.whitelist), "*" for all.
    pub four_letter_words: Vec<String>,
    /// Transactions between snapshots (snapCount).
    pub snap_count: u64,
    /// How often empty containers and expired TTL nodes are reaped, ms.
    pub container_check_interval_ms: u64,
    /// The ensemble's servers (`server.N` lines), by id; empty when standalone.
    pub servers: Vec<ServerSpec>,
    /// Ticks a learner may take to connect to and sync with a leader (initLimit).
    pub init_limit: u32,
    /// Ticks a learner and its leader may go without hearing each other (syncLimit).
    pub sync_limit: u32,
    /// Deliberate bugs to switch on (`failpoints=a,b`; needs a build with the
    /// `failpoints` feature).
    pub failpoints: Vec<String>,
    /// The digest identity `user:base64(sha1(user:password))` of the superuser
    /// (`superDigest`, ZooKeeper's `zookeeper.DigestAuthenticationProvider.superDigest`).
    pub super_digest: Option<String>,
}

/// One `server.N=host:quorumPort:electionPort[:type]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The server id N (its `myid`).
    pub id: u64,
    /// Host name or address.
    pub host: String,
    /// Port learners connect to when this server leads.
    pub quorum_port: u16,
    /// Port of leader election.
    pub election_port: u16,
    /// A non-voting member.
    pub observer: bool,
    /// The client address tail after `;` (`[address:]port`), as configured.
    pub client: Option<String>,
}

impl ServerSpec {
    /// Parses the value of a `server.N` line.
    pub fn parse(id: u64, value: &str) -> Result<ServerSpec, String> {
        let (addresses, client) = match value.split_once(';') {
            Some((a, c)) => (a, Some(c.trim().to_string()).filter(|c| !c.is_empty())),
            None => (value, None),
        };
        let parts: Vec<&str> = addresses.trim().rsplitn(4, ':').collect();
        let (kind, rest) = match parts.first() {
            Some(&"observer") => (true, &parts[1..]),
            Some(&"participant") => (false, &parts[1..]),
            _ => (false, &parts[..]),
        };
        let [election, quorum, host] = rest else {
            return Err("expected host:quorumPort:electionPort[:participant|:observer]".into());
        };
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("bad port {p:?}"))
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(':') && host.parse::<IpAddr>().is_err() {
            return Err(format!("bad host {host:?}"));
        }
        Ok(ServerSpec {
            id,
            host: host.to_string(),
            quorum_port: port(quorum)?,
            election_port: port(election)?,
            observer: kind,
            client,
        })
    }

    /// The line's value as `/zookeeper/config` shows it:
    /// `host:quorumPort:electionPort:participant|observer[;client]`.
    pub fn render(&self) -> String {
        let role = if self.observer {
            "observer"
        } else {
            "participant"
        };
        let host = join_host_port(&self.host, self.quorum_port);
        let client = self.client.as_ref().map(|c| format!(";{c}"));
        format!(
            "{host}:{}:{role}{}",
            self.election_port,
            client.unwrap_or_default()
        )
    }

    /// `host:port` of this server's quorum port.
    pub fn quorum_addr(&self) -> String {
        join_host_port(&self.host, self.quorum_port)
    }

    /// `host:port` of this server's election port.
    pub fn election_addr(&self) -> String {
        join_host_port(&self.host, self.election_port)
    }
}

/// The id N of a `server.N` key, if N is a server id (1 to 255).
pub fn server_id(key: &str) -> Option<u64> {
    key.strip_prefix("server.")?
        .parse::<u64>()
        .ok()
        .filter(|id| (1..256).contains(id))
}

/// Ids of the voting members among `servers`.
pub fn voters(servers: &[ServerSpec]) -> Vec<u64> {
    servers
        .iter()
        .filter(|s| !s.observer)
        .map(|s| s.id)
        .collect()
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The ensemble as this server sees it: the members and its own id.
#[derive(Debug, Clone)]
pub struct Ensemble {
    /// This server's id, from `<dataDir>/myid`.
    pub my_id: u64,
    /// Every member, voters and observers.
    pub servers: Vec<ServerSpec>,
}

impl Ensemble {
    /// This server's own entry.
    pub fn me(&self) -> &ServerSpec {
        self.server(self.my_id).expect("myid is checked at load")
    }

    /// The member with id `id`.
    pub fn server(&self, id: u64) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// Whether `id` is a voting member.
    pub fn is_voter(&self, id: u64) -> bool {
        self.server(id).is_some_and(|s| !s.observer)
    }

    /// Ids of the voting members.
    pub fn voters(&self) -> Vec<u64> {
        voters(&self.servers)
    }

    /// How many voters make a quorum (a strict majority).
    pub fn quorum(&self) -> usize {
        self.voters().len() / 2 + 1
    }

    /// Every member but this server.
    pub fn peers(&self) -> impl Iterator<Item = &ServerSpec> {
        self.servers.iter().filter(move |s| s.id != self.my_id)
    }
}

impl Config {
    /// Reads and parses the config file at `path`.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read config: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses config text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let mut port = None;
        let mut address: IpAddr = "0.0.0.0".parse().unwrap();
        let mut data_dir = None;
        let mut tick = 2000u32;
        let mut min = None;
        let mut max = None;
        let mut words = vec!["srvr".to_string()];
        let mut snap_count = 100_000u64;
        let mut container_check = 60_000u64;
        let mut servers: Vec<ServerSpec> = Vec::new();
        let mut init_limit = 10u32;
        let mut sync_limit = 5u32;
        let mut failpoints = Vec::new();
        let mut super_digest = None;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {}: expected key=value, got {line:?}", n + 1));
            };
            let (key, value) = (key.trim(), value.trim());
            let bad = |what: &str| format!("line {}: {key}: {what}, got {value:?}", n + 1);
            match key {
                "clientPort" => {
                    port = Some(
                        value
                            .parse::<u16>()
                            .map_err(|_| bad("expected a port number"))?,
                    )
                }
                "clientPortAddress" => {
                    address = value.parse().map_err(|_| bad("expected an IP address"))?
                }
                "dataDir" => data_dir = Some(PathBuf::from(value)),
                "tickTime" => {
                    tick = value
                        .parse()
                        .ok()
                        .filter(|t| *t > 0)
                        .ok_or_else(|| bad("expected a positive integer"))?
                }
                "minSessionTimeout" => {
                    min = Some(
                        value
                            .parse::<u32>()
                            .map_err(|_| bad("expected an integer"))?,
                    )
                }
                "maxSessionTimeout" => {
                    max = Some(
                        value
                            .parse::<u32>()
                            .map_err(|_| bad("expected an integer"))?,
                    )
                }
                "4lw.commands.whitelist" => {
                    words = value
                        .split(',')
                        .map(|w| w.trim().to_string())
                        .filter(|w| !w.is_empty())
                        .collect()
                }
                "snapCount" => {
                    snap_count = value
                        .parse()
                        .ok()
                        .filter(|c| *c > 0)
                        .ok_or_else(|| bad("expected a positive integer"))?
                }
                "containerCheckIntervalMs" => {
                    container_check = value
                        .parse()
                        .ok()
                        .filter(|c| *c > 0)
                        .ok_or_else(|| bad("expected a positive integer"))?
                }
                "initLimit" | "syncLimit" => {
                    let ticks = value
                        .parse()
                        .ok()
                        .filter(|t| *t > 0)
                        .ok_or_else(|| bad("expected a positive integer"))?;
                    if key == "initLimit" {
                        init_limit = ticks;
                    } else {
                        sync_limit = ticks;
                    }
                }
                "failpoints" => {
                    failpoints = value
                        .split(',')
                        .map(|w| w.trim().to_string())
                        .filter(|w| !w.is_empty())
                        .collect()
                }
                "superDigest" | "zookeeper.DigestAuthenticationProvider.superDigest" => {
                    if !value.contains(':') {
                        return Err(bad("expected user:base64(sha1(user:password))"));
                    }
                    super_digest = Some(value.to_string());
                }
                _ if key.starts_with("server.") => {
                    let id = server_id(key).ok_or_else(|| {
                        format!("line {}: {key}: expected server.N with N in 1..=255", n + 1)
                    })?;
                    if servers.iter().any(|s| s.id == id) {
                        return Err(format!("line {}: {key}: listed twice", n + 1));
                    }
                    servers.push(ServerSpec::parse(id, value).map_err(|e| bad(&e))?);
                }
                _ => {}
            }
        }
        let client_port = port.ok_or("clientPort is missing")?;
        let data_dir = data_dir.ok_or("dataDir is missing")?;
        let min_session_timeout = min.unwrap_or(tick * 2);
        let max_session_timeout = max.unwrap_or(tick * 20);
        if min_session_timeout > max_session_timeout {
            return Err(format!(
                "minSessionTimeout {min_session_timeout} exceeds maxSessionTimeout {max_session_timeout}"
            ));
        }
        servers.sort_by_key(|s| s.id);
        let voters = servers.iter().filter(|s| !s.observer).count();
        if !servers.is_empty() && voters == 0 {
            return Err(
                "server.N: the ensemble has no participant (every server is an observer)".into(),
            );
        }
        Ok(Config {
            client_port,
            client_port_address: address,
            data_dir,
            tick_time: tick,
            min_session_timeout,
            max_session_timeout,
            four_letter_words: words,
            snap_count,
            container_check_interval_ms: container_check,
            servers,
            init_limit,
            sync_limit,
            failpoints,
            super_digest,
        })
    }

    /// The ensemble this server is a member of, or `None` to run standalone
    /// (no server lines, or one participant and no observer). The server's
    /// id is read from `<dataDir>/myid`.
    pub fn ensemble(&self) -> Result<Option<Ensemble>, String> {
        if self.servers.len() <= 1 && self.servers.iter().all(|s| !s.observer) {
            return Ok(None);
        }
        let path = self.data_dir.join("myid");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: cannot read this server's id (needed with server.N lines): {e}",
                path.display()
            )
        })?;
        let my_id = text.trim().parse::<u64>().map_err(|_| {
            format!(
                "{}: expected a server id, got {:?}",
                path.display(),
                text.trim()
            )
        })?;
        let ensemble = Ensemble {
            my_id,
            servers: self.servers.clone(),
        };
        if ensemble.server(my_id).is_none() {
            return Err(format!(
                "{}: id {my_id} has no server.{my_id} line in the config",
                path.display()
            ));
        }
        Ok(Some(ensemble))
    }

    /// The length of a tick.
    pub fn tick(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.tick_time as u64)
    }

    /// The address to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.client_port_address, self.client_port)
    }

    /// Whether four-letter word `word` may be served.
    pub fn allows_word(&self, word: &str) -> bool {
        self.four_letter_words.iter().any(|w| w == "*" || w == word)
    }

    /// The timeout granted for a requested one.
    pub fn negotiate_timeout(&self, requested: i32) -> i32 {
        (requested.max(0) as u32).clamp(self.min_session_timeout, self.max_session_timeout) as i32
    }

    /// The config rendered for the `conf` four-letter word, for server `my_id` (0 standalone),
    /// without the membership (the `server.N` lines and `version`, which the caller appends
    /// from `/zookeeper/config`).
    pub fn render(&self, my_id: u64) -> String {
        let mut out = format!(
            "clientPort={}\nclientPortAddress={}\ndataDir={}\ndataLogDir={}\ntickTime={}\nmaxClientCnxns=0\nminSessionTimeout={}\nmaxSessionTimeout={}\nserverId={my_id}\nsnapCount={}\n4lw.commands.whitelist={}\n",
            self.client_port,
            self.client_port_address,
            self.data_dir.display(),
            self.data_dir.display(),
            self.tick_time,
            self.min_session_timeout,
            self.max_session_timeout,
            self.snap_count,
            self.four_letter_words.join(","),
        );
        if !self.servers.is_empty() {
            out.push_str(&format!(
                "initLimit={}\nsyncLimit={}\nelectionAlg=3\nelectionPort={}\nquorumPort={}\npeerType={}\n",
                self.init_limit,
                self.sync_limit,
                self.servers.iter().find(|s| s.id == my_id).map_or(0, |s| s.election_port),
                self.servers.iter().find(|s| s.id == my_id).map_or(0, |s| s.quorum_port),
                if self.servers.iter().any(|s| s.id == my_id && s.observer) { 1 } else { 0 },
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_zoo_cfg_with_defaults() {
        let c = Config::parse(
            "# comment\ntickTime=1000\nclientPort=2181\ndataDir=/tmp/x\n4lw.commands.whitelist=ruok, mntr\n",
        )
        .unwrap();
        assert_eq!(c.client_port, 2181);
        assert_eq!(
            (c.min_session_timeout, c.max_session_timeout),
            (2000, 20000)
        );
        assert!(c.allows_word("mntr") && !c.allows_word("srvr"));
        assert_eq!(c.negotiate_timeout(100), 2000);
        assert_eq!(c.negotiate_timeout(5000), 5000);
        assert_eq!(c.negotiate_timeout(99999), 20000);
    }

    #[test]
    fn bad_values_name_the_line_and_key() {
        let e = Config::parse("clientPort=abc\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("clientPort"), "{e}");
        assert!(Config::parse("clientPort=1\n")
            .unwrap_err()
            .contains("dataDir"));
        assert!(Config::parse(
            "clientPort=1\ndataDir=/x\nminSessionTimeout=9\nmaxSessionTimeout=1\n"
        )
        .is_err());
        assert!(Config::parse("garbage\n")
            .unwrap_err()
            .contains("key=value"));
    }

    fn ensemble_cfg(dir: &Path, servers: &str) -> Config {
        let text = format!(
            "clientPort=2181\ndataDir={}\ninitLimit=7\nsyncLimit=3\n{servers}",
            dir.display()
        );
        Config::parse(&text).unwrap()
    }

    #[test]
    fn parses_server_lines_and_myid() {
        let dir = std::env::temp_dir().join(format!("keeperd-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = ensemble_cfg(
            &dir,
            "server.3=10.0.0.3:2888:3888:observer\nserver.1=10.0.0.1:2888:3888\nserver.2=zk2:2889:3889:participant;2181\n",
        );
        assert_eq!((c.init_limit, c.sync_limit), (7, 3));
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[1].host, "zk2");
        assert_eq!(c.servers[1].quorum_addr(), "zk2:2889");
        assert!(c.servers[2].observer && !c.servers[0].observer);
        assert!(c.ensemble().unwrap_err().contains("myid"));
        std::fs::write(dir.join("myid"), "2\n").unwrap();
        let e = c.ensemble().unwrap().unwrap();
        assert_eq!(e.me().election_addr(), "zk2:3889");
        assert_eq!((e.voters(), e.quorum()), (vec![1, 2], 2));
        assert_eq!(e.peers().map(|s| s.id).collect::<Vec<_>>(), vec![1, 3]);
        std::fs::write(dir.join("myid"), "9\n").unwrap();
        assert!(c.ensemble().unwrap_err().contains("no server.9"));
        // One participant alone is standalone, as in ZooKeeper.
        let one = ensemble_cfg(&dir, "server.1=10.0.0.1:2888:3888\n");
        assert!(one.ensemble().unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_server_lines_name_the_line() {
        for (line, what) in [
            ("server.1=h:2888\n", "expected host"),
            ("server.0=h:1:2\n", "server.N"),
            ("server.x=h:1:2\n", "server.N"),
            ("server.1=h:99999:2\n", "bad port"),
            ("server.1=h:1:2\nserver.1=h:1:2\n", "twice"),
            ("server.1=h:1:2:observer\n", "no participant"),
        ] {
            let e = Config::parse(&format!("clientPort=1\ndataDir=/x\n{line}")).unwrap_err();
            assert!(e.contains(what), "{line:?}: {e}");
        }
    }
}
