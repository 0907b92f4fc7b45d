//! Suites: a matrix of tests (workloads × nemeses × DBs × repetitions) run unattended, one
//! after another in the suite's process, summarised as `summary.json`, a JUnit XML report and
//! an `index.html` in the suite's folder.

pub mod file;
pub mod html;
pub mod junit;
pub mod runner;
pub mod summary;

pub use file::SuiteFile;
pub use summary::{Summary, Verdict};
