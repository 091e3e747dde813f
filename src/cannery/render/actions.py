"""The actions rendered files use, pinned to full commit SHAs (package data), and their refresh.

A tag can be moved by whoever controls the action's repository; a commit SHA cannot. The data
file records, per action, the release tag and the commit it pointed to when last refreshed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cannery.errors import InputError, NetworkError
from cannery.render.yamltext import Commented
from cannery.util import toml
from cannery.util.patterns import COMMIT

FULL_SHA = COMMIT
RELEASE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")
HEADER = """\
# Actions the rendered workflow and the lint action use, pinned to full commit SHAs.
# Written by `cannery render refresh-actions` (reads the tags of each action's repository).
# version is the tag the SHA was read from; it is printed beside the SHA as a comment.
"""


@dataclass(frozen=True)
class Pin:
    action: str  # owner/repo
    version: str
    sha: str


def data_path() -> Path:
    return Path(str(resources.files("cannery.render") / "data" / "actions.toml"))


def load_pins(path: Path | None = None) -> dict[str, Pin]:
    path = path or data_path()
    try:
        raw = toml.loads(path.read_text(encoding="utf-8"))
    except (OSError, toml.TOMLDecodeError) as exc:
        raise InputError(f"{path}: cannot read action pins: {exc}") from None
    pins: dict[str, Pin] = {}
    for action, entry in raw.items():
        sha = entry.get("sha", "") if isinstance(entry, dict) else ""
        version = entry.get("version", "") if isinstance(entry, dict) else ""
        if not FULL_SHA.match(str(sha)) or not version:
            raise InputError(f"{path}: {action}: needs version and a full 40-hex sha")
        pins[action] = Pin(action, str(version), str(sha))
    return pins


def uses(pins: dict[str, Pin], action: str, path: str = "") -> Commented:
    """``owner/repo[/path]@<sha> # <version>`` for a `uses:` line."""
    pin = pins[action]
    return Commented(f"{action}{path}@{pin.sha}", pin.version)


def dump_pins(pins: dict[str, Pin]) -> str:
    out = [HEADER]
    for action in sorted(pins):
        p = pins[action]
        out.append(f'\n["{action}"]\nversion = "{p.version}"\nsha = "{p.sha}"\n')
    return "".join(out)


def _release_key(tag: str) -> tuple[int, int, int]:
    m = RELEASE.match(tag)
    assert m is not None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def newest_release(ls_remote: str, major: int | None) -> tuple[str, str] | None:
    """(tag, commit) of the highest vX.Y.Z tag in `git ls-remote --tags` output.

    Annotated tags are peeled (the ``^{}`` line names the commit). With ``major``, only tags
    of that major version are candidates.
    """
    commits: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in ls_remote.splitlines():
        sha, _, ref = line.partition("\t")
        if not ref.startswith("refs/tags/") or not FULL_SHA.match(sha):
            continue
        tag = ref[len("refs/tags/"):]
        if tag.endswith("^{}"):
            peeled[tag[:-3]] = sha
        else:
            commits[tag] = sha
    tags = [t for t in commits if RELEASE.match(t)]
    if major is not None:
        tags = [t for t in tags if _release_key(t)[0] == major]
    if not tags:
        return None
    best = max(tags, key=_release_key)
    return best, peeled.get(best, commits[best])


def refresh(pins: dict[str, Pin], base: str, allow_major: bool) -> dict[str, Pin]:
    """Re-read every action's release tags from ``base``/<owner>/<repo> with `git ls-remote`."""
    from cannery.util.cmd import CommandError, run

    env = {"GIT_TERMINAL_PROMPT": "0"}
    out: dict[str, Pin] = {}
    for action, pin in sorted(pins.items()):
        url = f"{base.rstrip('/')}/{action}"
        try:
            text = run(["git", "ls-remote", "--tags", url], extra_env=env, timeout=60)
        except CommandError as exc:
            raise NetworkError(f"{action}: cannot list tags: {exc.message}") from None
        major = None if allow_major else _release_key(pin.version)[0] if RELEASE.match(
            pin.version) else None
        found = newest_release(text, major)
        if found is None:
            raise NetworkError(f"{action}: no release tag vX.Y.Z found at {url}")
        out[action] = Pin(action, found[0], found[1])
    return out
