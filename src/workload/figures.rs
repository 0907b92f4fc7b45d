//! What a recipe run measured, in the form `compare`, the trend page and the sweep plots read:
//! latencies and herd load per release (or leadership change).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::history::Quantiles;
use crate::report::recipes::{LatencyKind, LoadFigures, RecipeFigures};

/// The figures of one run; all empty for a run that measured none (a register run, or a
/// recipe run that stopped before its summary).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The recipe's workload name, e.g. `lock-sequential`, `election-fair`.
    pub recipe: Option<String>,
    /// Contenders (candidates) at once.
    pub contenders: Option<u64>,
    /// Lock: from invoking acquire to holding the lock.
    pub acquire: Option<Quantiles>,
    /// Lock: from a release being invoked to the next holder acquiring.
    pub handoff: Option<Quantiles>,
    /// Election: from a leader leaving office to the next taking it.
    pub failover: Option<Quantiles>,
    /// Watch notifications delivered to waiters per release, as the clients counted them.
    pub notifications: Option<LoadFigures>,
    /// Requests waiters sent in reaction to a notification, per release.
    pub requests: Option<LoadFigures>,
    /// The servers' own counts per release, from `mntr` before and after the run.
    pub server: Option<ServerFigures>,
}

/// The servers' own load per release (or leadership change), summed over the servers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServerFigures {
    /// Watch notifications sent.
    pub notifications_per_release: f64,
    /// Packets received.
    pub packets_per_release: f64,
}

impl Figures {
    /// The figures of a recipe run (`recipe`: its workload name, e.g. `lock-sequential`,
    /// with `contenders` at once) held by its checkers' reports: `run` is the run's summary
    /// (latencies, herd counts, the servers' counts), `election` the election checker's
    /// report (failover times).
    pub fn of_recipe(checks: &Map<String, Value>, recipe: &str, contenders: u64) -> Figures {
        let null = Value::Null;
        let at = |key: &str| checks.get(key).unwrap_or(&null);
        let run = at("run");
        let load = |what: &str| {
            Some(LoadFigures {
                mean: run["herd"][format!("{what}_mean")].as_f64()?,
                max: run["herd"][format!("{what}_max")].as_u64()?,
            })
        };
        let server = &run["server"];
        let server = || {
            Some(ServerFigures {
                notifications_per_release: server["notifications_per_release"].as_f64()?,
                packets_per_release: server["packets_per_release"].as_f64()?,
            })
        };
        Figures {
            recipe: Some(run["recipe"].as_str().unwrap_or(recipe).to_string()),
            contenders: Some(contenders),
            acquire: quantiles(&run["latency"]["acquire"]),
            handoff: quantiles(&run["latency"]["handoff"]),
            failover: quantiles(&at("election")["failover"]),
            notifications: load("notifications"),
            requests: load("requests"),
            server: server(),
        }
    }

    /// The figures as the comparison plots take them, when the run has a recipe, its
    /// contenders and its latencies (acquire and hand-off for a lock, failover for an
    /// election).
    pub fn recipe_figures(&self) -> Option<RecipeFigures> {
        let latencies = match (self.acquire, self.handoff, self.failover) {
            (Some(acquire), Some(handoff), _) => vec![
                (LatencyKind::Acquire, acquire),
                (LatencyKind::Handoff, handoff),
            ],
            (_, _, Some(failover)) => vec![(LatencyKind::Failover, failover)],
            _ => return None,
        };
        Some(RecipeFigures {
            recipe: self.recipe.clone()?,
            contenders: self.contenders?,
            latencies,
            notifications: self.notifications,
            requests: self.requests,
            server_notifications: self.server.map(|s| s.notifications_per_release),
        })
    }
}

/// Latency quantiles as `results.json` holds them.
fn quantiles(q: &Value) -> Option<Quantiles> {
    serde_json::from_value(q.clone()).ok()
}
