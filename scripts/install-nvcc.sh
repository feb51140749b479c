#!/usr/bin/env bash
# Installs Debian bookworm's nvidia-cuda-toolkit (nvcc 11.8) when nvcc is missing.
# The image deletes downloaded packages between dpkg batches, so a separate archive cache is used.
set -euo pipefail
if command -v nvcc >/dev/null 2>&1; then
	exit 0
fi
src=/etc/apt/sources.list.d/debian-nonfree.sources
if [ ! -f "$src" ]; then
	cat >"$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq
mkdir -p /var/cache/apt-cuda/partial
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	-o Dir::Cache::archives=/var/cache/apt-cuda nvidia-cuda-toolkit
command -v nvcc
