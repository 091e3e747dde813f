"""``verify --rebuild``: build a platform again from the catalog and lock, in a containers
storage of its own (no cache, no image from an earlier build), with the same engine commands a
push build runs (buildah, ``dir:`` layout, Docker v2s2, config normalized), and compare the
manifest digest with what the registry serves. On a difference: the first layer (or the
config) that differs, and the files that differ in it (path, and what differs: content, mode,
owner, link, type; added or removed). For a byte-level view of one file, run ``diffoscope`` on
the two layers yourself (Debian package ``diffoscope``); cannery does not call it.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from pathlib import Path

from cannery.builder.buildah import BuildahEngine
from cannery.builder.engine import BuildOptions
from cannery.builder.execute import secret_files
from cannery.builder.jobs import ImageJob, PlatformJob
from cannery.errors import FatalError
from cannery.oci.client import OCIClient, malformed
from cannery.oci.manifest import MalformedManifest, digest_of, load_object, parse_manifest
from cannery.oci.reference import Reference
from cannery.util.bounded import copy_capped, inflate, tar_members
from cannery.util.cmd import run, stream
from cannery.verify.model import Check

MAX_FILES = 10


def _storage_env(root: Path) -> dict[str, str]:
    conf = root / "storage.conf"
    conf.write_text(
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{root / "storage"}"\n'
        f'runroot = "{root / "run"}"\n'
    )
    return {"CONTAINERS_STORAGE_CONF": str(conf)}  # added to child_env() by run/stream


def rebuild_platform(
    image: ImageJob, job: PlatformJob, cert_dir: Path | None, network: str | None, log: Path
) -> Path:
    """Build ``job`` from scratch in a fresh storage; the ``dir:`` layout it wrote."""
    engine = BuildahEngine()
    tmp = Path(tempfile.mkdtemp(prefix="cannery-rebuild-"))
    env = _storage_env(tmp)
    context = tmp / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(image.dockerfile, encoding="utf-8")
    work = tmp / "work"
    work.mkdir()
    opts = BuildOptions(
        context=context, dockerfile=context / "Dockerfile", work=work, push_repository=None,
        oci_output=False, cert_dir=cert_dir, network=network, no_cache=True,
        secrets=secret_files(image, work),
    )

    def run_logged(argv: list[str]) -> list[str]:
        lines: list[str] = []
        rc, _ = stream(argv, log, lines.append, extra_env=env)
        if rc != 0:
            raise FatalError(f"{job.platform}: rebuild: {argv[0]} {argv[1]} exited {rc} "
                             f"(log: {log})")
        return lines

    try:
        for argv in engine.steps(image, job, opts):
            run_logged(argv)
        # Nothing counts as present: the rebuild writes, and compares, every layer itself.
        built = engine.collect(image, job, opts, run_logged, lambda _desc: False)
        assert built.layout is not None
        out = Path(tempfile.mkdtemp(prefix="cannery-rebuilt-"))
        shutil.copytree(built.layout, out, dirs_exist_ok=True)
        return out
    finally:
        with contextlib.suppress(FatalError):  # the directory goes below all the same
            run(["buildah", "rmi", "--all", "--force"], extra_env=env, timeout=300)
        shutil.rmtree(tmp, ignore_errors=True)


def _members(layer: Path, what: str) -> dict[str, tuple[str, ...]]:
    """path → (type, mode, uid, gid, link, sha256 of content) of a (gzip) tar layer, read as a
    stream: each member hashed a chunk at a time, the inflating held to the ratio
    :func:`~cannery.util.bounded.inflate` allows (a layer of a few MiB holding GiB of zeros is
    refused, naming ``what``)."""
    out: dict[str, tuple[str, ...]] = {}
    with layer.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        stream = inflate(f, what=what) if gzipped else f
        for m, data in tar_members(stream, what=what):
            content = ""
            if data is not None:
                digest = hashlib.sha256()
                copy_capped(data, digest.update, limit=m.size, what=f"{what}: {m.name}")
                content = digest.hexdigest()
            out[m.name.removeprefix("./")] = (
                # Permission bits only: some writers put the file type into the mode field too.
                m.type.decode(), oct(m.mode & 0o7777), str(m.uid), str(m.gid), m.linkname,
                content,
            )
    return out


_FIELDS = ("type", "mode", "uid", "gid", "link", "content")


def layer_differences(
    ours: Path, theirs: Path, ours_name: str = "the rebuilt layer",
    theirs_name: str = "the registry's layer",
) -> list[str]:
    """The paths that differ between two layer files, with what differs (sorted, at most
    MAX_FILES, then a count). A layer that is not a (gzip) tar, or inflates past the ratio
    limit, is an InputError naming it."""
    a, b = _members(theirs, theirs_name), _members(ours, ours_name)
    out = []
    for path in sorted(set(a) | set(b)):
        if path not in b:
            out.append(f"{path} (only in the registry's)")
        elif path not in a:
            out.append(f"{path} (only in the rebuild)")
        elif a[path] != b[path]:
            what = [f for f, x, y in zip(_FIELDS, a[path], b[path], strict=True) if x != y]
            out.append(f"{path} ({', '.join(what)})")
    if len(out) > MAX_FILES:
        return [*out[:MAX_FILES], f"and {len(out) - MAX_FILES} more"]
    return out


def compare(
    client: OCIClient, repo: Reference, digest: str, layout: Path, platform: str
) -> Check:
    """The rebuilt layout against the registry's platform manifest ``digest``."""
    mine = (layout / "manifest.json").read_bytes()
    mine_digest = digest_of(mine)
    if mine_digest == digest:
        return Check("rebuild", True, f"same digest {digest[:19]}", platform)
    # The registry's answer is read strictly (a malformed one is exit 2 naming the field).
    try:
        t_config, theirs = parse_manifest(
            client.get_manifest(repo.with_digest(digest))[0], f"{repo.host}: {digest}"
        )
    except MalformedManifest as exc:
        raise malformed(repo, exc) from None
    o_config, ours = parse_manifest(mine, str(layout / "manifest.json"))
    t_layers = [x.digest for x in theirs]
    o_layers = [x.digest for x in ours]
    head = f"rebuilt {mine_digest[:19]}, registry serves {digest[:19]}"
    for n in range(max(len(t_layers), len(o_layers))):
        t = t_layers[n] if n < len(t_layers) else None
        o = o_layers[n] if n < len(o_layers) else None
        if t == o:
            continue
        where = f"layer {n + 1} of {len(t_layers)}"
        if t is None or o is None:
            return Check("rebuild", False, f"{head}; {where}: only in the "
                         f"{'rebuild' if t is None else 'registry'}", platform)
        with tempfile.TemporaryDirectory() as tmp:
            theirs_layer = Path(tmp) / "layer"
            # No more bytes than the manifest's descriptor says (a registry cannot stream
            # an endless layer under a valid digest).
            client.fetch_blob(repo, t, theirs_layer, size=theirs[n].size)
            files = layer_differences(
                layout / o.partition(":")[2], theirs_layer,
                f"{layout / o.partition(':')[2]} (rebuilt {where})",
                f"{repo.host}/{repo.repository}@{t} ({where})",
            )
        return Check("rebuild", False,
                     f"{head}; first differing {where}: "
                     f"{', '.join(files) or 'same files (tar headers or compression differ)'}",
                     platform)
    try:
        t_cfg = load_object(client.get_blob(repo, t_config.digest), f"{repo.host}: config")
    except MalformedManifest as exc:
        raise malformed(repo, exc) from None
    o_cfg = load_object((layout / o_config.digest.partition(":")[2]).read_bytes(), "rebuilt config")
    keys = sorted(k for k in set(t_cfg) | set(o_cfg) if t_cfg.get(k) != o_cfg.get(k))
    cfg, ocfg = (c if isinstance(c := d.get("config"), dict) else {} for d in (t_cfg, o_cfg))
    inner = sorted(k for k in set(cfg) | set(ocfg) if cfg.get(k) != ocfg.get(k))
    detail = ", ".join(keys) + (f" (config: {', '.join(inner)})" if inner else "")
    return Check("rebuild", False, f"{head}; same layers, config differs in {detail}", platform)
