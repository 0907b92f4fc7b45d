//! CI check of the ansible playbook: `ansible-playbook --syntax-check` with the example
//! inventory, installing Debian's ansible package first when `ansible-playbook` is missing.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn the_playbook_passes_ansibles_syntax_check() {
    common::ensure_ansible();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("ansible-playbook")
        .args([
            "--syntax-check",
            "-i",
            "ansible/inventory.example.ini",
            "ansible/stampede.yml",
        ])
        .current_dir(root)
        .env("ANSIBLE_NOCOLOR", "1")
        .output()
        .expect("cannot run ansible-playbook");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "syntax check failed:\n{text}");
    assert!(
        text.contains("playbook: ansible/stampede.yml"),
        "unexpected output:\n{text}"
    );
}
