#!/usr/bin/env bash
# The machine-level part of the test and demo setup, idempotent: Debian packages, arm64
# emulation through binfmt_misc, and the stand-in base root filesystems (cached).
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# package:binary it provides
need=()
for pkg_bin in docker-registry:docker-registry git:git openssl:openssl apache2-utils:htpasswd \
  curl:curl buildah:buildah skopeo:skopeo qemu-user-static:qemu-aarch64-static \
  mmdebstrap:mmdebstrap arch-test:arch-test uidmap:newuidmap rpm:rpmbuild rpm:rpmsign \
  createrepo-c:createrepo_c gnupg:gpg; do
  command -v "${pkg_bin#*:}" >/dev/null 2>&1 || need+=("${pkg_bin%%:*}")
done
if [ "${#need[@]}" -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# arm64 under emulation: qemu-user-static registers itself through binfmt_misc where systemd
# runs; in a container nothing does, so register the interpreter here.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
  $sudo mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  cat /usr/lib/binfmt.d/qemu-aarch64.conf | $sudo tee /proc/sys/fs/binfmt_misc/register >/dev/null
fi

# The stand-in base images' root filesystems (cached between runs; minutes on a fresh machine).
CANNERY_TEST_CACHE="${CANNERY_TEST_CACHE:-/var/cache/cannery-tests}"
export CANNERY_TEST_CACHE
$sudo bash scripts/test-bases.sh "$CANNERY_TEST_CACHE"
