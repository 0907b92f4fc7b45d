//! Ansible inventories (INI format) as nodes files: the hosts of the `zookeeper` group, or of
//! the whole file when there is no such group, with their `ansible_host`, `ansible_user` and
//! `ansible_port`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::Node;

/// The group whose hosts are the nodes, when the inventory has one.
const NODES_GROUP: &str = "zookeeper";

/// Whether `text` reads as an ansible INI inventory rather than a plain nodes file: it has a
/// `[section]` header or an `ansible_*=` variable (a nodes-file line does neither).
pub fn looks_like_inventory(text: &str) -> bool {
    text.lines().map(strip_comment).any(|line| {
        (line.starts_with('[') && line.ends_with(']'))
            || line
                .split_whitespace()
                .any(|word| word.starts_with("ansible_") && word.contains('='))
    })
}

/// Parses an ansible INI inventory into nodes, in the order the hosts first appear: the hosts
/// of the `[zookeeper]` group (with its `:children`) if there is one, else every host. Host
/// variables override `[group:vars]`, which override `[all:vars]`; the user defaults to
/// `default_user` and the port to 22. Errors name the file and line.
pub fn parse_inventory(path: &Path, text: &str, default_user: &str) -> anyhow::Result<Vec<Node>> {
    let inventory = Inventory::parse(path, text)?;
    let names = match inventory.groups.contains_key(NODES_GROUP) {
        true => inventory.members(NODES_GROUP),
        false => inventory.hosts.iter().map(|h| h.name.clone()).collect(),
    };
    if names.is_empty() {
        bail!("{}: no hosts in the inventory", path.display());
    }
    names
        .iter()
        .map(|name| inventory.node(path, name, default_user))
        .collect()
}

/// A host line: its name, the line it was first given on, and its own variables.
struct Host {
    name: String,
    line: usize,
    vars: HashMap<String, String>,
}

#[derive(Default)]
struct Group {
    hosts: Vec<String>,
    children: Vec<String>,
    vars: HashMap<String, String>,
}

#[derive(Default)]
struct Inventory {
    hosts: Vec<Host>,
    groups: HashMap<String, Group>,
}

enum Section {
    Hosts(String),
    Vars(String),
    Children(String),
}

impl Inventory {
    fn parse(path: &Path, text: &str) -> anyhow::Result<Inventory> {
        let mut inventory = Inventory::default();
        let mut section = Section::Hosts("ungrouped".to_string());
        for (i, raw) in text.lines().enumerate() {
            let line = strip_comment(raw);
            if line.is_empty() {
                continue;
            }
            let at = || format!("{}:{}", path.display(), i + 1);
            if line.starts_with('[') {
                section = parse_header(line).with_context(at)?;
                let group = match &section {
                    Section::Hosts(g) | Section::Vars(g) | Section::Children(g) => g.clone(),
                };
                inventory.groups.entry(group).or_default();
                continue;
            }
            match &section {
                Section::Hosts(group) => {
                    let (name, vars) = parse_host_line(line).with_context(at)?;
                    inventory.add_host(group, name, vars, i + 1);
                }
                Section::Vars(group) => {
                    let (key, value) = parse_assignment(line).with_context(at)?;
                    inventory
                        .groups
                        .entry(group.clone())
                        .or_default()
                        .vars
                        .insert(key, value);
                }
                Section::Children(group) => {
                    if line.split_whitespace().count() != 1 {
                        return Err(anyhow::anyhow!(
                            "expected one group name per line, found {line:?}"
                        ))
                        .with_context(at);
                    }
                    inventory
                        .groups
                        .entry(group.clone())
                        .or_default()
                        .children
                        .push(line.to_string());
                }
            }
        }
        Ok(inventory)
    }

    fn add_host(&mut self, group: &str, name: String, vars: HashMap<String, String>, line: usize) {
        match self.hosts.iter_mut().find(|h| h.name == name) {
            Some(host) => host.vars.extend(vars),
            None => self.hosts.push(Host {
                name: name.clone(),
                line,
                vars,
            }),
        }
        let members = &mut self.groups.entry(group.to_string()).or_default().hosts;
        if !members.contains(&name) {
            members.push(name);
        }
    }

    /// The hosts of `group` and of its child groups, each once, in order of first appearance.
    fn members(&self, group: &str) -> Vec<String> {
        let mut seen_groups = vec![group.to_string()];
        let mut pending = vec![group.to_string()];
        let mut names: Vec<String> = Vec::new();
        while let Some(g) = pending.pop() {
            let Some(entry) = self.groups.get(&g) else {
                continue;
            };
            names.extend(entry.hosts.iter().cloned());
            for child in &entry.children {
                if !seen_groups.contains(child) {
                    seen_groups.push(child.clone());
                    pending.push(child.clone());
                }
            }
        }
        self.hosts
            .iter()
            .map(|h| h.name.clone())
            .filter(|n| names.contains(n))
            .collect()
    }

    /// The groups `host` belongs to, directly or through `:children`.
    fn groups_of(&self, host: &str) -> Vec<&str> {
        let mut groups: Vec<&str> = Vec::new();
        for name in self.groups.keys() {
            if self.members(name).iter().any(|h| h == host) {
                groups.push(name);
            }
        }
        groups.sort_unstable();
        groups
    }

    /// A host's variable: its own, else a group's, else `[all:vars]`.
    fn var(&self, host: &Host, key: &str) -> Option<String> {
        if let Some(v) = host.vars.get(key) {
            return Some(v.clone());
        }
        let from_groups = self
            .groups_of(&host.name)
            .into_iter()
            .filter(|g| *g != "all")
            .find_map(|g| self.groups[g].vars.get(key));
        from_groups
            .or_else(|| self.groups.get("all").and_then(|g| g.vars.get(key)))
            .cloned()
    }

    fn node(&self, path: &Path, name: &str, default_user: &str) -> anyhow::Result<Node> {
        let host = self
            .hosts
            .iter()
            .find(|h| h.name == name)
            .expect("members are hosts");
        let at = || format!("{}:{}: host {name}", path.display(), host.line);
        let var = |keys: [&str; 2]| keys.iter().find_map(|k| self.var(host, k));
        let address = var(["ansible_host", "ansible_ssh_host"]).unwrap_or_else(|| name.to_string());
        let user =
            var(["ansible_user", "ansible_ssh_user"]).unwrap_or_else(|| default_user.to_string());
        let port = match var(["ansible_port", "ansible_ssh_port"]) {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .with_context(|| format!("bad ansible_port {p:?}"))
                .with_context(at)?,
            None => 22,
        };
        if address.contains(':') {
            return Err(anyhow::anyhow!(
                "bad ansible_host {address:?}: give the port as ansible_port"
            ))
            .with_context(at);
        }
        Node::parse(&format!("{name} {user}@{address}:{port}"), default_user).with_context(at)
    }
}

fn strip_comment(line: &str) -> &str {
    let line = line.trim();
    match line.starts_with('#') || line.starts_with(';') {
        true => "",
        false => line.split(" #").next().unwrap_or("").trim(),
    }
}

fn parse_header(line: &str) -> anyhow::Result<Section> {
    let inner = line
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .with_context(|| format!("bad section header {line:?}"))?;
    let (group, kind) = inner.split_once(':').unwrap_or((inner, ""));
    if group.is_empty()
        || !group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        bail!("bad group name {group:?}");
    }
    let group = group.to_string();
    match kind {
        "" => Ok(Section::Hosts(group)),
        "vars" => Ok(Section::Vars(group)),
        "children" => Ok(Section::Children(group)),
        other => bail!("unknown section kind {other:?} (expected vars or children)"),
    }
}

fn parse_host_line(line: &str) -> anyhow::Result<(String, HashMap<String, String>)> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default().to_string();
    if name.contains('=') {
        bail!("expected a host name before the variables, found {name:?}");
    }
    if name.contains('[') {
        bail!("host ranges like {name:?} are not supported: list the hosts one per line");
    }
    let vars = words
        .map(parse_assignment)
        .collect::<anyhow::Result<HashMap<_, _>>>()?;
    Ok((name, vars))
}

fn parse_assignment(text: &str) -> anyhow::Result<(String, String)> {
    let (key, value) = text
        .split_once('=')
        .with_context(|| format!("expected key=value, found {text:?}"))?;
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || key.contains(char::is_whitespace) {
        bail!("bad variable name in {text:?}");
    }
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Ok((key.to_string(), unquoted.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<Node>> {
        parse_inventory(Path::new("inventory.ini"), text, "root")
    }

    fn node(name: &str, host: &str, port: u16, user: &str) -> Node {
        Node {
            name: name.into(),
            host: host.into(),
            port,
            user: user.into(),
        }
    }

    #[test]
    fn example_inventory_parses() {
        let text = include_str!("../../ansible/inventory.example.ini");
        let nodes = parse_inventory(Path::new("inventory.example.ini"), text, "root").unwrap();
        assert_eq!(nodes.len(), 5);
        assert_eq!(nodes[0], node("zk1", "198.51.100.11", 22, "debian"));
        assert_eq!(nodes[4], node("zk5", "198.51.100.15", 2222, "debian"));
        assert!(looks_like_inventory(text));
    }

    #[test]
    fn host_vars_override_group_vars_which_override_all_vars() {
        let text = "\
; a comment
[all:vars]
ansible_user=everyone
ansible_port=2200

[zookeeper]
a ansible_host=10.0.0.1 ansible_user='alice'   # trailing comment
b ansible_host=\"10.0.0.2\"
c

[zookeeper:vars]
ansible_port=2222

[monitoring]
m ansible_host=10.0.0.9
";
        let nodes = parse(text).unwrap();
        assert_eq!(
            nodes,
            vec![
                node("a", "10.0.0.1", 2222, "alice"),
                node("b", "10.0.0.2", 2222, "everyone"),
                node("c", "c", 2222, "everyone")
            ]
        );
    }

    #[test]
    fn children_groups_are_members_and_without_zookeeper_group_all_hosts_count() {
        let text = "[east]\ne1 ansible_host=10.0.1.1\n[west]\nw1 ansible_host=10.0.2.1 ansible_ssh_port=23\n[zookeeper:children]\neast\nwest\n";
        let nodes = parse(text).unwrap();
        assert_eq!(
            nodes,
            vec![
                node("e1", "10.0.1.1", 22, "root"),
                node("w1", "10.0.2.1", 23, "root")
            ]
        );
        let ungrouped = "h1 ansible_host=10.0.0.1\n[other]\nh2\n";
        let names: Vec<String> = parse(ungrouped)
            .unwrap()
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["h1", "h2"]);
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            (
                "[zookeeper]\nzk1 ansible_host=10.0.0.1\nzk2 ansible_port=notaport\n",
                "inventory.ini:3: host zk2: bad ansible_port",
            ),
            (
                "[zookeeper]\nzk1 ansible_host\n",
                "inventory.ini:2: expected key=value",
            ),
            ("[zookeeper]\nzk[1:3]\n", "inventory.ini:2: host ranges"),
            (
                "\n[zookeeper:hosts]\n",
                "inventory.ini:2: unknown section kind",
            ),
            ("[zookeeper\nzk1\n", "inventory.ini:1: bad section header"),
            (
                "[zookeeper]\nzk1 ansible_host=10.0.0.1:22\n",
                "inventory.ini:2: host zk1: bad ansible_host",
            ),
            (
                "[zookeeper]\nbad!name\n",
                "inventory.ini:2: host bad!name: bad node name",
            ),
            ("[zookeeper]\n# none\n", "inventory.ini: no hosts"),
        ];
        for (text, expected) in cases {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.starts_with(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn plain_nodes_files_do_not_look_like_inventories() {
        assert!(!looks_like_inventory(
            "# nodes\nn1 root@10.0.0.1\nn2 10.0.0.2:2222\n"
        ));
        assert!(looks_like_inventory("zk1 ansible_host=10.0.0.1\n"));
        assert!(looks_like_inventory("# hosts\n[db]\nzk1\n"));
    }
}
