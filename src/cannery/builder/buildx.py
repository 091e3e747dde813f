"""BuildKit through ``docker buildx``: one platform per invocation, pushed by digest by BuildKit
itself (``push-by-digest=true,name-canonical=true``; no tag is written), its descriptor read
from ``--metadata-file``. ``--builder`` selects a remote or Kubernetes BuildKit: the way past
one machine. Index merge and tag move stay with cannery's registry client (see engine.py).

Registry logins: buildx reads Docker's config file and hands BuildKit the login of each registry
it pushes to, exports its cache to or pulls a base from. cannery never puts a secret on the
command line or in the child's environment (``CANNERY_REGISTRY_*`` is stripped from every
child); instead the executor runs these commands with ``DOCKER_CONFIG`` set to a temporary
config holding cannery's own logins for :meth:`BuildxEngine.login_hosts` (the same lookup its
registry client uses: ``CANNERY_REGISTRY_*``, then the user's Docker config and helpers), made
private to the user and removed when the platform's commands end. So a CI job needs no
``docker login`` step: the credentials it gives cannery are the ones BuildKit uses.
"""

from __future__ import annotations

import json

from cannery.builder.engine import BuildOptions, Built, Present, Run
from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.errors import FatalError, InputError
from cannery.oci import Descriptor, Reference


class BuildxEngine:
    name = "buildx"
    pushes_while_building = True

    def steps(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> list[list[str]]:
        if opts.oci_output or not opts.push_repository:
            raise InputError("--backend buildx pushes to a registry: use --push (or buildah)")
        argv = ["docker", "buildx", "build"]
        if opts.builder:
            argv += ["--builder", opts.builder]
        output = ",".join(
            [
                "type=image",
                f"name={opts.push_repository}",
                "push-by-digest=true",
                "name-canonical=true",
                "push=true",
                "rewrite-timestamp=true",
            ]
        )
        argv += [
            "--platform",
            job.platform,
            "--file",
            str(opts.dockerfile),
            "--build-arg",
            f"SOURCE_DATE_EPOCH={image.epoch}",
            *(a for k, v in image.build_args for a in ("--build-arg", f"{k}={v}")),
            "--label",
            f"{INPUTS_LABEL}={job.input_digest}",
            # Attestations would turn the platform manifest into an index of its own.
            "--provenance=false",
            "--sbom=false",
            "--output",
            output,
            "--metadata-file",
            str(opts.work / "metadata.json"),
        ]
        if opts.network:
            argv += ["--network", opts.network]
        for name, path in opts.secrets:
            argv += ["--secret", f"id={name},src={path}"]
        if opts.no_cache:
            argv.append("--no-cache")
        if opts.cache_ref:
            # One cache per image and platform: legs never share or overwrite an entry.
            argv += [
                "--cache-from",
                f"type=registry,ref={opts.cache_ref}",
                "--cache-to",
                f"type=registry,ref={opts.cache_ref},mode=max",
            ]
        argv.append(str(opts.context))
        return [argv]

    def login_hosts(self, image: ImageJob, opts: BuildOptions) -> list[str]:
        """The push repository's host (the image and its registry cache), then each base's."""
        refs = [opts.push_repository, opts.cache_ref, image.spec.base_image]
        refs += [st.base_image for st in image.spec.stages if st.own_base]
        return list(dict.fromkeys(Reference.parse(r).host for r in refs if r))

    def collect(
        self, image: ImageJob, job: PlatformJob, opts: BuildOptions, run: Run, present: Present
    ) -> Built:
        """BuildKit pushed the image itself: read its descriptor (``run`` and ``present`` are
        for engines that export for cannery to push)."""
        path = opts.work / "metadata.json"
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise FatalError(f"{job.platform}: buildx wrote no readable metadata: {exc}") from None
        desc = meta.get("containerimage.descriptor") or {}
        digest = meta.get("containerimage.digest") or desc.get("digest")
        media = desc.get("mediaType")
        size = desc.get("size")
        if not (isinstance(digest, str) and digest.startswith("sha256:") and media and size):
            raise FatalError(f"{path}: no pushed image descriptor (containerimage.descriptor)")
        if desc.get("digest") not in (None, digest):
            raise FatalError(f"{path}: containerimage.digest and descriptor disagree")
        return Built(
            layout=None,
            descriptor=Descriptor(media_type=str(media), digest=digest, size=int(size)),
        )
