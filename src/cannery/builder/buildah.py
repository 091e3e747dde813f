"""buildah (daemonless): build one platform, then write it to a ``dir:`` layout that cannery
pushes by digest with its own client (containers/image cannot push a manifest untagged).

Its config is normalized before the push (``normalize_config``): buildah records the build
container's random hostname and id and intermediate image ids, which would make every build's
digest differ. ``--format docker`` keeps the SHELL instruction (OCI image configs have no field
for it) and so the bash the rendered RUN steps need; an OCI layout output (``--output oci:DIR``)
is converted to OCI manifests at push time. ``--timestamp`` and ``SOURCE_DATE_EPOCH`` come from
the lock, so the same lock gives the same layer bytes. The isolation is buildah's own choice
(``BUILDAH_ISOLATION`` in the environment selects chroot where no OCI runtime can run).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cannery.builder.engine import BuildOptions, Built
from cannery.builder.plan import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.errors import FatalError

# Fields buildah 1.28 writes into a Docker-format config that name this one build's machine
# and intermediate images (a random hostname, container id, parent image id, "FROM <id>"
# history comments): they change on every build and describe nothing in the image.
_VOLATILE = ("container", "parent")
_VOLATILE_CONFIG = ("Hostname",)


def normalize_config(config: dict[str, object]) -> dict[str, object]:
    """The image config without build-machine identity, so equal layers give equal digests."""
    out = {k: v for k, v in config.items() if k not in _VOLATILE}
    for key in ("config", "container_config"):
        section = out.get(key)
        if isinstance(section, dict):
            out[key] = {k: v for k, v in section.items() if k not in _VOLATILE_CONFIG}
    history = out.get("history")
    if isinstance(history, list):
        out["history"] = [
            {k: v for k, v in h.items() if k != "comment"} if isinstance(h, dict) else h
            for h in history
        ]
    return out


def _rewrite(layout: Path) -> bytes:
    """Replace the layout's config with its normalized form; return the new manifest bytes."""
    manifest = json.loads((layout / "manifest.json").read_bytes())
    old = str(manifest["config"]["digest"]).split(":", 1)[1]
    config = json.loads((layout / old).read_bytes())
    body = json.dumps(normalize_config(config), separators=(",", ":")).encode()
    new = hashlib.sha256(body).hexdigest()
    (layout / new).write_bytes(body)
    if new != old:
        (layout / old).unlink()
    manifest["config"] = {**manifest["config"], "digest": f"sha256:{new}", "size": len(body)}
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    (layout / "manifest.json").write_bytes(raw)
    return raw


class BuildahEngine:
    name = "buildah"

    def steps(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> list[list[str]]:
        build = [
            "buildah",
            "build",
            "--platform",
            job.platform,
            "--format",
            "docker",
            "--timestamp",
            str(image.epoch),
            "--build-arg",
            f"SOURCE_DATE_EPOCH={image.epoch}",
            "--label",
            f"{INPUTS_LABEL}={job.input_digest}",
            "--pull",
            # One layer per instruction (least to most often changed, as rendered), so a bumped
            # framework pushes only its own layers; the cache is not used when forced.
            "--layers",
        ]
        for key, value in image.build_args:
            build += ["--build-arg", f"{key}={value}"]
        if opts.no_cache:
            build.append("--no-cache")
        if opts.cert_dir:
            build += ["--cert-dir", str(opts.cert_dir)]
        if opts.network:
            build += ["--network", opts.network]
        build += ["--file", str(opts.dockerfile), "--tag", job.local_name, str(opts.context)]
        push = [
            "buildah",
            "push",
            "--quiet",
            "--format",
            "oci" if opts.oci_output else "v2s2",
            "--digestfile",
            str(opts.work / "digest"),
            job.local_name,
            f"dir:{opts.work / 'layout'}",
        ]
        return [build, push]

    def collect(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> Built:
        layout = opts.work / "layout"
        try:
            reported = (opts.work / "digest").read_text().strip()
            manifest = (layout / "manifest.json").read_bytes()
        except OSError as exc:
            raise FatalError(f"{job.platform}: buildah wrote no image: {exc}") from None
        actual = "sha256:" + hashlib.sha256(manifest).hexdigest()
        if reported != actual:
            raise FatalError(
                f"{job.platform}: buildah reported {reported} but wrote a manifest of {actual}"
            )
        try:
            _rewrite(layout)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FatalError(f"{job.platform}: cannot read what buildah wrote: {exc}") from None
        return Built(layout=Path(layout), descriptor=None)
