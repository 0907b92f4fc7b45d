#!/usr/bin/env bash
# Builds the guest image of `stampede vm up`: a Debian bookworm (debootstrap minbase) with
# systemd, openssh-server, sudo and python3, as a cloud image has them, and the packages the
# ansible playbook installs already installed: unpacking a Java runtime on three emulated
# guests took 10-15 minutes, here it takes one, so the playbook finds them present and does
# the rest (services, keys, sudo). Guests have no route to a Debian mirror, so the image
# carries a local apt repository holding those packages (and their dependencies), and its
# apt sources point there only.
#
# Environment: WORK (an empty folder to build in), IMAGE (the raw ext4 image to write),
# MIRROR (the Debian mirror), USER_NAME, USER_PASSWORD (a sudoer with a password, as on a
# fresh cloud VM), USER_KEY (the public key the provider authorizes for that user),
# SIZE (the image size), KERNEL and INITRD (where to copy the guest's kernel and
# initramfs, for qemu's -kernel).
set -euo pipefail
root="$WORK/root"
debootstrap --variant=minbase \
  --include=systemd-sysv,openssh-server,iproute2,python3,sudo,kmod,udev,ca-certificates,linux-image-cloud-amd64,initramfs-tools \
  bookworm "$root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -5 "$WORK/debootstrap.log" >&2; exit 1; }

# As container images do: dpkg writes without an fsync per file (an emulated guest's fsync
# reaches the host's disk) and leaves out documentation, manual pages and translations.
cat >"$root/etc/dpkg/dpkg.cfg.d/stampede" <<'DPKG'
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/locale/*
DPKG

# What the playbook installs, and python3-apt, which its apt module needs.
packages="libzookeeper-java default-jre-headless iptables iproute2 procps faketime perl chrony
  sudo openssh-server python3 python3-apt"
# The local repository: those packages, downloaded with the guest's own apt, then installed
# from it (no service started in the chroot; Java's certificate store needs /proc).
repo=/srv/stampede-debs
mkdir -p "$root$repo/partial"
# shellcheck disable=SC2086 # one word per package
chroot "$root" apt-get install --download-only -y -q --no-install-recommends \
  -o Dir::Cache::archives="$repo" $packages >"$WORK/download.log" 2>&1 ||
  { tail -5 "$WORK/download.log" >&2; exit 1; }
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
# shellcheck disable=SC2086 # one word per package
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
  -o Dir::Cache::archives="$repo" $packages >"$WORK/install.log" 2>&1 ||
  { tail -5 "$WORK/install.log" >&2; exit 1; }
umount "$root/proc"
rm -f "$root/usr/sbin/policy-rc.d"
rm -rf "$root$repo/partial" "$root$repo/lock"
cp "$(ls "$root"/boot/vmlinuz-* | tail -1)" "$KERNEL"
cp "$(ls "$root"/boot/initrd.img-* | tail -1)" "$INITRD"
(cd "$root$repo" && apt-ftparchive packages . >Packages)
echo "deb [trusted=yes] file:$repo ./" >"$root/etc/apt/sources.list"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb

# Boot-time settings from the kernel command line (stampede.ip=A.B.C.D/24,
# stampede.name=NAME, stampede.ntp=A.B.C.D): address, hostname, fresh SSH host keys and the
# time server, as a provider's agent sets them.
cat >"$root/usr/local/sbin/stampede-guest" <<'SCRIPT'
#!/bin/sh
# Sets this guest's address, name, SSH host keys and time server from the kernel command line.
for word in $(cat /proc/cmdline); do
  case "$word" in
    stampede.ip=*) ip="${word#stampede.ip=}" ;;
    stampede.name=*) name="${word#stampede.name=}" ;;
    stampede.ntp=*) ntp="${word#stampede.ntp=}" ;;
  esac
done
ip link set lo up
[ -n "$ip" ] && { ip addr replace "$ip" dev eth0; ip link set eth0 up; }
[ -n "$name" ] && {
  echo "$name" >/etc/hostname
  hostname "$name"
  printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$name" >/etc/hosts
}
[ -n "$ntp" ] && {
  # chrony reads its sources from here as well.
  mkdir -p /etc/chrony/sources.d
  echo "server $ntp iburst" >/etc/chrony/sources.d/stampede.sources
}
ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A
echo "stampede-guest: $name is up" >/dev/console
SCRIPT
chmod 755 "$root/usr/local/sbin/stampede-guest"
cat >"$root/etc/systemd/system/stampede-guest.service" <<'UNIT'
[Unit]
Description=Address, name, SSH host keys and time server from the kernel command line
DefaultDependencies=no
After=systemd-udevd.service
Before=network.target ssh.service chrony.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/stampede-guest
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
UNIT
chroot "$root" systemctl enable stampede-guest.service >/dev/null 2>&1
chroot "$root" systemctl mask getty@tty1.service serial-getty@ttyS0.service \
  console-getty.service systemd-firstboot.service >/dev/null 2>&1
rm -f "$root"/etc/ssh/ssh_host_*
echo "LABEL=stampede-root / ext4 defaults,errors=remount-ro 0 1" >"$root/etc/fstab"
echo stampede-guest >"$root/etc/hostname"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"

# The provider's user: a sudoer with a password, logging in with the provider's key.
chroot "$root" useradd -m -s /bin/bash -G sudo "$USER_NAME"
echo "$USER_NAME:$USER_PASSWORD" | chroot "$root" chpasswd
install -d -m 700 "$root/home/$USER_NAME/.ssh"
cp "$USER_KEY" "$root/home/$USER_NAME/.ssh/authorized_keys"
chmod 600 "$root/home/$USER_NAME/.ssh/authorized_keys"
chroot "$root" chown -R "$USER_NAME:$USER_NAME" "/home/$USER_NAME/.ssh"

rm -f "$IMAGE"
truncate -s "$SIZE" "$IMAGE"
mkfs.ext4 -q -F -L stampede-root -d "$root" "$IMAGE"
rm -rf "$root"
