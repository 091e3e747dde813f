"""Catalog → docker-bake.json: one target per image, and one per (image, platform).

`docker buildx bake IMAGE` builds every platform of an image, as the catalog lists them;
`docker buildx bake IMAGE-ARCH` builds one platform (on a native or remote builder) with a
registry cache of its own, so platforms and images never share or overwrite a cache entry.
Tags, platforms and the Dockerfile are the ones the workflow builds. The per-platform
`io.cannery.inputs` label is `cannery build`'s (it hashes the platform too), not the bake file's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from cannery.plan import ImageSpec, platform_arch


def cache_ref(spec: ImageSpec, platform: str) -> str:
    """The registry cache of one image and platform (distinct for every pair)."""
    return f"{spec.repository}:cache-{spec.name}-{platform_arch(platform)}"


def render_bake(specs: Sequence[ImageSpec], dockerfiles: Mapping[str, str]) -> str:
    """``dockerfiles`` maps image name → Dockerfile path relative to the repository root."""
    targets: dict[str, object] = {}
    for spec in specs:
        targets[spec.name] = {
            "context": ".",
            "dockerfile": dockerfiles[spec.name],
            "platforms": list(spec.platforms),
            "tags": [f"{spec.repository}:{t}" for t in spec.tags],
            "labels": {
                "org.opencontainers.image.source": spec.source,
                "org.opencontainers.image.version": spec.tag,
            },
            # a download's URL held in a variable: bake hands it to the RUN as that secret
            **({"secret": [f"id={n},env={n}" for n in spec.secrets]} if spec.secrets else {}),
        }
        for platform in spec.platforms:
            ref = cache_ref(spec, platform)
            targets[f"{spec.name}-{platform_arch(platform)}"] = {
                "inherits": [spec.name],
                "platforms": [platform],
                "cache-from": [f"type=registry,ref={ref}"],
                "cache-to": [f"type=registry,ref={ref},mode=max"],
            }
    doc = {
        "group": {"default": {"targets": [s.name for s in specs]}},
        "target": targets,
    }
    return json.dumps(doc, indent=2) + "\n"
