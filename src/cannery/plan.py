"""catalog + lock → fully resolved, frozen ImageSpecs (cannery.spec). Pure: no network, no
processes.

Render, build and verify consume these specs unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import replace
from typing import Any

from cannery.catalog.hosts import host_needs
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
from cannery.spec import (
    CHECKOUT_ARG,
    GHCR_LAYER_LIMIT,
    BudgetSpec,
    ComponentSpec,
    Download,
    EnvSpec,
    FileSpec,
    GitSource,
    ImageSpec,
    PythonSpec,
    RegistryTarget,
    StageSpec,
    StepSpec,
    ToolkitSpec,
)
from cannery.util.patterns import COMMIT
from cannery.util.sizes import parse_size

# Defined with the catalog; importable from here too, where render and build look for them.
# The resolved image spec is defined in cannery.spec; importable from here too.
__all__ = [
    "CHECKOUT_ARG",
    "GHCR_LAYER_LIMIT",
    "UNAME_ARCH",
    "BudgetSpec",
    "ComponentSpec",
    "Download",
    "EnvSpec",
    "FileSpec",
    "GitSource",
    "ImageSpec",
    "PythonSpec",
    "RegistryTarget",
    "StageSpec",
    "StepSpec",
    "ToolkitSpec",
    "fill_url",
    "plan",
    "plan_image",
    "platform_arch",
    "render_tag",
    "toolkit_downloads",
]


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


def _python_locked(cat: Catalog, image: str, components: tuple[ComponentSpec, ...],
                   lock: Lock) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The lock's Python pins per arch, where they were resolved from today's inputs."""
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}
    commits.update(
        {(c.git.url, c.git.ref): c.git.commit for c in components if c.git and c.git.commit}
    )
    locked: list[tuple[str, tuple[str, ...]]] = []
    for req in python_requests(cat, image, commits) or []:
        entry = lock.python.get(req.key)
        if entry is not None and entry.inputs == req.digest():
            locked.append((req.arch, tuple(entry.requirements)))
    return tuple(locked)


def _extra_indexes(components: tuple[ComponentSpec, ...]) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for comp in components:
        for arch, urls in comp.extra_index:
            extra.setdefault(arch, []).extend(urls)
    return extra


def _files(cat: Catalog, image: str, lock: Lock) -> tuple[FileSpec, ...]:
    return tuple(
        FileSpec(d.name, d.path, d.unpack, d.executable, d.at, tuple(
            Download(n, a, u, lock.urls[u].sha256 if u in lock.urls else None)
            for n, a, u in file_downloads(cat, image) if n == d.name), d.url_secret)
        for d in cat.images[image].downloads)


def _runtime_env(cat: Catalog, image: str) -> tuple[EnvSpec, ...]:
    return tuple(
        EnvSpec(var, "set", (v,)) if isinstance(v, str)
        else EnvSpec(var, "set", (v.value,)) if isinstance(v, Override)
        else EnvSpec(var, v.mode, tuple(v.items), tuple(v.appended))
        for var, v in cat.images[image].env.items()
    )


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
    locked = _python_locked(cat, image, components, lock)
    extra = _extra_indexes(components)
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
        files=_files(cat, image, lock),
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
        python_locked=locked,
        runtime_env=_runtime_env(cat, image),
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
