"""How big is an image, and why: per platform, each layer with the catalog step that made it,
its compressed and uncompressed size and its biggest paths, and the bytes wasted (written in
one layer, then removed or overwritten in a later one); and the image's size budget as checks.

Layers are read as the registry (or a layout) serves them, each checked against its digest
while it is written to a temporary file, then read once as a tar stream; nothing is unpacked.
"""

from __future__ import annotations

import heapq
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cannery.errors import InputError
from cannery.oci.layers import READABLE, layer_tar
from cannery.oci.manifest import Descriptor, parse_manifest
from cannery.oci.reference import Reference
from cannery.plan import BudgetSpec
from cannery.util.sizes import human_size
from cannery.verify.model import Check

BASE_STEP = "base image"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


class BlobSource(Protocol):
    """A registry client or a layout: manifests, and blobs written to a file after checking."""

    def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]: ...

    def fetch_blob(
        self, ref: Reference, digest: str, dest: Path, size: int | None = None
    ) -> int: ...


@dataclass
class Layer:
    index: int  # 1-based, as `cannery size` prints it
    digest: str
    compressed: int
    step: str = ""
    uncompressed: int | None = None  # None: not read (a layer format cannery cannot read)
    biggest: list[tuple[str, int]] = field(default_factory=list)
    wasted: int = 0  # bytes of this layer's files that a later layer removes or overwrites
    file_bytes: int = 0  # bytes of the regular files in it


@dataclass
class PlatformSize:
    platform: str
    layers: list[Layer]
    read: bool = False  # the layers' contents were read (uncompressed, paths, wasted)
    # dive's "wasted bytes", for the cross-check: every copy of a path written more than once
    # (the surviving copy too), where cannery counts only the copies hidden later
    dive_wasted: int = 0

    @property
    def compressed(self) -> int:
        return sum(layer.compressed for layer in self.layers)

    @property
    def wasted(self) -> int:
        return sum(layer.wasted for layer in self.layers)

    @property
    def file_bytes(self) -> int:
        return sum(layer.file_bytes for layer in self.layers)

    @property
    def wasted_share(self) -> float:
        return self.wasted / self.file_bytes if self.file_bytes else 0.0

    def as_json(self) -> dict[str, object]:
        return {
            "platform": self.platform,
            "compressed": self.compressed,
            **({"wasted": self.wasted, "file_bytes": self.file_bytes,
                "wasted_as_dive_counts": self.dive_wasted} if self.read else {}),
            "layers": [
                {"index": la.index, "digest": la.digest, "step": la.step,
                 "compressed": la.compressed, "uncompressed": la.uncompressed,
                 "wasted": la.wasted if self.read else None,
                 "biggest": [{"path": p, "size": n} for p, n in la.biggest]}
                for la in self.layers
            ],
        }


@dataclass(frozen=True)
class OwnLayer:
    """A layer-making instruction of the image's own stage: what to call its layer, and a
    piece of its text that the config history's ``created_by`` of that layer contains (the
    RUN's command, as buildah and BuildKit both record it; a COPY's destination)."""

    name: str
    key: str


def layer_steps(dockerfile: str) -> list[OwnLayer]:
    """What each layer-making instruction (RUN, COPY, ADD) of a rendered Dockerfile's final
    stage is, in order: the first line of the comment above it (a catalog `run` step: its
    command), else the instruction itself."""
    lines: list[str] = []
    for raw in dockerfile.splitlines():  # one logical line per instruction
        if lines and lines[-1].endswith("\\") and not lines[-1].startswith("#"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw)
    steps: list[OwnLayer] = []
    comment: str | None = None
    for line in lines:
        text = line.strip()
        if text.startswith("#"):
            if comment is None:
                comment = text.lstrip("# ").rstrip(".")
            continue
        if not text:
            continue
        word, _, rest = text.partition(" ")
        if word.upper() == "FROM":
            steps = []  # only the last stage's layers are the image's own
        elif word.upper() in ("RUN", "COPY", "ADD"):
            if comment is None or comment.startswith("A catalog `run` step"):
                name = _short(f"{word.lower()}: {rest}" if comment else text)
            else:
                name = _short(comment)
            body = " ".join(rest.split())
            key = body[:50] if word.upper() == "RUN" else body.rsplit(" ", 1)[-1]
            steps.append(OwnLayer(name, key))
        comment = None
    return steps


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def history_steps(config: dict[str, object]) -> list[str]:
    """Per layer, the config history's ``created_by`` (the instruction that made it)."""
    history = config.get("history") or []
    assert isinstance(history, list)
    return [" ".join(str(h.get("created_by", "")).replace("/bin/sh -c #(nop) ", "").split())
            for h in history if isinstance(h, dict) and not h.get("empty_layer")]


def name_layers(layers: list[Layer], config: dict[str, object],
                steps: Sequence[OwnLayer | str] | None) -> None:
    """Give each layer the step that made it. With the history's ``created_by`` of every
    layer, each of the image's own instructions is found in it, in order (so a layer a
    builder adds, BuildKit's for a WORKDIR, is named by its own text, not shifted onto the
    next step); the layers before the first one found are the base's. Without a history that
    says it, the image's own layers are taken to be its last ones, one per instruction."""
    made = history_steps(config)
    own = [s if isinstance(s, OwnLayer) else OwnLayer(s, "") for s in steps or ()]
    if own and len(made) == len(layers) and all(s.key for s in own):
        names: list[str | None] = [None] * len(layers)
        k = 0
        for i, text in enumerate(made):
            for j in range(k, len(own)):
                if own[j].key in text:
                    names[i], k = own[j].name, j + 1
                    break
        first = next((i for i, n in enumerate(names) if n is not None), None)
        if first is not None:
            for i, layer in enumerate(layers):
                layer.step = (BASE_STEP if i < first
                              else names[i] or _short(made[i]) or "?")
            return
    if own and len(own) <= len(layers):
        base = len(layers) - len(own)
        for n, layer in enumerate(layers):
            layer.step = BASE_STEP if n < base else own[n - base].name
        return
    for n, layer in enumerate(layers):
        layer.step = _short(made[n]) if len(made) == len(layers) and made[n] else "?"


def _members(path: Path, media_type: str) -> Iterator[tuple[tarfile.TarInfo | None, int]]:
    """Each member, then None with the uncompressed size of the whole layer."""
    with layer_tar(path, media_type) as (tar, counted):
        for member in tar:
            yield member, counted.count
        yield None, counted.drain()


def read_contents(source: BlobSource, repo: Reference, layers: list[Layer],
                  descriptors: list[Descriptor], top: int = 3) -> tuple[bool, int]:
    """Read every layer: its uncompressed size, its ``top`` biggest paths, and the wasted bytes
    (charged to the layer that wrote them). Returns whether every layer could be read, and
    dive's figure for the same layers."""
    present: dict[str, tuple[int, int]] = {}  # path → (layer index, size) as stacked so far
    seen: dict[str, list[int]] = {}  # path → the size of each of its entries, every layer
    everything = True
    with tempfile.TemporaryDirectory(prefix="cannery-size-") as tmp:
        for n, (layer, desc) in enumerate(zip(layers, descriptors, strict=True)):
            if desc.media_type not in READABLE:
                everything = False  # zstd: Python reads no zstd before 3.14
                continue
            blob = Path(tmp) / "layer"
            source.fetch_blob(repo, desc.digest, blob, desc.size)
            sizes: list[tuple[int, str]] = []
            try:
                for member, read in _members(blob, desc.media_type):
                    if member is None:
                        layer.uncompressed = read
                        break
                    path = member.name.removeprefix("./").strip("/")
                    parent, _, name = path.rpartition("/")
                    if name == OPAQUE:
                        _remove(present, seen, layers, parent, n, inside_only=True)
                    elif name.startswith(WHITEOUT):
                        gone = f"{parent}/{name[len(WHITEOUT):]}".lstrip("/")
                        _remove(present, seen, layers, gone, n, inside_only=False)
                    elif member.isdir():
                        # a directory where an earlier layer had a file hides that file
                        earlier = present.pop(path, None)
                        if earlier is not None:
                            layers[earlier[0]].wasted += earlier[1]
                        continue
                    else:
                        size = member.size if member.isreg() else 0
                        # a file where there was a directory hides what was under it
                        _remove(present, seen, layers, path, n + 1, inside_only=True,
                                counted=False)
                        earlier = present.get(path)
                        if earlier is not None:  # an earlier copy, this layer's too
                            layers[earlier[0]].wasted += earlier[1]
                        present[path] = (n, size)
                        seen.setdefault(path, []).append(size)
                        if member.isreg():
                            layer.file_bytes += size
                            sizes.append((size, "/" + path))
            except (OSError, EOFError, tarfile.TarError) as exc:
                raise InputError(f"{repo}@{desc.digest}: layer {layer.index} is not a "
                                 f"readable tar: {exc}") from None
            finally:
                blob.unlink(missing_ok=True)
            layer.biggest = [(p, s) for s, p in heapq.nlargest(top, sizes)]
    dive = sum(sum(sizes) for sizes in seen.values() if len(sizes) > 1)
    return everything, dive


def _remove(present: dict[str, tuple[int, int]], seen: dict[str, list[int]],
            layers: list[Layer], path: str, n: int, inside_only: bool,
            counted: bool = True) -> None:
    """A whiteout in layer ``n``: what layers before it wrote at ``path`` (and under it; only
    under it for an opaque directory) is hidden, and wasted by the layer that wrote it.
    ``counted``: dive sees the whiteout as an entry of its own (a file replacing a directory
    is not one)."""
    prefix = f"{path}/" if path else ""
    hidden = [p for p in present
              if (p.startswith(prefix) or (p == path and not inside_only))
              and present[p][0] < n]
    removed = 0
    for p in hidden:
        idx, size = present.pop(p)
        layers[idx].wasted += size
        removed += size
    if counted and not inside_only:
        # dive sees the whiteout as one more entry of the path, sized as what it removed
        seen.setdefault(path, []).append(removed if path not in seen else 0)


def platform_size(source: BlobSource, repo: Reference, manifest: bytes, platform: str,
                  config: dict[str, object], steps: Sequence[OwnLayer | str] | None,
                  contents: bool, top: int = 3) -> PlatformSize:
    """One platform's layers, named, and (``contents``) read."""
    _, descriptors = parse_manifest(manifest, f"{repo} {platform}")
    layers = [Layer(n + 1, d.digest, d.size) for n, d in enumerate(descriptors)]
    name_layers(layers, config, steps)
    size = PlatformSize(platform, layers)
    if contents:
        size.read, size.dive_wasted = read_contents(source, repo, layers, descriptors, top)
    return size


def budget_checks(budget: BudgetSpec, size: PlatformSize) -> list[Check]:
    """The budget's checks on one platform, each failure naming the layer and its step."""
    p = size.platform
    out = []
    if budget.compressed is not None:
        ok = size.compressed <= budget.compressed
        biggest = max(size.layers, key=lambda la: la.compressed, default=None)
        detail = "" if ok or biggest is None else (
            f"{human_size(size.compressed)} over the budget of {human_size(budget.compressed)}; "
            f"its largest layer is {biggest.index} ({biggest.step}, "
            f"{human_size(biggest.compressed)})")
        out.append(Check("size budget: compressed", ok, detail, p))
    over = [la for la in size.layers if la.compressed > budget.layer]
    out.append(Check(
        "size budget: largest layer", not over,
        "; ".join(f"layer {la.index} ({la.step}) is {human_size(la.compressed)}, over "
                  f"{human_size(budget.layer)}" for la in over), p))
    if budget.wasted is not None:
        if not size.read:
            out.append(Check("size budget: wasted", False, "a layer cannot be read (zstd)", p))
        else:
            ok = size.wasted_share <= budget.wasted
            worst = max(size.layers, key=lambda la: la.wasted)
            detail = "" if ok else (
                f"{size.wasted_share:.1%} of the file bytes are removed or overwritten later, "
                f"over {budget.wasted:.1%}; most by layer {worst.index} ({worst.step}, "
                f"{human_size(worst.wasted)})")
            out.append(Check("size budget: wasted", ok, detail, p))
    return out
