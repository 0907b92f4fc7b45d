//! ZooKeeper's four-letter words (`srvr`, `mntr`, …), asked over the client port.

use std::fmt;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The role a server reports in `srvr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Leads the ensemble.
    Leader,
    /// Follows the leader.
    Follower,
    /// A single server without an ensemble.
    Standalone,
    /// A non-voting member.
    Observer,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Mode::Leader => "leader",
            Mode::Follower => "follower",
            Mode::Standalone => "standalone",
            Mode::Observer => "observer",
        };
        f.write_str(s)
    }
}

/// Sends `word` to the server at `address` and returns its answer.
pub async fn four_letter_word(address: &str, word: &str) -> anyhow::Result<String> {
    let ask = async {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        anyhow::Ok(answer)
    };
    tokio::time::timeout(Duration::from_secs(3), ask)
        .await
        .with_context(|| format!("{address} did not answer `{word}` within 3 s"))?
        .with_context(|| format!("cannot ask {address} `{word}`"))
}

/// The mode `srvr` reports, or an error when the server does not serve.
pub async fn mode(address: &str) -> anyhow::Result<Mode> {
    parse_mode(&four_letter_word(address, "srvr").await?).with_context(|| address.to_string())
}

/// The mode and the last zxid the server applied, as `srvr` reports them (`Mode:` and
/// `Zxid:`), or an error when the server does not serve.
pub async fn standing(address: &str) -> anyhow::Result<(Mode, i64)> {
    let srvr = four_letter_word(address, "srvr").await?;
    let mode = parse_mode(&srvr).with_context(|| address.to_string())?;
    let zxid = parse_zxid(&srvr).with_context(|| address.to_string())?;
    Ok((mode, zxid))
}

/// Reads the `Zxid: 0x…` line of a `srvr` answer.
pub fn parse_zxid(srvr: &str) -> anyhow::Result<i64> {
    let Some(value) = srvr.lines().find_map(|l| l.strip_prefix("Zxid:")) else {
        bail!("no Zxid line in srvr");
    };
    let hex = value.trim().trim_start_matches("0x");
    i64::from_str_radix(hex, 16).with_context(|| format!("bad zxid {:?}", value.trim()))
}

/// Reads the `Mode:` line of a `srvr` answer.
pub fn parse_mode(srvr: &str) -> anyhow::Result<Mode> {
    let Some(line) = srvr.lines().find_map(|l| l.strip_prefix("Mode:")) else {
        bail!(
            "not serving: {}",
            srvr.lines().next().unwrap_or("no answer")
        );
    };
    match line.trim() {
        "leader" => Ok(Mode::Leader),
        "follower" => Ok(Mode::Follower),
        "standalone" => Ok(Mode::Standalone),
        "observer" => Ok(Mode::Observer),
        other => bail!("unknown mode {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_modes() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(parse_mode(srvr).unwrap(), Mode::Follower);
        assert_eq!(parse_mode("Mode: leader\n").unwrap(), Mode::Leader);
        let err =
            parse_mode("This ZooKeeper instance is not currently serving requests\n").unwrap_err();
        assert!(err.to_string().contains("not currently serving"));
        assert!(parse_mode("Mode: confused\n").is_err());
    }

    #[test]
    fn reads_zxids() {
        let srvr = "Zookeeper version: 3.8.0\nZxid: 0x200000017\nMode: leader\n";
        assert_eq!(parse_zxid(srvr).unwrap(), 0x2_0000_0017);
        assert!(parse_zxid("Mode: leader\n").is_err());
        assert!(parse_zxid("Zxid: 0xnope\n").is_err());
    }
}
