"""buildah (daemonless): build one platform, then export it for cannery's own client to push
by digest (containers/image cannot push a manifest untagged).

The export writes only what the target lacks. ``buildah push`` compresses every layer it writes,
and a layer in buildah's storage is kept uncompressed, so exporting a whole image again after a
one-line change would recompress gigabytes that did not change. cannery keeps a small record
(:class:`LayerCache`) of the compressed blob buildah wrote for each layer, by the layer's
uncompressed digest (its diff ID). Before the export, each layer of the new image whose
compressed blob the target already has (asked by ``present``: a HEAD in the registry, a file
in the OCI layout) gets an empty stand-in file under its diff ID in a fresh OCI layout;
containers/image treats a blob file already in the layout as there, writes nothing for it and
names it by that diff ID in the manifest, which cannery then puts back to the recorded
descriptor. So the manifest is the one a full export gives, byte for byte (the same digest), but
only new layers are read, compressed and written. A layer is recorded only from a blob
containers/image compressed itself, and a stand-in that containers/image did not take as
present is simply compressed again: a cache that is missing, stale or ignored costs time, never
a different digest. The record is kept per buildah binary (its path, size and modification
time: another version may compress the same layer to other bytes) under
``$CANNERY_CACHE_DIR`` (default ``~/.cache/cannery``).

The config is normalized before the push (``normalize_config``): buildah records the build
container's random hostname and id and intermediate image ids, which would make every build's
digest differ. The platform's ``io.cannery.inputs`` label is written there too
(``with_inputs_label``), label and history entry as ``buildah build --label`` writes them, but
without the LABEL step ``--label`` appends to the Dockerfile (buildah 1.28): every build that
rebuilds a step would rebuild that one too, one more commit and working container. The config
is byte for byte the one ``--label`` gives.

``--format docker`` keeps the SHELL instruction (OCI image configs have no field for it) and
so the bash the rendered RUN steps need; an OCI layout output (``--output oci:DIR``) is
converted to OCI manifests at export time. ``--timestamp`` and ``SOURCE_DATE_EPOCH`` come
from the lock, so the same lock gives the same layer bytes. The isolation is buildah's own
choice (``BUILDAH_ISOLATION`` in the environment selects chroot where no OCI runtime can run).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cannery.builder.engine import BuildOptions, Built, Present, Run
from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.errors import FatalError
from cannery.oci.manifest import Descriptor, MalformedManifest
from cannery.oci.reference import Reference, valid_digest
from cannery.util.cache import cache_dir
from cannery.util.fs import atomic_write

# Fields buildah 1.28 writes into a Docker-format config that name this one build's machine
# and intermediate images (a random hostname, container id, parent image id, "FROM <id>"
# history comments): they change on every build and describe nothing in the image.
_VOLATILE = ("container", "parent")
_VOLATILE_CONFIG = ("Hostname",)
# Records kept per cache file: the newest layers (about 200 bytes each).
_CACHE_ENTRIES = 20000


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


def with_inputs_label(config: dict[str, object], inputs: str) -> dict[str, object]:
    """``config`` with the ``io.cannery.inputs`` label set to ``inputs``, in the run config (and
    the Docker format's container_config), and its history entry last, as ``--label`` adds."""
    out = dict(config)
    for key in ("config", "container_config"):
        section = out.get(key)
        if key == "config" or isinstance(section, dict):
            section = dict(section) if isinstance(section, dict) else {}
            labels = section.get("Labels")
            merged = {**(labels if isinstance(labels, dict) else {}), INPUTS_LABEL: inputs}
            section["Labels"] = dict(sorted(merged.items()))  # as buildah (Go) writes a map
            out[key] = section
    history = out.get("history")
    entry: dict[str, object] = {
        "created_by": f'/bin/sh -c #(nop) LABEL "{INPUTS_LABEL}"="{inputs}"',
        "empty_layer": True,
    }
    if "created" in out:
        entry = {"created": out["created"], **entry}
    out["history"] = [*(history if isinstance(history, list) else []), entry]
    return out


class LayerCache:
    """diff ID → the layer descriptor buildah wrote for it, in one export format, for one
    buildah binary. A file that cannot be read is an empty cache (it is only a cache)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries = self._read()
        self.added: dict[str, dict[str, object]] = {}

    def _read(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            entries = data["layers"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        if not isinstance(entries, dict):
            return {}
        out = {}
        for diff_id, layer in entries.items():
            try:
                Descriptor.from_json(layer)
            except MalformedManifest:
                continue
            if valid_digest(diff_id):
                out[diff_id] = layer
        return out

    def get(self, diff_id: str) -> dict[str, object] | None:
        return self.entries.get(diff_id)

    def record(self, diff_id: str, layer: dict[str, object]) -> None:
        self.entries[diff_id] = self.added[diff_id] = layer

    def save(self) -> None:
        """Merge what this build added into the file as it is now (another build may have
        written it meanwhile); keep the newest entries."""
        if not self.added:
            return
        merged = {k: v for k, v in self._read().items() if k not in self.added}
        merged.update(self.added)
        kept = dict(list(merged.items())[-_CACHE_ENTRIES:])
        # A cache that cannot be written only costs time in the next build.
        with contextlib.suppress(FatalError):
            atomic_write(self.path, json.dumps({"layers": kept}, separators=(",", ":")))


def _lines(output: list[str]) -> list[str]:
    return [line.strip() for line in output if line.strip()]


class BuildahEngine:
    name = "buildah"
    pushes_while_building = False

    def login_hosts(self, image: ImageJob, opts: BuildOptions) -> list[str]:
        """cannery's client pushes, and buildah pulls a base with its own auth file, except
        the catalog's own image an image is built FROM: it lives where cannery pushes, so
        buildah gets cannery's logins (REGISTRY_AUTH_FILE, a temporary file) for its hosts:
        the parent's and every stage base's (cannery's variables, then the Docker config)."""
        if image.spec.built_on is None:
            return []
        # that file replaces buildah's own auth file: every base it pulls is given a login
        refs = [image.spec.base_image, *(st.base_image for st in image.spec.stages if st.own_base)]
        return list(dict.fromkeys(Reference.parse(r).host for r in refs))

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
            # no --label: the inputs label is written with the config (with_inputs_label)
            # no --pull: the base is pinned by digest, so an image in local storage under that
            # digest is the base; asking its registry again costs every build ~0.1 s
            # One layer per instruction (least to most often changed, as rendered), so a bumped
            # framework rebuilds, exports and pushes only its own layers; not used when forced.
            "--layers",
        ]
        for key, value in image.build_args:
            build += ["--build-arg", f"{key}={value}"]
        if opts.no_cache:
            build.append("--no-cache")
        if opts.cert_dir:
            build += ["--cert-dir", str(opts.cert_dir)]
        for name, path in opts.secrets:
            build += ["--secret", f"id={name},src={path}"]
        if opts.network:
            build += ["--network", opts.network]
        build += ["--file", str(opts.dockerfile), "--tag", job.local_name, str(opts.context)]
        return [build]

    def export_format(self, opts: BuildOptions) -> str:
        return "oci" if opts.oci_output else "v2s2"

    def export_step(self, job: PlatformJob, opts: BuildOptions) -> list[str]:
        """Write the image into a fresh OCI image layout (a Docker v2s2 manifest in it, for a
        registry), every layer compressed as buildah pushes it, except those already there."""
        return [
            "buildah",
            "push",
            "--quiet",
            "--format",
            self.export_format(opts),
            "--digestfile",
            str(opts.work / "digest"),
            job.local_name,
            f"oci:{opts.work / 'export'}",
        ]

    def collect(
        self, image: ImageJob, job: PlatformJob, opts: BuildOptions, run: Run, present: Present
    ) -> Built:
        diff_ids = _lines(run([
            "buildah", "inspect", "--type", "image", "--format",
            "{{range .OCIv1.RootFS.DiffIDs}}{{println .}}{{end}}", job.local_name,
        ]))
        fmt = self.export_format(opts)
        key = hashlib.sha256(f"{_buildah_identity()}\n{fmt}".encode()).hexdigest()[:16]
        cache = LayerCache(cache_dir() / "buildah-layers" / f"{key}.json")
        export = opts.work / "export"
        blobs = export / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        standins: dict[str, dict[str, object]] = {}
        known = [
            (diff_id, layer)
            for diff_id in diff_ids
            if valid_digest(diff_id) and (layer := cache.get(diff_id)) is not None
        ]
        for (diff_id, layer), there in zip(known, _ask_all(present, known), strict=True):
            if there:
                (blobs / diff_id.partition(":")[2]).write_bytes(b"")
                standins[diff_id] = layer
        run(self.export_step(job, opts))
        try:
            layout = _assemble(export, opts.work / "digest", diff_ids, standins, cache,
                               job.input_digest)
        except (OSError, ValueError, KeyError, TypeError, MalformedManifest) as exc:
            raise FatalError(f"{job.platform}: cannot read what buildah wrote: {exc}") from None
        cache.save()
        return Built(layout=layout, descriptor=None, layers=len(diff_ids),
                     exported=len(diff_ids) - len(standins))


def _buildah_identity() -> str:
    """Which buildah compresses the layers, for the layer cache's key: its binary's real path,
    size and modification time (a buildah installed or upgraded is a new file, so a cache of
    its own), read without running it (`buildah --version` costs every build ~15 ms)."""
    found = shutil.which("buildah")
    if found is None:
        return "buildah"
    path = os.path.realpath(found)
    try:
        st = os.stat(path)
    except OSError:
        return path
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def _ask_all(present: Present, known: list[tuple[str, dict[str, object]]]) -> list[bool]:
    """``present`` for each recorded layer: the first alone (it settles the registry's
    scheme and auth), the rest side by side, as each is one round trip to the registry."""
    descs = [Descriptor.from_json(layer) for _, layer in known]
    if len(descs) < 2:
        return [present(d) for d in descs]
    first = present(descs[0])
    with ThreadPoolExecutor(max_workers=4) as pool:
        return [first, *pool.map(present, descs[1:])]


def _assemble(
    export: Path,
    digest_file: Path,
    diff_ids: list[str],
    standins: dict[str, dict[str, object]],
    cache: LayerCache,
    inputs: str,
) -> Path:
    """The ``dir:`` layout cannery pushes, from buildah's OCI layout: stand-ins put back to
    their recorded descriptors, new layers recorded, the config normalized and labelled with
    the platform's ``inputs`` digest."""
    blobs = export / "blobs" / "sha256"
    reported = digest_file.read_text().strip()
    if not valid_digest(reported) or not reported.startswith("sha256:"):
        raise ValueError(f"buildah reported no manifest digest ({reported[:80]!r})")
    raw = (blobs / reported.partition(":")[2]).read_bytes()
    actual = "sha256:" + hashlib.sha256(raw).hexdigest()
    if actual != reported:
        raise ValueError(f"buildah reported {reported} but wrote a manifest of {actual}")
    manifest = json.loads(raw)
    config_desc = Descriptor.from_json(manifest["config"], "config")
    config_path = blobs / config_desc.digest.partition(":")[2]
    config = json.loads(config_path.read_bytes())
    if config["rootfs"]["diff_ids"] != diff_ids:
        raise ValueError("the exported image's layers are not the built image's")
    layers = manifest["layers"]
    if len(layers) != len(diff_ids):
        raise ValueError(f"{len(layers)} layers for {len(diff_ids)} diff IDs")
    out = export.parent / "layout"
    out.mkdir()
    fixed = []
    for layer, diff_id in zip(layers, diff_ids, strict=True):
        desc = Descriptor.from_json(layer, "layer")
        if desc.digest == diff_id:
            # Named by its diff ID: the stand-in was taken as present (never a real gzip blob).
            if diff_id not in standins:
                raise ValueError(f"layer {diff_id} was written uncompressed")
            fixed.append(standins[diff_id])
            continue
        path = blobs / desc.digest.partition(":")[2]
        if path.stat().st_size != desc.size:
            raise ValueError(f"blob {desc.digest} is not {desc.size} bytes")
        if not (out / path.name).exists():  # two identical layers (two RUNs that change
            os.link(path, out / path.name)  # nothing) are one blob
        cache.record(diff_id, layer)
        fixed.append(layer)
    config = with_inputs_label(normalize_config(config), inputs)
    body = json.dumps(config, separators=(",", ":")).encode()
    new = hashlib.sha256(body).hexdigest()
    (out / new).write_bytes(body)
    manifest["config"] = {**manifest["config"], "digest": f"sha256:{new}", "size": len(body)}
    manifest["layers"] = fixed
    (out / "manifest.json").write_bytes(json.dumps(manifest, separators=(",", ":")).encode())
    return out
