"""pip: each requirement installed with pip (or `uv pip`): name → specifier, the index it is
resolved from, and the options that change what gets installed (``--no-deps`` …).

A requirement that is a local path inside a git checkout is named by the repository
(``https://github.com/o/r`` or ``…/r/sub``), so a tree moved from ``/verl`` to
``/opt/src/verl`` still pairs up; the move is the git category's. A ``git+URL@ref``
requirement is named by the same repository URL. ``pip uninstall`` gives an
item ``uninstall:NAME``. A requirement both sides install is compared field by field: the
specifier (item ``NAME``), where it resolves from (``NAME:index``) and the options that change
what is installed (``NAME:flags``), so an accepted list can accept one without the others."""

from __future__ import annotations

import re

from cannery.compare.categories.git import normal_url, sources
from cannery.compare.image import Cmd, ImageView, join
from cannery.compare.model import ADDED, CHANGED, REMOVED, Difference
from cannery.lint.rules._shell import PIP_VALUE_OPTIONS, basename
from cannery.util.pynames import canonical_name

NAME = "pip"
# Short options whose value may be written attached to them (`-e.`, `-rrequirements.txt`).
SHORT_ATTACHED = ("-e", "-r", "-c", "-i", "-f")
# Options that change what an install puts in the image (shown as flags).
SET_FLAGS = {"--no-deps": "--no-deps", "-U": "--upgrade", "--upgrade": "--upgrade",
             "--pre": "--pre", "--no-build-isolation": "--no-build-isolation",
             "--force-reinstall": "--force-reinstall", "-I": "--ignore-installed",
             "--ignore-installed": "--ignore-installed", "--user": "--user",
             "--no-index": "--no-index", "--require-hashes": "--require-hashes",
             "--no-binary": "--no-binary", "--only-binary": "--only-binary",
             "-t": "--target", "--target": "--target", "--prefix": "--prefix"}


class Requirement:
    __slots__ = ("cmd", "extra", "find_links", "flags", "index", "key", "spec", "verb")

    def __init__(self, verb: str, key: str, spec: str, index: str, extra: list[str],
                 find_links: list[str], flags: list[str], cmd: Cmd) -> None:
        self.verb = verb  # install | uninstall
        self.key = key
        self.spec = spec
        self.index = index
        self.extra = extra
        self.find_links = find_links
        self.flags = flags
        self.cmd = cmd

    def fields(self) -> dict[str, str]:
        """What is compared, by the item suffix it is reported under ("" for the specifier)."""
        sources = [f"index {self.index}"] if self.index else []
        sources += [f"extra index {u}" for u in self.extra]
        sources += [f"find-links {u}" for u in self.find_links]
        return {"": self.spec or "any version",
                ":index": "; ".join(sources) or "the default index",
                ":flags": " ".join(self.flags) or "none"}

    def describe(self) -> str:
        if self.verb == "uninstall":
            return "uninstalled"
        parts = [self.spec or "any version"]
        if self.index:
            parts.append(f"index {self.index}")
        parts += [f"extra index {u}" for u in self.extra]
        parts += [f"find-links {u}" for u in self.find_links]
        parts += self.flags
        return "; ".join(parts)


def requirements(view: ImageView) -> list[Requirement]:
    """Every install and uninstall of every pip command, in build order."""
    trees = [(src.dest, src.url) for src in sources(view)]
    out: list[Requirement] = []
    config: dict[str, str] = {}  # `pip config set global.index-url …` for later installs
    for c in view.commands:
        if c.name == "pip" and c.cmd.subcommand() == "config":
            words = [a for a in c.argv if not a.startswith("-")]
            if len(words) >= 4 and words[1] == "set":
                option = words[2].split(".", 1)[-1]
                config[option] = words[3]
            continue
        if c.name != "pip" or c.cmd.subcommand() not in ("install", "uninstall"):
            continue
        verb = c.cmd.subcommand()
        argv = c.argv[c.argv.index(verb) + 1 :]
        index = c.env.get("PIP_INDEX_URL", config.get("index-url", ""))
        extra = c.env.get("PIP_EXTRA_INDEX_URL", config.get("extra-index-url", "")).split()
        links: list[str] = []
        flags: list[str] = []
        items: list[tuple[str, str]] = []
        i = 0
        while i < len(argv):
            a = argv[i]
            if a[:2] in SHORT_ATTACHED and len(a) > 2:  # `-e.`, `-rreq.txt`: value attached
                argv = [*argv[:i], a[:2], a[2:], *argv[i + 1:]]
                a = argv[i]
            opt, eq, inline = a.partition("=")
            takes = opt in PIP_VALUE_OPTIONS and opt.startswith("-")
            value = inline if (eq and opt.startswith("--")) else (
                argv[i + 1] if takes and i + 1 < len(argv) else "")
            step = 1 if (eq and opt.startswith("--")) or not takes else 2
            if opt in ("-i", "--index-url", "--index", "--default-index"):
                index = value
            elif opt in ("--extra-index-url", "--extra-index"):
                extra.append(value)
            elif opt in ("-f", "--find-links"):
                links.append(value)
            elif opt in ("-r", "--requirement"):
                items.append(("-r", _path_key(join(c.cwd, value), trees)))
            elif opt in ("-e", "--editable"):
                items.append(("-e", value))
            elif opt in SET_FLAGS:
                flags.append(SET_FLAGS[opt] + (f"={value}" if value else ""))
            elif not a.startswith("-"):
                items.append(("", a))
            i += step
        flags = sorted(set(flags))
        index = index.rstrip("/")
        extra = [u.rstrip("/") for u in extra]
        for kind, text in items:
            if kind == "-r":
                key, spec = "requirements:" + text, "-r"
            else:
                key, spec = _requirement(text, c.cwd, trees, editable=kind == "-e")
                if kind == "-e":
                    spec = ("editable " + spec).strip()
            if verb == "uninstall":
                key = "uninstall:" + key
                out.append(Requirement(verb, key, "", "", [], [], [], c))
            else:
                out.append(Requirement(verb, key, spec, index, sorted(set(extra)), links, flags,
                                       c))
    return out


def _path_key(path: str, trees: list[tuple[str, str]]) -> str:
    """A path inside a git checkout, named by the repository; other paths as they are."""
    for dest, url in trees:
        if path == dest or path.startswith(dest.rstrip("/") + "/"):
            return url + path[len(dest):]
    return path


def _requirement(text: str, cwd: str, trees: list[tuple[str, str]],
                 editable: bool = False) -> tuple[str, str]:
    """(item, specifier) of one requirement word. The value of ``-e`` is a path or a VCS URL,
    never a name: ``-e MindSpeed`` is the directory MindSpeed of the working directory."""
    extras = ""
    m = re.match(r"^(.*?)(\[[^\]]*\])$", text)
    if m and ("/" in m.group(1) or m.group(1).startswith(".") or editable):
        text, extras = m.group(1), m.group(2)
    if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*@\s*\S", text):
        name, _, url = text.partition("@")
        return canonical_name(name.strip()), "@ " + url.strip()
    if re.match(r"^(https?|file)://", text) or text.endswith((".whl", ".tar.gz", ".zip")):
        wheel = basename(text)
        parts = wheel.split("-")
        if wheel.endswith(".whl") and len(parts) >= 3:  # NAME-VERSION-…-TAGS.whl
            return canonical_name(parts[0]), f"{parts[1]} ({wheel})"
        if re.match(r"^(https?|file)://", text):
            return text, "url"
    if text.startswith("git+"):  # named by its repository, as a checkout of it is
        return normal_url(text.split("@")[0]), text
    if text.startswith(("hg+", "svn+")):
        return text.split("@")[0], text
    if text.startswith((".", "/", "~")) or "/" in text or (editable and "://" not in text):
        path = join(cwd, text.rstrip("/"))
        return _path_key(path, trees), ("path " + extras).strip()
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$", text)
    if not m:
        return text, ""
    return canonical_name(m.group(1)), ((m.group(2) or "") + m.group(3)).strip()


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    a = {r.key: r for r in requirements(original)}  # the last install of a name wins
    b = {r.key: r for r in requirements(new)}
    out: list[Difference] = []
    for key, r in a.items():
        if key not in b:
            out.append(Difference(NAME, key, REMOVED, r.describe(), None))
            continue
        mine, theirs = r.fields(), b[key].fields()
        out += [Difference(NAME, key + part, CHANGED, mine[part], theirs[part])
                for part in mine if mine[part] != theirs[part]]
    out += [Difference(NAME, key, ADDED, None, r.describe()) for key, r in b.items()
            if key not in a]
    return out
