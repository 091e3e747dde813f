"""downloads: each URL fetched (curl, wget, aria2c, `ADD URL`) → the checksum the build checks
it against (`sha256sum -c` fed "HASH  FILE", `ADD --checksum=`), or none."""

from __future__ import annotations

import re

from cannery.compare.image import Cmd, ImageView, expand
from cannery.compare.model import Difference, mapping_diff
from cannery.lint.rules._shell import CHECKSUM_TOOLS, DOWNLOADERS, basename, downloaded_file

NAME = "downloads"
NONE = "no checksum"


def downloads(view: ImageView) -> dict[str, str]:
    files: dict[str, str] = {}  # file name → URL
    by_node = {(c.inst.index, c.cmd.node.start_byte): c for c in view.commands}
    out: dict[str, str] = {}
    for inst in view.instructions:
        if inst.keyword == "ADD":
            for src in inst.value[:-1]:
                url = expand(src, view.env)
                if re.match(r"^(https?|ftp)://", url):
                    checksum = next((f.split("=", 1)[1] for f in inst.flags
                                     if f.startswith("--checksum=")), NONE)
                    out[url] = checksum
    for c in view.commands:
        if c.name in DOWNLOADERS:
            for url in (a for a in c.argv if re.match(r"^(https?|ftp)://", a)):
                out.setdefault(url, NONE)
                target = downloaded_file(c.cmd) or ""
                files[basename(target) or basename(url)] = url
        elif c.name in CHECKSUM_TOOLS and c.cmd.has_flag("-c", "--check"):
            for digest, name in _checked(c, by_node):
                fetched = files.get(basename(name))
                if fetched is not None:
                    algo = c.name.replace("sum", "") if c.name != "shasum" else "sha"
                    out[fetched] = f"{algo}:{digest}"
    return out


def _checked(c: Cmd, by_node: dict[tuple[int, int], Cmd]) -> list[tuple[str, str]]:
    """(digest, file) pairs a checksum command is fed: a pipe from echo/printf (as the build
    expands it), a here-string or heredoc."""
    texts: list[str] = []
    cmd = c.cmd
    if cmd.stdin is not None:
        texts.append(cmd.stdin.value)
    if cmd.pipeline and cmd.pipe_index > 0:
        prev = cmd.pipeline[cmd.pipe_index - 1]
        if prev.name in ("echo", "printf"):
            feeder = by_node.get((c.inst.index, prev.node.start_byte))
            words = feeder.argv if feeder is not None else prev.argv
            texts.append(" ".join(w for w in words if not w.startswith("-")))
    out = []
    for text in texts:
        for m in re.finditer(r"\b([0-9a-fA-F]{32,128})\s+\*?(\S+)", text):
            out.append((m.group(1).lower(), m.group(2)))
    return out


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    return mapping_diff(NAME, downloads(original), downloads(new))
