//! CI check of the ansible playbook: `ansible-playbook --syntax-check` with the example
//! inventory, installing Debian's ansible package first when `ansible-playbook` is missing.

use std::path::Path;
use std::process::Command;

fn has_program(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn install_ansible() {
    let update = Command::new("apt-get")
        .args(["update", "-q"])
        .status()
        .expect("cannot run apt-get");
    assert!(update.success(), "apt-get update failed");
    let install = Command::new("apt-get")
        .args(["install", "-y", "-q", "ansible"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .expect("cannot run apt-get");
    assert!(install.success(), "apt-get install ansible failed");
}

#[test]
fn the_playbook_passes_ansibles_syntax_check() {
    if !has_program("ansible-playbook") {
        install_ansible();
    }
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
