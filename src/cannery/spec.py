"""The resolved image spec: what one image is once the catalog and the lock are read
(cannery.plan makes it). Frozen data; render, build and verify consume it unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cannery.catalog.hosts import HostNeeds


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
