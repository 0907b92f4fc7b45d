//! Installing the OS packages a node image needs, with apt-get, when they are missing.

use anyhow::{bail, Context};

use super::local;

/// A Debian package and a file whose presence shows it is installed.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    /// The Debian package name.
    pub name: &'static str,
    /// A file the package installs.
    pub provides: &'static str,
}

/// What every local node needs: sshd and the tools the nemeses use, and the database.
pub const NODE_IMAGE: &[Package] = &[
    Package {
        name: "openssh-server",
        provides: "/usr/sbin/sshd",
    },
    Package {
        name: "iproute2",
        provides: "/usr/sbin/ip",
    },
    Package {
        name: "iptables",
        provides: "/usr/sbin/iptables",
    },
    Package {
        name: "procps",
        provides: "/usr/bin/pgrep",
    },
    Package {
        name: "faketime",
        provides: "/usr/bin/faketime",
    },
    Package {
        name: "perl",
        provides: "/usr/bin/cpan",
    },
    Package {
        name: "zookeeper",
        provides: "/usr/share/java/zookeeper.jar",
    },
];

/// Installs whichever of `packages` are missing, with a message saying so.
pub fn ensure(packages: &[Package]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|p| !std::path::Path::new(p.provides).exists())
        .map(|p| p.name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !local::has_program("apt-get") {
        bail!(
            "missing packages {} and no apt-get to install them: install them by hand",
            missing.join(", ")
        );
    }
    eprintln!(
        "installing missing packages with apt-get: {}",
        missing.join(" ")
    );
    local::run("apt-get", &["update", "-q"]).context("apt-get update failed")?;
    let mut args = vec![
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=300",
    ];
    args.extend(&missing);
    let out = std::process::Command::new("apt-get")
        .args(&args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .context("cannot run apt-get")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("");
        bail!("apt-get install {} failed: {last}", missing.join(" "));
    }
    Ok(())
}
