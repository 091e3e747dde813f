"""The catalog's components, each in its own RUN: a pip requirement (a pin first), a wheel or a
release bundle of wheels, or a source tree from git or from the checkout."""

from __future__ import annotations

from collections.abc import Iterable

from cannery.catalog.inputs import BUNDLE_WHEEL_ENDINGS, bundle_kind
from cannery.plan import ComponentSpec, ImageSpec
from cannery.render.dockerfile.fragments import (
    ARCH_VAR,
    CONSTRAINTS,
    PIP,
    SRC,
    UV,
    _arch_case,
    _downloads_run,
    _finish,
    _index_url,
    _mirrored,
    _q,
    _refuse,
    _var,
)
from cannery.render.instructions import Comment, Copy, Instruction, Run


def _component(spec: ImageSpec, comp: ComponentSpec, constrained: bool) -> list[Instruction]:
    """One component's comment and RUN (a checkout's also its COPY); nothing for a pip
    requirement the locked Python step installs."""
    if spec.python_pinned and comp.path is None and comp.pip:
        return []  # installed, with hashes, by the locked Python step
    pip, extra, index = _pip_words(spec, comp, constrained)
    if comp.pin:
        return _pinned(spec, comp, extra, index)
    if comp.pip:
        out: list[Instruction] = [Comment(f"{comp.name}: {' '.join(comp.pip)}")]
        args = " ".join([*extra, *(_q(r) for r in comp.pip)])
        lines = ["set -eu;", *index, f"{pip} {args}"] if index else [f"{pip} {args}"]
        out.append(Run(lines))
        return out
    if comp.wheels:
        return _wheels(spec, comp, pip, extra, index)
    return _source(spec, comp, pip, extra, index)


def _pip_words(
    spec: ImageSpec, comp: ComponentSpec, constrained: bool
) -> tuple[str, list[str], list[str]]:
    """The component's pip command, its own extra words (each quoted where it needs it) and the
    lines that choose its extra indexes for TARGETARCH (none when it needs none)."""
    installer = UV if spec.installer == "uv" else PIP
    pip = installer + _index_url(spec, resolves=comp.path is not None or not spec.python_pinned)
    pip += f" -c {CONSTRAINTS}" if constrained else ""
    extra = [_q(a) for a in comp.pip_args]  # shell words, each quoted where it needs it
    if spec.python_pinned and comp.path is None:
        # dependencies and build requirements come from the lock: pip fetches nothing more
        extra += [a for a in ("--no-deps", "--no-build-isolation") if a not in extra]
        if comp.wheels:
            extra = [a for a in extra if a != "--no-build-isolation"]
    # The component's extra indexes, for its pip calls only ("$@": POSIX, no bash arrays);
    # with a lock nothing is resolved here, so none is needed, except for a checkout (pip
    # resolves its dependencies and requirements files at build time).
    index: list[str] = []
    if comp.extra_index and (not spec.python_pinned or comp.path is not None):
        urls = dict(comp.extra_index)
        branches = {
            a: [" ".join(["set --", *(_q(f"--extra-index-url={_mirrored(spec, u)}")
                                      for u in urls.get(a, ()))])
                + ";"]
            for a in spec.arches
        }
        index = _arch_case(spec, f"package index choice for {comp.name}", branches)
        pip += ' "$@"'
    return pip, extra, index


def _pinned(
    spec: ImageSpec, comp: ComponentSpec, extra: list[str], index: list[str]
) -> list[Instruction]:
    """A pin (torch): installed first, its versions added to the constraints of every later
    pip call."""
    reqs = " ".join(_q(r) for r in comp.pip)
    lines = ["set -eu;", *index]
    lines.append("mkdir -p /opt/cannery;")
    lines.append(f"printf '%s\\n' {reqs} >> {CONSTRAINTS};")
    idx = ' "$@"' if index else ""
    lines.append(f"{PIP}{_index_url(spec, True)}{idx} -c {CONSTRAINTS} "
                 f"{' '.join([*extra, reqs])}".rstrip() + ";")
    return [
        Comment(
            f"{comp.name}: {' '.join(comp.pip)}.\n"
            "Installed before anything compiles against it; every later pip call is\n"
            "constrained to these versions, so nothing re-pins them."
        ),
        Run(_finish(lines)),
    ]


def _wheels(
    spec: ImageSpec, comp: ComponentSpec, pip: str, extra: list[str], index: list[str]
) -> list[Instruction]:
    """A wheel, or a release bundle of wheels, fetched and checked against the lock's sha256,
    then installed."""
    lines = ["set -eu;", *index, *_downloads_run(spec, comp.wheels, f"{comp.name} wheel")]
    v = _var(comp.name)
    kinds = {bundle_kind(w.url) for w in comp.wheels}  # the lock's rule (one per arch)
    bundle = kinds.pop() if len(kinds) == 1 else None
    if bundle is not None:
        # A release bundle of wheels: every wheel in it for this platform (torch_npu's
        # daily bundle holds x86_64 and aarch64 ones) and every pure-Python one is
        # installed, in one pip call.
        comment = Comment(f"{comp.name}: a {bundle} of wheels, checked against its "
                          "sha256 from cannery.lock; its wheels for this platform"
                          + (" named " + ", ".join(comp.bundle_wheels)
                             if comp.bundle_wheels else "") + " installed")
        return [comment, Run(_finish(lines + _bundle_lines(comp, bundle, pip, extra)))]
    lines.append(f'wheel="/tmp/$(basename "${{{v}_url}}")"; mv /tmp/{v}.run "${{wheel}}";')
    lines.append(
        f'{pip} {" ".join(extra)} "${{wheel}}"; rm -f "${{wheel}}";'.replace("  ", " ")
    )
    return [Comment(f"{comp.name}: wheel, checked against its sha256 from cannery.lock"),
            Run(_finish(lines))]


def _bundle_lines(comp: ComponentSpec, bundle: str, pip: str, extra: list[str]) -> list[str]:
    """Lines that unpack a downloaded bundle (zip or tar.gz) and install, in one pip call, its
    wheels that fit this platform (and bundle_wheels' patterns, if any)."""
    v = _var(comp.name)
    lines = [
        f"python3 -m zipfile -e /tmp/{v}.run /tmp/{v}/;" if bundle == "zip"
        else f"mkdir -p /tmp/{v}; tar -xzf /tmp/{v}.run -C /tmp/{v};"
    ]

    # bundle_wheel_fits, as find patterns ({uname_arch}: this platform's CANN_ARCH)
    def names(patterns: Iterable[str]) -> str:
        return " -o ".join('-name "' + p.replace("{uname_arch}", "${" + ARCH_VAR + "}")
                           + '"' for p in patterns)

    fits = names("*" + e for e in BUNDLE_WHEEL_ENDINGS)
    # bundle_wheels: only those of them whose names match one of its patterns
    select = f" \\( {names(comp.bundle_wheels)} \\)" if comp.bundle_wheels else ""
    lines.append(" ".join(
        [f"find /tmp/{v} \\( {fits} \\){select} -print0 | xargs -0 {pip}", *extra])
        + ";")
    lines.append(f"rm -rf /tmp/{v} /tmp/{v}.run;")
    return lines


def _source(
    spec: ImageSpec, comp: ComponentSpec, pip: str, extra: list[str], index: list[str]
) -> list[Instruction]:
    """A source tree, fetched from git at its locked commit or copied from the checkout, built
    and installed with its build env, then its .git (or, for pip, the tree) removed."""
    git = comp.git
    # toolkit_build: the loader checked that the image has a soc and a toolkit it installs
    devlib = spec.toolkit.devlib if comp.toolkit_build and spec.toolkit else None
    dest = comp.dest or f"{SRC}/{comp.name}"
    out: list[Instruction] = [_source_notes(comp, devlib)]
    lines = ["set -eu;", *index]
    if git is None:
        assert comp.path is not None
        out.append(Copy(comp.path, dest))
    else:
        if not git.commit:
            lines.append(_refuse(f"git ref {git.ref} of {comp.name} has no commit"))
        lines += [
            f"git init -q {dest};",
            f"git -C {dest} fetch -q --depth 1 {_q(git.url)} {_q(git.pinned)};",
            f"git -C {dest} checkout -q FETCH_HEAD;",
        ]
    if comp.install != "none":
        lines += _build_env_lines(spec, comp, devlib)
    # Requirements files, with the component's pip_args but their dependencies (`--no-deps`
    # is about the component itself, as in the lock). With a Python lock a git tree's are in
    # it, installed hash-checked by the locked step; a checkout's change with it: pip here.
    req_args = [_q(a) for a in comp.pip_args if a != "--no-deps"]
    for req in comp.requirements if not spec.python_pinned or git is None else ():
        lines.append(f"{' '.join([pip, *req_args])} -r {_q(dest + '/' + req)};")
    if comp.install != "none":
        project = f"{dest}/{comp.subdir}" if comp.subdir else dest
        if comp.pyproject:
            lines.append(f"cp {_q(project + '/' + comp.pyproject)} {project}/pyproject.toml;")
        spec_ = project + (f"[{','.join(comp.extras)}]" if comp.extras else "")
        target = f"-e {_q(spec_)}" if comp.install == "editable" else _q(spec_)
        lines.append(f"{pip} {' '.join([*extra, target])};")
    if git is not None:
        lines.append(f"rm -rf {dest};" if comp.install == "pip" else f"rm -rf {dest}/.git;")
    if len(lines) > 1:
        out.append(Run(_finish(lines)))
    return out


def _source_notes(comp: ComponentSpec, devlib: str | None) -> Comment:
    """What a source component is (its commit or ref, or the checkout), what build env and job
    limit its step has, and where its commit is recorded."""
    git = comp.git
    head = f"{comp.name}"
    if comp.version:
        head += f" {comp.version}"
    if git is not None:
        head += f" at {git.commit[:12]}" if git.commit else f" at ref {git.ref}"
    else:
        head += f": this repository's checkout ({comp.path})"
    notes = [head + (f" ({comp.install})" if comp.install != "pip" else "")]
    if git is not None and not git.commit:
        notes.append(f"cannery: UNLOCKED git ref {git.ref!r}: run `cannery lock` to pin a commit.")
    env_names = [k for k, _ in comp.build_env] + (["SOC_VERSION"] if comp.toolkit_build else [])
    if devlib:
        env_names.append("the devlib stub on LD_LIBRARY_PATH")
    if env_names and comp.install != "none":
        what = ", ".join(env_names[:-1]) + (" and " if len(env_names) > 1 else "") + env_names[-1]
        notes.append(f"Build env for this step only: {what}.")
    if comp.jobs_limit is not None:
        notes.append(f"Job limit {comp.jobs_limit}, for this step only: {comp.jobs_reason}.")
    if git is None:
        notes.append(
            "Copied from the build context (.git left out by the rendered .dockerignore); the\n"
            "commit, read from git at build time, is in the label\n"
            f"io.cannery.component.{comp.name}."
        )
    elif comp.install == "pip":
        notes.append(
            "The source tree is removed once installed; the commit is in the label\n"
            f"io.cannery.component.{comp.name}."
        )
    else:
        notes.append(
            ".git is removed (stat data, reflogs and FETCH_HEAD differ on every build);\n"
            f"the commit is in the label io.cannery.component.{comp.name}."
        )
    return Comment("\n".join(notes))


def _build_env_lines(spec: ImageSpec, comp: ComponentSpec, devlib: str | None) -> list[str]:
    """The job limit, build env, SOC_VERSION and devlib stub of a step that builds, exported
    for that RUN only."""
    lines = _jobs_lines(comp)
    for key, value in comp.build_env:
        lines.append(f"export {key}={_q(value)};")
    if comp.toolkit_build and spec.soc:
        lines.append(f"export SOC_VERSION={_q(spec.soc)};")
    if devlib:
        devlib = devlib.replace("{uname_arch}", "${" + ARCH_VAR + "}")
        lines.append(
            f'export LD_LIBRARY_PATH="{devlib}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}";'
        )
    return lines


def _jobs_lines(comp: ComponentSpec) -> list[str]:
    if comp.jobs_limit is not None:
        n = str(comp.jobs_limit)
        return [f"export MAX_JOBS={n} CMAKE_BUILD_PARALLEL_LEVEL={n} MAKEFLAGS=-j{n};"]
    return [
        'jobs="${BUILD_JOBS:-$(nproc)}";',
        'export MAX_JOBS="${jobs}" CMAKE_BUILD_PARALLEL_LEVEL="${jobs}" MAKEFLAGS="-j${jobs}";',
    ]
