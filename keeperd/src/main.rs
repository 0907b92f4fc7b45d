//! `keeperd <zoo.cfg>`: runs the server with the given configuration.

use std::path::PathBuf;

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let config = match (args.next(), args.next()) {
        (Some(path), None) if path != "-h" && path != "--help" => PathBuf::from(path),
        _ => {
            eprintln!("usage: keeperd <zoo.cfg>");
            std::process::exit(2);
        }
    };
    if let Err(e) = keeperd::run(&config) {
        eprintln!("keeperd: {e}");
        std::process::exit(1);
    }
}
