//! `stampede compare`: one table row per test run (verdict, lock and election latencies, herd
//! load) and plots comparing the runs: `compare.png` (acquire or failover latency per run)
//! and, on request, `herd.png` and `recipes.png`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::report::recipes::{
    compare_chart, herd_chart, recipes_chart, render_chart, LatencyKind, LoadFigures, RecipeFigures,
};
use crate::store::{RunFolder, TestConfig};
use anyhow::{bail, Context};

/// Arguments of `stampede compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Results folders of runs, or a test's folder (`results/<test>`) meaning all its runs.
    #[arg(required = true, value_name = "RUN")]
    runs: Vec<PathBuf>,
    /// Where to draw the acquire (lock) or failover (election) latency of each run.
    #[arg(long, default_value = "compare.png", value_name = "FILE.png")]
    plot: PathBuf,
    /// Also draw the load per release against the number of contenders, per recipe.
    #[arg(long, value_name = "FILE.png")]
    herd: Option<PathBuf>,
    /// Also draw the acquire, hand-off and failover latency quantiles per recipe.
    #[arg(long, value_name = "FILE.png")]
    recipes: Option<PathBuf>,
}

/// What one test run shows in the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// The results folder.
    pub dir: PathBuf,
    /// The test's name.
    pub test: String,
    /// The run's timestamp (its folder's name).
    pub stamp: String,
    /// The fault kinds injected, joined by `+` (`none`, or `-` when unknown).
    pub nemesis: String,
    /// `valid`, `INVALID`, `unknown` or `unknown (aborted)`.
    pub verdict: String,
    /// The recipe, for a lock or election run.
    pub recipe: Option<String>,
    /// Contenders (candidates) at once, for a lock or election run.
    pub contenders: Option<u64>,
    /// What the lock or election run measured (none when it stopped before a summary).
    pub figures: Option<RecipeFigures>,
    /// The servers' own `mntr` figures per release (or leadership change), watch
    /// notifications and packets received (summed over the servers), when the run sampled
    /// them.
    pub server_per_release: Option<(f64, f64)>,
}

/// Runs `stampede compare`: prints the table, draws the plots, says where.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let rows = load_runs(&args.runs)?;
    print!("{}", render_table(&rows));
    let recipe_runs = numbered_recipe_runs(&rows);
    if recipe_runs.is_empty() {
        eprintln!("no lock or election run with latency figures: no plots drawn");
        return Ok(ExitCode::SUCCESS);
    }
    render_chart(&compare_chart(&recipe_runs), &args.plot)?;
    println!("plot: {}", args.plot.display());
    if let Some(path) = &args.herd {
        plot_herd(&rows, path)?;
        println!("herd plot: {}", path.display());
    }
    if let Some(path) = &args.recipes {
        plot_recipes(&rows, path)?;
        println!("recipes plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Draws the load per release against contenders, per recipe, of the lock and election runs
/// among `rows` into `path`; false (and nothing drawn) when no run has figures.
pub fn plot_herd(rows: &[RunRow], path: &Path) -> anyhow::Result<bool> {
    let figures = figures_of(rows);
    if !figures.is_empty() {
        render_chart(&herd_chart(&figures), path)?;
    }
    Ok(!figures.is_empty())
}

/// Draws the latency quantiles per recipe of the lock and election runs among `rows` into
/// `path`; false (and nothing drawn) when no run has figures.
pub fn plot_recipes(rows: &[RunRow], path: &Path) -> anyhow::Result<bool> {
    let figures = figures_of(rows);
    if !figures.is_empty() {
        render_chart(&recipes_chart(&figures), path)?;
    }
    Ok(!figures.is_empty())
}

fn figures_of(rows: &[RunRow]) -> Vec<RecipeFigures> {
    rows.iter().filter_map(|r| r.figures.clone()).collect()
}

/// The runs with figures, labelled by their row number in the table.
fn numbered_recipe_runs(rows: &[RunRow]) -> Vec<(String, RecipeFigures)> {
    rows.iter()
        .enumerate()
        .filter_map(|(i, r)| r.figures.clone().map(|f| (format!("#{}", i + 1), f)))
        .collect()
}

/// Reads every run named by `paths`: a results folder (with `results.json`), or a test's
/// folder whose run folders are taken in timestamp order.
pub fn load_runs(paths: &[PathBuf]) -> anyhow::Result<Vec<RunRow>> {
    let mut rows = Vec::new();
    for path in paths {
        let folder = RunFolder::open(path);
        if folder.results_path().is_file() {
            rows.push(load_run(&folder)?);
            continue;
        }
        let runs = RunFolder::judged_runs_in(path)?;
        if runs.is_empty() {
            bail!(
                "{}: no results.json (neither a results folder nor a test's folder of runs)",
                path.display()
            );
        }
        for folder in runs {
            rows.push(load_run(&folder)?);
        }
    }
    Ok(rows)
}

/// Reads one run's `results.json` and, when present, its `test.yaml`.
fn load_run(folder: &RunFolder) -> anyhow::Result<RunRow> {
    let dir = folder.dir();
    let results = folder
        .read_results()?
        .with_context(|| format!("{}: no results.json", dir.display()))?;
    let test = folder.read_config()?;
    let figures = &results.figures;
    Ok(RunRow {
        dir: dir.to_path_buf(),
        test: match &test {
            Some(t) => t.name.clone(),
            None => dir
                .parent()
                .and_then(Path::file_name)
                .map_or("-".into(), |n| n.to_string_lossy().to_string()),
        },
        stamp: folder.stamp(),
        nemesis: test.as_ref().map_or("-".into(), TestConfig::fault_kinds),
        verdict: results.verdict_word().to_string(),
        recipe: figures.recipe.clone(),
        contenders: figures.contenders,
        figures: figures.recipe_figures(),
        server_per_release: figures
            .server
            .map(|s| (s.notifications_per_release, s.packets_per_release)),
    })
}

/// The table of runs, one row each under a header, columns padded to line up.
pub fn render_table(rows: &[RunRow]) -> String {
    let header = [
        "#",
        "test",
        "run",
        "recipe",
        "contenders",
        "nemesis",
        "verdict",
        "acquire p50/p99 (ms)",
        "hand-off p50/p99 (ms)",
        "failover p50/p99 (ms)",
        "notifications/release mean/max",
        "requests/release mean/max",
        "server notifications/packets per release",
    ];
    let dash = || "-".to_string();
    let mut cells: Vec<Vec<String>> = vec![header.map(String::from).to_vec()];
    for (i, r) in rows.iter().enumerate() {
        let figures = r.figures.as_ref();
        let ms = |kind| {
            figures
                .and_then(|f| f.latency(kind))
                .map_or_else(dash, |q| format!("{:.1}/{:.1}", q.p50_ms, q.p99_ms))
        };
        let load = |l: fn(&RecipeFigures) -> Option<LoadFigures>| {
            figures
                .and_then(l)
                .map_or_else(dash, |l| format!("{:.2}/{}", l.mean, l.max))
        };
        cells.push(vec![
            (i + 1).to_string(),
            r.test.clone(),
            r.stamp.clone(),
            r.recipe.clone().unwrap_or_else(dash),
            r.contenders.map_or_else(dash, |c| c.to_string()),
            r.nemesis.clone(),
            r.verdict.clone(),
            ms(LatencyKind::Acquire),
            ms(LatencyKind::Handoff),
            ms(LatencyKind::Failover),
            load(|f| f.notifications),
            load(|f| f.requests),
            r.server_per_release
                .map_or_else(dash, |(n, p)| format!("{n:.2}/{p:.2}")),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &cells {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use plotters::style::RGBColor;

    use super::*;
    use crate::report::recipes::recipe_colour;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare")
    }

    fn lock_rows() -> Vec<RunRow> {
        let names = [
            "lock-sequential-herd-partition",
            "lock-sequential-partition",
            "lock-protected-kill",
        ];
        load_runs(&names.map(|n| fixtures().join(n))).unwrap()
    }

    #[test]
    fn the_table_has_a_row_per_run_with_what_each_run_has() {
        let mut paths = vec![fixtures().join("lock-sequential-herd-partition")];
        paths.push(fixtures().join("register-none/2026-11-21T050000Z"));
        paths.push(fixtures().join("lock-protected-kill"));
        let rows = load_runs(&paths).unwrap();
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("#  test"), "{table}");
        let cells = |line: &str| -> Vec<String> {
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        };
        assert_eq!(
            cells(lines[1]),
            [
                "1",
                "lock-sequential-herd-partition",
                "2026-11-21T060500Z",
                "lock-sequential-herd",
                "5",
                "partition",
                "valid",
                "5.0/25.0",
                "3.0/9.0",
                "-",
                "4.00/4",
                "4.00/4",
                "-"
            ]
        );
        assert_eq!(cells(lines[2])[6], "INVALID");
        assert_eq!(cells(lines[2])[12], "19.00/42.00");
        assert_eq!(cells(lines[2])[4], "20");
        let register = cells(lines[3]);
        assert_eq!(register[1], "register-none");
        assert_eq!(
            register[5..],
            ["none", "valid", "-", "-", "-", "-", "-", "-"]
        );
        assert_eq!(register[3..5], ["-", "-"]);
        let aborted = cells(lines[4]);
        assert_eq!(aborted[3], "lock-protected");
        assert_eq!(
            aborted[5..],
            [
                "kill+pause",
                "unknown (aborted)",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-"
            ]
        );
        // Columns line up: the verdict column starts at the same place on every line.
        let at = lines[0].find("verdict").unwrap();
        for line in &lines[1..] {
            assert_eq!(&line[at - 2..at], "  ", "{table}");
            assert_ne!(&line[at..at + 1], " ", "{table}");
        }
    }

    #[test]
    fn election_runs_show_failover_and_load_per_leadership_change() {
        let mut rows = lock_rows();
        rows.extend(load_runs(&[fixtures().join("election-fair-kill")]).unwrap());
        let election = rows.last().unwrap();
        assert_eq!(election.recipe.as_deref(), Some("election-fair"));
        let table = render_table(&rows);
        let line = table.lines().last().unwrap();
        assert!(
            line.contains("6.0/300.0") && line.contains("1.08/11.39"),
            "{table}"
        );
        assert!(
            line.contains("1.00/1 ") && line.contains("2.00/3"),
            "{table}"
        );
        let figures = figures_of(&rows);
        let recipes = recipes_chart(&figures);
        let failover = recipes
            .legend
            .iter()
            .position(|e| e.label == "election-fair failover (5 c.)")
            .expect("failover in the legend");
        assert_eq!(
            recipes.series[failover].points,
            [(0.0, 6.0), (1.0, 12.0), (2.0, 300.0), (3.0, 400.0)]
        );
        let herd = herd_chart(&figures);
        assert!(herd
            .legend
            .iter()
            .any(|e| e.label == "election-fair notifications"));
        let compare = compare_chart(&numbered_recipe_runs(&rows));
        assert_eq!(compare.series.len(), 2 * 5, "one p50 and one p99 per run");
    }

    #[test]
    fn a_recipe_the_clients_could_not_count_shows_the_servers_figures() {
        let mut figures = figures_of(&lock_rows());
        for f in figures.iter_mut().filter(|f| f.recipe == "lock-sequential") {
            f.recipe = "lock-crate".into();
            (f.notifications, f.requests) = (None, None);
            f.server_notifications = Some(1.5);
        }
        let herd = herd_chart(&figures);
        let servers = herd
            .legend
            .iter()
            .position(|e| e.label == "lock-crate notifications (servers)")
            .expect("the servers' line");
        assert_eq!(herd.series[servers].points, [(5.0, 1.5), (20.0, 1.5)]);
        assert!(herd.y_log, "1 and 100 per release both show");
    }

    #[test]
    fn herd_and_recipe_data_come_from_the_runs() {
        let rows = lock_rows();
        assert_eq!(rows.len(), 5);
        let figures = figures_of(&rows);
        assert_eq!(figures.len(), 4, "the aborted run has no figures");
        let herd = herd_chart(&figures);
        let points: Vec<&Vec<(f64, f64)>> = herd.series.iter().map(|s| &s.points).collect();
        assert_eq!(
            points,
            [
                &vec![(5.0, 1.0), (20.0, 1.0)],
                &vec![(5.0, 1.0), (20.0, 1.0)],
                &vec![(5.0, 4.0), (20.0, 19.0)],
                &vec![(5.0, 4.0), (20.0, 19.0)],
            ]
        );
        assert_eq!(herd.legend[2].label, "lock-sequential-herd notifications");
        let recipes = recipes_chart(&figures);
        assert_eq!(
            recipes.series[0].points,
            [(0.0, 30.0), (1.0, 60.0), (2.0, 90.0), (3.0, 120.0)],
            "lock-sequential acquire at 20 contenders"
        );
        assert_eq!(recipes.series[3].points[3], (3.0, 50.0));
        assert_eq!(recipes.legend[1].label, "lock-sequential hand-off (20 c.)");
        let compare = compare_chart(&numbered_recipe_runs(&rows));
        let crate::report::recipes::XAxis::Categories(labels) = &compare.x else {
            panic!("runs are categories");
        };
        assert_eq!(labels, &["#3", "#4", "#1", "#2"], "grouped by recipe");
        assert_eq!(compare.series[0].points, [(0.0, 4.0)]);
        assert_eq!(compare.series[1].points, [(0.0, 20.0)]);
    }

    fn pixels_of(path: &Path, colour: RGBColor) -> usize {
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        buf[..info.buffer_size()]
            .chunks(3)
            .filter(|p| p == &[colour.0, colour.1, colour.2])
            .count()
    }

    #[test]
    fn plots_draw_a_line_per_recipe_present_and_none_for_others() {
        let dir = tempfile::tempdir().unwrap();
        let rows = lock_rows();
        let (herd, recipes) = (dir.path().join("herd.png"), dir.path().join("recipes.png"));
        assert!(plot_herd(&rows, &herd).unwrap());
        assert!(plot_recipes(&rows, &recipes).unwrap());
        for path in [&herd, &recipes] {
            for recipe in ["lock-sequential", "lock-sequential-herd"] {
                let n = pixels_of(path, recipe_colour(recipe));
                assert!(n > 300, "{recipe} in {}: {n} pixels", path.display());
            }
            let absent = pixels_of(path, recipe_colour("lock-single-node"));
            assert_eq!(absent, 0, "{}", path.display());
        }
        let register = load_runs(&[fixtures().join("register-none")]).unwrap();
        let nothing = dir.path().join("nothing.png");
        assert!(!plot_herd(&register, &nothing).unwrap());
        assert!(!nothing.exists());
    }

    #[test]
    fn bad_folders_get_a_one_line_error_naming_them() {
        let missing = fixtures().join("no-results");
        let err = format!(
            "{:#}",
            load_runs(std::slice::from_ref(&missing)).unwrap_err()
        );
        assert!(err.starts_with(&missing.display().to_string()), "{err}");
        assert!(err.contains("no results.json"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let run = missing.join("2026-11-21T070000Z");
        let err = format!("{:#}", load_runs(std::slice::from_ref(&run)).unwrap_err());
        assert!(err.starts_with(&run.display().to_string()), "{err}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("results.json"), "{ not json").unwrap();
        let err = format!("{:#}", load_runs(&[dir.path().to_path_buf()]).unwrap_err());
        assert!(err.contains("results.json: not a results file"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }
}
