#!/usr/bin/env bash
# Root filesystems for the stand-in base images the end-to-end tests build on (one per arch and
# family: a Debian one, and an openEuler-shaped one that is Debian with dnf and rpm), made once with mmdebstrap and kept in a cache directory between runs. arm64 packages are
# configured under qemu-user-static, so this is the slow part of a fresh run (a few minutes).
# Usage: scripts/test-bases.sh [CACHE_DIR]   (default: $CANNERY_TEST_CACHE or /var/cache/cannery-tests)
set -euo pipefail
cache="${1:-${CANNERY_TEST_CACHE:-/var/cache/cannery-tests}}"
mkdir -p "$cache"
# What the stand-in CANN base ships: bash (its SHELL), the tools the rendered steps call
# (curl, git, sha256sum), Python with pip, and a C compiler for the compiled component (a plain
# shared library loaded with ctypes, so no Python headers). Docs, man pages and locales are left out.
include="bash,ca-certificates,curl,git,python3,python3-pip,gcc,libc6-dev"
stamp="bookworm:$include:v2"
for arch in amd64 arm64; do
  out="$cache/rootfs-$arch.tar"
  if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  tmp="$cache/.partial-$$-rootfs-$arch.tar"  # mmdebstrap picks the format from the suffix
  # The stand-in base keeps no apt lists, logs or caches (they would differ between runs) and
  # lets pip install into the system Python, as the CANN bases' own Python does.
  mmdebstrap --quiet --variant=minbase --architectures="$arch" --include="$include" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/* "$1"/usr/bin/*-lto-dump-*' \
    bookworm "$tmp"
  mv "$tmp" "$out"
  echo "$stamp" > "$out.stamp"
done

# The openEuler stand-in (no openEuler mirror is reachable): Debian's dnf 4 and rpm 4.18 in a
# rootfs whose os-release says openEuler 24.03, with no apt sources and no dnf repositories (the
# tests add their own signed repository) and rpm's database where openEuler keeps it
# (/var/lib/rpm; Debian's rpm defaults to ~/.rpmdb). What the catalog image needs besides: bash,
# curl and sha256sum for the toolkit installer, Python with pip for the components.
oe_include="bash,ca-certificates,curl,python3,python3-pip,dnf,rpm"
oe_stamp="bookworm:$oe_include:openeuler-v2"
for arch in amd64 arm64; do
  out="$cache/rootfs-openeuler-$arch.tar"
  if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$oe_stamp" ]; then
    continue
  fi
  tmp="$cache/.partial-$$-rootfs-openeuler-$arch.tar"
  mmdebstrap --quiet --variant=minbase --architectures="$arch" --include="$oe_include" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -f "$1"/etc/os-release "$1"/usr/lib/os-release; printf "NAME=\"openEuler\"\nVERSION=\"24.03 (LTS)\"\nID=\"openEuler\"\nVERSION_ID=\"24.03\"\nPRETTY_NAME=\"openEuler 24.03 (LTS)\"\n" > "$1"/usr/lib/os-release; ln -s ../usr/lib/os-release "$1"/etc/os-release' \
    --customize-hook='mkdir -p "$1"/etc/dnf/vars "$1"/etc/yum.repos.d "$1"/etc/rpm "$1"/var/lib/rpm; echo 24.03 > "$1"/etc/dnf/vars/releasever; echo "%_dbpath /var/lib/rpm" > "$1"/etc/rpm/macros.dbpath' \
    --customize-hook='rm -rf "$1"/etc/yum.repos.d/* "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/* "$1"/var/cache/dnf/*' \
    bookworm "$tmp"
  mv "$tmp" "$out"
  echo "$oe_stamp" > "$out.stamp"
done
