//! The guest image, built once per machine from Debian packages by `image.sh` (debootstrap,
//! a local apt repository, the provider's user and key) and cached with a stamp of the
//! script that built it, so a changed script builds it again.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::super::local;

/// Where the cached image lives.
const IMAGE_DIR: &str = "/var/lib/stampede/vm/image";

/// The script that builds the image (run with bash as root).
const BUILD_SCRIPT: &str = include_str!("image.sh");

/// The Debian mirror debootstrap and the guests' local repository are filled from
/// (`STAMPEDE_DEBIAN_MIRROR` overrides it).
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The image's size (sparse: only what the guests write takes space).
const IMAGE_SIZE: &str = "6G";

/// A built image: the root filesystem, the kernel and initramfs to boot it with, and the
/// provider's key that logs in to a fresh guest.
#[derive(Debug, Clone)]
pub struct Image {
    /// The raw ext4 root filesystem (the guests' overlays are backed by it).
    pub root: PathBuf,
    /// The guest kernel.
    pub kernel: PathBuf,
    /// Its initramfs.
    pub initrd: PathBuf,
    /// The provider's private key (authorized for the guest user in the image).
    pub provider_key: PathBuf,
}

fn dir() -> &'static Path {
    Path::new(IMAGE_DIR)
}

fn image() -> Image {
    Image {
        root: dir().join("root.img"),
        kernel: dir().join("vmlinuz"),
        initrd: dir().join("initrd.img"),
        provider_key: dir().join("provider_key"),
    }
}

/// A stamp of the build script: FNV-1a of its text, stable across builds of stampede.
fn stamp() -> String {
    let hash = BUILD_SCRIPT.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    format!("{hash:016x}\n")
}

/// The image, if it is built and current.
pub fn cached() -> anyhow::Result<Image> {
    let current = std::fs::read_to_string(dir().join("stamp")).ok() == Some(stamp());
    if !current {
        bail!("the VM image in {IMAGE_DIR} is missing or outdated: `stampede vm up` builds it");
    }
    Ok(image())
}

/// The guests' sudo password, made with the image.
pub fn password() -> anyhow::Result<String> {
    let path = dir().join("password");
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .trim()
        .to_string())
}

/// The image, built first when missing or outdated (about 2 minutes; it needs a Debian
/// mirror). Refuses to rebuild under a VM cluster that is up, whose overlays it backs.
pub fn ensure() -> anyhow::Result<Image> {
    if let Ok(image) = cached() {
        return Ok(image);
    }
    let users: Vec<String> = std::fs::read_dir(super::STATE_ROOT)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if !users.is_empty() {
        bail!(
            "the VM image must be rebuilt, but VM clusters {} still use it: `stampede vm down` them first",
            users.join(", ")
        );
    }
    eprintln!("building the VM image in {IMAGE_DIR} (debootstrap; about 2 minutes)");
    let _ = std::fs::remove_dir_all(dir());
    std::fs::create_dir_all(dir().join("work"))
        .with_context(|| format!("cannot create {IMAGE_DIR}"))?;
    let image = image();
    super::super::ensure_key(&image.provider_key)?;
    let password = format!("{:016x}", rand::random::<u64>());
    std::fs::write(dir().join("password"), format!("{password}\n"))?;
    let script = dir().join("image.sh");
    std::fs::write(&script, BUILD_SCRIPT)?;
    let mirror =
        std::env::var("STAMPEDE_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.to_string());
    let path = |p: &Path| p.display().to_string();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .env("WORK", dir().join("work"))
        .env("IMAGE", &image.root)
        .env("KERNEL", &image.kernel)
        .env("INITRD", &image.initrd)
        .env("MIRROR", &mirror)
        .env("USER_NAME", super::GUEST_USER)
        .env("USER_PASSWORD", &password)
        .env("USER_KEY", path(&image.provider_key.with_extension("pub")))
        .env("SIZE", IMAGE_SIZE)
        .output()
        .context("cannot run bash")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "building the VM image failed (logs in {}): {}",
            dir().join("work").display(),
            stderr.trim().lines().last().unwrap_or("")
        );
    }
    local::run("rm", &["-rf", &path(&dir().join("work"))])?;
    std::fs::write(dir().join("stamp"), stamp())?;
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guests reach no mirror: every package the playbook installs must be in the image's
    /// local repository (and installed), which `image.sh` fills.
    #[test]
    fn the_image_carries_every_package_the_playbook_installs() {
        let playbook = include_str!("../../../ansible/stampede.yml");
        let listed: Vec<&str> = playbook
            .lines()
            .skip_while(|l| !l.contains("stampede_packages:"))
            .skip(1)
            .map_while(|l| l.trim().strip_prefix("- "))
            .map(|l| l.split_whitespace().next().unwrap_or(""))
            .collect();
        assert!(listed.len() >= 8, "the playbook's packages: {listed:?}");
        let carried = BUILD_SCRIPT
            .split("packages=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("image.sh names its packages");
        for package in listed {
            assert!(
                carried.split_whitespace().any(|w| w == package),
                "image.sh does not carry {package}, which the playbook installs"
            );
        }
    }
}
