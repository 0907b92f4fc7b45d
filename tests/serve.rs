//! The results browser (`stampede serve`) driven by a real headless browser (Debian's
//! chromium, installed with apt-get when missing) over a copy of `tests/fixtures/results/`:
//! the index lists the runs with their verdicts and filters them, a run page shows its plots
//! and the images load, the trend page renders, and paths outside the results folder are
//! refused, however they are spelt. Set STAMPEDE_SCREENSHOTS=DIR to keep the screenshots.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const VALID_RUN: &str = "register-partition/2026-11-21T054813Z";
const INVALID_RUN: &str = "register-partition/2026-11-21T061500Z";

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A running `stampede serve`, killed (by pid) when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(results: &Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["serve", "--port", "0", "--results"])
        .arg(results)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot run stampede serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(
        addr.starts_with("127.0.0.1:"),
        "binds to loopback by default: {addr}"
    );
    Served { child, addr }
}

/// One raw HTTP/1.0 request (the path sent exactly as given): status, headers, body.
fn http(addr: &str, method: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_lowercase(), raw[split + 4..].to_vec())
}

fn chromium_program() -> &'static str {
    let has = |p: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !has("chromium") {
        assert!(
            Command::new("apt-get")
                .args(["update", "-q"])
                .status()
                .unwrap()
                .success(),
            "apt-get update failed"
        );
        let ok = Command::new("apt-get")
            .args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .unwrap();
        assert!(ok.success(), "apt-get install chromium failed");
    }
    "chromium"
}

/// Runs headless chromium with `args` then `url`, in a fresh profile; killed (by pid) if it
/// takes over a minute. Returns its standard output.
fn chromium(work: &Path, args: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir_in(work).unwrap();
    let mut child = Command::new(chromium_program())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .current_dir(work)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot run chromium");
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

fn dom(work: &Path, url: &str) -> String {
    let dom = chromium(work, &["--dump-dom"], url);
    assert!(dom.contains("<html"), "no DOM for {url}: {dom}");
    dom
}

/// The screenshot of `url` and how many of its pixels are saturated colours (plot lines and
/// markers; the pages' own text and verdict banners are grey or pale).
fn screenshot(work: &Path, url: &str, file: &str) -> (PathBuf, usize) {
    let path = work.join(file);
    chromium(
        work,
        &[
            "--window-size=1200,2400",
            "--hide-scrollbars",
            &format!("--screenshot={}", path.display()),
        ],
        url,
    );
    let decoder = png::Decoder::new(BufReader::new(
        std::fs::File::open(&path).expect("a screenshot"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let coloured = buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|px| {
            let (lo, hi) = (px[..3].iter().min().unwrap(), px[..3].iter().max().unwrap());
            hi - lo > 100
        })
        .count();
    (path, coloured)
}

/// Copies a screenshot to `$STAMPEDE_SCREENSHOTS/<name>.png` when that is set, to look at.
fn keep(shot: &Path, name: &str) {
    if let Some(dir) = std::env::var_os("STAMPEDE_SCREENSHOTS") {
        std::fs::copy(shot, Path::new(&dir).join(format!("{name}.png"))).unwrap();
    }
}

fn attr_values<'a>(dom: &'a str, prefix: &str) -> Vec<&'a str> {
    dom.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &dom[i + prefix.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

#[test]
fn the_results_browser_works_in_a_real_browser() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let results = work.join("results");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results"),
        &results,
    );
    std::fs::write(work.join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink("/etc", results.join("escape")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", results.join("leak")).unwrap();
    std::os::unix::fs::symlink(VALID_RUN, results.join("latest")).unwrap();
    let server = serve(&results);
    let base = format!("http://{}", server.addr);

    // The index: both runs, newest first, with their verdicts; the suite; filters.
    let index = dom(work, &format!("{base}/"));
    let rows: Vec<&str> = attr_values(&index, "<tr class=\"run\" data-verdict=\"");
    assert_eq!(
        rows,
        ["invalid", "valid"],
        "newest first, each run once (not again through latest)"
    );
    assert!(
        index.contains(&format!("href=\"/run/{INVALID_RUN}\""))
            && index.contains(&format!("href=\"/run/{VALID_RUN}\""))
    );
    assert_eq!(
        attr_values(&index, "<tr class=\"suite\" data-verdict=\""),
        ["error"]
    );
    let filtered = dom(work, &format!("{base}/?workload=register&nemesis=kill&db="));
    assert!(
        filtered.contains("0 of 2 runs") && !filtered.contains("<tr class=\"run\""),
        "the filter is applied on the server"
    );
    let filtered = dom(work, &format!("{base}/?nemesis=partition&db=zookeeper"));
    assert!(filtered.contains("2 of 2 runs"));
    let (shot, _) = screenshot(work, &format!("{base}/"), "index.png");
    keep(&shot, "index");

    // A run page: verdict, anomalies, config, logs, and three plots whose images load.
    let run = dom(work, &format!("{base}/run/{VALID_RUN}"));
    assert!(run.contains("data-verdict=\"valid\""));
    assert!(run.contains("no anomalies"));
    assert!(run.contains("timeline.html\">timeline.html</a>"));
    assert!(
        run.contains("name: register-partition"),
        "test.yaml is shown"
    );
    assert!(run.contains("nodes/n1/zookeeper.log\">zookeeper.log</a>"));
    let images = attr_values(&run, "<img src=\"");
    assert_eq!(images.len(), 3, "{images:?}");
    for src in &images {
        let (status, head, body) = http(&server.addr, "GET", src);
        assert_eq!(status, 200, "{src}");
        assert!(head.contains("content-type: image/png"), "{src}: {head}");
        assert!(
            body.starts_with(b"\x89PNG\r\n\x1a\n") && body.len() > 10_000,
            "{src}"
        );
    }
    let (shot, with_plots) = screenshot(work, &format!("{base}/run/{VALID_RUN}"), "run.png");
    keep(&shot, "run");
    let (_, without_plots) = screenshot(
        work,
        &format!("{base}/run/{INVALID_RUN}"),
        "run-without-plots.png",
    );
    assert!(
        with_plots > 3_000 && with_plots > 5 * without_plots,
        "the plots are drawn: {with_plots} coloured pixels vs {without_plots} without plots"
    );
    let invalid = dom(work, &format!("{base}/run/{INVALID_RUN}"));
    assert!(
        invalid.contains("data-verdict=\"invalid\"") && invalid.contains("stale-read"),
        "anomalies are listed"
    );
    let timeline = http(
        &server.addr,
        "GET",
        &format!("/files/{VALID_RUN}/timeline.html"),
    );
    assert_eq!(timeline.0, 200);
    assert!(timeline.1.contains("content-type: text/html"));

    // The trend page: both runs, oldest first, with latencies and a chart.
    let trend = dom(work, &format!("{base}/trend?name=register-partition"));
    assert!(trend.contains("2 runs of register-partition"));
    let trend_rows: Vec<&str> = attr_values(&trend, "<td><a href=\"/run/");
    assert_eq!(trend_rows, [VALID_RUN, INVALID_RUN]);
    assert!(
        trend.contains("write p99 ms") && trend.contains("<svg") && trend.contains("<polyline"),
        "a chart of latencies"
    );
    let (shot, _) = screenshot(
        work,
        &format!("{base}/trend?name=register-partition"),
        "trend.png",
    );
    keep(&shot, "trend");

    // Nothing outside the results folder, however the path is spelt.
    for path in [
        "/../etc/passwd",
        "/files/../../etc/passwd",
        "/files/%2e%2e/%2e%2e/etc/passwd",
        "/files/..%2f..%2fetc%2fpasswd",
        "/files/%2E%2E%2F%2E%2E%2Fsecret.txt",
        "/files//etc/passwd",
        "/files/escape/passwd",
        "/files/leak",
        "/run/..%2f..%2fetc",
        "/files/..%5c..%5csecret.txt",
    ] {
        let (status, _, body) = http(&server.addr, "GET", path);
        assert!(status == 403 || status == 404, "{path}: {status}");
        let body = String::from_utf8_lossy(&body);
        assert!(
            !body.contains("root:") && !body.contains("top secret"),
            "{path} leaked: {body}"
        );
    }
    let browser_view = chromium(
        work,
        &["--dump-dom"],
        &format!("{base}/files/escape/passwd"),
    );
    assert!(!browser_view.contains("root:"), "{browser_view}");
    assert_eq!(
        http(&server.addr, "GET", "/files/latest/test.yaml").0,
        200,
        "symlinks inside the folder are fine"
    );
    assert_eq!(http(&server.addr, "POST", "/").0, 405, "read-only");
    drop(server);
}
