//! Nodes and the lists and files that name them.

use std::fmt;
use std::path::Path;

use anyhow::{bail, Context};

/// One machine under test, reached over SSH.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// The name used in logs, file names and the history (`n1`, or the host as given).
    pub name: String,
    /// Host name or address to connect to.
    pub host: String,
    /// SSH port.
    pub port: u16,
    /// SSH user.
    pub user: String,
}

/// Nodes `n1`… at `10.0.0.1`…, for tests.
#[cfg(test)]
pub fn test_nodes(n: usize) -> Vec<Node> {
    (1..=n)
        .map(|i| Node {
            name: format!("n{i}"),
            host: format!("10.0.0.{i}"),
            port: 22,
            user: "root".into(),
        })
        .collect()
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Node {
    /// The node as a nodes file names it: `n1 root@10.0.0.1:22`.
    pub fn address(&self) -> String {
        format!("{} {}@{}:{}", self.name, self.user, self.host, self.port)
    }

    /// Parses `[user@]host[:port]`, optionally preceded by a name and white space
    /// (`n1 root@10.0.0.1:22`); the user defaults to `default_user`.
    pub fn parse(spec: &str, default_user: &str) -> anyhow::Result<Node> {
        let words: Vec<&str> = spec.split_whitespace().collect();
        let (name, address) = match words.as_slice() {
            [address] => (None, *address),
            [name, address] => (Some(*name), *address),
            [] => bail!("empty node"),
            _ => bail!("expected `[name] [user@]host[:port]`, found {spec:?}"),
        };
        let (user, rest) = match address.split_once('@') {
            Some((user, rest)) if !user.is_empty() => (user, rest),
            Some(_) => bail!("empty user in {address:?}"),
            None => (default_user, address),
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) => {
                let port = port.parse::<u16>().ok().filter(|p| *p > 0);
                let port = port.with_context(|| format!("bad port in {address:?}"))?;
                (host, port)
            }
            None => (rest, 22),
        };
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            bail!("bad host in {address:?}");
        }
        let name = name.unwrap_or(host);
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            bail!("bad node name {name:?}: use letters, digits, '-', '_' and '.'");
        }
        Ok(Node {
            name: name.to_string(),
            host: host.to_string(),
            port,
            user: user.to_string(),
        })
    }
}

/// Parses a comma-separated list of nodes, as given to `--nodes`.
pub fn parse_list(list: &str, default_user: &str) -> anyhow::Result<Vec<Node>> {
    let nodes = list
        .split(',')
        .map(str::trim)
        .enumerate()
        .map(|(i, spec)| {
            Node::parse(spec, default_user).with_context(|| format!("--nodes: entry {}", i + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    check_unique(nodes, "--nodes")
}

/// Parses a nodes file: one node per line, `#` comments and blank lines ignored.
pub fn parse_file_text(path: &Path, text: &str, default_user: &str) -> anyhow::Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let node = Node::parse(line, default_user)
            .with_context(|| format!("{}:{}", path.display(), i + 1))?;
        nodes.push(node);
    }
    if nodes.is_empty() {
        bail!("{}: no nodes in the file", path.display());
    }
    check_unique(nodes, &path.display().to_string())
}

/// Reads and parses a nodes file: one node per line, or an ansible INI inventory.
pub fn read_file(path: &Path, default_user: &str) -> anyhow::Result<Vec<Node>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read nodes file {}", path.display()))?;
    if super::inventory::looks_like_inventory(&text) {
        let nodes = super::inventory::parse_inventory(path, &text, default_user)?;
        return check_unique(nodes, &path.display().to_string());
    }
    parse_file_text(path, &text, default_user)
}

fn check_unique(nodes: Vec<Node>, source: &str) -> anyhow::Result<Vec<Node>> {
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].iter().any(|n| n.name == node.name) {
            bail!("{source}: node {} is listed twice", node.name);
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_host_with_defaults() {
        let n = Node::parse("db1.example", "admin").unwrap();
        assert_eq!(
            n,
            Node {
                name: "db1.example".into(),
                host: "db1.example".into(),
                port: 22,
                user: "admin".into()
            }
        );
    }

    #[test]
    fn parses_user_host_port_and_name() {
        let n = Node::parse("n2   root@10.1.2.3:2222", "admin").unwrap();
        assert_eq!(
            n,
            Node {
                name: "n2".into(),
                host: "10.1.2.3".into(),
                port: 2222,
                user: "root".into()
            }
        );
    }

    #[test]
    fn rejects_bad_ports_and_hosts() {
        assert!(Node::parse("h:0", "u").is_err());
        assert!(Node::parse("h:99999", "u").is_err());
        assert!(Node::parse("h:x", "u").is_err());
        assert!(Node::parse("@h", "u").is_err());
        assert!(Node::parse("u@", "u").is_err());
        assert!(Node::parse("a b c", "u").is_err());
    }

    #[test]
    fn file_errors_name_the_line() {
        let text = "# cluster\nn1 root@10.0.0.1\n\nn2 root@10.0.0.2:notaport\n";
        let err = parse_file_text(Path::new("nodes.txt"), text, "root").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.starts_with("nodes.txt:4: bad port"), "{msg}");
    }

    #[test]
    fn file_with_comments_parses() {
        let text = "n1 root@10.0.0.1 # first\n  n2 10.0.0.2:22\n";
        let nodes = parse_file_text(Path::new("f"), text, "ubuntu").unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].user, "ubuntu");
    }

    #[test]
    fn empty_file_and_duplicates_are_rejected() {
        assert!(parse_file_text(Path::new("f"), "# nothing\n", "u").is_err());
        let err = parse_list("a,b,a", "u").unwrap_err();
        assert!(format!("{err:#}").contains("listed twice"));
    }

    #[test]
    fn list_errors_name_the_entry() {
        let err = parse_list("a,b:70000", "u").unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "--nodes: entry 2: bad port in \"b:70000\""
        );
    }
}
