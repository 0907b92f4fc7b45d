//! Test configuration files: YAML workloads (`workloads/`) and nemesis schedules (`nemeses/`).
//!
//! A command names a file ([`resolve`]), loads it into its owner's struct with command-line
//! overrides applied on top ([`load_with_overrides`], [`Override`]), and saves the effective
//! configuration with the results ([`save`]). The structs belong to the stages that use them;
//! they should carry `#[serde(deny_unknown_fields)]` so a misspelt key is an error, and may
//! use [`Duration`] for spans of time written like `60s` or `500ms`.

mod duration;
mod load;
mod overrides;
mod resolve;

pub use duration::Duration;
pub use load::{from_section, load, load_with_overrides, save};
pub use overrides::Override;
pub use resolve::{names, resolve};
