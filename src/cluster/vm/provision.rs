//! `stampede vm provision`: the project's playbook run on a VM cluster's guests, as it is run
//! on cloud VMs, with `ansible-playbook` installed by apt-get when this machine has none.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use super::super::packages::{self, Package};
use super::{local, VmCluster};
use crate::control::shell;

/// The playbook `vm provision` runs unless told otherwise, relative to stampede's checkout.
pub const DEFAULT_PLAYBOOK: &str = "ansible/stampede.yml";

/// The Debian package that brings `ansible-playbook`: the playbook uses only
/// `ansible.builtin` modules, so ansible-core (8 MB) does without the collections of Debian's
/// `ansible` (259 MB).
const ANSIBLE: Package = Package {
    name: "ansible-core",
    provides: "/usr/bin/ansible-playbook",
};

impl VmCluster {
    /// The arguments of `ansible-playbook` that run `playbook` on the guests: their inventory,
    /// the key the playbook authorizes (stampede's, not the provider's) and their host keys.
    pub fn playbook_args(&self, playbook: &Path) -> Vec<String> {
        vec![
            "-i".into(),
            self.inventory_file().display().to_string(),
            playbook.display().to_string(),
            "-e".into(),
            format!("stampede_ssh_public_key={}.pub", self.key_file().display()),
            format!(
                "--ssh-common-args=-o UserKnownHostsFile={}",
                self.known_hosts_file().display()
            ),
        ]
    }

    /// The `ansible-playbook` command line that runs `playbook` on the guests, quoted for a
    /// shell (what `vm provision` runs).
    pub fn playbook_command(&self, playbook: &Path) -> String {
        let args: Vec<String> = self
            .playbook_args(playbook)
            .iter()
            .map(|a| shell::quote(a))
            .collect();
        format!("ansible-playbook {}", args.join(" "))
    }
}

/// Runs `playbook` on the guests of `cluster` with `ansible-playbook` (installed with apt-get
/// first when missing, saying so), its output going to this process's; an error when the
/// playbook is missing or fails.
pub fn provision(cluster: &VmCluster, playbook: &Path) -> anyhow::Result<()> {
    if !playbook.is_file() {
        bail!(
            "playbook {} not found: run from stampede's checkout or give --playbook PATH",
            playbook.display()
        );
    }
    let program = if local::has_program("ansible-playbook") {
        "ansible-playbook"
    } else {
        packages::ensure(&[ANSIBLE])?;
        ANSIBLE.provides
    };
    eprintln!("running: {}", cluster.playbook_command(playbook));
    let status = Command::new(program)
        .args(cluster.playbook_args(playbook))
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    if !status.success() {
        bail!(
            "the playbook {} failed on VM cluster {} ({status}): see its output above",
            playbook.display(),
            cluster.spec.name
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::{Backend, VmSpec};
    use super::*;

    fn cluster() -> VmCluster {
        VmCluster {
            spec: VmSpec {
                name: "vmp".into(),
                nodes: 3,
                subnet: [10, 9, 8],
                memory_mb: 1024,
                cpus: 1,
            },
            backend: Backend::Tcg,
            dir: PathBuf::from("/var/lib/stampede/vms/vmp"),
        }
    }

    #[test]
    fn the_playbook_runs_with_the_clusters_inventory_key_and_host_keys() {
        let command = cluster().playbook_command(Path::new(DEFAULT_PLAYBOOK));
        assert_eq!(
            command,
            "ansible-playbook -i /var/lib/stampede/vms/vmp/inventory.ini ansible/stampede.yml \
             -e stampede_ssh_public_key=/var/lib/stampede/vms/vmp/id_ed25519.pub \
             '--ssh-common-args=-o UserKnownHostsFile=/var/lib/stampede/vms/vmp/known_hosts'"
        );
    }

    #[test]
    fn a_missing_playbook_is_named() {
        let err = provision(&cluster(), Path::new("/nonexistent/stampede.yml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "playbook /nonexistent/stampede.yml not found: run from stampede's checkout or give \
             --playbook PATH"
        );
    }
}
