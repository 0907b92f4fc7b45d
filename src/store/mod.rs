//! The results folder and what it holds, owned here and nowhere else.
//!
//! A run lives in `results/<test>/<stamp>/`: `test.yaml` ([`TestConfig`], written before the
//! run starts), `history.jsonl` (written by `history` as operations complete), `results.json`
//! ([`Results`], written by the verdict), `timeline.html`, plots, and `nodes/<node>/` (the
//! servers' logs). `test`, `check`, `compare`, `suite`, `serve` and the trend page read a run
//! through [`RunFolder`] as typed structs; no command reads another's output.

mod config;
mod results;
mod run_folder;

pub use crate::workload::Figures;
#[cfg(test)]
pub use crate::workload::ServerFigures;
pub use config::TestConfig;
pub use results::{Results, SCHEMA};
pub use run_folder::{stamp, RunFolder};
