"""Two-arch stand-in base images, pushed to a test registry as one index.

The slow part (a Debian root filesystem per arch, made by ``scripts/test-bases.sh`` with
mmdebstrap) is cached between runs, and so is its gzip, the base's first layer. Each push then
adds a small second layer holding what is the session's own (the test CA appended to the system
trust bundle, so ``curl``, ``git`` and Debian's ``pip`` inside builds trust the test servers, as
a company image trusts its internal CA; a test's extra files) and uploads the blobs over the
distribution API: seconds, where building the base with buildah and pushing it took ~40 s.
The image is shaped as ``buildah commit --format docker`` + ``buildah manifest push`` made it
before: an OCI index of Docker schema 2 manifests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import ssl
import subprocess
import tarfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.services.registry import upload_blob
from tests.services.tlsca import LocalCA

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CANNERY_TEST_CACHE", "/var/cache/cannery-tests"))
BUNDLE = "etc/ssl/certs/ca-certificates.crt"


def rootfs(arch: str, family: str = "debian") -> Path:
    """The cached root filesystem: Debian 12, or (``openeuler``) the openEuler stand-in."""
    path = CACHE / (f"rootfs-{arch}.tar" if family == "debian" else f"rootfs-{family}-{arch}.tar")
    if not path.is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "test-bases.sh"), str(CACHE)], check=True)
    return path


def cert_dir_for(ca: LocalCA, root: Path) -> Path:
    """A directory in the form ``--cert-dir`` takes (``ca.crt``) for buildah and skopeo."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "ca.crt").write_bytes(ca.ca_cert.read_bytes())
    return root


DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
CHUNK = 1 << 20
CREATED = "2026-01-01T00:00:00Z"
BASE_LAYERS = 2  # the root filesystem, then the session's own files


@dataclass(frozen=True)
class Blob:
    path: Path | None  # a file on disk, or
    data: bytes  # the bytes themselves
    digest: str
    size: int
    diff_id: str = ""  # a layer's uncompressed digest


def _bytes_blob(data: bytes, diff_id: str = "") -> Blob:
    return Blob(None, data, "sha256:" + hashlib.sha256(data).hexdigest(), len(data), diff_id)


def rootfs_layer(tar: Path) -> Blob:
    """The gzip of a cached root filesystem tar, made once and kept beside it (keyed by the
    tar's size and mtime, which ``scripts/test-bases.sh`` changes only by replacing it)."""
    gz = tar.with_name(tar.name + ".gz")
    meta = tar.with_name(tar.name + ".gz.json")
    st = tar.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        known = json.loads(meta.read_text())
        if known["source"] == key and gz.stat().st_size == known["size"]:
            return Blob(gz, b"", known["digest"], known["size"], known["diff_id"])
    except (OSError, ValueError, KeyError):
        pass
    raw, packed = hashlib.sha256(), hashlib.sha256()
    tmp = gz.with_name(f".{gz.name}.{os.getpid()}.{threading.get_ident()}")

    class _Hashing(io.RawIOBase):
        def __init__(self, out: io.BufferedWriter) -> None:
            self.out = out

        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            packed.update(b)
            return self.out.write(b)

    # Level 1 and no name or time in the header: fast, and the same bytes every time.
    with (
        tar.open("rb") as src,
        tmp.open("wb") as out,
        gzip.GzipFile(fileobj=_Hashing(out), mode="wb", compresslevel=1, mtime=0) as z,
    ):
        while chunk := src.read(CHUNK):
            raw.update(chunk)
            z.write(chunk)
    os.replace(tmp, gz)
    blob = Blob(gz, b"", "sha256:" + packed.hexdigest(), gz.stat().st_size,
                "sha256:" + raw.hexdigest())
    meta.write_text(json.dumps({"source": key, "digest": blob.digest, "size": blob.size,
                                "diff_id": blob.diff_id}))
    return blob


def _session_layer(files: Sequence[tuple[Path, str]]) -> Blob:
    """A gzipped layer tar of ``(host path, image path)`` pairs (a directory's contents go
    under its image path), owned by root, with every parent directory in it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        seen: set[str] = set()

        def add(host: Path, name: str) -> None:
            parts = name.strip("/").split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in seen:
                    seen.add(parent)
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tf.addfile(info)
            info = tf.gettarinfo(str(host), "/".join(parts))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if info.isdir():
                seen.add(info.name)
                tf.addfile(info)
                for child in sorted(host.iterdir()):
                    add(child, f"{info.name}/{child.name}")
            else:
                with host.open("rb") as fh:
                    tf.addfile(info, fh)

        for host, dest in files:
            add(host, dest)
    raw = buf.getvalue()
    return _bytes_blob(gzip.compress(raw, compresslevel=6, mtime=0),
                       "sha256:" + hashlib.sha256(raw).hexdigest())


def _chunks(blob: Blob) -> Iterator[bytes]:
    assert blob.path is not None
    with blob.path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _upload(client: httpx.Client, base: str, repo: str, blob: Blob) -> None:
    body = blob.data if blob.path is None else _chunks(blob)
    upload_blob(client, base, repo, blob.digest, body, blob.size)


def _put_manifest(client: httpx.Client, base: str, repo: str, ref: str, blob: Blob,
                  media_type: str) -> None:
    r = client.put(f"{base}/v2/{repo}/manifests/{ref}", content=blob.data,
                   headers={"Content-Type": media_type})
    r.raise_for_status()


def push_base(
    registry_host: str, ca: LocalCA, work: Path, repo: str = "standin/cann",
    family: str = "debian", extra: Sequence[tuple[Path, str]] = (),
    arches: Sequence[str] = ("amd64", "arm64"),
) -> str:
    """Push a base for ``arches`` (both, by default) as ``HOST/REPO:8.5.1-910b-<os>-py3.11``: the
    cached root filesystem, then a layer with the trust bundle and each ``(host path, image
    path)`` of ``extra``."""
    work.mkdir(parents=True, exist_ok=True)
    os_tag = {"debian": "debian12", "openeuler": "openeuler24.03"}[family]
    tag = f"8.5.1-910b-{os_tag}-py3.11"
    base = f"https://{registry_host}"
    tars = {arch: rootfs(arch, family) for arch in arches}
    layers: dict[str, Blob] = {}
    threads = [
        threading.Thread(target=lambda a=arch: layers.__setitem__(a, rootfs_layer(tars[a])))
        for arch in arches
    ]  # zlib lets go of the GIL: the two gzips (first push on a machine only) run side by side
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    children = []
    verify = ssl.create_default_context(cafile=str(ca.ca_cert))
    with httpx.Client(verify=verify, timeout=120) as client:
        for arch in arches:
            if arch not in layers:
                raise RuntimeError(f"gzip of {tars[arch]} failed")
            with tarfile.open(tars[arch]) as tf:
                member = tf.extractfile(f"./{BUNDLE}")
                assert member is not None
                bundle = member.read()
            (work / f"bundle-{arch}.crt").write_bytes(bundle + b"\n" + ca.ca_cert.read_bytes())
            own = _session_layer([(work / f"bundle-{arch}.crt", f"/{BUNDLE}"), *extra])
            # Every history entry has a time, as buildah writes them: buildah's layer cache
            # takes an entry without one and the same entry read back from a Docker-format
            # image (where it is the zero time) as different, and never hits.
            config = _bytes_blob(json.dumps({
                "created": CREATED,
                "architecture": arch,
                "os": "linux",
                "config": {
                    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "LANG=C.UTF-8"],
                    "Cmd": ["/bin/bash"],
                },
                "rootfs": {"type": "layers", "diff_ids": [layers[arch].diff_id, own.diff_id]},
                "history": [
                    {"created": CREATED,
                     "created_by": f"{family} root filesystem (scripts/test-bases.sh)"},
                    {"created": CREATED, "created_by": "the test CA and the test's own files"},
                ],
            }, sort_keys=True).encode())
            for blob in (layers[arch], own, config):
                _upload(client, base, repo, blob)
            manifest = _bytes_blob(json.dumps({
                "schemaVersion": 2,
                "mediaType": DOCKER_MANIFEST,
                "config": {"mediaType": DOCKER_CONFIG, "size": config.size,
                           "digest": config.digest},
                "layers": [{"mediaType": DOCKER_LAYER, "size": b.size, "digest": b.digest}
                           for b in (layers[arch], own)],
            }).encode())
            _put_manifest(client, base, repo, manifest.digest, manifest, DOCKER_MANIFEST)
            children.append({"mediaType": DOCKER_MANIFEST, "digest": manifest.digest,
                             "size": manifest.size,
                             "platform": {"architecture": arch, "os": "linux"}})
        index = _bytes_blob(json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                                        "manifests": children}).encode())
        _put_manifest(client, base, repo, tag, index, OCI_INDEX)
    return f"{registry_host}/{repo}:{tag}"
