"""An image's Python dependencies, resolved once per platform with hashes (``uv pip compile``).

What goes in, per image and platform: the catalog's ``pip_tools`` and every pip component's
specifiers; each git component's requirements files, its own dependencies and its build
requirements, all read at the locked commit; each wheel component's dependencies. What comes
out: one ``name==version --hash=sha256:…`` line per package, which the rendered Dockerfile
installs with ``pip install --require-hashes --no-deps``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Protocol

from cannery.catalog.inputs import bundle_kind, bundle_wheel_fits, fill_url
from cannery.catalog.models import Catalog
from cannery.catalog.platforms import UNAME_ARCH, arches_of
from cannery.errors import LockError
from cannery.util import toml
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.cache import cache_dir
from cannery.util.cmd import CommandError, run

# One locked requirement: a pinned name and at least one sha256.
LOCKED_LINE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?==[^\s;]+( --hash=sha256:[0-9a-f]{64})+$"
)
# The most bytes a wheel bundle may have, downloaded and (its wheels together) unpacked.
BUNDLE_LIMIT = 8 << 30
PYPROJECT_LIMIT = 4 << 20  # a git component's pyproject.toml
# pip's own fallback build requirements for a source tree without pyproject.toml.
LEGACY_BUILD_REQUIRES = ("setuptools>=40.8.0", "wheel")


class PythonEntryLike(Protocol):
    """A lock's Python entry (``cannery.lock.PythonEntry``, which imports this module)."""

    @property
    def inputs(self) -> str: ...
    @property
    def requirements(self) -> list[str]: ...


@dataclass(frozen=True)
class GitPackage:
    name: str
    url: str
    commit: str
    requirements: tuple[str, ...]  # requirements files, relative to the repository root
    with_deps: bool  # False when the component installs with --no-deps


@dataclass(frozen=True)
class PythonRequest:
    """Everything one resolution depends on; equal requests resolve to equal locks."""

    image: str
    arch: str
    python: str
    index_url: str
    extra_index_urls: tuple[str, ...]
    requirements: tuple[str, ...]
    wheels: tuple[str, ...]  # "name @ URL"
    git: tuple[GitPackage, ...]
    # a bundle's URL → the patterns of its wheels to install (the component's bundle_wheels)
    bundle_wheels: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.image}/{self.arch}"

    def digest(self) -> str:
        fields = asdict(self)
        if not self.bundle_wheels:  # a request without them digests as before they existed
            del fields["bundle_wheels"]
        blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def python_requests(
    cat: Catalog, image: str, commits: Mapping[tuple[str, str], str]
) -> list[PythonRequest] | None:
    """One request per architecture of ``image`` (none when it installs no Python package);
    None while a git commit is not locked.

    ``commits`` maps (git URL, ref) to the locked commit.
    """
    img = cat.images[image]
    python = cat.python_of(image)
    if python is None or not (img.pip_tools or img.components):
        return []  # nothing to resolve (a Python use without a Python is a validate error)
    requirements = list(img.pip_tools)
    wheels: list[str] = []
    git: list[GitPackage] = []
    extra: dict[str, list[str]] = {}
    for cname in img.components:
        comp = cat.components[cname]
        for arch in comp.extra_index:
            extra.setdefault(arch, []).extend(comp.indexes(arch))
        if comp.pip:
            requirements += comp.pip
        elif comp.git and comp.ref:
            commit = commits.get((comp.git, comp.ref))
            if commit is None:
                return None
            git.append(
                GitPackage(
                    name=cname,
                    url=comp.git,
                    commit=commit,
                    requirements=tuple(comp.requirements),
                    with_deps=comp.install != "none" and "--no-deps" not in comp.pip_args,
                )
            )
    out = []
    for arch in arches_of(img.platforms):
        arch_wheels = list(wheels)
        select: list[tuple[str, tuple[str, ...]]] = []
        for cname in img.components:
            comp = cat.components[cname]
            if comp.wheel:
                url = fill_url(comp.wheel, arch=arch)
                arch_wheels.append(f"{comp.package or cname} @ {url}")
                if comp.bundle_wheels:
                    select.append((url, tuple(comp.bundle_wheels)))
        out.append(
            PythonRequest(
                image=image,
                arch=arch,
                python=python,
                index_url=cat.catalog.python_index,
                extra_index_urls=tuple(dict.fromkeys(extra.get(arch, []))),
                requirements=tuple(requirements),
                wheels=tuple(arch_wheels),
                git=tuple(git),
                bundle_wheels=tuple(select),
            )
        )
    return out


def cannery_requirement(cat: Catalog) -> str:
    """What CI installs cannery from: ``[ci] install``, else this cannery's exact version."""
    from cannery import __version__

    return cat.ci.install or f"cannery=={__version__.split('+')[0]}"


def ci_requests(cat: Catalog) -> list[PythonRequest]:
    """``[ci] install`` resolved like an image's dependencies: one request per architecture
    CI runs cannery on (amd64, where the check and merge jobs run, then each runner's), for
    ``[ci] python``, from the catalog's index; none with ``[ci] install_action``."""
    if cat.ci.install_action is not None:
        return []
    arches = dict.fromkeys(("amd64", *arches_of(list(cat.ci.runners))))
    return [
        PythonRequest(
            image="ci",
            arch=arch,
            python=cat.ci.python,
            index_url=cat.catalog.python_index,
            extra_index_urls=(),
            requirements=(cannery_requirement(cat),),
            wheels=(),
            git=(),
        )
        for arch in arches
    ]


def ci_requirements(cat: Catalog, entries: Mapping[str, PythonEntryLike]) -> str | None:
    """The requirements file CI installs cannery from (``pip install --require-hashes
    --no-deps -r``): the lock's pins, a line each; a pin found for some architectures only
    gets a ``platform_machine`` marker. None when an architecture's pins are missing from
    ``entries`` (the lock's ``ci`` table) or were resolved from another request, and with
    ``[ci] install_action`` (nothing is installed from a file)."""
    requests = ci_requests(cat)
    if not requests:
        return None
    per_arch: dict[str, list[str]] = {}
    for req in requests:
        entry = entries.get(req.arch)
        if entry is None or entry.inputs != req.digest():
            return None
        per_arch[req.arch] = list(entry.requirements)
    lines = sorted({line for pins in per_arch.values() for line in pins}, key=str.lower)
    out = []
    for line in lines:
        pin, *hashes = line.split(" ")
        on = [a for a in per_arch if line in per_arch[a]]
        if len(on) < len(per_arch):
            pin += " ; " + " or ".join(f"platform_machine == '{UNAME_ARCH[a]}'" for a in on)
        # one hash a line, as uv and pip-compile write them: a new wheel is a one-line diff
        out.append(" \\\n    ".join([pin, *hashes]) + "\n")
    return "".join(out)


def _build_requires(tree: Path) -> list[str]:
    """A source tree's build requirements (PEP 518), for installs without build isolation."""
    pyproject = tree / "pyproject.toml"
    if not pyproject.is_file():
        return list(LEGACY_BUILD_REQUIRES)
    try:
        # the checkout is the remote's: its pyproject.toml may be a symlink to anything
        data = toml.loads(read_regular_file(pyproject, limit=PYPROJECT_LIMIT).decode("utf-8"))
    except (NotRegularFile, OverLimit) as exc:
        raise LockError(f"{pyproject.name} of {tree.name}: cannot read: {exc.message}") from None
    except (OSError, UnicodeDecodeError, toml.TOMLDecodeError) as exc:
        raise LockError(f"{pyproject.name} of {tree.name}: cannot read: {exc}") from None
    system = data.get("build-system")
    if not isinstance(system, dict):
        return list(LEGACY_BUILD_REQUIRES)
    requires = system.get("requires", [])
    return [r for r in requires if isinstance(r, str)]


_CACHE_LOCKS: dict[Path, threading.Lock] = {}
_CACHE_LOCKS_GUARD = threading.Lock()


def _cache_lock(bare: Path) -> threading.Lock:
    with _CACHE_LOCKS_GUARD:
        return _CACHE_LOCKS.setdefault(bare, threading.Lock())


def _checkout(pkg: GitPackage, dest: Path, ca_file: str | None) -> None:
    """The tree of ``pkg`` at its commit in ``dest``. A commit is immutable, so it is fetched
    once into a local cache repository per URL (``cache_dir()/git``) and checked out from
    there: re-resolving an image whose other components changed does no network work for this
    one. Any trouble with the cache falls back to fetching straight into ``dest``. git runs
    with ``cannery.tls.git_env`` for the package's URL, as `cannery lock` resolves it."""
    from cannery.tls import git_env

    env = git_env(pkg.url, ca_file)
    bare = cache_dir() / "git" / (hashlib.sha256(pkg.url.encode()).hexdigest()[:24] + ".git")
    git = ["git", f"--git-dir={bare}"]
    try:
        # One fetch at a time per cache repository: an image's platforms are resolved side by
        # side and read the same commit (the second finds it there).
        with _cache_lock(bare):
            if not (bare / "HEAD").is_file():
                run(["git", "init", "-q", "--bare", str(bare)], extra_env=env, timeout=60)
            try:
                run([*git, "cat-file", "-e", f"{pkg.commit}^{{commit}}"], extra_env=env,
                    timeout=60)
            except CommandError:
                run([*git, "fetch", "-q", "--depth", "1", "--", pkg.url, pkg.commit],
                    extra_env=env, timeout=600)
        dest.mkdir(parents=True)
        index = dict(env, GIT_INDEX_FILE=str(dest.parent / f".{dest.name}.index"))
        run([*git, f"--work-tree={dest}", "read-tree", pkg.commit], extra_env=index, timeout=120)
        run(
            [*git, f"--work-tree={dest}", "checkout-index", "-a", "-q"],
            extra_env=index,
            timeout=300,
        )
        return
    except (CommandError, OSError):
        shutil.rmtree(dest, ignore_errors=True)
    try:
        run(["git", "init", "-q", str(dest)], extra_env=env, timeout=60)
        run(
            ["git", "-C", str(dest), "fetch", "-q", "--depth", "1", "--", pkg.url, pkg.commit],
            extra_env=env,
            timeout=600,
        )
        run(["git", "-C", str(dest), "checkout", "-q", "FETCH_HEAD"], extra_env=env, timeout=120)
    except CommandError as exc:
        raise LockError(f"{pkg.url}@{pkg.commit[:12]}: cannot fetch: {exc.message}") from None


def parse_compiled(text: str) -> list[str]:
    """``uv pip compile --generate-hashes`` output → sorted one-line locked requirements.

    Path and URL entries (the git checkouts, wheel URLs) are dropped: those are installed by
    their own steps, at their locked commit or sha256.
    """
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or " @ " in line or line.startswith(("/", ".")):
            continue
        if not LOCKED_LINE.match(line):
            raise LockError(f"uv pip compile: unexpected output line {line[:120]!r}")
        out.append(line)
    return sorted(out, key=str.lower)


def _bundle_wheels(url: str, dest: Path, ca_file: str | None) -> list[Path]:
    """The wheels of the bundle at ``url`` (a .zip or .tar.gz), downloaded over verified TLS
    and written to ``dest`` under their own base names: no member path is followed, so a
    hostile archive writes nowhere else (the Dockerfile installs the same ``*.whl`` files).

    Bounded: the download is refused past BUNDLE_LIMIT; each wheel is copied to its file a chunk
    at a time (never whole in memory), and the wheels together are refused past BUNDLE_LIMIT
    or past the inflation ratio :mod:`cannery.util.bounded` allows (a small archive holding a
    huge wheel of zeros)."""
    import ssl
    import zipfile

    from cannery.download import resolve_url
    from cannery.util.bounded import (
        RATIO_LIMIT,
        OverLimit,
        copy_capped,
        copy_inflated,
        inflate,
        ratio_limit,
        tar_members,
    )

    dest.mkdir(parents=True)
    archive = dest / "bundle"
    resolve_url(url, ssl.create_default_context(cafile=ca_file), timeout=600, into=archive,
                limit=BUNDLE_LIMIT)
    what = f"{url}: the wheel bundle"
    out: set[Path] = set()
    total = 0
    # The wheels together, held to the ratio against the archive itself: a zip's members are
    # each held to their own declared sizes (entries may overlap, and each gets RATIO_FREE).
    whole = ratio_limit(archive.stat().st_size)

    def keep(name: str, src: IO[bytes], compressed: int | None) -> None:
        nonlocal total
        path = dest / PurePosixPath(name).name
        member = f"{what}, member {name}"
        with path.open("wb") as fh:
            if compressed is None:  # from inflate(), which holds it to the ratio
                total += copy_capped(src, fh.write, limit=BUNDLE_LIMIT - total, what=member)
            else:
                room = min(BUNDLE_LIMIT, whole) - total
                try:
                    total += copy_inflated(src, fh.write, compressed=compressed, limit=room,
                                           what=member)
                except OverLimit as exc:
                    if whole < BUNDLE_LIMIT and exc.limit == room:
                        raise OverLimit(what, whole, "its wheels inflate to more than "
                                        f"{RATIO_LIMIT} times the archive's size (a "
                                        "decompression bomb?)") from None
                    raise
        out.add(path)

    try:
        with archive.open("rb") as raw:
            if bundle_kind(url) == "zip":
                with zipfile.ZipFile(raw) as zf:
                    for i in zf.infolist():
                        if i.filename.endswith(".whl") and not i.is_dir():
                            with zf.open(i) as member:
                                keep(i.filename, member, i.compress_size)
            else:
                stream = inflate(raw, limit=BUNDLE_LIMIT, what=what)
                for m, content in tar_members(stream, what=what):
                    if content is not None and m.name.endswith(".whl"):
                        keep(m.name, content, None)
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise LockError(f"{url}: cannot read the wheel bundle: {exc}") from None
    if not out:
        raise LockError(f"{url}: the bundle holds no .whl file")
    return sorted(out)


def resolve_python(req: PythonRequest, ca_file: str | None = None) -> list[str]:
    """Resolve ``req`` with ``uv pip compile`` for its platform and Python version.

    ``ca_file`` is a complete trust bundle (``cannery.tls.git_ca_bundle``) for git and uv.
    """
    try:
        from uv import find_uv_bin

        uv = find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise LockError("uv is not installed: `pip install uv` (a cannery dependency)") from None
    from cannery.tls import git_trust_env

    # uv's own git (a git+ requirement inside a component's requirements file) verifies TLS
    # as cannery's does
    env = {**git_trust_env(ca_file), "UV_NO_CONFIG": "1"}
    if ca_file:
        env["SSL_CERT_FILE"] = ca_file
    with tempfile.TemporaryDirectory(prefix="cannery-py-") as tmp:
        root = Path(tmp)
        lines = list(req.requirements)
        for i, wheel in enumerate(req.wheels):
            url = wheel.split(" @ ", 1)[1]
            if bundle_kind(url) is None:
                lines.append(wheel)
            else:  # uv reads each wheel of a bundle from disk (a URL would be an sdist to it)
                uname = UNAME_ARCH[req.arch]
                select = dict(req.bundle_wheels).get(url, ())
                fits = [w for w in _bundle_wheels(url, root / f"bundle{i}", ca_file)
                        if bundle_wheel_fits(w.name, uname, select)]
                if not fits:
                    raise LockError(f"{url}: the bundle holds no wheel for {uname} "
                                    "(*_" + uname + ".whl) and no pure-Python one (*-any.whl)"
                                    + (" named " + ", ".join(select) if select else ""))
                lines += [str(w) for w in fits]
        for pkg in req.git:
            dest = root / "src" / pkg.name
            _checkout(pkg, dest, ca_file)
            lines += [f"-r {dest / r}" for r in pkg.requirements]
            if pkg.with_deps:
                lines.append(str(dest))
            lines += _build_requires(dest)
        infile = root / "requirements.in"
        infile.write_text("\n".join(lines) + "\n", encoding="utf-8")
        argv = [
            uv,
            "pip",
            "compile",
            str(infile),
            "--generate-hashes",
            "--no-header",
            "--no-annotate",
            "--quiet",
            # uv's own cache (content-addressed, safe to share): a wheel it has read is not
            # downloaded again when only another component of the image changed.
            "--cache-dir",
            str(cache_dir() / "uv"),
            "--python-version",
            req.python,
            "--python-platform",
            f"{UNAME_ARCH[req.arch]}-manylinux_2_28",
            "--index-url",
            req.index_url,
        ]
        for url in req.extra_index_urls:
            argv += ["--extra-index-url", url]
        try:
            text = run(argv, extra_env=env, timeout=1800)
        except CommandError as exc:
            raise LockError(f"Python dependencies of {req.key}: {exc.message}") from None
    return parse_compiled(text)
