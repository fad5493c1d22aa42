#!/usr/bin/env bash
# install-deps.sh: makes sure the Debian packages ampscope builds and plots with are present.
# Installs the missing ones when run as root with apt-get available; otherwise prints the
# exact apt-get line and fails. Usage: scripts/install-deps.sh [PACKAGE...]
# Open MPI (distributed cases) is among the defaults unless AMPSCOPE_NO_MPI=1 (make MPI=0),
# with iproute2, whose `ip netns` makes the hosts of tests/test_hosts.c; oneDNN (bfloat16 GEMMs
# on avx512_bf16) unless AMPSCOPE_NO_DNNL=1 (make DNNL=0).
set -u
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
    pkgs=(libopenblas-dev libcriterion-dev python3-matplotlib python3-numpy)
    [ "${AMPSCOPE_NO_MPI:-}" = 1 ] || pkgs+=(libopenmpi-dev openmpi-bin iproute2)
    [ "${AMPSCOPE_NO_DNNL:-}" = 1 ] || pkgs+=(libdnnl-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y ${missing[*]}"
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: run as root:  apt-get update && $line" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q "${missing[@]}" >&2; then
    apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2 || {
        echo "deps: could not install; run as root:  apt-get update && $line" >&2
        exit 1
    }
fi
