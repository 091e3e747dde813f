"""git: each repository a build fetches (`git clone`, or `git init` + `git fetch`), by URL:
the ref checked out, whether submodules come along, the history depth, and where it lands."""

from __future__ import annotations

import re

from cannery.compare.image import ImageView, join
from cannery.compare.model import ADDED, CHANGED, REMOVED, Difference
from cannery.lint.rules._shell import git_operands

NAME = "git"


class Source:
    __slots__ = ("depth", "dest", "ref", "submodules", "url")

    def __init__(self, url: str, dest: str) -> None:
        self.url = url
        self.dest = dest
        self.ref = "(default branch)"
        self.submodules = "no"
        self.depth = "full"

    def describe(self) -> str:
        return (f"ref {self.ref}; submodules {self.submodules}; depth {self.depth}; "
                f"at {self.dest}")


def normal_url(url: str) -> str:
    """One spelling per repository: no ``.git``, no trailing slash, no ``git+``."""
    url = re.sub(r"^git\+", "", url).rstrip("/")
    return url[:-4] if url.endswith(".git") else url


def sources(view: ImageView) -> list[Source]:
    out: list[Source] = []
    by_dest: dict[str, Source] = {}
    remotes: dict[tuple[str, str], str] = {}  # (dir, remote name) → URL
    for c in view.commands:
        if c.name != "git":
            continue
        sub, operands, dirs = git_operands(c.cmd)
        where = c.cwd
        for d in dirs:
            where = join(where, d)
        ops = [w.value for w in operands]
        argv = c.argv
        if sub == "clone" and ops:
            url = normal_url(ops[0])
            dest = join(where, ops[1] if len(ops) > 1 else url.rsplit("/", 1)[-1])
            src = Source(url, dest)
            branch = c.cmd.flag_value("-b", "--branch")
            if branch is not None:
                src.ref = branch.value
            if c.cmd.has_flag("--recursive", "--recurse-submodules"):
                src.submodules = "yes"
            depth = c.cmd.flag_value("--depth")
            if depth is not None:
                src.depth = depth.value
            out.append(src)
            by_dest[dest] = src
        elif sub == "init":
            dest = join(where, ops[0]) if ops else where
            by_dest.pop(dest, None)
            remotes = {k: v for k, v in remotes.items() if k[0] != dest}
        elif sub == "remote" and len(ops) >= 3 and ops[0] == "add":
            remotes[(where, ops[1])] = ops[2]
        elif sub == "fetch" and ops:
            url = remotes.get((where, ops[0]), ops[0])
            if "://" not in url and not url.startswith("git@"):
                continue
            known = by_dest.get(where)
            if known is None or known.url != normal_url(url):
                known = Source(normal_url(url), where)
                out.append(known)
                by_dest[where] = known
            if len(ops) > 1:
                known.ref = ops[1]
            depth = c.cmd.flag_value("--depth")
            known.depth = depth.value if depth is not None else "full"
            if "--recurse-submodules" in argv:
                known.submodules = "yes"
        elif sub in ("checkout", "switch", "reset") and where in by_dest:
            target = [o for o in ops if o not in ("FETCH_HEAD", "HEAD")]
            if target and (sub != "reset" or "--hard" in argv):
                by_dest[where].ref = target[0]
        elif sub == "submodule" and where in by_dest and "update" in ops:
            by_dest[where].submodules = "yes" if "--init" in argv else by_dest[where].submodules
    return out


def _items(view: ImageView) -> dict[str, Source]:
    out: dict[str, Source] = {}
    for src in sources(view):
        key = src.url
        n = 2
        while key in out:  # the same repository fetched twice
            key, n = f"{src.url}#{n}", n + 1
        out[key] = src
    return out


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    """A repository on one side only is one item (its URL); one both sides fetch is compared
    field by field: ``URL:ref``, ``URL:submodules``, ``URL:depth``, ``URL:dest``."""
    a, b = _items(original), _items(new)
    out = [Difference(NAME, key, REMOVED, src.describe(), None) for key, src in a.items()
           if key not in b]
    for key, src in a.items():
        if key in b:
            other = b[key]
            out += [Difference(NAME, f"{key}:{field}", CHANGED, getattr(src, field),
                               getattr(other, field))
                    for field in ("ref", "submodules", "depth", "dest")
                    if getattr(src, field) != getattr(other, field)]
    out += [Difference(NAME, key, ADDED, None, src.describe()) for key, src in b.items()
            if key not in a]
    return out
