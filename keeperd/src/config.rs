//! Server configuration in ZooKeeper's zoo.cfg style: `key=value` lines,
//! `#` comments. Unknown keys are ignored (a real zoo.cfg has many), bad
//! values are errors naming the file, line and key.

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
        })
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

    /// The config rendered for the `conf` four-letter word.
    pub fn render(&self) -> String {
        format!(
            "clientPort={}\nclientPortAddress={}\ndataDir={}\ndataLogDir={}\ntickTime={}\nmaxClientCnxns=0\nminSessionTimeout={}\nmaxSessionTimeout={}\nserverId=0\nsnapCount={}\n4lw.commands.whitelist={}\n",
            self.client_port,
            self.client_port_address,
            self.data_dir.display(),
            self.data_dir.display(),
            self.tick_time,
            self.min_session_timeout,
            self.max_session_timeout,
            self.snap_count,
            self.four_letter_words.join(","),
        )
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
}
