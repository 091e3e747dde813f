"""A base image's OS comes from its /etc/os-release, read when it is locked, against a real
registry (docker-registry on 127.0.0.1, plain HTTP: loopback only) holding images built here
as the distributions lay the file out (Debian's /etc/os-release is a symlink to
../usr/lib/os-release; openEuler's is a file). A catalog `os` or `os_version` that
contradicts what the lock recorded is an error at that key's line, exit 2; a lock from before
has its bases' OS read without moving their digest or time (the build's clock)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import httpx
import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import BaseEntry, Lock, Resolvers, dump_lock, read_lock, update_lock
from cannery.oci import OCIClient
from cannery.oci.rootfs import BaseOs, read_os_release
from cannery.tls import ssl_context
from tests.catalogs import line_of, tiny
from tests.services.registry import LocalRegistry, upload_blob

DEBIAN = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
          'VERSION_ID="12"\nID=debian\n')
UBI = 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nVERSION_ID="9.4"\n'
OPENEULER = 'NAME="openEuler"\nVERSION="24.03 (LTS)"\nID="openEuler"\nVERSION_ID="24.03"\n'


def _layer(files: dict[str, bytes], links: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return gzip.compress(raw.getvalue(), mtime=0)


def _push(registry: LocalRegistry, repo: str, tag: str, layers: list[bytes]) -> str:
    with httpx.Client() as client:
        def blob(data: bytes) -> dict[str, object]:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            upload_blob(client, registry.url, repo, digest, data, len(data))
            return {"digest": digest, "size": len(data)}

        config = blob(json.dumps({"architecture": "amd64", "os": "linux",
                                  "rootfs": {"type": "layers", "diff_ids": []}}).encode())
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        **blob(layer)} for layer in layers]}).encode()
        r = client.put(f"{registry.url}/v2/{repo}/manifests/{tag}", content=manifest,
                       headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        r.raise_for_status()
        return "sha256:" + hashlib.sha256(manifest).hexdigest()


@pytest.fixture(scope="module")
def bases(registry: LocalRegistry) -> dict[str, tuple[str, str]]:
    debian = _push(registry, "os/debian", "12", [
        _layer({"usr/lib/os-release": DEBIAN.encode(), "bin/sh": b"x",
                "usr/bin/apt-get": b"elf"}, {"etc/os-release": "../usr/lib/os-release"}),
        _layer({"opt/app": b"y"}, {})])
    openeuler = _push(registry, "os/openeuler", "24.03", [
        _layer({"etc/os-release": OPENEULER.encode(), "usr/bin/dnf-3": b"py"},
               {"usr/bin/dnf": "dnf-3", "usr/bin/yum": "dnf-3"})])
    # a UBI minimal image: ID=rhel, and microdnf its only package manager
    minimal = _push(registry, "os/ubi-minimal", "9", [
        _layer({"etc/os-release": UBI.encode(), "usr/bin/microdnf": b"elf"}, {})])
    bare = _push(registry, "os/bare", "1", [_layer({"opt/x": b"z"}, {})])
    return {"debian": (f"{registry.host}/os/debian:12", debian),
            "openeuler": (f"{registry.host}/os/openeuler:24.03", openeuler),
            "ubi-minimal": (f"{registry.host}/os/ubi-minimal:9", minimal),
            "bare": (f"{registry.host}/os/bare:1", bare)}


def test_os_release_is_read_from_the_layers(bases: dict[str, tuple[str, str]]) -> None:
    with OCIClient(ssl_context()) as client:
        assert read_os_release(client, *bases["debian"]) == BaseOs("debian", "12", ("apt",))
        assert read_os_release(client, *bases["openeuler"]) == BaseOs(
            "openEuler", "24.03", ("dnf", "yum"))  # links count: dnf and yum are dnf-3
        assert read_os_release(client, *bases["bare"]) is None


def test_the_package_manager_the_base_lacks_is_an_error_at_its_key(
    tmp_path: Path, bases: dict[str, tuple[str, str]], cli  # type: ignore[no-untyped-def]
) -> None:
    """A UBI minimal base (ID rhel) has no dnf: the catalog's default for rhel is refused,
    naming what the image has; `package_manager = "microdnf"` plans."""
    image, digest = bases["ubi-minimal"]
    path = _catalog(tmp_path, image, "rhel", "9")
    lock = update_lock(load_catalog(path).catalog, Lock(), _resolvers(digest))
    assert lock.bases[image].package_managers == ["microdnf"]
    (tmp_path / "cannery.lock").write_text(dump_lock(lock))
    res = cli("plan", "--catalog", str(path))
    assert res.code == 2
    line = line_of(path.read_text(), 'os = "rhel"')
    assert res.err.strip() == (
        f"cannery: error: {path}:{line}: bases.b.os: 'rhel' 9 installs with dnf, but {image} "
        "has microdnf (cannery.lock): set package_manager = 'microdnf'")
    path.write_text(path.read_text().replace('os_version = "9"',
                                             'os_version = "9"\npackage_manager = "microdnf"'))
    assert cli("plan", "--catalog", str(path)).code == 0
    path.write_text(path.read_text().replace('"microdnf"', '"yum"'))
    res = cli("plan", "--catalog", str(path))
    assert res.code == 2 and "bases.b.package_manager: 'rhel' 9 installs with yum" in res.err


def _catalog(tmp_path: Path, image: str, os: str, version: str) -> Path:
    text = tiny("fam", "registry.example.com/fam/images", image, "t-{chip}")
    text = text.replace('os = "ubuntu"', f'os = "{os}"').replace('os_version = "22.04"',
                                                                 f'os_version = "{version}"')
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    return path


def _resolvers(digest: str) -> Resolvers:
    client = OCIClient(ssl_context())
    return Resolvers(base=lambda image: digest, git=lambda url, ref: "b" * 40,
                     url=lambda url: ("c" * 64, 1),
                     os_release=lambda image, d: read_os_release(client, image, d))


def test_a_catalog_os_that_contradicts_the_image_is_an_error_at_its_line(
    tmp_path: Path, bases: dict[str, tuple[str, str]], cli  # type: ignore[no-untyped-def]
) -> None:
    image, digest = bases["debian"]
    path = _catalog(tmp_path, image, "ubuntu", "22.04")  # what the CentOS-style mistake looks like
    lock = update_lock(load_catalog(path).catalog, Lock(), _resolvers(digest))
    entry = lock.bases[image]
    assert (entry.os_id, entry.os_version) == ("debian", "12")
    (tmp_path / "cannery.lock").write_text(dump_lock(lock))
    assert read_lock(tmp_path / "cannery.lock").bases[image].os_id == "debian"  # round trip
    res = cli("plan", "--catalog", str(path))
    assert res.code == 2
    line = line_of(path.read_text(), 'os = "ubuntu"')
    assert res.err.strip() == (
        f"cannery: error: {path}:{line}: bases.b.os: 'ubuntu', but {image}'s /etc/os-release "
        "says debian 12 (cannery.lock)")
    # the right OS, the wrong version
    fixed = _catalog(tmp_path, image, "debian", "11")
    res = cli("plan", "--catalog", str(fixed))
    assert res.code == 2 and "bases.b.os_version: '11', but" in res.err
    # as written, it plans
    good = _catalog(tmp_path, image, "debian", "12")
    assert cli("plan", "--catalog", str(good)).code == 0


def test_an_older_lock_gets_its_bases_os_without_moving_digest_or_time(
    tmp_path: Path, bases: dict[str, tuple[str, str]]
) -> None:
    image, digest = bases["openeuler"]
    path = _catalog(tmp_path, image, "openeuler", "24.03")
    old = Lock(bases={image: BaseEntry(digest=digest, resolved_at="2026-01-01T00:00:00+00:00")})

    def never(image: str) -> str:
        raise AssertionError("a locked base is not re-resolved for its OS")

    res = _resolvers(digest)
    lock = update_lock(load_catalog(path).catalog, old,
                       Resolvers(base=never, git=res.git, url=res.url,
                                 os_release=res.os_release))
    entry = lock.bases[image]
    assert entry.digest == digest and entry.resolved_at == "2026-01-01T00:00:00+00:00"
    assert (entry.os_id, entry.os_version) == ("openEuler", "24.03")
