#!/usr/bin/env bash
# Checks the Debian package the way an operator meets it: builds the .deb
# (docs/installing.md), makes a fresh Debian 12 tree with debootstrap,
# installs the package there with apt (which must resolve every Depends from
# Debian alone), boots that tree under systemd-nspawn with systemd as PID 1,
# and checks that horovodd.service is enabled, active, and answers
# `horovodctl list`. Prints the unit's status; exits non-zero on any failure.
#
# Slow (a Debian download and a CPU-only build) and needs root and the Debian
# mirror, so it is not part of scripts/test.sh.
#
#   DEB          an existing .deb to check instead of building one
#   DEB_BUILD    build directory (default build-deb/)
#   DEB_ROOT     where the Debian 12 tree goes (default /var/tmp/horovodd-deb12;
#                kept between runs, with the package purged before each)
#   DEB_MIRROR   the Debian mirror for debootstrap (default: Debian's own)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DEB_BUILD:-$repo_root/build-deb}"
root="${DEB_ROOT:-/var/tmp/horovodd-deb12}"
mirror="${DEB_MIRROR:-http://deb.debian.org/debian}"

[[ $(id -u) -eq 0 ]] || { echo "check_deb.sh: needs root (debootstrap, nspawn)" >&2; exit 2; }
for tool in debootstrap systemd-nspawn; do
  command -v "$tool" > /dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap systemd-container
done

deb="${DEB:-}"
if [[ -z "$deb" ]]; then
  echo "== building the package in $build_dir"
  # scripts/build.sh: RelWithDebInfo, through ccache when it is installed.
  BUILD_DIR="$build_dir" CMAKE_ARGS="-DCMAKE_INSTALL_PREFIX=/usr \
    -DHVDD_WITH_NCCL=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
    -DHVDD_BUILD_TESTS=OFF -DHVDD_BENCH=OFF" "$repo_root/scripts/build.sh"
  (cd "$build_dir" && cpack -G DEB > cpack.log)
  deb="$(ls -t "$build_dir"/horovodd_*.deb | head -n 1)"
fi
echo "== package: $deb"

if [[ ! -x "$root/usr/bin/apt-get" ]]; then
  echo "== debootstrap: a minimal Debian 12 with systemd in $root"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$root" "$mirror"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" dpkg --purge horovodd > /dev/null 2>&1 || true
rm -f "$root/root/result.txt"
cp "$deb" "$root/tmp/horovodd.deb"

echo "== apt-get install ./horovodd.deb (Depends from Debian alone)"
chroot "$root" apt-get update -qq
chroot "$root" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends /tmp/horovodd.deb

# A one-shot unit that waits for horovodd, records what a person would check,
# and powers the container off.
cat > "$root/etc/systemd/system/horovodd-check.service" <<'UNIT'
[Unit]
Description=record whether horovodd.service started
After=horovodd.service
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'for i in $(seq 1 60); do systemctl is-active -q horovodd && /usr/bin/horovodctl --daemon 127.0.0.1:7451 list > /root/ctl.txt 2>&1 && break; sleep 1; done; { echo "enabled: $(systemctl is-enabled horovodd)"; echo "active: $(systemctl is-active horovodd)"; echo "horovodctl list:"; cat /root/ctl.txt; systemctl status horovodd --no-pager; } > /root/result.txt 2>&1; systemctl poweroff'
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/horovodd-check.service \
  "$root/etc/systemd/system/multi-user.target.wants/horovodd-check.service"

echo "== booting the tree under systemd-nspawn"
timeout 300 systemd-nspawn -q -D "$root" --register=no --keep-unit --boot --console=pipe \
  < /dev/null > "$root.boot.log" 2>&1 || true
[[ -f "$root/root/result.txt" ]] || { echo "check_deb.sh: the container recorded nothing; see $root.boot.log" >&2; exit 1; }
cat "$root/root/result.txt"
grep -qx "enabled: enabled" "$root/root/result.txt" &&
  grep -qx "active: active" "$root/root/result.txt" &&
  grep -q "No jobs." "$root/root/result.txt" || { echo "check_deb.sh: FAILED" >&2; exit 1; }
echo "check_deb.sh: the package installs on a fresh Debian 12 and its unit starts and serves"
