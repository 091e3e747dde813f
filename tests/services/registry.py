"""A real CNCF distribution registry (Debian's docker-registry) on 127.0.0.1, and a minimal
OCI image pusher that speaks the distribution API to it (blobs, manifest, index)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRegistry:
    def __init__(
        self,
        root: Path,
        tls: tuple[Path, Path] | None = None,
        htpasswd: Path | None = None,
        auth: str = "",
        port: int = 0,
    ) -> None:
        binary = shutil.which("docker-registry")
        if binary is None:
            raise RuntimeError(
                "docker-registry is not installed: run `bash .ci/run` (it installs it)"
            )
        self.root = root  # storage is root/data: tests read it to see whether anything was written
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        tls_cfg = ""
        if tls:
            tls_cfg = f"\n  tls:\n    certificate: {tls[0]}\n    key: {tls[1]}"
        auth_cfg = auth  # a ready `auth:` section (token service)
        if htpasswd:
            auth_cfg = f"auth:\n  htpasswd:\n    realm: cannery-test\n    path: {htpasswd}\n"
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}{tls_cfg}\n" + auth_cfg
        )
        self.scheme = "https" if tls else "http"
        self.binary, self.config = binary, config
        # Its log goes to a file: an unread pipe fills up and then blocks the registry.
        self.log = root / "registry.log"
        self.start()

    def start(self) -> None:
        """Serve (again, after :meth:`stop`) on the same port, from the same storage."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "serve", str(self.config)], stdout=subprocess.DEVNULL, stderr=log
            )
        self._wait()

    def garbage_collect(self, delete_untagged: bool = True) -> str:
        """Run ``docker-registry garbage-collect`` the way its docs ask: registry stopped, then
        started again. Returns what it printed (the manifests and blobs it deleted)."""
        self.stop()
        try:
            argv = [self.binary, "garbage-collect"]
            if delete_untagged:
                argv.append("--delete-untagged")
            done = subprocess.run(
                [*argv, str(self.config)], capture_output=True, text=True, check=False
            )
        finally:
            self.start()
        printed = done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"garbage-collect exited {done.returncode}: {printed[-2000:]}")
        return printed

    def _wait(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {self.log.read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("docker-registry did not start in 20 s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"


def password_registry(
    root: Path, tls: tuple[Path, Path], user: str, password: str, port: int = 0
) -> LocalRegistry:
    """A TLS registry under ``root`` that requires ``user``'s ``password`` (htpasswd, bcrypt;
    ``root/htpasswd`` is written anew). htpasswd reads the password on stdin (-i), so it is in
    no argv."""
    htpasswd = root / "htpasswd"
    subprocess.run(["htpasswd", "-iBc", str(htpasswd), user], input=password, text=True,
                   check=True, capture_output=True)
    return LocalRegistry(root, tls=tls, htpasswd=htpasswd, port=port)


def upload_blob(client: httpx.Client, base: str, repo: str, digest: str,
                content: bytes | Iterator[bytes], size: int) -> None:
    """A monolithic upload: POST for a session, then one PUT with the digest; ``content`` may
    stream (an iterator of chunks) with its size given."""
    start = client.post(f"{base}/v2/{repo}/blobs/uploads/")
    start.raise_for_status()
    loc = start.headers["location"]
    loc = loc if loc.startswith("http") else base + loc
    sep = "&" if "?" in loc else "?"
    put = client.put(
        f"{loc}{sep}digest={digest}", content=content,
        headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
    )
    put.raise_for_status()


def _blob(client: httpx.Client, base: str, repo: str, data: bytes) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    upload_blob(client, base, repo, digest, data, len(data))
    return {"digest": digest, "size": len(data)}


def push_image(
    base: str,
    repo: str,
    tag: str,
    arch: str = "amd64",
    note: str = "",
    verify: object = True,
    auth: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """Push a tiny one-layer OCI image (with ``labels`` in its config); return the manifest
    digest."""
    with httpx.Client(verify=verify, auth=auth) as client:  # type: ignore[arg-type]
        config = json.dumps(
            {
                "architecture": arch,
                "os": "linux",
                "config": {"Env": [f"NOTE={note}"], **({"Labels": labels} if labels else {})},
                "rootfs": {"type": "layers", "diff_ids": []},
            }
        ).encode()
        cfg = _blob(client, base, repo, config)
        layer = _blob(client, base, repo, f"layer {arch} {note}".encode())
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
            }
        ).encode()
        r = client.put(
            f"{base}/v2/{repo}/manifests/{tag}",
            content=manifest,
            headers={"Content-Type": OCI_MANIFEST},
        )
        r.raise_for_status()
        return "sha256:" + hashlib.sha256(manifest).hexdigest()


def push_index(
    base: str, repo: str, tag: str, note: str = "", labels: dict[str, str] | None = None
) -> str:
    """Push a two-platform index (amd64, arm64) under ``tag``; return the index digest."""
    children = []
    for arch in ("amd64", "arm64"):
        digest = push_image(base, repo, f"{tag}-{arch}", arch, note, labels=labels)
        with httpx.Client() as client:
            size = len(
                client.get(
                    f"{base}/v2/{repo}/manifests/{digest}", headers={"Accept": OCI_MANIFEST}
                ).content
            )
        children.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": size,
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}).encode()
    with httpx.Client() as client:
        r = client.put(
            f"{base}/v2/{repo}/manifests/{tag}", content=index, headers={"Content-Type": OCI_INDEX}
        )
        r.raise_for_status()
    return "sha256:" + hashlib.sha256(index).hexdigest()


def write_dir_layout(
    root: Path, arch: str, note: str = "", *, os_name: str = "linux", docker: bool = False
) -> Path:
    """Write a tiny single-platform image as containers/image's ``dir:`` transport lays it out
    (what ``buildah push IMG dir:PATH`` writes): manifest.json, one file per blob named by its
    hex digest, and ``version``. Returns the directory."""
    import gzip
    import io
    import tarfile

    root.mkdir(parents=True, exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = f"{arch} {note}\n".encode()
        info = tarfile.TarInfo("note.txt")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    config = json.dumps(
        {
            "architecture": arch,
            "os": os_name,
            "config": {"Env": [f"NOTE={note}"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    blobs = {}
    for data in (config, layer):
        hexdigest = hashlib.sha256(data).hexdigest()
        (root / hexdigest).write_bytes(data)
        blobs[data] = {"digest": f"sha256:{hexdigest}", "size": len(data)}
    if docker:
        types = ("application/vnd.docker.container.image.v1+json",
                 "application/vnd.docker.image.rootfs.diff.tar.gzip")
    else:
        types = ("application/vnd.oci.image.config.v1+json",
                 "application/vnd.oci.image.layer.v1.tar+gzip")
    manifest: dict[str, object] = {"schemaVersion": 2}
    if docker:
        manifest["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
    else:
        manifest["mediaType"] = OCI_MANIFEST
    manifest["config"] = {"mediaType": types[0], **blobs[config]}
    manifest["layers"] = [{"mediaType": types[1], **blobs[layer]}]
    (root / "manifest.json").write_bytes(json.dumps(manifest).encode())
    (root / "version").write_text("Directory Transport Version: 1.1\n")
    return root


def labelled_layout(root: Path, arch: str, note: str, labels: dict[str, str]) -> Path:
    """``write_dir_layout`` (Docker types, as buildah pushes one) under ``root/NOTE-ARCH``,
    whose image config carries ``labels``. Its layer is its own (``note`` is in it): side by
    side pushes of one shared blob into one repository race in docker-registry's filesystem
    driver (a manifest PUT that reads the blob's link file while another upload rewrites it
    answers 400 DIGEST_INVALID)."""
    layout = write_dir_layout(root / f"{note}-{arch}", arch, note, docker=True)
    manifest = json.loads((layout / "manifest.json").read_bytes())
    old = manifest["config"]["digest"].partition(":")[2]
    config = json.loads((layout / old).read_bytes())
    config["config"]["Labels"] = labels
    body = json.dumps(config).encode()
    new = hashlib.sha256(body).hexdigest()
    (layout / old).unlink()
    (layout / new).write_bytes(body)
    manifest["config"].update(digest=f"sha256:{new}", size=len(body))
    (layout / "manifest.json").write_bytes(json.dumps(manifest).encode())
    return layout
