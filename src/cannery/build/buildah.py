"""buildah (daemonless): build one platform, then write it to a ``dir:`` layout that cannery
pushes by digest with its own client (containers/image cannot push a manifest untagged).

``--format docker`` keeps the SHELL instruction (OCI image configs have no field for it) and
so the bash the rendered RUN steps need; an OCI layout output (``--output oci:DIR``) is
converted to OCI manifests at push time. ``--timestamp`` and ``SOURCE_DATE_EPOCH`` come from
the lock, so the same lock gives the same layer bytes. The isolation is buildah's own choice
(``BUILDAH_ISOLATION`` in the environment selects chroot where no OCI runtime can run).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cannery.build.engine import BuildOptions, Built
from cannery.build.plan import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.errors import FatalError


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
            "--layers=false",
        ]
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
        json.loads(manifest)  # a layout cannery cannot read is an error here, not at push
        return Built(layout=Path(layout), descriptor=None)
