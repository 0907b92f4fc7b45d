//! Which private /24s are taken on this machine: one local cluster per subnet, since two
//! bridges with one address make both clusters unreachable.

use std::net::Ipv4Addr;
use std::path::Path;

use super::{Cluster, STATE_ROOT};

/// Who already uses `subnet` on this machine, other than the cluster `own` (whose own bridge
/// and saved state do not count): another local cluster's saved state, or an interface with
/// an address in it. `None` when it is free.
pub fn user_of(subnet: [u8; 3], own: &str) -> anyhow::Result<Option<String>> {
    for other in saved_clusters() {
        if other.spec.name != own && other.spec.subnet == subnet {
            return Ok(Some(format!("cluster {}", other.spec.name)));
        }
    }
    let own_bridge = Cluster::named(own).bridge();
    let listing = super::local::run("ip", &["-4", "-o", "addr", "show"])?;
    Ok(interfaces_in(&listing, subnet)
        .into_iter()
        .find(|iface| *iface != own_bridge)
        .map(|iface| format!("interface {iface}")))
}

/// The first free /24 of 10.241.0.0/16, for a cluster made without a subnet named.
pub fn free(own: &str) -> anyhow::Result<[u8; 3]> {
    for third in 0..=255u8 {
        let subnet = [10, 241, third];
        if user_of(subnet, own)?.is_none() {
            return Ok(subnet);
        }
    }
    anyhow::bail!("every /24 of 10.241.0.0/16 is in use: name a free one with --subnet")
}

/// The local clusters whose state is saved on this machine.
fn saved_clusters() -> Vec<Cluster> {
    let Ok(entries) = std::fs::read_dir(Path::new(STATE_ROOT)) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|name| Cluster::named(&name))
        .filter(|c| c.spec.nodes > 0)
        .collect()
}

/// The interfaces in `ip -4 -o addr show` output whose network overlaps `subnet`'s /24.
fn interfaces_in(listing: &str, subnet: [u8; 3]) -> Vec<String> {
    let ours = u32::from(Ipv4Addr::new(subnet[0], subnet[1], subnet[2], 0));
    let mut found = Vec::new();
    for line in listing.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(iface), Some(cidr)) = (fields.get(1), fields.get(3)) else {
            continue;
        };
        let Some((addr, len)) = cidr.split_once('/') else {
            continue;
        };
        let (Ok(addr), Ok(len)) = (addr.parse::<Ipv4Addr>(), len.parse::<u32>()) else {
            continue;
        };
        // Two networks overlap when the shorter prefix of the two covers both.
        let shorter = len.min(24);
        let mask = if shorter == 0 {
            0
        } else {
            u32::MAX << (32 - shorter)
        };
        if u32::from(addr) & mask == ours & mask {
            found.push(iface.trim_end_matches(':').to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
5: nu-br    inet 10.236.0.254/24 scope global nu-br\\       valid_lft forever preferred_lft forever
7: eth0    inet 10.0.0.0/8 scope global eth0\\       valid_lft forever preferred_lft forever
";

    #[test]
    fn an_interface_in_or_around_the_subnet_uses_it() {
        assert_eq!(interfaces_in(LISTING, [10, 236, 0]), ["nu-br", "eth0"]);
        assert_eq!(interfaces_in(LISTING, [192, 168, 3]), Vec::<String>::new());
        assert_eq!(interfaces_in(LISTING, [127, 0, 0]), ["lo"]);
    }
}
