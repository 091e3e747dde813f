"""SLSA v1 provenance for one platform manifest, drawn from the plan (and so from the lock).

The statement is built with the ``in-toto-attestation`` models (Statement, ResourceDescriptor,
the SLSA v1 Provenance message). ``resolvedDependencies`` lists every pinned input the image
uses on that platform: the base image by digest, the toolkit installers and wheel URLs by
sha256, git sources by commit, and each Python distribution by each of its locked hashes.
``verify`` recomputes this list from the catalog and lock and compares.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cannery import __version__
from cannery.catalog.platforms import platform_arch
from cannery.oci.manifest import Descriptor
from cannery.plan import ImageSpec

if TYPE_CHECKING:
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor

# protobuf and the in-toto models are imported where a statement is built, not here: every
# `cannery build` imports this module, and they cost start-up a build without --attest, or
# one that fails before its first merge, has no use for.

SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
# Not a resolvable URL: cannery has no web site; the URN names the build type all the same.
BUILD_TYPE = "urn:cannery:build-type:image:v1"
LOCAL_BUILDER = "urn:cannery:builder:local"
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")

Dependency = dict[str, object]


@dataclass(frozen=True)
class BuildContext:
    """What the provenance says about the run (not about the inputs)."""

    catalog_path: str
    catalog_digest: str  # sha256 (hex) of the catalog file's bytes
    backend: str
    builder: str | None
    started: dt.datetime
    invocation_id: str
    builder_id: str


def build_context(
    catalog_path: str, catalog_digest: str, backend: str, builder: str | None
) -> BuildContext:
    """The run's context; in GitHub Actions the builder is the workflow and the invocation
    its run URL (from the runner's own variables)."""
    env = os.environ
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_RUN_ID"):
        run = (
            f"{server}/{env.get('GITHUB_REPOSITORY', '')}/actions/runs/{env['GITHUB_RUN_ID']}"
            f"/attempts/{env.get('GITHUB_RUN_ATTEMPT', '1')}"
        )
        builder_id = f"{server}/{env.get('GITHUB_WORKFLOW_REF', '')}"
    else:
        run = f"urn:uuid:{uuid.uuid4()}"
        builder_id = LOCAL_BUILDER
    return BuildContext(
        catalog_path, catalog_digest, backend, builder,
        dt.datetime.now(dt.timezone.utc).replace(microsecond=0), run, builder_id,
    )


def warm() -> None:
    """Import what building a statement needs (protobuf and the in-toto models, ~20 ms), so
    a build can pay for it while buildah runs rather than after. An import that fails here
    (a missing or mismatched protobuf) fails again, and is reported, where the statement is
    built: nothing is printed from here."""
    try:
        from google.protobuf import json_format  # noqa: F401
        from in_toto_attestation.predicates.provenance.v1 import provenance_pb2  # noqa: F401
        from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor  # noqa: F401
        from in_toto_attestation.v1.statement import Statement  # noqa: F401
    except Exception:  # reported where the statement is built
        pass


def _rd(name: str, uri: str, digest: dict[str, str]) -> Dependency:
    from google.protobuf import json_format
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor

    out: Dependency = json_format.MessageToDict(ResourceDescriptor(name, uri, digest).pb)
    return out


def resolved_dependencies(spec: ImageSpec, platform: str) -> list[Dependency]:
    """Every pinned input ``spec`` uses on ``platform``, as in-toto ResourceDescriptors,
    sorted (so two lists compare as lists)."""
    arch = platform_arch(platform)
    out: list[Dependency] = []
    if spec.base_digest:
        algo, _, hexd = spec.base_digest.partition(":")
        out.append(_rd("base", f"oci://{spec.base_image}", {algo: hexd}))
    for d in spec.downloads:
        if d.arch == arch and d.sha256:
            kind = "python:source" if d.name == "python" else f"toolkit:{d.name}"
            out.append(_rd(kind, d.url, {"sha256": d.sha256}))
    for c in spec.components:
        if c.git and c.git.commit:
            out.append(
                _rd(f"git:{c.name}", f"git+{c.git.url}@{c.git.ref}", {"gitCommit": c.git.commit})
            )
        for w in c.wheels:
            if w.arch == arch and w.sha256:
                out.append(_rd(f"wheel:{c.name}", w.url, {"sha256": w.sha256}))
    for a, lines in spec.python_locked:
        if a != arch:
            continue
        for line in lines:
            m = _REQ.match(line)
            if not m:
                continue
            name, version = m.group(1).lower().replace("_", "-"), m.group(2)
            for h in _HASH.findall(line):
                out.append(_rd(f"python:{name}", f"pkg:pypi/{name}@{version}", {"sha256": h}))
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


def subject(repository: str, manifest: Descriptor) -> ResourceDescriptor:
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor

    algo, _, hexd = manifest.digest.partition(":")
    return ResourceDescriptor(name=repository, digest={algo: hexd}, media_type=manifest.media_type)


def provenance(
    spec: ImageSpec,
    platform: str,
    manifest: Descriptor,
    input_digest: str,
    ctx: BuildContext,
    finished: dt.datetime | None = None,
) -> bytes:
    """The in-toto statement (JSON bytes) whose subject is ``manifest`` of ``spec.repository``."""
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
    from in_toto_attestation.v1.statement import Statement

    prov = provenance_pb2.Provenance()
    bd = prov.build_definition
    bd.build_type = BUILD_TYPE
    bd.external_parameters.update(
        {
            "catalog": {"path": ctx.catalog_path, "digest": {"sha256": ctx.catalog_digest}},
            "image": spec.name,
            "platform": platform,
            "repository": spec.repository,
        }
    )
    bd.internal_parameters.update(
        {
            "cannery": __version__,
            "backend": ctx.backend,
            "builder": ctx.builder or "",
            "inputDigest": input_digest,
        }
    )
    for dep in resolved_dependencies(spec, platform):
        bd.resolved_dependencies.append(json_format.ParseDict(dep, ResourceDescriptor().pb))
    rd = prov.run_details
    rd.builder.id = ctx.builder_id
    rd.builder.version["cannery"] = __version__
    rd.metadata.invocation_id = ctx.invocation_id
    rd.metadata.started_on.FromDatetime(ctx.started)
    end = finished or dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    rd.metadata.finished_on.FromDatetime(end)
    predicate = json_format.MessageToDict(prov)
    stmt = Statement([subject(spec.repository, manifest).pb], SLSA_PROVENANCE, predicate)
    stmt.validate()
    return json.dumps(json_format.MessageToDict(stmt.pb), sort_keys=True).encode()
