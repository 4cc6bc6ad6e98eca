#!/usr/bin/env bash
# Installs lavapipe (Mesa's Vulkan driver that runs on the CPU) so hashtile's CubeCL kernels can be tested on a
# machine without a GPU. Needs Mesa >= 24: lavapipe in Mesa 22.3 (Debian 12's default) drops the lanes that
# ran a loop body at the loop's exit, which loses keys in the insert kernel (NOTES.md, "lavapipe").
# On Debian 12 it takes Mesa 25 from bookworm-backports; elsewhere the distribution's package must be new enough.
# Exit status 0 only when a Mesa >= 24 lavapipe is installed.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ "$codename" = "bookworm" ]; then
  echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/hashtile-bookworm-backports.list >/dev/null
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
else
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null
fi
version=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)
major=${version%%.*}
major=${major##*:}
if [ "${major:-0}" -lt 24 ]; then
  echo "install-lavapipe: mesa-vulkan-drivers $version is older than 24: its lavapipe miscompiles hashtile's insert kernel" >&2
  exit 1
fi
echo "install-lavapipe: mesa-vulkan-drivers $version (lavapipe) installed"
