"""runs: every command of the original's RUNs that the new side does not account for.

A command is accounted for when another category compares what it does (package installs,
pip, downloads and their checksums, git), when it only keeps house (`set`, `cd`, `echo`,
removing caches, refreshing package lists), or when the new side runs the same command with
the same (expanded) arguments. The item is the command as the original writes it."""

from __future__ import annotations

import re

from cannery.compare.categories.packages import FAMILY, INSTALL, REMOVE
from cannery.compare.image import Cmd, ImageView
from cannery.compare.model import REMOVED, Difference
from cannery.lint.rules._shell import CHECKSUM_TOOLS, DOWNLOADERS

NAME = "runs"
HOUSEKEEPING = {"set", "cd", "pushd", "popd", "echo", "printf", "true", "false", "exit", "test",
                "[", "[[", ":", "sleep", "export", "unset", "shopt", "trap", "local", "return",
                "nproc", "uname", "arch", "which", "command", "type", "hash", "ls", "cat",
                "dpkg-query", "grep", "head", "tail", "cut", "awk", "sort", "wc", "tr",
                "mkdir", "source", ".", "env"}
# Paths whose removal only drops caches, logs and temporary files.
SCRATCH = re.compile(r"^(/tmp/|/var/tmp/|/var/lib/apt/lists|/var/cache/|/var/log/|"
                     r"/root/\.cache|~/\.cache|\$\{?HOME\}?/\.cache|.*\.git$|.*/\.git/?$|"
                     r"/var/lib/rpm/rpmdb\.sqlite-shm|.*/__pycache__)")


def compared_elsewhere(c: Cmd) -> bool:
    family = FAMILY.get(c.name)
    if family is not None:
        sub = c.cmd.subcommand()
        return sub in INSTALL[family] + REMOVE[family] + (
            "update", "upgrade", "clean", "makecache", "autoremove", "autoclean", "group")
    if c.name == "pip":
        return c.cmd.subcommand() in ("install", "uninstall", "cache")
    if c.name in DOWNLOADERS or c.name in CHECKSUM_TOOLS:
        return True
    return c.name == "git" and c.cmd.subcommand() in (
        "clone", "init", "fetch", "checkout", "switch", "reset", "submodule", "remote")


def writes_file(c: Cmd) -> bool:
    """A redirect to a file (not to /dev/…, not `>&2`)."""
    return any(op in (">", ">>", "&>", "&>>", ">|") and not t.value.startswith(("/dev/", "&"))
               for op, t in c.cmd.redirects)


def housekeeping(c: Cmd) -> bool:
    if writes_file(c):
        return False
    if c.name in HOUSEKEEPING:
        return True
    if c.name == "rm":
        paths = [a for a in c.argv if not a.startswith("-")]
        return bool(paths) and all(SCRATCH.match(p) for p in paths)
    return False


def signature(c: Cmd) -> str:
    return " ".join([c.name, *c.argv])


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    theirs = {signature(c) for c in new.commands}
    out: list[Difference] = []
    seen: set[str] = set()
    for c in original.commands:
        if compared_elsewhere(c) or housekeeping(c) or signature(c) in theirs:
            continue
        if c.text in seen:
            continue
        seen.add(c.text)
        out.append(Difference(NAME, c.text, REMOVED, f"line {c.line}", None,
                              "no step of the new side runs it"))
    return out
