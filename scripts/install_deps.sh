#!/usr/bin/env bash
# Installs the Debian packages horovodd needs to build and test. Idempotent:
# when everything is installed it changes nothing and needs no network; it
# runs apt-get update only when something is missing, and sudo only when not
# already root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ccache  # every build of scripts/ compiles through it (scripts/build.sh)
  clang-format  # scripts/check_format.sh (version 14: .clang-format's)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgloo-dev libspdlog-dev libcli11-dev libyaml-cpp-dev catch2 libabsl-dev
  libssh-dev libsystemd-dev libsqlite3-dev
  # etcd, the replicated journal of an HA setup (horovodd --store etcd://...): the server for
  # the tests, and the API definitions the daemon's client is generated from with their imports
  etcd-server golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
  systemd  # systemd-analyze verifies deploy/systemd/horovodd.service in the tests
  openssh-server openssh-client  # a private sshd for the multi-host tests (tests/integration/sshd.py)
  python3 python3-pytest python3-pytest-xdist  # -n 2: the integration tests mostly wait, two at a time
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-torch  # the horovodd Python package
  clang libclang-rt-14-dev  # libFuzzer and ASan for scripts/fuzz.sh (tests/fuzz)
  slurm-wlm munge  # a private Slurm cluster on loopback for the Slurm launcher's tests
  openmpi-bin libopenmpi-dev  # OpenMPI, a peer in bench/ (MPI_Allreduce)
  python3-torchvision  # Horovod's published examples (synthetic benchmark)
  # The status page in a real browser (tests/integration/test_status_page.py): headless
  # Chromium, driven over its DevTools WebSocket; YAML for the Prometheus rules' checks.
  chromium python3-websocket python3-yaml
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages are installed"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "install_deps: missing packages (${missing[*]}) and no apt-get to install them" >&2
  exit 1
fi
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  as_root=(sudo)
fi

echo "install_deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
