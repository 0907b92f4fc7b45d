//! Queue positions as a verdict line shows them: how often each position (the contenders a
//! newcomer found ahead of it) was seen.

use std::collections::BTreeMap;

/// `0:12 1:30 2:8` (position:times), or `none` when nothing was seen.
pub fn seen(positions: &BTreeMap<usize, u64>) -> String {
    if positions.is_empty() {
        return "none".to_string();
    }
    let seen: Vec<String> = positions.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    seen.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_position_colon_times() {
        assert_eq!(seen(&BTreeMap::new()), "none");
        assert_eq!(seen(&BTreeMap::from([(2, 8), (0, 12)])), "0:12 2:8");
    }
}
