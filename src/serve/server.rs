//! The HTTP side: a few threads taking requests from one listener, routing them to pages or
//! files, read-only (GET and HEAD only).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use tiny_http::{Header, Method, Request, Response, Server};

use super::catalog;
use super::latency::Cache;
use super::pages::{self, Filter};
use super::paths::{self, Refusal};

/// Threads answering requests at once (a browser fetches a page's images in parallel).
const WORKERS: usize = 4;

/// The results browser, bound and ready to serve.
pub struct Browser {
    server: Arc<Server>,
    root: Arc<PathBuf>,
    cache: Arc<Cache>,
}

impl Browser {
    /// Binds `addr` (port 0 picks a free port) to serve the results folder `root`.
    pub fn bind(addr: SocketAddr, root: &Path) -> anyhow::Result<Browser> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| anyhow!("results folder {}: {e}", root.display()))?;
        if !root.is_dir() {
            anyhow::bail!("results folder {}: not a folder", root.display());
        }
        let server = Server::http(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
        Ok(Browser {
            server: Arc::new(server),
            root: Arc::new(root),
            cache: Arc::default(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.server.server_addr().to_ip()
    }

    /// Answers requests until the process ends.
    pub fn run(self) {
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (server, root, cache) =
                    (self.server.clone(), self.root.clone(), self.cache.clone());
                std::thread::spawn(move || {
                    for request in server.incoming_requests() {
                        handle(request, &root, &cache);
                    }
                })
            })
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
    }
}

fn handle(request: Request, root: &Path, cache: &Cache) {
    let response = match request.method() {
        Method::Get | Method::Head => route(request.url(), root, cache),
        _ => text(405, "only GET and HEAD"),
    };
    if let Err(e) = request.respond(response) {
        tracing::debug!("response not sent: {e}");
    }
}

type Reply = Response<std::io::Cursor<Vec<u8>>>;

fn route(url: &str, root: &Path, cache: &Cache) -> Reply {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if paths::is_traversal(path) {
        return text(403, "forbidden");
    }
    let Some(decoded) = paths::decode(path, false) else {
        return text(400, "bad path");
    };
    if decoded == "/" {
        let (runs, suites) = catalog::scan(root);
        let filter = Filter {
            workload: paths::query_param(query, "workload"),
            nemesis: paths::query_param(query, "nemesis"),
            db: paths::query_param(query, "db"),
        };
        return html(pages::index(&runs, &suites, &filter));
    }
    if decoded == "/trend" {
        let Some(name) = paths::query_param(query, "name") else {
            return text(404, "which test? /trend?name=NAME");
        };
        let (runs, _) = catalog::scan(root);
        let mut runs: Vec<_> = runs.into_iter().filter(|r| r.name == name).collect();
        runs.reverse();
        let with_stats: Vec<_> = runs
            .into_iter()
            .map(|r| {
                let stats = cache.stats(&root.join(&r.rel));
                (r, stats)
            })
            .collect();
        return html(pages::trend(&name, &with_stats));
    }
    if let Some(rel) = decoded.strip_prefix("/run/") {
        return match paths::resolve(root, rel) {
            Ok(dir) if crate::store::RunFolder::is_run(&dir) => {
                let rel = dir
                    .strip_prefix(root)
                    .unwrap_or(&dir)
                    .to_string_lossy()
                    .to_string();
                html(pages::run(&dir, &rel))
            }
            Ok(_) => text(404, "not a run"),
            Err(refusal) => refused(refusal),
        };
    }
    if let Some(rel) = decoded.strip_prefix("/files/") {
        return match paths::resolve(root, rel) {
            Ok(file) if file.is_file() => match std::fs::read(&file) {
                Ok(data) => with_type(Response::from_data(data), content_type(&file)),
                Err(_) => text(404, "not found"),
            },
            Ok(_) => text(404, "not a file"),
            Err(refusal) => refused(refusal),
        };
    }
    text(404, "not found")
}

fn refused(refusal: Refusal) -> Reply {
    match refusal {
        Refusal::Forbidden => text(403, "forbidden"),
        Refusal::NotFound => text(404, "not found"),
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "html" => "text/html; charset=utf-8",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" | "jsonl" | "log" | "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn html(body: String) -> Reply {
    with_type(
        Response::from_data(body.into_bytes()),
        "text/html; charset=utf-8",
    )
}

fn text(status: u16, body: &str) -> Reply {
    with_type(
        Response::from_data(format!("{body}\n").into_bytes()),
        "text/plain; charset=utf-8",
    )
    .with_status_code(status)
}

fn with_type(response: Reply, content_type: &str) -> Reply {
    let header = |name: &str, value: &str| {
        Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("valid header")
    };
    response
        .with_header(header("Content-Type", content_type))
        .with_header(header("X-Content-Type-Options", "nosniff"))
        .with_header(header("Cache-Control", "no-cache"))
}
