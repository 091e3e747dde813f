"""catalog + lock → fully resolved, frozen ImageSpecs. Pure: no network, no processes.

Render, build and verify consume these specs unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from cannery.catalog.hosts import HostNeeds, host_needs
from cannery.catalog.image_bases import parent_of
from cannery.catalog.inputs import (
    NO_DATE,
    file_downloads,
    fill_url,
    python_source_url,
    render_tag,
    tag_values,
    template_fields,
    toolkit_downloads,
)
from cannery.catalog.models import Catalog, Component, Override, Step
from cannery.catalog.platforms import UNAME_ARCH, arches_of, platform_arch
from cannery.lock import Lock, git_key, lock_epoch
from cannery.pydeps import python_requests
from cannery.util.patterns import COMMIT
from cannery.util.sizes import parse_size

# Defined with the catalog; importable from here too, where render and build look for them.
__all__ = [
    "UNAME_ARCH",
    "ComponentSpec",
    "Download",
    "GitSource",
    "ImageSpec",
    "ToolkitSpec",
    "fill_url",
    "plan",
    "plan_image",
    "platform_arch",
    "render_tag",
    "toolkit_downloads",
]


@dataclass(frozen=True)
class Download:
    name: str
    arch: str  # TARGETARCH: amd64, arm64
    url: str
    sha256: str | None  # None: not locked yet


@dataclass(frozen=True)
class FileSpec:
    """A file the build fetches (``downloads``: per TARGETARCH, its URL and locked sha256) and
    places at ``path``."""

    name: str
    path: str
    unpack: bool
    executable: bool
    at: str
    downloads: tuple[Download, ...]
    secret: str | None = None  # the build secret (an environment variable) that holds the URL


@dataclass(frozen=True)
class GitSource:
    url: str
    ref: str
    commit: str | None  # None: not locked yet

    @property
    def pinned(self) -> str:
        return self.commit or self.ref


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    package: str
    version: str | None
    git: GitSource | None
    pip: tuple[str, ...]
    wheels: tuple[Download, ...]
    install: str
    requirements: tuple[str, ...]
    pip_args: tuple[str, ...]
    subdir: str | None
    extras: tuple[str, ...]
    pyproject: str | None
    build_env: tuple[tuple[str, str], ...]
    toolkit_build: bool
    jobs_limit: int | None
    jobs_reason: str | None
    pin: bool
    # TARGETARCH → extra package indexes for this component's pip calls, in the order written
    extra_index: tuple[tuple[str, tuple[str, ...]], ...]
    # A directory of the checkout being built (the build context), and where a source tree goes
    path: str | None = None
    dest: str | None = None
    checkout: str | None = None  # the checkout's commit, once read (verify compares labels)
    bundle_wheels: tuple[str, ...] = ()  # a bundle's wheels to install, by name pattern

    @property
    def label_version(self) -> str:
        """What the image label says: version@commit, the pins, or the wheel URLs' digests; for
        a checkout, the build argument that carries its commit (read from git at build time)."""
        if self.path is not None:
            return self.checkout or "${" + CHECKOUT_ARG + "}"
        if self.git:
            return f"{self.version}@{self.git.pinned}" if self.version else self.git.pinned
        if self.pip:
            return " ".join(self.pip)
        return self.version or ",".join(sorted({w.sha256 or "unlocked" for w in self.wheels}))


@dataclass(frozen=True)
class ToolkitSpec:
    version: str
    install: bool  # False when the base already ships this version
    downloads: tuple[Download, ...]
    install_args: tuple[str, ...]
    env: tuple[tuple[str, str | tuple[str, ...]], ...]
    devlib: str | None
    env_scripts: tuple[str, ...]
    provided: str = "image"  # image | host: a host's toolkit is mounted at run time

    @property
    def in_image(self) -> bool:
        """The toolkit is in the image (installed, or shipped by the base): its ENV applies."""
        return self.provided == "image"


GHCR_LAYER_LIMIT = 10 * 10**9  # GHCR refuses a layer over 10 GB


@dataclass(frozen=True)
class BudgetSpec:
    """An image's size budget per platform, in bytes (None: no limit on that)."""

    compressed: int | None = None
    layer: int = GHCR_LAYER_LIMIT
    wasted: float | None = None


# The build argument carrying the checkout's commit (``+dirty…`` when the tree had changes).
CHECKOUT_ARG = "CANNERY_CHECKOUT"


@dataclass(frozen=True)
class StepSpec:
    """A step after the installs: ``kind`` is uninstall | alternatives | symlink | ldconfig |
    run; ``args`` its values in the order the renderer prints them."""

    kind: str
    args: tuple[str, ...]
    at: str = "after-components"


@dataclass(frozen=True)
class EnvSpec:
    """A runtime variable: ``mode`` is set (one value), or append | prepend | replace (a path
    list relative to what the toolkit or the base already set); a prepend may also carry
    ``appended``, entries added after the current value."""

    name: str
    mode: str
    values: tuple[str, ...]
    appended: tuple[str, ...] = ()


@dataclass(frozen=True)
class PythonSpec:
    """The Python an image installs: ``packages`` (the distribution's) or ``source`` (built in
    the builder stage ``cannery-python`` from ``downloads``, the tarball for each TARGETARCH)."""

    version: str
    install: str  # packages | source
    packages: tuple[str, ...]  # packages: the distribution's; source: the builder's, build-only
    downloads: tuple[Download, ...] = ()

    @property
    def prefix(self) -> str:
        """Where a source build installs (as Ascend's CANN images put it)."""
        return f"/usr/local/python{self.version}"


@dataclass(frozen=True)
class StageSpec:
    """A builder stage: its own base, build-only packages and steps; only ``outputs`` reach the
    final image."""

    name: str
    base_image: str
    base_digest: str | None
    package_manager: str
    packages: tuple[str, ...]
    steps: tuple[StepSpec, ...]
    outputs: tuple[str, ...]
    own_base: bool  # False: FROM the image's base stage

    @property
    def base_reference(self) -> str:
        return f"{self.base_image}@{self.base_digest}" if self.base_digest else self.base_image


@dataclass(frozen=True)
class RegistryTarget:
    """One registry an image is published to: its catalog name (which names its credentials),
    the repository, and the index media type it is given ("oci" or "docker")."""

    name: str
    repository: str
    media_types: str = "oci"


@dataclass(frozen=True)
class ImageSpec:
    name: str
    tag: str
    repository: str
    base_image: str
    base_digest: str | None
    python: str | None  # 3.11: the image's (installed) or the base's; None: no Python
    os: str
    os_version: str
    chip: str | None  # None: a plain OS base (the image has no toolkit and no soc)
    family: str | None  # without a soc: the family of the base's chip, if there is one
    soc: str | None
    platforms: tuple[str, ...]
    toolkit: ToolkitSpec | None  # None: no toolkit
    packages: tuple[str, ...]
    package_manager: str  # apt | dnf | yum | microdnf | apk: what the base installs with
    pip_tools: tuple[str, ...]
    installer: str  # pip | uv: what installs the components (render/dockerfile.py: which)
    components: tuple[ComponentSpec, ...]
    smoke_imports: tuple[str, ...]
    source: str
    revision: str | None
    labels: tuple[tuple[str, str], ...]
    catalog_name: str
    arches: tuple[str, ...] = field(default=())
    python_index: str = "https://pypi.org/simple"
    # TARGETARCH → extra package indexes (e.g. the CPU torch wheels for amd64)
    python_extra_index: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # TARGETARCH → locked "name==version --hash=sha256:…" lines, for arches whose lock entry
    # matches the catalog and the locked commits (a stale entry is not used)
    python_locked: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Where it is published: the registry it is built into first, then its mirrors.
    registries: tuple[RegistryTarget, ...] = ()
    # Image settings for the running container, and steps after the installs.
    runtime_env: tuple[EnvSpec, ...] = ()
    workdir: str | None = None
    user: str | None = None
    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] = ("/bin/bash",)
    aliases: tuple[str, ...] = ()  # more tags of the same index
    # (field, value) of each {field} the tag and aliases use, in order (plan shows them)
    tag_fields: tuple[tuple[str, str], ...] = ()
    steps: tuple[StepSpec, ...] = ()
    python_install: PythonSpec | None = None  # None: the base's Python (or none)
    stages: tuple[StageSpec, ...] = ()  # builder stages, before the final one
    # build_mirrors, (original prefix, mirror prefix) longest original first: used by the
    # rendered package and pip steps for that RUN only.
    package_mirrors: tuple[tuple[str, str], ...] = ()
    python_mirrors: tuple[tuple[str, str], ...] = ()
    # What a node needs to run it (catalog/hosts.py); None: no CANN toolkit in the image
    host: HostNeeds | None = None
    budget: BudgetSpec = BudgetSpec()
    files: tuple[FileSpec, ...] = ()  # the image's downloads, in catalog order
    built_on: str | None = None  # the catalog image it is built FROM (base = "image:NAME")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The build secrets (environment variables) its build needs, each once."""
        return tuple(dict.fromkeys(f.secret for f in self.files if f.secret))

    @property
    def tags(self) -> tuple[str, ...]:
        """Every tag that names this image's index: the tag, then its aliases."""
        return (self.tag, *self.aliases)

    @property
    def python_pinned(self) -> bool:
        """Every platform's Python dependencies come from the lock, with hashes."""
        return bool(self.arches) and {a for a, _ in self.python_locked} == set(self.arches)

    def with_checkout(self, commit: str) -> ImageSpec:
        """This image with the checkout's commit known: what its labels say once built."""
        from dataclasses import replace

        comps = tuple(replace(c, checkout=commit) if c.path is not None else c
                      for c in self.components)
        revision = commit if self.revision == "${" + CHECKOUT_ARG + "}" else self.revision
        return replace(self, components=comps, revision=revision)

    def checkout_resolved(self) -> list[str]:
        """Components whose dependencies pip resolves at build time by design: a checkout's
        change with the checkout, so the lock cannot hold them (its constraints still apply)."""
        return [
            f"component {c.name}: dependencies of the checkout ({c.path})"
            for c in self.components
            if c.path is not None
            and (c.requirements or (c.install != "none" and "--no-deps" not in c.pip_args))
        ]

    def unpinned(self) -> list[str]:
        """Python requirements that would be resolved at build time (not from the lock)."""
        if self.python_pinned:
            return []
        out = [f"Python tool {t}" for t in self.pip_tools]
        for c in self.components:
            out += [f"component {c.name}: {r}" for r in c.pip]
            if c.git:
                out += [f"component {c.name}: {r}" for r in c.requirements]
            if c.git and c.install != "none" and "--no-deps" not in c.pip_args:
                out.append(f"component {c.name}: its own dependencies")
            if c.wheels:
                out.append(f"component {c.name}: the wheel's dependencies")
        return out

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def downloads(self) -> tuple[Download, ...]:
        """What the image's build fetches and checks: the toolkit's installers, the Python
        source tarball and the image's own downloads."""
        py = self.python_install.downloads if self.python_install else ()
        files = tuple(d for f in self.files for d in f.downloads)
        return (*(self.toolkit.downloads if self.toolkit else ()), *py, *files)

    def fact_labels(self) -> tuple[tuple[str, str | None], ...]:
        """The labels that state the toolkit, the SoC and what a node needs (chips, oldest
        driver and firmware); None: the label must be absent (a toolkit the image does not
        carry is never claimed, nor a SoC it is not built for, nor a need no source gives)."""
        tk = self.toolkit
        needs = self.host.labels() if self.host else HostNeeds((), None, None).labels()
        return (
            ("io.cannery.toolkit", f"cann-{tk.version}" if tk and tk.in_image else None),
            ("io.cannery.toolkit-provided", "host" if tk and not tk.in_image else None),
            ("io.cannery.soc", self.soc),
            *needs,
        )

    @property
    def base_reference(self) -> str:
        return f"{self.base_image}@{self.base_digest}" if self.base_digest else self.base_image

    def unlocked(self) -> list[str]:
        out: list[str] = []
        if not self.base_digest:
            out.append(f"base image {self.base_image} (no digest)")
        for d in self.toolkit.downloads if self.toolkit else ():
            if not d.sha256:
                out.append(f"{d.name} installer for {d.arch} (no sha256)")
        for d in self.python_install.downloads if self.python_install else ():
            if not d.sha256:
                out.append(f"Python source for {d.arch} (no sha256)")
        for f in self.files:
            for d in f.downloads:
                if not d.sha256:
                    out.append(f"download {f.name} for {d.arch} (no sha256)")
        for st in self.stages:
            if st.own_base and not st.base_digest:
                out.append(f"base image {st.base_image} of stage {st.name} (no digest)")
        for c in self.components:
            if c.git and not c.git.commit:
                out.append(f"component {c.name}: git ref {c.git.ref} (no commit)")
            for w in c.wheels:
                if not w.sha256:
                    out.append(f"component {c.name}: wheel for {w.arch} (no sha256)")
        return out


def _component(name: str, comp: Component, arches: tuple[str, ...], lock: Lock) -> ComponentSpec:
    git = None
    if comp.git and comp.ref:
        if COMMIT.match(comp.ref):
            commit: str | None = comp.ref
        else:
            entry = lock.git.get(git_key(comp.git, comp.ref))
            commit = entry.commit if entry else None
        git = GitSource(comp.git, comp.ref, commit)
    wheels: tuple[Download, ...] = ()
    if comp.wheel:
        urls = [(a, fill_url(comp.wheel, arch=a)) for a in arches]
        wheels = tuple(
            Download(name, a, u, lock.urls[u].sha256 if u in lock.urls else None) for a, u in urls
        )
    return ComponentSpec(
        name=name,
        package=comp.package or name,
        version=comp.version,
        git=git,
        pip=tuple(comp.pip or ()),
        wheels=wheels,
        bundle_wheels=tuple(comp.bundle_wheels or ()),
        install=comp.install,
        requirements=tuple(comp.requirements),
        pip_args=tuple(comp.pip_args),
        subdir=comp.subdir,
        extras=tuple(comp.extras),
        pyproject=comp.pyproject,
        build_env=tuple(comp.build_env.items()),
        toolkit_build=comp.toolkit_build,
        jobs_limit=comp.jobs.limit if comp.jobs else None,
        jobs_reason=comp.jobs.reason if comp.jobs else None,
        pin=comp.pin,
        extra_index=tuple((a, tuple(comp.indexes(a))) for a in sorted(comp.extra_index)),
        path=comp.path,
        dest=comp.dest,
    )


def _longest_first(mirrors: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A prefix map in the order it is applied: the most specific original prefix wins."""
    return tuple(sorted(mirrors.items(), key=lambda kv: (-len(kv[0]), kv[0])))


def plan_image(cat: Catalog, image: str, lock: Lock) -> ImageSpec:
    img = cat.images[image]
    base = cat.bases[img.base]
    family = cat.family_for(image)  # the loader checked every image's SoC
    arches = arches_of(img.platforms)
    toolkit = _toolkit(cat, image, lock)
    components = tuple(_component(n, cat.components[n], arches, lock) for n in img.components)
    # Pins go first so nothing compiles against a torch that is replaced later.
    components = tuple(c for c in components if c.pin) + tuple(c for c in components if not c.pin)
    base_entry = lock.bases.get(base.image)
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}
    commits.update(
        {(c.git.url, c.git.ref): c.git.commit for c in components if c.git and c.git.commit}
    )
    locked: list[tuple[str, tuple[str, ...]]] = []
    for req in python_requests(cat, image, commits) or []:
        entry = lock.python.get(req.key)
        if entry is not None and entry.inputs == req.digest():
            locked.append((req.arch, tuple(entry.requirements)))
    extra: dict[str, list[str]] = {}
    for comp in components:
        for arch, urls in comp.extra_index:
            extra.setdefault(arch, []).extend(urls)
    target = img.registry or cat.catalog.registry or ""
    templates = [img.tag, *img.aliases]
    used = dict.fromkeys(f for t in templates for f in template_fields(t))
    revision = None
    if img.revision_from:
        rev = next(c for c in components if c.name == img.revision_from)
        revision = rev.git.pinned if rev.git else rev.label_version
    spec = ImageSpec(
        name=image,
        tag=img.tag,  # the templates; filled in below, once the lock's date is known
        repository=cat.registries[target].repository,
        base_image=base.image,
        base_digest=base_entry.digest if base_entry else None,
        python=cat.python_of(image),
        os=base.os,
        os_version=base.os_version,
        chip=base.chip,
        host=host_needs(cat, image, base.chip),
        budget=_budget(cat, image),
        files=tuple(
            FileSpec(d.name, d.path, d.unpack, d.executable, d.at, tuple(
                Download(n, a, u, lock.urls[u].sha256 if u in lock.urls else None)
                for n, a, u in file_downloads(cat, image) if n == d.name), d.url_secret)
            for d in cat.images[image].downloads),
        family=family,
        soc=img.soc,
        platforms=tuple(img.platforms),
        toolkit=toolkit,
        packages=tuple(img.packages),
        package_manager=base.manager,
        pip_tools=tuple(img.pip_tools),
        installer=img.installer,
        components=components,
        smoke_imports=tuple(img.smoke_imports),
        source=cat.catalog.source,
        revision=revision,
        labels=tuple(sorted(img.label_values().items())),
        catalog_name=cat.catalog.name,
        arches=arches,
        python_index=cat.catalog.python_index,
        python_extra_index=tuple((a, tuple(dict.fromkeys(u))) for a, u in sorted(extra.items())),
        python_locked=tuple(locked),
        runtime_env=tuple(
            EnvSpec(var, "set", (v,)) if isinstance(v, str)
            else EnvSpec(var, "set", (v.value,)) if isinstance(v, Override)
            else EnvSpec(var, v.mode, tuple(v.items), tuple(v.appended))
            for var, v in img.env.items()
        ),
        workdir=img.workdir,
        user=img.user,
        entrypoint=tuple(img.entrypoint) if img.entrypoint else None,
        cmd=tuple(img.cmd) if img.cmd else ("/bin/bash",),
        aliases=tuple(img.aliases),
        steps=tuple(_step(s) for s in img.steps),
        package_mirrors=_longest_first(cat.build_mirrors.packages),
        python_mirrors=_longest_first(cat.build_mirrors.python),
        registries=_registries(cat, image),
        python_install=_python(cat, image, arches, lock),
        stages=_stages(cat, image, lock),
        built_on=parent_of(cat, image),
    )
    date = _tag_date(spec, lock) if "date" in used else NO_DATE
    values = tag_values(cat, image, date)
    return replace(
        spec,
        tag=render_tag(cat, image, date=date),
        aliases=tuple(render_tag(cat, image, a, date) for a in img.aliases),
        tag_fields=tuple((f, values[f] or "") for f in used),
    )


def lock_entries(
    spec: ImageSpec, lock: Lock, arch: str | None = None
) -> dict[str, tuple[str, str]]:
    """The lock entries ``spec`` was planned from (for one TARGETARCH, or all): key → (pinned
    value, resolved_at). Keys name the input, never the image."""
    out: dict[str, tuple[str, str]] = {}
    base = lock.bases.get(spec.base_image)
    if base:
        out[f"base:{spec.base_image}"] = (base.digest, base.resolved_at)
    for st in spec.stages:  # a builder stage's own base
        sbase = lock.bases.get(st.base_image)
        if st.own_base and sbase:
            out[f"base:{st.base_image}"] = (sbase.digest, sbase.resolved_at)
    downloads = [*spec.downloads, *(w for c in spec.components for w in c.wheels)]
    for d in downloads:
        url = lock.urls.get(d.url)
        if url and (arch is None or d.arch == arch):
            out[f"url:{d.url}"] = (url.sha256, url.resolved_at)
    locked = dict(spec.python_locked)
    for a in spec.arches:
        pentry = lock.python.get(f"{spec.name}/{a}")
        if pentry and a in locked and (arch is None or a == arch):
            pins = "\n".join(locked[a])
            out[f"python:{a}"] = (hashlib.sha256(pins.encode()).hexdigest(), pentry.resolved_at)
    for c in spec.components:
        if c.git:
            entry = lock.git.get(git_key(c.git.url, c.git.ref))
            if entry:
                out[f"git:{c.git.url}#{c.git.ref}"] = (entry.commit, entry.resolved_at)
    return dict(sorted(out.items()))


def _tag_date(spec: ImageSpec, lock: Lock) -> str:
    """{date}: the UTC day (YYYYMMDD) the newest of the image's lock entries was resolved.
    Read from the lock, not the clock, so every leg of a build and every rebuild from the
    same lock render the same tag; a nightly's `cannery lock --update` moves it when an
    input moved. ``NO_DATE`` while nothing of the image is locked."""
    entries = lock_entries(spec, lock)
    if not entries:
        return NO_DATE
    return dt.datetime.fromtimestamp(lock_epoch(entries), dt.timezone.utc).strftime("%Y%m%d")


# What a builder stage installs to compile Python when the catalog names nothing
# (python.build_packages): the compiler, make, and the headers of the optional modules.
PYTHON_BUILD = {
    "apt": ("gcc", "make", "libc6-dev", "libssl-dev", "zlib1g-dev", "libbz2-dev",
            "libreadline-dev", "libsqlite3-dev", "libffi-dev", "liblzma-dev", "libncursesw5-dev",
            "libgdbm-dev", "uuid-dev", "tar", "gzip", "xz-utils"),
    "dnf": ("gcc", "make", "glibc-devel", "openssl-devel", "zlib-devel", "bzip2-devel",
            "readline-devel", "sqlite-devel", "libffi-devel", "xz-devel", "ncurses-devel",
            "gdbm-devel", "libuuid-devel", "tar", "gzip", "xz"),
    "apk": ("build-base", "linux-headers", "openssl-dev", "zlib-dev", "bzip2-dev",
            "readline-dev", "sqlite-dev", "libffi-dev", "xz-dev", "ncurses-dev", "gdbm-dev",
            "util-linux-dev", "tar", "gzip", "xz"),
}
PYTHON_BUILD["yum"] = PYTHON_BUILD["microdnf"] = PYTHON_BUILD["dnf"]


def _python(cat: Catalog, image: str, arches: tuple[str, ...], lock: Lock) -> PythonSpec | None:
    img = cat.images[image]
    py = img.python
    if py is None:
        return None
    if py.install == "packages":
        return PythonSpec(py.version, "packages", tuple(py.packages or ()))
    url = python_source_url(cat, image)
    assert url is not None  # the model requires a url for install = "source"
    sha = lock.urls[url].sha256 if url in lock.urls else None
    manager = cat.bases[img.base].manager
    build = tuple(py.build_packages) if py.build_packages is not None else PYTHON_BUILD[manager]
    return PythonSpec(
        py.version, "source", build, tuple(Download("python", a, url, sha) for a in arches)
    )


def _stages(cat: Catalog, image: str, lock: Lock) -> tuple[StageSpec, ...]:
    img = cat.images[image]
    out = []
    for st in img.stages:
        bname = st.base or img.base
        base = cat.bases[bname]
        entry = lock.bases.get(base.image)
        out.append(StageSpec(
            name=st.name,
            base_image=base.image,
            base_digest=entry.digest if entry else None,
            package_manager=base.manager,
            packages=tuple(st.packages),
            steps=tuple(_step(s) for s in st.steps),
            outputs=tuple(st.outputs),
            own_base=bname != img.base,
        ))
    return tuple(out)


def _budget(cat: Catalog, image: str) -> BudgetSpec:
    """The catalog's budget, each field the image sets replacing it."""
    own = cat.images[image].budget

    def pick(name: str) -> Any:
        value = getattr(own, name) if own is not None else None
        return value if value is not None else getattr(cat.budget, name)

    compressed, layer = pick("compressed"), pick("layer")
    return BudgetSpec(
        compressed=parse_size(compressed) if compressed else None,
        layer=parse_size(layer) if layer else GHCR_LAYER_LIMIT,
        wasted=pick("wasted"),
    )


def _toolkit(cat: Catalog, image: str, lock: Lock) -> ToolkitSpec | None:
    tk = cat.toolkit_of(image)
    if tk is None:
        return None
    base = cat.bases[cat.images[image].base]
    downloads = tuple(
        Download(n, a, u, lock.urls[u].sha256 if u in lock.urls else None)
        for n, a, u in toolkit_downloads(cat, image)
    )
    env: list[tuple[str, str | tuple[str, ...]]] = []
    for var, value in cat.envs[tk.env].items() if tk.env is not None else ():
        if isinstance(value, list):
            env.append((var, tuple(v.replace("{version}", tk.version) for v in value)))
        else:
            env.append((var, value.replace("{version}", tk.version)))
    return ToolkitSpec(
        version=tk.version,
        install=tk.provided == "image" and base.toolkit_version != tk.version,
        downloads=downloads,
        install_args=tuple(tk.install_args),
        env=tuple(env),
        devlib=tk.devlib.replace("{version}", tk.version) if tk.devlib else None,
        env_scripts=tuple(s.replace("{version}", tk.version) for s in tk.env_scripts),
        provided=tk.provided,
    )


def _registries(
    cat: Catalog, image: str
) -> tuple[RegistryTarget, ...]:
    return tuple(
        RegistryTarget(n, cat.registries[n].repository, cat.registries[n].media_types)
        for n in cat.published_to(image)
    )


def _step(step: Step) -> StepSpec:
    spec = _step_kind(step)
    return replace(spec, at=step.at) if step.at is not None else spec


def _step_kind(step: Step) -> StepSpec:
    if step.uninstall is not None:
        return StepSpec("uninstall", tuple(step.uninstall))
    if step.alternatives is not None:
        a = step.alternatives
        return StepSpec("alternatives", (a.link, a.name, a.path, str(a.priority)))
    if step.symlink is not None:
        return StepSpec("symlink", (step.symlink.target, step.symlink.link))
    if step.ldconfig is not None:
        return StepSpec("ldconfig", ())
    assert step.run is not None
    return StepSpec("run", (step.run,))


def plan(cat: Catalog, lock: Lock, names: list[str] | None = None) -> list[ImageSpec]:
    return [plan_image(cat, n, lock) for n in (names or list(cat.images))]
