//! The results browser (`stampede serve`): the results folder as plain server-rendered web
//! pages — runs and suites coloured by verdict, one page per run, latency trends — read-only,
//! never serving anything outside the folder.

mod catalog;
mod latency;
mod pages;
mod paths;
mod server;

pub use server::Browser;
