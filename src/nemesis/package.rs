//! Nemesis packages: the faults a test takes turns injecting (`nemeses/*.yaml`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use rand::Rng;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::dice::Dice;
use super::kind::{refuse, Checking, FaultKind, Refusal};
use super::trigger::TriggerConfig;
use super::{kind, HolderView, Nemesis, KINDS};
use crate::control::{Control, Node};
use crate::db::Db;

/// A nemesis file: the faults, injected in turn or in a random mix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NemesisConfig {
    /// The faults; empty for a run without faults.
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
    /// In which order the faults come, one at each nemesis interval.
    #[serde(default)]
    pub order: Order,
}

/// The order of a package's faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// One after the other, as listed, round and round.
    #[default]
    InTurn,
    /// A fault picked at random each time.
    Random,
}

/// A random mix of faults, presented to the generator as one nemesis: each start injects the
/// fault picked after the previous stop, and `kind` names that fault.
struct RandomMix {
    faults: Vec<Arc<dyn Nemesis>>,
    next: std::sync::Mutex<usize>,
    dice: Dice,
}

impl RandomMix {
    fn current(&self) -> &Arc<dyn Nemesis> {
        &self.faults[*self.next.lock().unwrap_or_else(|p| p.into_inner())]
    }
}

#[async_trait::async_trait]
impl Nemesis for RandomMix {
    fn kind(&self) -> &str {
        self.current().kind()
    }

    fn target(&self) -> String {
        self.current().target()
    }

    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        self.current().start().await
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let fault = self.current().clone();
        let healed = fault.stop().await;
        let n = self.faults.len();
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) =
            self.dice.roll(|rng| rng.gen_range(0..n));
        healed
    }
}

/// One fault of a package: its kind, its target, a log trigger, and the settings of its kind
/// under the key the kind names (`netem:` for `packet`, `steps:` for `sequence`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultConfig {
    /// A kind of the registry ([`KINDS`]): `partition`, `kill`, `pause`, …
    pub kind: String,
    /// Which nodes (see `stampede nemesis run --help`).
    #[serde(default = "default_target")]
    pub target: String,
    /// Fire a `kill`, `pause`, `partition` or `lose-unfsynced` on a line of the server's log
    /// instead of at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<TriggerConfig>,
    /// The settings of its kind, under the key its kind names, as written; read by the kind
    /// ([`FaultConfig::section`]).
    #[serde(flatten)]
    pub settings: BTreeMap<String, serde_yaml_ng::Value>,
}

fn default_target() -> String {
    "one".into()
}

/// What is wrong with one field of a package's fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The fault's position in `faults`.
    pub fault: usize,
    /// The field: `kind`, `target`, `trigger`, a settings key, or a field in the settings
    /// (`clock.period`).
    pub field: String,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "faults[{}].{}: {}", self.fault, self.field, self.message)
    }
}

/// The nodes a package's faults are aimed at, for checking targets before anything starts.
pub struct Aim<'a> {
    /// Every node under control.
    pub nodes: &'a [Node],
    /// The database on them: faults count only on the nodes running it.
    pub db: &'a dyn Db,
}

impl FaultConfig {
    /// A fault of `kind` on `target`, without trigger or settings.
    pub fn new(kind: &str, target: &str) -> FaultConfig {
        FaultConfig {
            kind: kind.to_string(),
            target: target.to_string(),
            trigger: None,
            settings: BTreeMap::new(),
        }
    }

    /// Its kind's entry in the registry; the refusal lists the known kinds.
    pub fn entry(&self) -> Result<&'static dyn FaultKind, Refusal> {
        kind(&self.kind).ok_or_else(|| {
            let known: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
            refuse(
                "kind",
                format!(
                    "unknown nemesis kind {:?} (known: {})",
                    self.kind,
                    known.join(", ")
                ),
            )
        })
    }

    /// The settings under `key` as `T`, `None` when absent; the refusal names the field
    /// (`clock.period`).
    pub fn section<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Refusal> {
        let Some(value) = self.settings.get(key) else {
            return Ok(None);
        };
        crate::config::from_section(value)
            .map(Some)
            .map_err(|text| {
                let path = |p: &str| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_.[]-".contains(c))
                };
                match text.split_once(": ") {
                    Some((inner, why)) if path(inner) => refuse(&format!("{key}.{inner}"), why),
                    _ => refuse(key, text),
                }
            })
    }

    /// Checks every field of this fault: its kind, its settings key, its trigger, then what
    /// its kind checks (its target against `aim`'s nodes and database when given; `holders`:
    /// whether the workload has lock holders or leaders for the target `holder`). The
    /// refusal names the field.
    pub fn validate(&self, holders: bool, aim: Option<&Aim>) -> Result<(), Refusal> {
        let entry = self.entry()?;
        for key in self.settings.keys() {
            if entry.settings_key() == Some(key.as_str()) {
                continue;
            }
            let owner = KINDS
                .iter()
                .find(|k| k.settings_key() == Some(key.as_str()));
            return Err(match owner {
                Some(owner) => refuse(
                    key,
                    format!("only {} faults take {key} settings", owner.name()),
                ),
                None => {
                    let own = entry
                        .settings_key()
                        .map(|k| format!(", `{k}`"))
                        .unwrap_or_default();
                    refuse(
                        key,
                        format!(
                            "unknown field `{key}` (expected `kind`, `target`, `trigger`{own})"
                        ),
                    )
                }
            });
        }
        if let Some(trigger) = &self.trigger {
            trigger
                .check(&self.kind)
                .map_err(|e| refuse("trigger", e))?;
            if let Some(aim) = aim {
                if let Some(node) = crate::db::servers(aim.db, aim.nodes).first() {
                    if aim.db.server_files(node).is_none() {
                        let why = format!("{} does not say where its server logs", aim.db.name());
                        return Err(refuse("trigger", why));
                    }
                }
            }
        }
        entry.check(self, &Checking { holders, aim })
    }

    /// This fault and the faults it holds (a sequence's steps), depth first.
    fn with_nested(&self) -> Vec<FaultConfig> {
        let mut all = vec![self.clone()];
        if let Ok(entry) = self.entry() {
            for inner in entry.nested(self) {
                all.extend(inner.with_nested());
            }
        }
        all
    }
}

/// The line (from 1) of field `field` of fault `fault` in a nemesis file's text, as far as
/// block or one-line flow YAML shows it: the field's own line, else the fault's line.
fn line_of(text: &str, fault: usize, field: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let meaningful = |l: &&str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let top = lines.iter().position(|l| l.starts_with("faults:"))?;
    let end = (top + 1..lines.len())
        .find(|&i| meaningful(&lines[i]) && indent(lines[i]) == 0)
        .unwrap_or(lines.len());
    let items: Vec<usize> = (top + 1..end)
        .filter(|&i| lines[i].trim_start().starts_with('-'))
        .collect();
    let Some(&first) = items.get(fault) else {
        return Some(top + 1);
    };
    let last = items.get(fault + 1).copied().unwrap_or(end);
    let key = format!("{field}:");
    let on_line = |i: usize| {
        let content = lines[i].trim_start().trim_start_matches('-').trim_start();
        content.starts_with(&key)
            || content.contains(&format!(" {key}"))
            || content.contains(&format!("{{{key}"))
    };
    let at = (first..last).find(|&i| on_line(i)).unwrap_or(first);
    Some(at + 1)
}

/// Reads the nemesis package at `path` and checks every field of its faults
/// ([`FaultConfig::validate`]); an error is one line, `file:line: faults[i].field: what`.
pub fn load(path: &Path, holders: bool, aim: Option<&Aim>) -> anyhow::Result<NemesisConfig> {
    let cfg: NemesisConfig = crate::config::load(path)?;
    cfg.check(path, holders, aim)?;
    Ok(cfg)
}

impl NemesisConfig {
    /// Checks every fault of this package, loaded from `path`, naming the file and line of
    /// the first field that is wrong.
    pub fn check(&self, path: &Path, holders: bool, aim: Option<&Aim>) -> anyhow::Result<()> {
        let Err(e) = self.validate(holders, aim) else {
            return Ok(());
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let key = e.field.split(['.', '[']).next().unwrap_or_default();
        match line_of(&text, e.fault, key) {
            Some(line) => anyhow::bail!("{}:{line}: {e}", path.display()),
            None => anyhow::bail!("{}: {e}", path.display()),
        }
    }

    /// Checks every fault ([`FaultConfig::validate`]); the error names the first bad field.
    pub fn validate(&self, holders: bool, aim: Option<&Aim>) -> Result<(), FieldError> {
        for (fault, f) in self.faults.iter().enumerate() {
            f.validate(holders, aim)
                .map_err(|(field, message)| FieldError {
                    fault,
                    field,
                    message,
                })?;
        }
        Ok(())
    }

    /// Builds the package's nemeses, each fault drawing its random choices from dice of its
    /// own split from `dice`; an error names the fault that is wrong.
    pub fn build(
        &self,
        control: &Control,
        db: Arc<dyn Db>,
        holder: Option<Arc<dyn HolderView>>,
        dice: &Dice,
    ) -> anyhow::Result<Vec<Arc<dyn Nemesis>>> {
        let faults = self.build_faults(control, db, holder, dice)?;
        Ok(match self.order {
            Order::Random if faults.len() > 1 => {
                let dice = dice.split(u64::MAX);
                let first = dice.roll(|rng| rng.gen_range(0..faults.len()));
                vec![Arc::new(RandomMix {
                    faults,
                    next: std::sync::Mutex::new(first),
                    dice,
                })]
            }
            _ => faults,
        })
    }

    fn build_faults(
        &self,
        control: &Control,
        db: Arc<dyn Db>,
        holder: Option<Arc<dyn HolderView>>,
        dice: &Dice,
    ) -> anyhow::Result<Vec<Arc<dyn Nemesis>>> {
        self.faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let dice = dice.split(i as u64);
                super::build(f, control.clone(), db.clone(), holder.clone(), dice)
                    .with_context(|| format!("faults[{i}] ({} on {})", f.kind, f.target))
            })
            .collect()
    }

    /// The database the package's faults need (each kind used, a sequence's steps included,
    /// prepares it once), given the one the run would use.
    pub fn prepare_db(&self, db: Arc<dyn Db>) -> Arc<dyn Db> {
        let mut used: Vec<&'static dyn FaultKind> = Vec::new();
        for fault in self.faults.iter().flat_map(FaultConfig::with_nested) {
            if let Ok(entry) = fault.entry() {
                if !used.iter().any(|k| k.name() == entry.name()) {
                    used.push(entry);
                }
            }
        }
        used.into_iter().fold(db, |db, kind| kind.prepare_db(db))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::control::{HostKeyPolicy, Node, SshOptions};
    use crate::db::zookeeper::{ZkConfig, ZooKeeper};

    #[test]
    fn every_shipped_nemesis_file_loads_and_builds() {
        let nodes: Vec<Node> = (1..=3)
            .map(|i| Node {
                name: format!("n{i}"),
                host: format!("10.0.0.{i}"),
                port: 22,
                user: "root".into(),
            })
            .collect();
        let opts = SshOptions {
            key: None,
            known_hosts: "/dev/null".into(),
            policy: HostKeyPolicy::Strict,
            connect_timeout: std::time::Duration::from_secs(1),
        };
        let control = Control::new(nodes.clone(), opts);
        let db: Arc<dyn Db> = Arc::new(ZooKeeper::new(ZkConfig::default(), nodes));
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("nemeses");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let aim = Aim {
                nodes: control.nodes(),
                db: db.as_ref(),
            };
            let cfg = load(&path, true, Some(&aim)).unwrap_or_else(|e| panic!("{e:#}"));
            if cfg.faults.iter().any(|f| f.kind == "power-loss") {
                let refused = cfg
                    .build(&control, db.clone(), None, &Dice::seeded(1))
                    .err()
                    .map(|e| format!("{e:#}"));
                assert!(
                    refused.as_deref().is_some_and(|e| e.contains("is not a guest of `stampede vm up`")),
                    "{}: power-loss on nodes that are not VM guests must be refused, got {refused:?}",
                    path.display()
                );
                seen += 1;
                continue;
            }
            let built = cfg
                .build(&control, db.clone(), None, &Dice::seeded(1))
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            let expected = if cfg.order == Order::Random && cfg.faults.len() > 1 {
                1
            } else {
                cfg.faults.len()
            };
            assert_eq!(built.len(), expected);
            seen += 1;
        }
        assert!(seen >= 5, "the shipped nemesis files were found");
    }

    #[test]
    fn a_bad_fault_is_named() {
        let cfg: NemesisConfig =
            serde_yaml_ng::from_str("faults:\n  - kind: partition\n  - kind: flood\n").unwrap();
        let nodes = vec![Node {
            name: "n1".into(),
            host: "10.0.0.1".into(),
            port: 22,
            user: "root".into(),
        }];
        let opts = SshOptions {
            key: None,
            known_hosts: "/dev/null".into(),
            policy: HostKeyPolicy::Strict,
            connect_timeout: std::time::Duration::from_secs(1),
        };
        let db: Arc<dyn Db> = Arc::new(ZooKeeper::new(ZkConfig::default(), nodes.clone()));
        let err = cfg
            .build(&Control::new(nodes, opts), db, None, &Dice::seeded(1))
            .err()
            .expect("flood is no fault");
        assert!(
            format!("{err:#}").starts_with("faults[1] (flood on one): unknown nemesis kind"),
            "{err:#}"
        );
        assert_eq!(
            load_error("faults:\n  - kind: clock\n    clok: {}\n", false, false).unwrap(),
            "x.yaml:3: faults[0].clok: unknown field `clok` (expected `kind`, `target`, \
             `trigger`, `clock`)"
        );
        assert_eq!(
            load_error("faults:\n  - kind: clock\n    steps: []\n", false, false).unwrap(),
            "x.yaml:3: faults[0].steps: only sequence faults take steps settings"
        );
    }

    /// Loads `yaml` as a package file against `db` on three nodes; the error, if any.
    fn load_error(yaml: &str, holders: bool, keeperd: bool) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.yaml");
        std::fs::write(&path, yaml).unwrap();
        let nodes = crate::control::test_nodes(3);
        let db: Box<dyn Db> = match keeperd {
            // keeperd on n1 alone (standalone), the other nodes running nothing.
            true => {
                Box::new(crate::db::keeperd::Keeperd::new(Default::default(), &nodes[..1]).unwrap())
            }
            false => Box::new(ZooKeeper::new(ZkConfig::default(), nodes.clone())),
        };
        let aim = Aim {
            nodes: &nodes,
            db: db.as_ref(),
        };
        load(&path, holders, Some(&aim))
            .err()
            .map(|e| format!("{e:#}").replace(&path.display().to_string(), "x.yaml"))
    }

    #[test]
    fn a_mistyped_kind_target_or_duration_is_named_by_file_and_line() {
        let err = |yaml| load_error(yaml, false, false).expect("refused");
        let kil = err(
            "faults:\n  - kind: partition\n    target: halves\n  - kind: kil\n    target: one\n",
        );
        assert!(
            kil.starts_with(
                "x.yaml:4: faults[1].kind: unknown nemesis kind \"kil\" (known: partition, kill, \
                 pause, clock, packet, "
            ),
            "{kil}"
        );
        assert_eq!(
            err("# comment\nfaults:\n  - kind: kill\n    target: sideways\n"),
            "x.yaml:4: faults[0].target: unknown target \"sideways\": not a node (nodes: n1, n2, \
             n3) nor one of one, minority, majority, all, leader, follower"
        );
        assert!(err("faults:\n  - kind: partition\n    target: sideways\n")
            .starts_with("x.yaml:3: faults[0].target: unknown target \"sideways\""));
        assert!(err("faults: [{kind: pause, target: n7}]\n")
            .starts_with("x.yaml:1: faults[0].target: unknown target \"n7\""));
        let period = err("faults:\n  - kind: clock\n    clock: {mode: strobe, period: 1}\n");
        assert!(
            period.starts_with("x.yaml:3:")
                && period.contains("faults[0].clock.period: invalid duration `1`"),
            "{period}"
        );
        assert_eq!(
            err("faults:\n  - kind: clock\n    clock: {mode: strobe, period: 0s}\n"),
            "x.yaml:3: faults[0].clock: a strobe needs a period above 0"
        );
        assert_eq!(
            err("faults:\n  - kind: kill\n    netem: {delay: 5ms}\n"),
            "x.yaml:3: faults[0].netem: only packet faults take netem settings"
        );
        assert_eq!(
            err("faults:\n  - kind: packet\n    netem: {loss: 120}\n"),
            "x.yaml:3: faults[0].netem: netem loss 120 is not a percentage from 0 to 100"
        );
        assert_eq!(
            err("faults:\n  - kind: kill\n    trigger: {pattern: \"NEWLEADER(\"}\n"),
            "x.yaml:3: faults[0].trigger: pattern \"NEWLEADER(\" is not a regular expression: \
             error: unclosed group"
        );
        assert_eq!(
            err("faults:\n  - kind: clock\n    trigger: {pattern: x}\n"),
            "x.yaml:3: faults[0].trigger: only partition, kill, pause and lose-unfsynced faults \
             take a trigger, not clock"
        );
        assert_eq!(
            err("faults:\n  - kind: sequence\n    steps:\n      - {kind: kill}\n      - {heal: 2}\n"),
            "x.yaml:3: faults[0].steps: steps[1].heal: step 2 is no fault step before it still in \
             effect"
        );
        assert_eq!(
            err("faults:\n  - kind: sequence\n    steps:\n      - {kind: pause, trigger: {pattern: x, probability: 0}}\n"),
            "x.yaml:3: faults[0].steps: steps[0].trigger: probability 0 is not above 0 and at most 1"
        );
        assert_eq!(
            err("faults:\n  - kind: partition\n    target: holder\n"),
            "x.yaml:3: faults[0].target: target holder: only lock and election workloads have \
             holders"
        );
        assert_eq!(
            load_error(
                "faults:\n  - {kind: partition, target: holder}\n",
                true,
                false
            ),
            None
        );
        assert_eq!(
            load_error("faults:\n  - kind: kill\n    target: n2\n", false, false),
            None
        );
    }

    #[test]
    fn targets_must_reach_a_node_running_the_database() {
        let err = |yaml| load_error(yaml, true, true).expect("refused");
        assert_eq!(
            err("faults:\n  - kind: partition\n    target: halves\n"),
            "x.yaml:2: faults[0].kind: a partition needs two keeperd servers; keeperd runs on n1 \
             alone"
        );
        assert_eq!(
            err("faults:\n  - kind: kill\n  - kind: pause\n    target: n2\n"),
            "x.yaml:4: faults[1].target: target \"n2\" runs no keeperd server (keeperd runs on n1)"
        );
        assert_eq!(
            err("faults:\n  - kind: clock\n    target: follower\n"),
            "x.yaml:3: faults[0].target: target follower needs two keeperd servers; keeperd runs \
             on n1 alone"
        );
        assert_eq!(
            load_error(
                "faults:\n  - {kind: kill, target: leader}\n  - {kind: pause, target: minority}\n",
                false,
                true
            ),
            None
        );
    }

    #[test]
    fn a_reconfig_is_refused_on_keeperd_and_below_a_majority_of_voters() {
        assert_eq!(
            load_error("faults:\n  - kind: reconfig\n", false, true).unwrap(),
            "x.yaml:2: faults[0].kind: a reconfig needs an ensemble of 3 or more keeperd \
             servers; this one has 0"
        );
        assert_eq!(
            load_error(
                "faults:\n  - kind: reconfig\n    target: majority\n",
                false,
                false
            )
            .unwrap(),
            "x.yaml:3: faults[0].target: target majority takes 2 of 3 voters out; a reconfig \
             may take at most 1, leaving a majority of the planned voters"
        );
        assert_eq!(
            load_error(
                "faults:\n  - kind: kill\n    reconfig: {action: observer}\n",
                false,
                false
            )
            .unwrap(),
            "x.yaml:3: faults[0].reconfig: only reconfig faults take reconfig settings"
        );
        let fine = "faults:\n  - {kind: reconfig, target: leader, reconfig: {action: observer}}\n";
        assert_eq!(load_error(fine, false, false), None);
    }

    #[test]
    fn the_registry_names_each_kind_and_settings_key_once() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
        let mut keys: Vec<&str> = KINDS.iter().filter_map(|k| k.settings_key()).collect();
        let (kinds, settings) = (names.len(), keys.len());
        names.sort();
        names.dedup();
        keys.sort();
        keys.dedup();
        assert_eq!(
            (names.len(), keys.len()),
            (kinds, settings),
            "{names:?} {keys:?}"
        );
        assert!(["kind", "target", "trigger"]
            .iter()
            .all(|k| !keys.contains(k)));
    }

    #[test]
    fn a_lose_unfsynced_step_puts_the_database_on_its_layer() {
        let nodes = crate::control::test_nodes(3);
        let db: Arc<dyn Db> = Arc::new(ZooKeeper::new(ZkConfig::default(), nodes.clone()));
        let on_layer = |yaml: &str| {
            let cfg: NemesisConfig = serde_yaml_ng::from_str(yaml).unwrap();
            let prepared = cfg.prepare_db(db.clone());
            !Arc::ptr_eq(&prepared, &db)
        };
        assert!(on_layer("faults:\n  - kind: lose-unfsynced\n"));
        assert!(on_layer(
            "faults:\n  - kind: sequence\n    steps:\n      - {kind: lose-unfsynced}\n"
        ));
        assert!(!on_layer("faults:\n  - kind: kill\n  - kind: partition\n"));
    }

    /// A fault that does nothing but answer to its name.
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Nemesis for Named {
        fn kind(&self) -> &str {
            self.0
        }

        async fn start(&self) -> anyhow::Result<serde_json::Value> {
            Ok(serde_json::Value::Null)
        }

        async fn stop(&self) -> anyhow::Result<serde_json::Value> {
            Ok(serde_json::Value::Null)
        }
    }

    #[test]
    fn a_random_mix_names_the_fault_it_injects_next() {
        let faults: Vec<Arc<dyn Nemesis>> = vec![
            Arc::new(Named("kill")),
            Arc::new(Named("pause")),
            Arc::new(Named("clock")),
        ];
        let mix = RandomMix {
            faults,
            next: std::sync::Mutex::new(0),
            dice: Dice::seeded(1),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut kinds = std::collections::BTreeMap::new();
        for _ in 0..300 {
            *kinds.entry(mix.kind().to_string()).or_insert(0) += 1;
            runtime.block_on(mix.stop()).unwrap();
        }
        assert_eq!(kinds.len(), 3, "every fault comes up: {kinds:?}");
        assert!(kinds.values().all(|n| *n > 50), "roughly evenly: {kinds:?}");
        let cfg: NemesisConfig = serde_yaml_ng::from_str("order: random\nfaults: []\n").unwrap();
        assert_eq!(cfg.order, Order::Random);
    }
}
