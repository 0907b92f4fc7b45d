//! `stampede serve`: browse the results folder in a web browser.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::serve::Browser;

/// Arguments of `stampede serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on; only this machine can connect by default.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// The results folder to serve.
    #[arg(long, default_value = "results")]
    results: PathBuf,
}

/// Serves until killed; prints `listening on http://ADDR/` once bound.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let browser = Browser::bind(SocketAddr::new(args.bind, args.port), &args.results)?;
    let addr = browser
        .local_addr()
        .map_or_else(|| "?".to_string(), |a| a.to_string());
    println!("listening on http://{addr}/");
    eprintln!(
        "serving {} read-only; Ctrl-C to stop",
        args.results.display()
    );
    browser.run();
    Ok(ExitCode::SUCCESS)
}
