//! The replica convergence checker: after the faults are healed, every server's tree under the
//! test's root, read through a session pinned to that server without and with `sync`
//! ([`crate::client::replica_read`]), must be the same as every other's read at the same zxid:
//! the same paths, data and Stat fields (czxid, mzxid, pzxid, version, cversion,
//! ephemeralOwner, numChildren). Reads are compared only when they were kept at one zxid, so
//! a follower that lags while sessions still expire is never taken for a diverged one. Any
//! difference is a `replica-divergence` (the run is INVALID); so is a difference of keeperd's
//! whole-state digests at one zxid. A server that could not be read within the bound, or reads
//! that never met at one zxid, leave the comparison unknown, and the run at best unknown.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::result::Validity;
use crate::client::replica_read::{Labelled, ReplicaReading};
use crate::client::tree::{Tree, Znode};

/// At most this many differences are kept in `results.json` (all are counted).
const KEPT: usize = 50;

/// What the replicas' comparison found (kept in `results.json` as `replicas`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replicas {
    /// Runs before trees were compared: every node stood at `zxid` with the same digest.
    Converged { zxid: i64, nodes: usize },
    /// Runs before trees were compared: nodes at the same `zxid` with different digests.
    Diverged {
        zxid: i64,
        digests: Vec<(String, u64)>,
    },
    /// Not compared, and why (one server); it does not touch the verdict.
    NotJudged(String),
    /// Every server's tree read and compared.
    Compared(Comparison),
}

/// The trees' comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// Converged, diverged, or unknown.
    pub outcome: Convergence,
    /// Why it is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The zxid every server's reads were kept at, when they met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zxid: Option<i64>,
    /// The znodes under the root at that zxid.
    pub znodes: usize,
    /// Whether keeperd's digests were compared at that zxid too.
    pub digests_compared: bool,
    /// How many differences were found in all.
    pub differences: usize,
    /// The differences (the first [`KEPT`]).
    pub divergences: Vec<Divergence>,
    /// What was read (the trees left out).
    pub reading: ReplicaReading,
}

/// The comparison's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Convergence {
    /// Every server served the same tree at one zxid, without and with `sync`.
    Converged,
    /// Some server served something else at a zxid another served.
    Diverged,
    /// A server could not be read, or the reads never met at one zxid.
    Unknown,
}

/// Which read of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Read {
    /// Read without `sync`.
    Unsynced,
    /// Read after `sync`.
    Synced,
}

/// One `replica-divergence`: what `server` served differs from what the most reads at the
/// same zxid served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// The server that differs.
    pub server: String,
    /// Its reads that differ.
    pub reads: Vec<Read>,
    /// The znode (`None`: keeperd's digest of the whole state).
    pub path: Option<String>,
    /// The fields that differ (`exists` when the znode is on one side only).
    pub fields: Vec<String>,
    /// The zxid the reads were kept at.
    pub zxid: i64,
    /// Those fields as `server` served them.
    pub served: String,
    /// The servers that served the other value.
    pub others: Vec<String>,
    /// Those fields as they served them.
    pub expected: String,
}

impl Divergence {
    /// `n1 /a/b data, version at zxid 0x5: n1 has data "1", version 2 where n2, n3 have
    /// data "3", version 4 (read without sync)`.
    fn describe(&self) -> String {
        let (what, reads) = match &self.path {
            Some(path) => {
                let reads = match self.reads.as_slice() {
                    [Read::Unsynced] => " (read without sync)",
                    [Read::Synced] => " (read after sync)",
                    _ => " (read without and after sync)",
                };
                (format!("{path} {}", self.fields.join(", ")), reads)
            }
            None => ("keeperd digest".to_string(), ""),
        };
        let others = self.others.join(", ");
        let have = if self.others.len() == 1 {
            "has"
        } else {
            "have"
        };
        format!(
            "{} {what} at zxid {:#x}: {} has {} where {others} {have} {}{reads}",
            self.server, self.zxid, self.server, self.served, self.expected
        )
    }
}

impl Replicas {
    /// What the comparison makes of the run: diverged is invalid, unknown at best unknown.
    pub fn validity(&self) -> Validity {
        match self {
            Replicas::Diverged { .. } => Validity::Invalid,
            Replicas::Converged { .. } | Replicas::NotJudged(_) => Validity::Valid,
            Replicas::Compared(c) => match c.outcome {
                Convergence::Converged => Validity::Valid,
                Convergence::Diverged => Validity::Invalid,
                Convergence::Unknown => Validity::Unknown,
            },
        }
    }

    /// The verdict line's part, e.g. `replicas: converged (3 servers agree on 12 znodes at
    /// zxid 0x200000017, read without and after sync; settled in 400 ms)`; `None` when not
    /// judged.
    pub fn describe(&self) -> Option<String> {
        let line = match self {
            Replicas::Converged { zxid, nodes } => {
                format!("replicas: converged ({nodes} at zxid {zxid:#x})")
            }
            Replicas::Diverged { zxid, digests } => {
                let each: Vec<String> = digests
                    .iter()
                    .map(|(n, d)| format!("{n} {d:016x}"))
                    .collect();
                format!("replicas: DIVERGED at zxid {zxid:#x} ({})", each.join(", "))
            }
            Replicas::NotJudged(_) => return None,
            Replicas::Compared(c) => c.describe(),
        };
        Some(line)
    }
}

impl Comparison {
    fn describe(&self) -> String {
        let r = &self.reading;
        match self.outcome {
            Convergence::Converged => {
                let digests = match self.digests_compared {
                    true => ", keeperd digests too",
                    false => "",
                };
                format!(
                    "replicas: converged ({} servers agree on {} znodes at zxid {:#x}, read \
                     without and after sync{digests}; settled in {})",
                    r.servers.len(),
                    self.znodes,
                    self.zxid.unwrap_or_default(),
                    seconds(r.settled_ms.unwrap_or(r.elapsed_ms)),
                )
            }
            Convergence::Diverged => {
                let first = self.divergences.first().map(Divergence::describe);
                format!(
                    "replicas: DIVERGED (replica-divergence: {}; {} difference{} in all)",
                    first.unwrap_or_default(),
                    self.differences,
                    if self.differences == 1 { "" } else { "s" }
                )
            }
            Convergence::Unknown => format!(
                "replicas: UNKNOWN ({})",
                self.why.as_deref().unwrap_or("not compared")
            ),
        }
    }
}

/// `400 ms`, `1.2 s`.
fn seconds(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

/// One kept read: whose, which, and what.
struct Kept<'a> {
    server: &'a str,
    read: Read,
    labelled: &'a Labelled,
}

/// A comparison that could not be made (the controller was interrupted before it read the
/// servers), and why: unknown, so the run is at best unknown.
pub fn not_compared(why: String) -> Replicas {
    Replicas::Compared(Comparison {
        outcome: Convergence::Unknown,
        why: Some(why),
        zxid: None,
        znodes: 0,
        digests_compared: false,
        differences: 0,
        divergences: Vec::new(),
        reading: ReplicaReading::default(),
    })
}

/// Judges what was read of every server.
pub fn judge(reading: ReplicaReading) -> Replicas {
    if reading.servers.len() < 2 {
        return Replicas::NotJudged("one server".into());
    }
    let mut at: BTreeMap<i64, Vec<Kept>> = BTreeMap::new();
    for s in &reading.servers {
        let reads = [(Read::Unsynced, &s.unsynced), (Read::Synced, &s.synced)];
        for (read, labelled) in reads {
            if let Some(labelled) = labelled {
                let server = s.server.as_str();
                at.entry(labelled.zxid).or_default().push(Kept {
                    server,
                    read,
                    labelled,
                });
            }
        }
    }
    let mut found: Vec<Divergence> = Vec::new();
    for (zxid, kept) in &at {
        found.extend(differences(*zxid, kept));
    }
    let met = reading.met_at();
    found.extend(digest_differences(&reading));
    let digests_compared = met.is_some()
        && reading
            .servers
            .iter()
            .all(|s| s.digest.is_some_and(|d| Some(d.zxid) == met));
    let znodes = met
        .and_then(|z| at.get(&z))
        .and_then(|kept| kept.first())
        .map_or(0, |k| k.labelled.tree.len());
    let (outcome, why) = match (found.is_empty(), met) {
        (false, _) => (Convergence::Diverged, None),
        (true, Some(_)) => (Convergence::Converged, None),
        (true, None) => (Convergence::Unknown, Some(why_unknown(&reading))),
    };
    let differences = found.len();
    found.truncate(KEPT);
    Replicas::Compared(Comparison {
        outcome,
        why,
        zxid: met,
        znodes,
        digests_compared,
        differences,
        divergences: found,
        reading,
    })
}

/// Why reads that found no difference still leave the comparison unknown: the servers that
/// could not be read, or where each stood.
fn why_unknown(reading: &ReplicaReading) -> String {
    let limit = seconds(reading.limit_ms);
    let unread: Vec<String> = reading
        .servers
        .iter()
        .filter(|s| s.synced.is_none() || s.unsynced.is_none() || s.error.is_some())
        .map(|s| match &s.error {
            Some(e) => format!("{}: {e}", s.server),
            None => format!("{}: its zxid never stood still across a read", s.server),
        })
        .collect();
    if !unread.is_empty() {
        return format!(
            "not every server could be read within {limit}: {}",
            unread.join("; ")
        );
    }
    let stood: Vec<String> = reading
        .servers
        .iter()
        .map(|s| {
            let z = |l: &Option<Labelled>| l.as_ref().map_or(0, |l| l.zxid);
            format!("{} {:#x}/{:#x}", s.server, z(&s.unsynced), z(&s.synced))
        })
        .collect();
    format!(
        "the servers' reads never met at one zxid within {limit} (without/after sync: {})",
        stood.join(", ")
    )
}

/// The differences among reads kept at `zxid`: each read against the tree most of them
/// served (on a tie, the first read's), merged per server, znode and fields.
fn differences(zxid: i64, kept: &[Kept]) -> Vec<Divergence> {
    let served: Vec<(&str, &Tree)> = kept.iter().map(|k| (k.server, &k.labelled.tree)).collect();
    let Some((reference, others)) = majority(&served) else {
        return Vec::new();
    };
    let mut merged: Vec<Divergence> = Vec::new();
    for k in kept.iter().filter(|k| k.labelled.tree != *reference) {
        for (path, fields, served, expected) in tree_differences(&k.labelled.tree, reference) {
            let same = merged
                .iter_mut()
                .find(|d| d.server == k.server && d.path.as_ref() == Some(&path));
            match same {
                Some(d) if d.fields == fields => d.reads.push(k.read),
                _ => merged.push(Divergence {
                    server: k.server.to_string(),
                    reads: vec![k.read],
                    path: Some(path),
                    fields,
                    zxid,
                    served,
                    others: others.clone(),
                    expected,
                }),
            }
        }
    }
    merged
}

/// Where `tree` differs from `reference`: per znode, the fields that differ and their values
/// on each side.
fn tree_differences(tree: &Tree, reference: &Tree) -> Vec<(String, Vec<String>, String, String)> {
    let paths: std::collections::BTreeSet<&String> = tree.keys().chain(reference.keys()).collect();
    let mut found = Vec::new();
    for path in paths {
        match (tree.get(path), reference.get(path)) {
            (Some(a), Some(b)) if a != b => {
                let (fields, served, expected) = field_differences(a, b);
                found.push((path.clone(), fields, served, expected));
            }
            (Some(_), None) => found.push((path.clone(), exists(), "it".into(), "none".into())),
            (None, Some(_)) => found.push((path.clone(), exists(), "none".into(), "it".into())),
            _ => {}
        }
    }
    found
}

fn exists() -> Vec<String> {
    vec!["exists".to_string()]
}

/// The names of the fields where `a` and `b` differ, and their values in each.
fn field_differences(a: &Znode, b: &Znode) -> (Vec<String>, String, String) {
    let (mut names, mut served, mut expected) = (Vec::new(), Vec::new(), Vec::new());
    for ((name, x), (_, y)) in a.fields().into_iter().zip(b.fields()) {
        if x != y {
            names.push(name.to_string());
            served.push(format!("{name} {x}"));
            expected.push(format!("{name} {y}"));
        }
    }
    (names, served.join(", "), expected.join(", "))
}

/// Of what each server served, the value most of them agree on (on a tie, the first's), and
/// the servers that served it, each named once.
fn majority<'a, T: PartialEq>(served: &[(&str, &'a T)]) -> Option<(&'a T, Vec<String>)> {
    let agreeing = |value: &T| served.iter().filter(|(_, v)| *v == value).count();
    let &(_, reference) = served.iter().rev().max_by_key(|(_, v)| agreeing(v))?;
    let mut others: Vec<String> = served
        .iter()
        .filter(|(_, v)| *v == reference)
        .map(|(server, _)| server.to_string())
        .collect();
    others.dedup();
    Some((reference, others))
}

/// keeperd's digests that differ among servers asked at the same zxid.
fn digest_differences(reading: &ReplicaReading) -> Vec<Divergence> {
    let mut at: BTreeMap<i64, Vec<(&str, u64)>> = BTreeMap::new();
    for s in &reading.servers {
        if let Some(d) = s.digest {
            at.entry(d.zxid).or_default().push((&s.server, d.digest));
        }
    }
    let mut found = Vec::new();
    for (zxid, digests) in at {
        let served: Vec<(&str, &u64)> = digests.iter().map(|(s, d)| (*s, d)).collect();
        let Some((&reference, others)) = majority(&served) else {
            continue;
        };
        for (server, digest) in digests.iter().filter(|(_, d)| *d != reference) {
            found.push(Divergence {
                server: server.to_string(),
                reads: Vec::new(),
                path: None,
                fields: vec!["digest".into()],
                zxid,
                served: format!("digest {digest:016x}"),
                others: others.clone(),
                expected: format!("digest {reference:016x}"),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replicas")
    }

    /// The comparison of fixture `name` (a hand-made reading of every server).
    fn judged(name: &str) -> Comparison {
        let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
        match judge(serde_json::from_str(&text).unwrap()) {
            Replicas::Compared(c) => c,
            other => panic!("{name}: {other:?}"),
        }
    }

    fn line(c: &Comparison) -> String {
        Replicas::Compared(c.clone()).describe().unwrap()
    }

    #[test]
    fn every_fixture_gets_the_verdict_its_name_states() {
        let mut seen = 0;
        for entry in std::fs::read_dir(fixtures()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let expected = match stem.split('-').next().unwrap() {
                "valid" => Validity::Valid,
                "invalid" => Validity::Invalid,
                "unknown" => Validity::Unknown,
                other => panic!("{name}: no verdict {other:?} in its name"),
            };
            let c = judged(&name);
            assert_eq!(
                Replicas::Compared(c.clone()).validity(),
                expected,
                "{name}: {}",
                line(&c)
            );
            seen += 1;
        }
        assert!(seen >= 10, "{seen} fixtures");
    }

    #[test]
    fn a_stale_znode_names_its_server_path_fields_and_zxid() {
        let c = judged("invalid-stale-znode-on-one-follower.json");
        assert_eq!(c.differences, 1, "{:?}", c.divergences);
        let d = &c.divergences[0];
        assert_eq!(d.server, "n1");
        assert_eq!(d.path.as_deref(), Some("/stampede/r/register/0"));
        assert_eq!(d.fields, ["data", "mzxid", "version"]);
        assert_eq!(d.reads, [Read::Unsynced, Read::Synced]);
        assert_eq!(d.others, ["n2", "n3"]);
        assert_eq!(
            line(&c),
            "replicas: DIVERGED (replica-divergence: n1 /stampede/r/register/0 data, mzxid, \
             version at zxid 0x10000002a: n1 has data \"3\", mzxid 0x100000010, version 3 where \
             n2, n3 have data \"7\", mzxid 0x100000029, version 5 (read without and after \
             sync); 1 difference in all)"
        );
        let twin = judged("valid-stale-znode-on-one-follower.json");
        assert_eq!(
            line(&twin),
            "replicas: converged (3 servers agree on 5 znodes at zxid 0x10000002a, read \
             without and after sync; settled in 400 ms)"
        );
    }

    #[test]
    fn a_kept_ephemeral_is_named_with_its_parents_stat() {
        let c = judged("invalid-ephemeral-kept-after-its-session.json");
        let found: Vec<(&str, &str, Vec<String>)> = c
            .divergences
            .iter()
            .map(|d| {
                (
                    d.server.as_str(),
                    d.path.as_deref().unwrap(),
                    d.fields.clone(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "n3",
                    "/stampede/r/lock",
                    vec!["pzxid".into(), "cversion".into(), "numChildren".into()]
                ),
                (
                    "n3",
                    "/stampede/r/lock/lock-0000000005",
                    vec!["exists".into()]
                ),
            ]
        );
    }

    #[test]
    fn a_stale_read_without_sync_is_a_divergence_of_that_read_only() {
        let c = judged("invalid-stale-only-without-sync.json");
        assert_eq!(c.divergences.len(), 1);
        assert_eq!(c.divergences[0].server, "n2");
        assert_eq!(c.divergences[0].reads, [Read::Unsynced]);
        assert!(line(&c).contains("(read without sync)"), "{}", line(&c));
    }

    #[test]
    fn a_follower_behind_is_compared_with_nothing() {
        let c = judged("unknown-lagging-follower-never-met.json");
        assert!(c.divergences.is_empty());
        assert!(
            line(&c).starts_with("replicas: UNKNOWN (the servers' reads never met at one zxid within 30.0 s (without/after sync: "),
            "{}",
            line(&c)
        );
        assert!(
            line(&c).contains("n3 0x100000028/0x10000002a"),
            "{}",
            line(&c)
        );
    }

    #[test]
    fn a_server_that_could_not_be_read_is_named_with_why() {
        let c = judged("unknown-one-server-unreadable.json");
        assert_eq!(c.outcome, Convergence::Unknown);
        assert_eq!(
            line(&c),
            "replicas: UNKNOWN (not every server could be read within 30.0 s: n3: no session \
             to 10.236.200.3:2181 within 5s)"
        );
    }

    #[test]
    fn keeperd_digests_are_compared_at_one_zxid_only() {
        let c = judged("invalid-keeperd-digests-differ.json");
        let d = &c.divergences[0];
        assert_eq!((d.server.as_str(), d.path.as_ref()), ("n3", None));
        assert!(
            line(&c).contains("replica-divergence: n3 keeperd digest at zxid 0x10000002a"),
            "{}",
            line(&c)
        );
        let twin = judged("valid-keeperd-digests-at-other-zxids.json");
        assert!(!twin.digests_compared);
        assert!(!line(&twin).contains("digests"), "{}", line(&twin));
    }

    #[test]
    fn a_comparison_cut_short_is_unknown_and_says_why() {
        let cut = not_compared("not compared: interrupted by SIGINT".into());
        assert_eq!(cut.validity(), Validity::Unknown);
        assert_eq!(
            cut.describe().as_deref(),
            Some("replicas: UNKNOWN (not compared: interrupted by SIGINT)")
        );
    }

    #[test]
    fn one_server_is_not_judged_and_touches_nothing() {
        let text =
            std::fs::read_to_string(fixtures().join("valid-lagging-follower-caught-up.json"));
        let mut reading: ReplicaReading = serde_json::from_str(&text.unwrap()).unwrap();
        reading.servers.truncate(1);
        let one = judge(reading);
        assert_eq!(one, Replicas::NotJudged("one server".into()));
        assert_eq!((one.validity(), one.describe()), (Validity::Valid, None));
    }

    #[test]
    fn results_keep_the_comparison_without_the_trees_and_read_older_shapes() {
        let c = Replicas::Compared(judged("invalid-stale-znode-on-one-follower.json"));
        let kept = serde_json::to_value(&c).unwrap();
        assert!(!kept.to_string().contains("\"tree\""), "{kept}");
        let back: Replicas = serde_json::from_value(kept).unwrap();
        assert_eq!(
            (back.validity(), back.describe()),
            (c.validity(), c.describe())
        );
        let older = [
            (r#"{"converged":{"zxid":16,"nodes":3}}"#, Validity::Valid),
            (
                r#"{"diverged":{"zxid":16,"digests":[["n1",1],["n2",2]]}}"#,
                Validity::Invalid,
            ),
            (r#"{"not-judged":"one server"}"#, Validity::Valid),
        ];
        for (json, validity) in older {
            let r: Replicas = serde_json::from_str(json).unwrap();
            assert_eq!(r.validity(), validity, "{json}");
        }
    }
}
