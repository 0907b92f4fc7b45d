//! Finding a config file from a name on the command line.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// Finds the config file meant by `name_or_path` in `kind_dir` (`"workloads"` or `"nemeses"`).
///
/// Something that looks like a path (it has a `/` or ends in `.yaml`/`.yml`) is taken as is.
/// A bare name such as `register` means `<kind_dir>/register.yaml`, looked up first under the
/// current directory, then under each ancestor of the running executable's directory (a
/// checkout's `target/debug/stampede` finds the checkout), then in the source checkout the
/// binary was built from. When nothing matches, the error lists the names that exist.
pub fn resolve(kind_dir: &str, name_or_path: &str) -> anyhow::Result<PathBuf> {
    resolve_in(&search_roots(), kind_dir, name_or_path)
}

/// The directories whose `<kind_dir>/` may hold named config files, in lookup order.
fn search_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let mut seen = BTreeSet::new();
    roots.retain(|r| seen.insert(r.clone()));
    roots
}

/// The names of the config files in `kind_dir` (every `<name>.yaml` the lookup of
/// [`resolve`] could find), sorted.
pub fn names(kind_dir: &str) -> Vec<String> {
    let names: BTreeSet<String> = search_roots()
        .iter()
        .map(|r| r.join(kind_dir))
        .filter(|d| d.is_dir())
        .flat_map(|d| yaml_names(&d))
        .collect();
    names.into_iter().collect()
}

fn resolve_in(roots: &[PathBuf], kind_dir: &str, name_or_path: &str) -> anyhow::Result<PathBuf> {
    let looks_like_path = name_or_path.contains('/')
        || name_or_path.ends_with(".yaml")
        || name_or_path.ends_with(".yml");
    if looks_like_path {
        let path = PathBuf::from(name_or_path);
        if !path.is_file() {
            bail!("{name_or_path}: no such file");
        }
        return Ok(path);
    }
    let file = format!("{name_or_path}.yaml");
    let dirs: Vec<PathBuf> = roots
        .iter()
        .map(|r| r.join(kind_dir))
        .filter(|d| d.is_dir())
        .collect();
    if let Some(found) = dirs.iter().map(|d| d.join(&file)).find(|p| p.is_file()) {
        return Ok(found);
    }
    let available: BTreeSet<String> = dirs.iter().flat_map(|d| yaml_names(d)).collect();
    let looked = if dirs.is_empty() {
        format!("no {kind_dir}/ directory found under the current directory or the executable's")
    } else {
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        format!("looked in {}", shown.join(", "))
    };
    let names = if available.is_empty() {
        "none".to_owned()
    } else {
        available.into_iter().collect::<Vec<_>>().join(", ")
    };
    bail!("no {kind_dir}/{file} ({looked}); available {kind_dir}: {names}")
}

/// The names (file stems) of the `.yaml` files in `dir`.
fn yaml_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "rate: 1\n").unwrap();
    }

    #[test]
    fn names_are_found_in_the_first_root_that_has_them() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        touch(&b.path().join("workloads/register.yaml"));
        touch(&a.path().join("workloads/bank.yaml"));
        touch(&b.path().join("workloads/bank.yaml"));
        let roots = [a.path().to_path_buf(), b.path().to_path_buf()];
        assert_eq!(
            resolve_in(&roots, "workloads", "register").unwrap(),
            b.path().join("workloads/register.yaml")
        );
        assert_eq!(
            resolve_in(&roots, "workloads", "bank").unwrap(),
            a.path().join("workloads/bank.yaml")
        );
    }

    #[test]
    fn unknown_name_lists_the_available_ones() {
        let a = tempfile::tempdir().unwrap();
        touch(&a.path().join("nemeses/partition.yaml"));
        touch(&a.path().join("nemeses/kill.yaml"));
        touch(&a.path().join("nemeses/notes.txt"));
        let roots = [a.path().to_path_buf()];
        let err = resolve_in(&roots, "nemeses", "partitoin")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "no nemeses/partitoin.yaml (looked in {}); available nemeses: kill, partition",
                a.path().join("nemeses").display()
            )
        );
        let err = resolve_in(&roots, "workloads", "register")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no workloads/ directory found"), "{err}");
        assert!(err.ends_with("available workloads: none"), "{err}");
    }

    #[test]
    fn paths_are_taken_as_is() {
        let a = tempfile::tempdir().unwrap();
        let file = a.path().join("mine.yaml");
        touch(&file);
        let text = file.to_str().unwrap();
        assert_eq!(resolve_in(&[], "workloads", text).unwrap(), file);
        let missing = a.path().join("gone.yaml");
        let err = resolve_in(&[], "workloads", missing.to_str().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: no such file", missing.display())
        );
    }
}
