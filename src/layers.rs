//! The order of the top-level modules, checked: each module may use only the modules before
//! it, so the pipeline has no back edge and no two modules import each other.

/// The top-level modules, each after everything it uses (see `main.rs`).
const LAYERS: &[&str] = &[
    "config",
    "control",
    "cluster",
    "db",
    "history",
    "nemesis",
    "client",
    "generator",
    "checker",
    "report",
    "progress",
    "workload",
    "store",
    "engine",
    "suite",
    "serve",
    "cli",
];

/// The top-level modules a source file names through `crate::…` paths, including grouped
/// imports such as `use crate::{a, b::c}`.
fn modules_used(text: &str) -> std::collections::BTreeSet<String> {
    let mut used = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inside = &group[..group.find('}').unwrap_or(group.len())];
            for item in inside.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                used.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            used.insert(name);
        }
    }
    used.retain(|m| LAYERS.contains(&m.as_str()));
    used
}

/// Every `.rs` file below `dir`.
fn sources(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_module_uses_only_the_modules_before_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut back_edges = Vec::new();
    let mut unlisted = Vec::new();
    for file in sources(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "main" || module == "layers" {
            continue;
        }
        let Some(layer) = LAYERS.iter().position(|m| *m == module) else {
            unlisted.push(module);
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for used in modules_used(&text) {
            let at = LAYERS.iter().position(|m| *m == used).unwrap();
            if at > layer {
                back_edges.push(format!("{} uses {used}", relative.display()));
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "modules missing from LAYERS: {unlisted:?}"
    );
    assert!(
        back_edges.is_empty(),
        "back edges:\n{}",
        back_edges.join("\n")
    );
}

#[test]
fn grouped_and_nested_paths_are_read() {
    let used = modules_used(
        "use crate::{history::Op, checker};\nlet x = crate::report::write(1);\ncrate::nothing",
    );
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["checker", "history", "report"]
    );
}
