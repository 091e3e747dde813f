"""The checkout an image is built from (components with `path`): its commit, read from git.

The commit goes into the image's labels (a build argument) and its input digest, so an image
says which tree it was built from and a new commit rebuilds it. A tree with changes git has not
committed is said so: ``COMMIT+dirty.HASH``, where HASH covers the changes and the untracked
files, so two different dirty trees never share an input digest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cannery.errors import CommandError, InputError
from cannery.util.cmd import run
from cannery.util.patterns import COMMIT


@dataclass(frozen=True)
class Checkout:
    root: Path  # the build context
    commit: str  # full commit, with +dirty.HASH when the tree has uncommitted changes

    @property
    def dirty(self) -> bool:
        return "+dirty." in self.commit


def read_checkout(root: Path) -> Checkout:
    """``root``'s commit from git; exit 2 when it is not a git checkout."""
    if not root.is_dir():
        raise InputError(f"--context {root}: not a directory")

    def git(*args: str) -> str:
        try:
            return run(["git", "-C", str(root), *args], timeout=120)
        except CommandError as exc:
            raise InputError(
                f"--context {root}: not a git checkout ({exc.message}); cannery records the "
                "commit of the tree it builds"
            ) from None

    commit = git("rev-parse", "--verify", "HEAD^{commit}").strip()
    if not COMMIT.match(commit):
        raise InputError(f"--context {root}: git gave {commit!r} for HEAD, not a commit")
    status = git("status", "--porcelain", "--untracked-files=all")
    if not status.strip():
        return Checkout(root, commit)
    digest = hashlib.sha256(git("diff", "HEAD", "--binary").encode())
    for name in sorted(git("ls-files", "--others", "--exclude-standard", "-z").split("\0")):
        if name:
            digest.update(name.encode() + b"\0")
            path = root / name
            digest.update(path.read_bytes() if path.is_file() else b"")
    return Checkout(root, f"{commit}+dirty.{digest.hexdigest()[:12]}")
