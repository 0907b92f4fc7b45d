//! Guests under qemu: the backend (KVM when a probe boot succeeds, else TCG emulation), the
//! host packages, and one guest's emulator (boot from its copy-on-write overlay, pid, kill).
//!
//! Measured on a 2-core machine whose `/dev/kvm` boots only kernels built for it: KVM fails
//! with Debian's kernel, so the probe picks TCG (three guests answer SSH in about 50 s).
//! user-mode-linux would be faster, but Debian 12's (6.1) panics at its first process on
//! hosts with AMX ("ptrace set fp regs failed"), and the fixed one needs a newer glibc.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::super::{local, packages};
use super::image::Image;

/// How a guest's CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Hardware virtualization (`-accel kvm`).
    Kvm,
    /// qemu's software emulation (`-accel tcg`).
    Tcg,
}

/// One guest's emulator and the files it uses.
#[derive(Debug, Clone)]
pub struct Guest {
    /// qemu's `-name`, unique on the machine: how its process is recognised.
    pub id: String,
    /// Node name (`n1`).
    pub name: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// Its tap on the cluster's bridge.
    pub tap: String,
    /// Its MAC address.
    pub mac: String,
    /// The time server its time daemon is given (this machine, on the bridge), if any.
    pub time_server: Option<Ipv4Addr>,
    /// Its folder: overlay, pid file, console.
    pub dir: PathBuf,
    /// Memory in MiB.
    pub memory_mb: u32,
    /// Virtual CPUs.
    pub cpus: u32,
    /// How its CPU runs.
    pub backend: Backend,
}

/// The host packages the VM path needs besides qemu.
const HOST_PACKAGES: &[packages::Package] = &[
    packages::Package {
        name: "debootstrap",
        provides: "/usr/sbin/debootstrap",
    },
    packages::Package {
        name: "apt-utils",
        provides: "/usr/bin/apt-ftparchive",
    },
    packages::Package {
        name: "e2fsprogs",
        provides: "/usr/sbin/mkfs.ext4",
    },
    packages::Package {
        name: "qemu-utils",
        provides: "/usr/bin/qemu-img",
    },
    packages::Package {
        name: "openssh-client",
        provides: "/usr/bin/ssh-keyscan",
    },
];

/// Where Debian 12 gets a qemu that matches the qemu-utils machines like this one carry
/// from bookworm-backports (Debian 12's own qemu-system-x86 7.2 would remove it).
const BACKPORTS: &str = "/etc/apt/sources.list.d/stampede-bookworm-backports.sources";

/// Installs what is missing of qemu and the image tools, with apt-get.
pub fn install() -> anyhow::Result<()> {
    packages::ensure(HOST_PACKAGES)?;
    if local::has_program("qemu-system-x86_64") {
        return Ok(());
    }
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    if release.contains("VERSION_CODENAME=bookworm") {
        std::fs::write(
            BACKPORTS,
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\n\
             Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
        )
        .with_context(|| format!("cannot write {BACKPORTS}"))?;
        args.extend(["-t", "bookworm-backports"]);
    }
    args.push("qemu-system-x86");
    eprintln!("installing qemu-system-x86 with apt-get");
    local::run("apt-get", &["update", "-q"]).context("apt-get update failed")?;
    local::run("apt-get", &args).context("cannot install qemu-system-x86")?;
    Ok(())
}

/// Where the probe's verdict is kept, with the host kernel it was made on.
const PROBE_FILE: &str = "/var/lib/stampede/vm/backend";

/// The backend to boot guests with: KVM if a probe boot reaches the guest's userspace within
/// a minute, else TCG. The verdict is cached per host kernel (a probe that fails can take its
/// whole minute).
pub fn pick_backend(image: &Image) -> anyhow::Result<Backend> {
    let kernel = local::run("uname", &["-r"])?;
    if let Ok(saved) = std::fs::read_to_string(PROBE_FILE) {
        if let Some((k, verdict)) = saved.trim().split_once(' ') {
            if k == kernel {
                return Ok(if verdict == "kvm" {
                    Backend::Kvm
                } else {
                    Backend::Tcg
                });
            }
        }
    }
    let verdict = if Path::new("/dev/kvm").exists() {
        eprintln!("probing KVM with a boot (up to a minute)");
        probe_kvm(image)?
    } else {
        Backend::Tcg
    };
    let name = if verdict == Backend::Kvm {
        "kvm"
    } else {
        "tcg"
    };
    std::fs::write(PROBE_FILE, format!("{kernel} {name}\n"))?;
    Ok(verdict)
}

fn probe_kvm(image: &Image) -> anyhow::Result<Backend> {
    let dir = Path::new(PROBE_FILE).with_file_name("probe");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let guest = Guest {
        id: "stampede-vm-probe".into(),
        name: "probe".into(),
        address: Ipv4Addr::new(127, 0, 0, 2),
        tap: String::new(),
        mac: String::new(),
        time_server: None,
        dir: dir.clone(),
        memory_mb: 512,
        cpus: 1,
        backend: Backend::Kvm,
    };
    let booted = guest.boot(image).is_ok() && {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut up = false;
        while Instant::now() < deadline && guest.pid().is_some() && !up {
            std::thread::sleep(Duration::from_millis(500));
            up = std::fs::read_to_string(guest.console())
                .unwrap_or_default()
                .contains("stampede-guest: probe is up");
        }
        up
    };
    guest.kill()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(if booted { Backend::Kvm } else { Backend::Tcg })
}

impl Guest {
    fn overlay(&self) -> PathBuf {
        self.dir.join("disk.qcow2")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.join("qemu.pid")
    }

    /// The guest's serial console, as qemu writes it.
    pub fn console(&self) -> PathBuf {
        self.dir.join("console.log")
    }

    /// The pid of this guest's emulator, when it runs.
    pub fn pid(&self) -> Option<u32> {
        local::pid_in_file(&self.pid_file(), &format!("-name {} ", self.id))
    }

    /// Starts the emulator (in the background) from the guest's overlay, made on first boot.
    pub fn boot(&self, image: &Image) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = |p: &Path| p.display().to_string();
        if !self.overlay().exists() {
            local::run(
                "qemu-img",
                &[
                    "create",
                    "-q",
                    "-f",
                    "qcow2",
                    "-b",
                    &path(&image.root),
                    "-F",
                    "raw",
                    &path(&self.overlay()),
                ],
            )?;
        }
        let accel = match self.backend {
            Backend::Kvm => "kvm",
            Backend::Tcg => "tcg",
        };
        let mut append = format!(
            "root=LABEL=stampede-root rw console=ttyS0 net.ifnames=0 quiet \
             stampede.ip={}/24 stampede.name={}",
            self.address, self.name
        );
        if let Some(server) = self.time_server {
            append.push_str(&format!(" stampede.ntp={server}"));
        }
        let (memory, cpus) = (self.memory_mb.to_string(), self.cpus.to_string());
        let drive = format!("file={},if=virtio,format=qcow2", path(&self.overlay()));
        let serial = format!("file:{}", path(&self.console()));
        let mut args = vec![
            "-name", &self.id, "-accel", accel, "-m", &memory, "-smp", &cpus,
        ];
        let (kernel, initrd) = (path(&image.kernel), path(&image.initrd));
        args.extend(["-kernel", &kernel, "-initrd", &initrd, "-append", &append]);
        args.extend(["-drive", &drive]);
        let (netdev, device);
        if self.tap.is_empty() {
            args.extend(["-nic", "none"]);
        } else {
            netdev = format!("tap,id=net0,ifname={},script=no,downscript=no", self.tap);
            device = format!("virtio-net-pci,netdev=net0,mac={}", self.mac);
            args.extend(["-netdev", &netdev, "-device", &device]);
        }
        let pid_file = path(&self.pid_file());
        args.extend(["-display", "none", "-monitor", "none", "-serial", &serial]);
        args.extend(["-pidfile", &pid_file, "-daemonize"]);
        local::run("qemu-system-x86_64", &args)
            .with_context(|| format!("cannot boot guest {}", self.name))?;
        Ok(())
    }

    /// Kills the emulator with SIGKILL (a power cut) and waits until it is gone.
    pub fn kill(&self) -> anyhow::Result<()> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        // The pid is this guest's emulator: `pid()` checked its command line.
        if !local::kill_and_wait(pid, Duration::from_secs(10)) {
            bail!(
                "the emulator of guest {} (pid {pid}) survives SIGKILL",
                self.name
            );
        }
        Ok(())
    }
}
