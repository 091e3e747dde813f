"""ImageSpec → one Dockerfile for all of the image's platforms.

What the output guarantees (each a defect found in review of hand-written images):
- every download is fetched over verified TLS and checked with ``sha256sum -c`` before use;
- an input the lock does not pin (a base without digest, a git ref without commit, a download
  without sha256) stops the build at its own step, before anything uses it;
- Python dependencies locked per platform are installed with ``--require-hashes --no-deps``,
  and nothing after that step fetches a dependency; without a lock entry the file says
  UNPINNED at the top;
- the toolkit env is persisted with ENV from the catalog table, with no empty path element and
  no build-only ``devlib``, so ``docker run IMAGE python`` sees it with no shell in between;
  an image without a toolkit, or whose toolkit the host mounts, gets no toolkit ENV or label;
- the step that installs the toolkit sources its env scripts and stops the build, naming each
  variable, where the ENV lacks or differs from what they set;
- builder stages (a Python source build, the catalog's stages) come before the final stage:
  their build-only packages and steps stay there, only their outputs are copied in;
- a job limit, SOC_VERSION and a component's build env live only in that component's RUN;
- git sources are fetched at their locked commit with depth 1, and leave no ``.git`` behind;
- torch pins are installed first and constrain every later pip call;
- no mirror, index or trusted-host config is left in the image: build_mirrors are used by the
  package and pip steps for that RUN only;
- apt or dnf (from the base's os) installs only what the base lacks and leaves no lists,
  caches or logs;
- layers run from least to most often changed, so bumping the framework rebuilds the tail only;
  ENTRYPOINT and CMD come first and one LABEL last, so that tail is the changed steps and the
  LABEL.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from cannery import __version__
from cannery.catalog.inputs import BUNDLE_WHEEL_ENDINGS, SECRET_URL, bundle_kind
from cannery.plan import (
    CHECKOUT_ARG,
    UNAME_ARCH,
    ComponentSpec,
    Download,
    ImageSpec,
    PythonSpec,
    StageSpec,
    StepSpec,
)
from cannery.render.instructions import (
    Arg,
    Blank,
    Cmd,
    Comment,
    Copy,
    Entrypoint,
    Env,
    From,
    Instruction,
    Label,
    Run,
    Shell,
    User,
    Workdir,
    render_all,
)

SHELL = ("/bin/bash", "-o", "pipefail", "-c")
CONSTRAINTS = "/opt/cannery/constraints.txt"
REQUIREMENTS = "/opt/cannery/requirements.txt"
SRC = "/opt/src"
ARCH_VAR = "CANN_ARCH"  # x86_64 | aarch64, set per platform in the arch-* stages
UNLOCKED = "UNLOCKED"
PIP = "python3 -m pip install --no-cache-dir"
# installer = "uv": the system Python as pip installs into it, no cache left in the layer,
# .pyc written as pip writes them, and the system's CA store (a mirror's private CA), as
# Debian's pip trusts it (--system-certs in the uv the tests pin, 0.13.9; older uv had
# --native-tls, which 0.13 still takes with a deprecation warning).
UV = "uv pip install --system --no-cache --compile-bytecode --system-certs"
DEFAULT_INDEX = "https://pypi.org/simple"


def _q(text: str) -> str:
    return shlex.quote(text)


def _expand(value: str, known: dict[str, str]) -> str:
    """Substitute references to variables this table defines (one ENV sees only older values)."""
    value = value.replace("{uname_arch}", "${" + ARCH_VAR + "}")
    return re.sub(
        r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: known.get(m.group(1), m.group(0)), value
    )


# Variables whose value is a ':'-separated search path, where an empty element means ".".
SEARCH_PATHS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CMAKE_PREFIX_PATH")


def lacking_elements(image: str, sourced: str) -> list[str]:
    """The elements of a search path an env script leaves (``sourced``) that the image's value
    lacks: empty ones and a build-only devlib aside, a trailing '/' ignored. The install step's
    env check (``_env_check``, in bash) applies the same rule."""
    have = {e.rstrip("/") for e in image.split(":")}
    return [
        e for e in sourced.split(":")
        if e and not _is_devlib(e) and e.rstrip("/") not in have
    ]


def _is_devlib(element: str) -> bool:
    return element.endswith("/devlib") or "/devlib/" in element


def toolkit_env(spec: ImageSpec) -> tuple[tuple[str, str], ...]:
    """The ENV pairs that persist the toolkit's set_env.sh (search paths prepend, no '::');
    none for an image without a toolkit, or whose toolkit the host mounts at run time."""
    known: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for var, value in spec.toolkit.env if spec.toolkit and spec.toolkit.in_image else ():
        if isinstance(value, tuple):
            parts = ":".join(_expand(v, known) for v in value)
            text = parts + "${" + var + ":+:${" + var + "}}"
        else:
            text = _expand(value, known)
            known[var] = text
        pairs.append((var, text))
    return tuple(pairs)


def _arch_case(spec: ImageSpec, what: str, branches: dict[str, list[str]]) -> list[str]:
    lines = ['case "${TARGETARCH}" in']
    for arch in spec.arches:
        body = branches.get(arch, [])
        text = " ".join(body).rstrip(";")
        lines.append(f"  {arch}) {text} ;;" if text else f"  {arch}) ;;")
    lines.append(f'  *) echo "cannery: no {what} for TARGETARCH=${{TARGETARCH}}" >&2; exit 1 ;;')
    lines.append("esac;")
    return lines


def _var(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).lower()


def _downloads_run(
    spec: ImageSpec, downloads: tuple[Download, ...], what: str, install: list[str] | None = None
) -> list[str]:
    """Lines that fetch each download for TARGETARCH and verify it before anything uses it."""
    names = list(dict.fromkeys(d.name for d in downloads))
    branches: dict[str, list[str]] = {}
    for d in downloads:
        v = _var(d.name)
        # a URL held in a build secret is read from its mount, in this RUN only
        url = (f'"$(cat {SECRETS}/{d.url[len(SECRET_URL):]})"' if d.url.startswith(SECRET_URL)
               else _q(d.url))
        branches.setdefault(d.arch, []).append(f"{v}_url={url}; {v}_sha256={d.sha256 or UNLOCKED};")
    lines = _arch_case(spec, what, branches)
    for name in names:
        v = _var(name)
        if any(d.sha256 is None for d in downloads if d.name == name):
            lines.append(
                f'if [ "${{{v}_sha256}}" = {UNLOCKED} ]; then'
                f" {_refuse(f'{name} download has no sha256 for this platform')} fi;"
            )
        lines.append(f'curl -fsSL --proto =https --tlsv1.2 -o /tmp/{v}.run "${{{v}_url}}";')
        # on a mismatch, the URL (a secret one: its name) and both digests (sha256sum -c
        # alone says only FAILED)
        secret = next((d.url[len(SECRET_URL):] for d in downloads
                       if d.name == name and d.url.startswith(SECRET_URL)), None)
        shown = f"the URL in build secret {secret}" if secret else f"${{{v}_url}}"
        lines.append(f'if ! echo "${{{v}_sha256}}  /tmp/{v}.run" | sha256sum -c - >/dev/null;'
                     f' then got="$(sha256sum /tmp/{v}.run)"; echo "cannery: {shown}:'
                     f' sha256 ${{got%% *}}, but cannery.lock has ${{{v}_sha256}}" >&2;'
                     " exit 1; fi;")
        if install is not None:
            lines.append(f"bash /tmp/{v}.run {' '.join(_q(a) for a in install)};")
            lines.append(f"rm -f /tmp/{v}.run;")
    return lines


def _refuse(what: str) -> str:
    """A shell fragment that stops the build because ``what`` is not locked."""
    return f"echo {_q(f'cannery: UNLOCKED {what}; run cannery lock')} >&2; exit 1;"


def _finish(lines: list[str]) -> list[str]:
    """Drop the trailing ';' of the last fragment (a RUN ends on a command)."""
    if lines and lines[-1].endswith(";") and not lines[-1].endswith(";;"):
        lines[-1] = lines[-1][:-1]
    return lines


def _mirrored(spec: ImageSpec, url: str) -> str:
    """``url`` as the build fetches it: the longest build_mirrors.python prefix that covers
    whole path segments of it replaced (the lock's hashes are checked against what the mirror
    serves all the same)."""
    probe = url if url.endswith("/") else url + "/"
    for src, dst in spec.python_mirrors:
        if probe.startswith(src):
            out = dst + probe[len(src):]
            return out if url.endswith("/") else out[:-1]
    return url


def _index_url(spec: ImageSpec, resolves: bool) -> str:
    """The catalog's python_index (or its build mirror) for a pip call that resolves at build
    time (PyPI, pip's own default, needs no option); a call that only installs locked files
    needs none."""
    index = _mirrored(spec, spec.python_index)
    if not resolves or index.rstrip("/") == DEFAULT_INDEX:
        return ""
    return f" --index-url {_q(index)}"


def _jobs_lines(comp: ComponentSpec) -> list[str]:
    if comp.jobs_limit is not None:
        n = str(comp.jobs_limit)
        return [f"export MAX_JOBS={n} CMAKE_BUILD_PARALLEL_LEVEL={n} MAKEFLAGS=-j{n};"]
    return [
        'jobs="${BUILD_JOBS:-$(nproc)}";',
        'export MAX_JOBS="${jobs}" CMAKE_BUILD_PARALLEL_LEVEL="${jobs}" MAKEFLAGS="-j${jobs}";',
    ]


def _component(spec: ImageSpec, comp: ComponentSpec, constrained: bool) -> list[Instruction]:
    out: list[Instruction] = []
    installer = UV if spec.installer == "uv" else PIP
    pip = installer + _index_url(spec, resolves=comp.path is not None or not spec.python_pinned)
    pip += f" -c {CONSTRAINTS}" if constrained else ""
    extra = [_q(a) for a in comp.pip_args]  # shell words, each quoted where it needs it
    if spec.python_pinned and comp.path is None:
        if comp.pip:
            return []  # installed, with hashes, by the locked Python step
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
    if comp.pin:
        reqs = " ".join(_q(r) for r in comp.pip)
        out.append(
            Comment(
                f"{comp.name}: {' '.join(comp.pip)}.\n"
                "Installed before anything compiles against it; every later pip call is\n"
                "constrained to these versions, so nothing re-pins them."
            )
        )
        lines = ["set -eu;", *index]
        lines.append("mkdir -p /opt/cannery;")
        lines.append(f"printf '%s\\n' {reqs} >> {CONSTRAINTS};")
        idx = ' "$@"' if index else ""
        lines.append(f"{PIP}{_index_url(spec, True)}{idx} -c {CONSTRAINTS} "
                     f"{' '.join([*extra, reqs])}".rstrip() + ";")
        out.append(Run(_finish(lines)))
        return out
    if comp.pip:
        out.append(Comment(f"{comp.name}: {' '.join(comp.pip)}"))
        args = " ".join([*extra, *(_q(r) for r in comp.pip)])
        lines = ["set -eu;", *index, f"{pip} {args}"] if index else [f"{pip} {args}"]
        out.append(Run(lines))
        return out
    if comp.wheels:
        out.append(Comment(f"{comp.name}: wheel, checked against its sha256 from cannery.lock"))
        lines = ["set -eu;", *index, *_downloads_run(spec, comp.wheels, f"{comp.name} wheel")]
        v = _var(comp.name)
        kinds = {bundle_kind(w.url) for w in comp.wheels}  # the lock's rule (one per arch)
        bundle = kinds.pop() if len(kinds) == 1 else None
        if bundle is not None:
            # A release bundle of wheels: every wheel in it for this platform (torch_npu's
            # daily bundle holds x86_64 and aarch64 ones) and every pure-Python one is
            # installed, in one pip call.
            out[-1] = Comment(f"{comp.name}: a {bundle} of wheels, checked against its "
                              "sha256 from cannery.lock; its wheels for this platform"
                              + (" named " + ", ".join(comp.bundle_wheels)
                                 if comp.bundle_wheels else "") + " installed")
            lines.append(
                f"python3 -m zipfile -e /tmp/{v}.run /tmp/{v}/;" if bundle == "zip"
                else f"mkdir -p /tmp/{v}; tar -xzf /tmp/{v}.run -C /tmp/{v};"
            )
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
            out.append(Run(_finish(lines)))
            return out
        lines.append(f'wheel="/tmp/$(basename "${{{v}_url}}")"; mv /tmp/{v}.run "${{wheel}}";')
        lines.append(
            f'{pip} {" ".join(extra)} "${{wheel}}"; rm -f "${{wheel}}";'.replace("  ", " ")
        )
        out.append(Run(_finish(lines)))
        return out
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
    # toolkit_build: the loader checked that the image has a soc and a toolkit it installs
    devlib = spec.toolkit.devlib if comp.toolkit_build and spec.toolkit else None
    env_names = [k for k, _ in comp.build_env] + (["SOC_VERSION"] if comp.toolkit_build else [])
    if devlib:
        env_names.append("the devlib stub on LD_LIBRARY_PATH")
    if env_names and comp.install != "none":
        what = ", ".join(env_names[:-1]) + (" and " if len(env_names) > 1 else "") + env_names[-1]
        notes.append(f"Build env for this step only: {what}.")
    if comp.jobs_limit is not None:
        notes.append(f"Job limit {comp.jobs_limit}, for this step only: {comp.jobs_reason}.")
    dest = comp.dest or f"{SRC}/{comp.name}"
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
    out.append(Comment("\n".join(notes)))
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
        lines += _jobs_lines(comp)
        for key, value in comp.build_env:
            lines.append(f"export {key}={_q(value)};")
        if comp.toolkit_build and spec.soc:
            lines.append(f"export SOC_VERSION={_q(spec.soc)};")
        if devlib:
            devlib = devlib.replace("{uname_arch}", "${" + ARCH_VAR + "}")
            lines.append(
                f'export LD_LIBRARY_PATH="{devlib}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}";'
            )
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


def _python_locked(spec: ImageSpec) -> list[Instruction]:
    """One step installs every Python dependency from the lock, hash-checked, nothing else."""
    locked = dict(spec.python_locked)
    extra = dict(spec.python_extra_index)
    n = {a: len(locked[a]) for a in spec.arches}
    counts = ", ".join(f"{a} {n[a]}" for a in spec.arches)
    comment = Comment(
        f"Python dependencies from cannery.lock, resolved per platform ({counts} packages):\n"
        "pip installs exactly these files (--require-hashes --no-deps) and nothing else;\n"
        f"{CONSTRAINTS} keeps every later step on these versions."
    )
    branches: dict[str, list[str]] = {}
    for arch in spec.arches:
        reqs = " ".join(_q(line) for line in locked[arch])
        index = " ".join(_q(f"--extra-index-url={_mirrored(spec, u)}")
                         for u in extra.get(arch, ()))
        # the extra indexes become "$@" (POSIX, no bash arrays)
        branches[arch] = [
            f"printf '%s\\n' {reqs} > {REQUIREMENTS};",
            f"set -- {index};" if index else "set --;",
        ]
    lines = [
        "set -eu;",
        "mkdir -p /opt/cannery;",
        *_arch_case(spec, "locked Python dependencies", branches),
        f"{PIP} --require-hashes --no-deps --index-url {_q(_mirrored(spec, spec.python_index))}"
        f' "$@" -r {REQUIREMENTS};',
        f"sed 's/ .*//' {REQUIREMENTS} > {CONSTRAINTS}",
    ]
    return [comment, Run(lines)]


def _refuse_base(spec: ImageSpec) -> list[Run]:
    """A base image given by tag only could change under the build: stop before using it."""
    if spec.base_digest:
        return []
    why = f"base image {spec.base_image} has no digest"
    if spec.built_on is not None:
        why += f": build and push image {spec.built_on} first"
    return [Run([_refuse(why)[:-1]])]


# dnf's own state for the one transaction (persistdir: the history database with the time and
# the command line, repository state), so it is never written into the image's /var/lib/dnf;
# rpm's database stays the record of what is installed (rpm >= 4.18 takes its install times
# from SOURCE_DATE_EPOCH, which the build passes), so the layer is byte-reproducible.
DNF_STATE = "/tmp/cannery-dnf"
# Where BuildKit and buildah mount a RUN's build secrets (each a file named by its id).
SECRETS = "/run/secrets"
# Where the package step puts its rewritten copy of the base's repository sources when the
# catalog has build_mirrors.packages; removed in the same RUN.
MIRROR_DIR = "/tmp/cannery-mirror"
# dnf .repo copies: in each [section], the first build_mirrors prefix found on its baseurl
# line is replaced; a section whose baseurl was rewritten loses its metalink= and
# mirrorlist= lines, so dnf asks the mirror only. gpgkey= is never rewritten: the key comes
# from where the base says, never from the mirror.
_REPO_AWK = (
    r"function flush(i) { for (i = 1; i <= n; i++)"
    r" if (!(hit && buf[i] ~ /^[ \t]*(metalink|mirrorlist)[ \t]*=/)) print buf[i];"
    r" n = 0; hit = 0 }"
    r' BEGIN { m = split(map, kv, " ") }'
    r" /^[ \t]*\[/ { flush() }"
    r" /^[ \t]*baseurl[ \t]*=/ { for (i = 1; i < m; i += 2) if ((p = index($0, kv[i])) > 0)"
    r" { $0 = substr($0, 1, p - 1) kv[i + 1] substr($0, p + length(kv[i])); hit = 1; break } }"
    r" { buf[++n] = $0 } END { flush() }"
)


def _mirror_copy(manager: str, pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """Lines that copy the base's repository sources to MIRROR_DIR with each
    build_mirrors.packages prefix replaced, and stop the build when none matched (a mirror
    that silently goes unused would be a setting cannery did not honour)."""
    found = " ".join(f"-e {_q(to)}" for _, to in pairs)
    if manager == "apk":
        script = " ".join(
            f"-e {_q('s#' + src.replace('.', chr(92) + '.') + '#' + to + '#')} -e t"
            for src, to in pairs
        )
        return [
            f"  rm -rf {MIRROR_DIR}; mkdir -p {MIRROR_DIR};",
            f"  sed {script} /etc/apk/repositories > {MIRROR_DIR}/repositories;",
            f"  grep -qsF {found} {MIRROR_DIR}/repositories"
            f" || {{ echo 'cannery: no line of /etc/apk/repositories starts with a"
            " build_mirrors.packages prefix' >&2; exit 1; };",
        ]
    if manager in ("dnf", "yum"):
        mapping = " ".join(f"{src} {to}" for src, to in pairs)
        return [
            f"  rm -rf {MIRROR_DIR}; mkdir -p {MIRROR_DIR};",
            "  for f in /etc/yum.repos.d/*.repo; do",
            '    [ -f "$f" ] || continue;',
            f"    awk -v map={_q(mapping)} {_q(_REPO_AWK)}"
            f' "$f" > "{MIRROR_DIR}/${{f##*/}}";',
            "  done;",
            f"  grep -qsF {found} {MIRROR_DIR}/*.repo"
            f" || {{ echo 'cannery: no baseurl in /etc/yum.repos.d starts with a"
            " build_mirrors.packages prefix' >&2; exit 1; };",
        ]
    # sed: the first prefix that matches a line is replaced (`t` ends that line's script).
    script = " ".join(
        f"-e {_q('s#' + src.replace('.', chr(92) + '.') + '#' + to + '#')} -e t"
        for src, to in pairs
    )
    return [
        f"  rm -rf {MIRROR_DIR}; mkdir -p {MIRROR_DIR}/sources.list.d;",
        "  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list"
        " /etc/apt/sources.list.d/*.sources; do",
        '    [ -f "$f" ] || continue;',
        f'    sed {script} "$f" > "{MIRROR_DIR}/${{f#/etc/apt/}}";',
        "  done;",
        f"  grep -rqsF {found} {MIRROR_DIR}"
        f" || {{ echo 'cannery: no apt source of the base starts with a"
        " build_mirrors.packages prefix' >&2; exit 1; };",
    ]


def _package_lines(spec: ImageSpec) -> list[str]:
    """Install only the packages the base lacks, with the base's package manager, then drop
    its lists, caches and logs in the same step.

    curl is added only when the image downloads something, git only when it has a git
    component. The lists, caches and logs differ on every run, so leaving them would make the
    layer irreproducible. Signature checks stay as the base configures them; no repository or
    mirror configuration is written. With build_mirrors.packages, apt or dnf reads a rewritten
    copy of the base's sources in MIRROR_DIR (the base's own files are left as they are), and
    the copy is removed before the step ends.
    """
    py = spec.python_install
    packages = list(spec.packages)
    if py is not None and py.install == "packages":
        packages += [p for p in py.packages if p not in packages]
    needs = ["ca-certificates"]
    if _installs_toolkit(spec) or any(c.wheels for c in spec.components):
        needs.append("curl")
    if any(c.git for c in spec.components):
        needs.append("git")
    packages += [n for n in needs if n not in packages]
    names = " ".join(packages)
    if py is not None and py.install == "source":
        # the packages of the shared libraries the built Python links, found by its builder
        names += f" $(cat {PY_RUNTIME})"
    return _install_lines(spec.package_manager, names, spec.package_mirrors)


def _install_lines(
    manager: str, names: str, mirrors: tuple[tuple[str, str], ...] = ()
) -> list[str]:
    """Install what of ``names`` (shell words) is missing with ``manager``, then drop its lists,
    caches and logs in the same step. With build_mirrors.packages (``mirrors``), apt or dnf
    reads a rewritten copy of the base's sources in MIRROR_DIR, removed before the step ends."""
    mirror = _mirror_copy(manager, mirrors) if mirrors else []
    done = [f"  rm -rf {MIRROR_DIR};"] if mirror else []
    if manager == "apk":
        repos = f" --repositories-file {MIRROR_DIR}/repositories" if mirror else ""
        return [
            "set -eu;",
            f'missing=$(for p in {names}; do apk info -e "$p" >/dev/null || echo "$p"; done);',
            'if [ -n "${missing}" ]; then',
            *mirror,
            # --no-cache: the index is fetched to a temporary place, never kept in the layer;
            # unquoted on purpose: one word per missing package
            f"  apk add --no-cache{repos} ${{missing}};",
            *done,
            "fi;",
            "rm -rf /var/cache/apk/* /var/cache/ldconfig/aux-cache",
        ]
    if manager == "microdnf":
        # (build_mirrors.packages: the loader refuses it for a microdnf base)
        return [
            "set -eu;",
            f'missing=$(for p in {names}; do rpm -q --quiet "$p" || echo "$p"; done);',
            'if [ -n "${missing}" ]; then',
            "  microdnf install -y --nodocs --setopt=install_weak_deps=0 ${missing};",
            "fi;",
            "microdnf clean all;",
            "rm -rf /var/cache/yum/* /var/cache/dnf/* /var/lib/dnf/history*"
            " /var/log/dnf*.log /var/log/hawkey.log /var/cache/ldconfig/aux-cache"
            " /var/lib/rpm/rpmdb.sqlite-shm",
        ]
    if manager in ("dnf", "yum"):
        repos = f" --setopt=reposdir={MIRROR_DIR}" if mirror else ""
        # yum (CentOS and RHEL 7) has no weak dependencies, so no setting for them
        weak = " --setopt=install_weak_deps=False" if manager == "dnf" else ""
        return [
            "set -eu;",
            f'missing=$(for p in {names}; do rpm -q --quiet "$p" || echo "$p"; done);',
            'if [ -n "${missing}" ]; then',
            *mirror,
            # unquoted on purpose: one word per missing package
            f"  {manager} install -y{repos} --setopt=persistdir={DNF_STATE}{weak} ${{missing}};",
            f"  rm -rf {DNF_STATE};",
            *done,
            "fi;",
            f"{manager} clean all;",
            # rpmdb.sqlite-shm is SQLite's shared-memory index of the WAL: no persistent
            # content (the next open rebuilds it), different bytes on every run.
            "rm -rf /var/cache/dnf/* /var/cache/yum/* /var/log/dnf.log /var/log/dnf.librepo.log"
            " /var/log/dnf.rpm.log /var/log/hawkey.log"
            + (" /var/log/yum.log" if manager == "yum" else "")
            + " /var/cache/ldconfig/aux-cache /var/lib/rpm/rpmdb.sqlite-shm",
        ]
    apt = "apt-get"
    if mirror:
        apt += (f" -o Dir::Etc::SourceList={MIRROR_DIR}/sources.list"
                f" -o Dir::Etc::SourceParts={MIRROR_DIR}/sources.list.d")
    return [
        "set -eu;",
        f"missing=$(for p in {names}; do",
        "  dpkg-query -W -f='${Status}' \"$p\" 2>/dev/null | grep -q 'ok installed'"
        ' || echo "$p";',
        "done);",
        'if [ -n "${missing}" ]; then',
        *mirror,
        f"  {apt} update;",
        # unquoted on purpose: one word per missing package
        f"  DEBIAN_FRONTEND=noninteractive {apt} install -y --no-install-recommends ${{missing}};",
        *done,
        "fi;",
        "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log"
        " /var/cache/ldconfig/aux-cache",
    ]


def _installs_toolkit(spec: ImageSpec) -> bool:
    return spec.toolkit is not None and spec.toolkit.install and bool(spec.toolkit.downloads)


def _toolkit(spec: ImageSpec) -> list[Instruction]:
    """The toolkit's ENV and installers; nothing for no toolkit or the host's."""
    tk = spec.toolkit
    if tk is None or not tk.in_image:
        return []
    body: list[Instruction] = [
        Comment(
            f"CANN {tk.version} environment, as its set_env.sh sets it, persisted for every\n"
            "later step and for the running container (no `source` needed, none lost under\n"
            "--entrypoint)."
        ),
        Env(toolkit_env(spec)),
    ]
    if _installs_toolkit(spec):
        names = ", ".join(dict.fromkeys(d.name for d in tk.downloads))
        body.append(
            Comment(
                f"CANN {tk.version} installers ({names}): fetched over verified TLS and\n"
                "checked against their sha256 from cannery.lock before they run."
            )
        )
        lines = [
            "set -eu;",
            *_downloads_run(
                spec, tk.downloads, f"CANN {tk.version} installers", list(tk.install_args)
            ),
            *_env_check(spec),
        ]
        body.append(Run(_finish(lines)))
    body.append(Blank())
    return body


def _env_check(spec: ImageSpec) -> list[str]:
    """Lines that source every env script the toolkit installed and stop the build, naming each
    variable, where what they set is not what the ENV above persists: a variable the ENV lacks
    or holds with another value; for a search path, an element it lacks (the scripts prepend
    to the ENV's value, so only their elements are compared, a trailing '/' aside). A devlib
    element is build-only (it would shadow the host's driver) and never required. Plain bash,
    as the base may have no Python; in a subshell, so the scripts change nothing after it."""
    tk = spec.toolkit
    if tk is None or not tk.env_scripts:
        return []
    lists = [k for k, v in tk.env if isinstance(v, tuple)]
    paths = "|".join(dict.fromkeys([*SEARCH_PATHS, *lists]))
    scripts = " ".join(_q(s) for s in tk.env_scripts)
    them = "the CANN env scripts"
    was = '${persisted[$n]+set}'
    return [
        # +eu: the scripts read unset variables, and a failure is reported below instead;
        # -f: an element of a search path, split on ':', is never taken as a glob
        "( set +eu -f;",
        "  declare -A persisted=();",
        '  for n in $(compgen -e); do persisted[$n]="${!n}"; done;',
        f"  for s in {scripts}; do",
        '    [ -f "$s" ] || { echo "cannery: env script $s was not installed" >&2; exit 1; };',
        '    . "$s" > /dev/null || { echo "cannery: sourcing $s failed" >&2; exit 1; };',
        "  done;",
        "  bad=0;",
        "  for n in $(compgen -e); do",
        '    now="${!n}";',
        '    case "$n" in _|PWD|OLDPWD|SHLVL) continue ;; esac;',
        f'    if [ -n "{was}" ] && [ "${{persisted[$n]}}" = "$now" ]; then continue; fi;',
        f'    if [ -n "{was}" ]; then case "$n" in',
        f"      {paths})",
        r'        had=":${persisted[$n]}:"; had="${had//\/:/:}"; lacks=""; IFS=:;',
        '        for e in $now; do case "$e" in ""|*/devlib|*/devlib/*) continue ;; esac;',
        '          case "$had" in *":${e%/}:"*) ;; *) lacks="$lacks $e" ;; esac; done;',
        "        unset IFS;",
        '        [ -z "$lacks" ] && continue;',
        f'        echo "cannery: ENV $n lacks$lacks, which {them} add" >&2; bad=1; continue ;;',
        "    esac; fi;",
        f'    if [ -n "{was}" ]; then',
        f"      echo \"cannery: ENV $n is '${{persisted[$n]}}'; {them} set '$now'\" >&2;",
        "    else",
        f"      echo \"cannery: ENV lacks $n, which {them} set to '$now'\" >&2;",
        "    fi;",
        "    bad=1;",
        "  done;",
        f'  [ "$bad" = 0 ] || {{ echo "cannery: the image ENV is not what {them} set'
        f' (CANN {tk.version}): fix the toolkit\'s env table" >&2; exit 1; }}',
        ")",
    ]


# The builder stage that compiles Python, and the list of packages its shared libraries need.
PY_STAGE = "cannery-python"
PY_RUNTIME = "/opt/cannery/python-runtime-packages"
# Which package owns a library file, per package manager: dpkg -S and rpm -qf, by the path
# ldd prints, its real path, or with /usr added or removed (merged /usr: a package may name
# either).
_OWNER = {
    "apt": "dpkg-query -S {path} 2>/dev/null | head -n 1 | cut -d: -f1",
    "dnf": "rpm -qf --qf '%{{NAME}}\\n' {path} 2>/dev/null",
    # "… is owned by musl-1.2.4-r2": the name, without its version and release
    "apk": "apk info --who-owns {path} 2>/dev/null | sed -n 's/.* is owned by //p'"
           " | sed -E 's/-[0-9][^-]*-r[0-9]+$//'",
}
_OWNER["yum"] = _OWNER["microdnf"] = _OWNER["dnf"]


def _bash(manager: str, mirrors: tuple[tuple[str, str], ...] = ()) -> list[Instruction]:
    """Before SHELL names bash: an Alpine base has only busybox's sh, so bash is added first
    (the one step that runs under /bin/sh), from build_mirrors.packages as the package step."""
    if manager != "apk":
        return []
    if not mirrors:
        return [Run(["command -v bash >/dev/null || apk add --no-cache bash"])]
    return [Run([
        "set -eu;",
        "if ! command -v bash >/dev/null; then",
        *_mirror_copy("apk", mirrors),
        f"  apk add --no-cache --repositories-file {MIRROR_DIR}/repositories bash;",
        f"  rm -rf {MIRROR_DIR};",
        "fi",
    ])]


def _stage_head(
    name: str, source: str, refuse: list[Run], manager: str,
    mirrors: tuple[tuple[str, str], ...] = (),
) -> list[Instruction]:
    return [
        From(source, name),
        *refuse,
        Arg("TARGETARCH"),
        Arg("SOURCE_DATE_EPOCH"),
        *_bash(manager, mirrors),
        Shell(SHELL),
    ]


def _python_stage(spec: ImageSpec, py: PythonSpec) -> list[Instruction]:
    """The builder stage that compiles Python from its locked tarball, as Ascend's CANN images
    do (shared library, an rpath to its own lib, altinstall under its own prefix), and writes
    the packages of the system libraries it links for the final image to install."""
    prefix = py.prefix
    minor = ".".join(py.version.split(".")[:2])
    owner = _OWNER[spec.package_manager]
    names = " ".join(["ca-certificates", "curl", *(p for p in py.packages
                                                   if p not in ("ca-certificates", "curl"))])
    lines = [
        "set -eu;",
        *_downloads_run(spec, py.downloads, f"Python {py.version} source"),
        "mkdir -p /tmp/python-src;",
        "tar -xf /tmp/python.run -C /tmp/python-src --strip-components=1;",
        "cd /tmp/python-src;",
        f'./configure --prefix={prefix} --enable-shared LDFLAGS="-Wl,-rpath,{prefix}/lib";',
        'make -j"$(nproc)";',
        "make altinstall;",
        f"ln -sf python{minor} {prefix}/bin/python3;",
        f"ln -sf python3 {prefix}/bin/python;",
        f"if [ -e {prefix}/bin/pip{minor} ]; then",
        f"  ln -sf pip{minor} {prefix}/bin/pip3; ln -sf pip3 {prefix}/bin/pip;",
        "fi;",
        "cd /;",
        "rm -rf /tmp/python-src /tmp/python.run;",
        "mkdir -p /opt/cannery;",
        f"find {prefix} -type f \\( -name '*.so*' -o -perm -u+x \\) -print0"
        " | xargs -0 -r -n 1 sh -c 'ldd \"$0\" 2>/dev/null || true'"
        f" | awk -v own={prefix}/ '$2 == \"=>\" && index($3, \"/\") == 1"
        " && index($3, own) != 1 { print $3 }' | sort -u > /tmp/python-libs;",
        f": > {PY_RUNTIME};",
        "while read -r lib; do",
        "  pkg=;",
        '  for path in "${lib}" "$(readlink -f "${lib}")" "/usr${lib}" "${lib#/usr}"; do',
        # a failed query says why on stdout (rpm's "is not owned"): never take that as a name
        f'    [ -n "${{pkg}}" ] || pkg=$({owner.format(path=chr(34) + "${path}" + chr(34))})'
        " || pkg=;",
        "  done;",
        '  if [ -z "${pkg}" ]; then echo "cannery: no package owns ${lib}" >&2; exit 1; fi;',
        f'  echo "${{pkg}}" >> {PY_RUNTIME};',
        "done < /tmp/python-libs;",
        f"sort -u -o {PY_RUNTIME} {PY_RUNTIME};",
        "rm -f /tmp/python-libs",
    ]
    return [
        Comment(
            f"Python {py.version}, built from its source tarball (sha256 from cannery.lock) in a\n"
            "builder stage: the compiler and headers stay here. The final image gets the\n"
            f"prefix {prefix} and installs the packages of the shared libraries it links."
        ),
        *_stage_head(PY_STAGE, spec.base_reference, _refuse_base(spec), spec.package_manager,
                     spec.package_mirrors),
        Run(_install_lines(spec.package_manager, names, spec.package_mirrors)),
        Run(lines),
        Blank(),
    ]


def _builder_stage(spec: ImageSpec, st: StageSpec) -> list[Instruction]:
    if not st.own_base:
        refuse = _refuse_base(spec)
    elif not st.base_digest:
        refuse = [Run([_refuse(f"base image {st.base_image} of stage {st.name} has no digest")
                       [:-1]])]
    else:
        refuse = []
    body: list[Instruction] = [
        Comment(f"Builder stage {st.name}: its packages and steps stay in it; only its outputs\n"
                f"({', '.join(st.outputs)}) reach the image."),
        *_stage_head(st.name, st.base_reference if st.own_base else spec.base_reference, refuse,
                     st.package_manager, spec.package_mirrors),
    ]
    if st.packages:
        body.append(Run(
            _install_lines(st.package_manager, " ".join(st.packages), spec.package_mirrors)
        ))
    body += _step_list(st.steps)
    if body[-1] != Blank():
        body.append(Blank())
    return body


def _python_final(spec: ImageSpec) -> list[Instruction]:
    """The built Python in the final image: its prefix and the list of its runtime packages
    (installed by the package step next), first on PATH."""
    py = spec.python_install
    if py is None or py.install != "source":
        return []
    return [
        Comment(f"Python {py.version} from the builder stage {PY_STAGE}, first on PATH."),
        Copy(py.prefix, py.prefix, PY_STAGE),
        Copy(PY_RUNTIME, PY_RUNTIME, PY_STAGE),
        Env((("PATH", f"{py.prefix}/bin:${{PATH}}"),)),
        Blank(),
    ]


def _stage_outputs(spec: ImageSpec) -> list[Instruction]:
    out: list[Instruction] = []
    for st in spec.stages:
        out.append(Comment(f"Outputs of the builder stage {st.name}."))
        out += [Copy(path, path, st.name) for path in st.outputs]
    return [*out, Blank()] if out else []


def render_dockerfile(spec: ImageSpec) -> str:
    arch_list = ", ".join(spec.platforms)
    header = [
        f"Generated by cannery {__version__.split('+')[0]} from catalog {spec.catalog_name!r},"
        f" image {spec.name!r}.",
        "Do not edit: change the catalog, then run `cannery render dockerfile`.",
        f"Tag: {spec.reference}",
        f"Platforms: {arch_list}",
    ]
    for item in spec.unlocked():
        header.append(f"cannery: UNLOCKED {item}; run `cannery lock`.")
    for item in spec.checkout_resolved():
        header.append(f"cannery: {item} are resolved by pip at build time, under the lock's "
                      "constraints.")
    if spec.unpinned():
        header.append(
            "cannery: UNPINNED Python dependencies: pip resolves them at build time, so this\n"
            "file can build a different image tomorrow; `cannery lock` pins them with hashes."
        )
    body: list[Instruction] = [Comment("\n".join(header)), Blank()]

    # No stage is only `FROM <base> AS base` for the others to start from: buildah 1.28
    # (Debian 12's) leaves a mounted working container behind for such a stage on every build
    # (containers/buildah#4572). Each stage names the pinned base itself.
    body += [Arg("TARGETARCH"), Blank()]
    if spec.python_install is not None and spec.python_install.install == "source":
        body += _python_stage(spec, spec.python_install)
    for st in spec.stages:
        body += _builder_stage(spec, st)
    body += [
        Comment("Per-platform values; a platform with no stage here fails the build at FROM."),
    ]
    for arch in spec.arches:
        body += [From(spec.base_reference, f"arch-{arch}"), Env(((ARCH_VAR, UNAME_ARCH[arch]),))]
    body += [
        Blank(),
        From("arch-${TARGETARCH}", "image"),
        *_refuse_base(spec),
        Arg("TARGETARCH"),
        Comment(
            "The build passes the lock's timestamp here, so Python writes hash-based .pyc files\n"
            "and tools clamp file times; unset, nothing changes."
        ),
        Arg("SOURCE_DATE_EPOCH"),
        *_bash(spec.package_manager, spec.package_mirrors),
        Shell(SHELL),
        *_command(spec),
        Blank(),
    ]

    body += _python_final(spec)
    body += [Comment("System packages (change least often)."), Run(_package_lines(spec))]
    if spec.pip_tools and not spec.python_pinned:
        body.append(Run([f"{PIP}{_index_url(spec, True)} --upgrade "
                         f"{' '.join(_q(t) for t in spec.pip_tools)}"]))
    body.append(Blank())
    body += _stage_outputs(spec)

    body += _steps(spec, "before-toolkit")
    body += _toolkit(spec)
    body += _steps(spec, "before-components")

    if spec.python_pinned:
        body += _python_locked(spec)
        body.append(Blank())
    constrained = spec.python_pinned or any(c.pin for c in spec.components)
    declared_jobs = False
    for comp in spec.components:
        if comp.git and comp.install != "none" and not declared_jobs:
            body += [
                Comment("Parallel jobs for every build step; empty means the builder's cores."),
                Arg("BUILD_JOBS", ""),
            ]
            declared_jobs = True
        body += _component(spec, comp, constrained and not comp.pin)
        body.append(Blank())

    body += _steps(spec, "after-components")
    body += _settings_head(spec)

    labels: list[tuple[str, str]] = [
        ("org.opencontainers.image.source", spec.source),
        ("org.opencontainers.image.version", spec.tag),
        ("org.opencontainers.image.base.name", spec.base_image),
    ]
    if spec.revision:
        labels.append(("org.opencontainers.image.revision", spec.revision))
    if spec.base_digest:
        labels.append(("org.opencontainers.image.base.digest", spec.base_digest))
    labels += [(k, v) for k, v in spec.fact_labels() if v is not None]
    labels += [(f"io.cannery.component.{c.name}", c.label_version) for c in spec.components]
    # an own label of the image's (override = true, the loader checked) replaces cannery's
    own = dict(spec.labels)
    labels = [(k, v) for k, v in labels if k not in own] + list(spec.labels)
    if any(c.path is not None for c in spec.components):
        body += [
            Comment("The checkout's commit, read from git by `cannery build` (+dirty… when the "
                    "tree had changes)."),
            Arg(CHECKOUT_ARG, "unknown"),
        ]
    if spec.user:
        body.append(User(spec.user))
    # Last and one instruction: a bump rebuilds its own step, the steps after it, and this.
    body.append(Label(tuple(labels)))
    return render_all(body)


def _command(spec: ImageSpec) -> list[Instruction]:
    """ENTRYPOINT and CMD, at the top of the final stage: no build step uses them, and set
    there they stay cached when a later step changes (each instruction after a changed step
    is a commit of its own in `buildah build --layers`)."""
    out: list[Instruction] = [Entrypoint(spec.entrypoint)] if spec.entrypoint else []
    return [*out, Cmd(spec.cmd)]


def render_dockerignore(specs: list[ImageSpec], catalog_name: str) -> str | None:
    """The build context's ``.dockerignore`` when an image copies the checkout (a component
    with ``path``); None when no image does (the context is then the Dockerfile alone)."""
    paths = sorted({c.path for s in specs for c in s.components if c.path is not None})
    if not paths:
        return None
    return "\n".join([
        f"# Generated by cannery {__version__.split('+')[0]} from catalog {catalog_name!r}. "
        "Do not edit: change the catalog, then run `cannery render`.",
        f"# The build context of images that copy this checkout ({', '.join(paths)}).",
        "# Version-control data stays out of the image: `cannery build` reads the commit from",
        "# git and puts it in the image's labels and input digest.",
        ".git",
        "**/.git",
        "",
    ])


def run_step_text(text: str) -> Run:
    """A catalog `run` step as the RUN it renders to (the render-time lint looks for it)."""
    return Run([text])


def _steps(spec: ImageSpec, at: str) -> list[Instruction]:
    """The image's downloads, then its steps, placed ``at`` one place, in catalog order:
    typed steps print their own command."""
    return _files(spec, at) + _step_list(tuple(s for s in spec.steps if s.at == at))


def _files(spec: ImageSpec, at: str) -> list[Instruction]:
    """Each download placed ``at`` one place: fetched, checked, then put at its path."""
    out: list[Instruction] = []
    for f in (f for f in spec.files if f.at == at):
        v = _var(f.name)
        if f.unpack:
            place = [f"mkdir -p {_q(f.path)};",
                     f"tar -xf /tmp/{v}.run -C {_q(f.path)} --no-same-owner;"]
            how = f"unpacked into {f.path}"
        else:
            mode = "0755" if f.executable else "0644"
            # -T: a path that is an existing directory fails, not gets the file inside it
            place = [f"install -D -T -m {mode} /tmp/{v}.run {_q(f.path)};"]
            how = f"placed at {f.path}" + (" (executable)" if f.executable else "")
        out += [
            Comment(f"Download {f.name}: fetched over verified TLS, checked against its sha256 "
                    f"from cannery.lock,\n{how}."
                    + (f"\nIts URL is the build secret {f.secret}, mounted for this step only."
                       if f.secret else "")),
            Run(_finish(["set -eu;", *_downloads_run(spec, f.downloads, f"download {f.name}"),
                         *place,
                         f"rm -f /tmp/{v}.run;"]),
                flags=[f"--mount=type=secret,id={f.secret},required=true"] if f.secret else []),
            Blank(),
        ]
    return out


def _step_list(steps: tuple[StepSpec, ...]) -> list[Instruction]:
    out: list[Instruction] = []
    for step in steps:
        a = step.args
        # a placed step says its place; the default keeps the words it always had
        when = {"before-toolkit": "before the toolkit",
                "before-components": "before the components"}.get(step.at, "after the installs")
        if step.kind == "uninstall":
            out += [Comment(f"Removed {when}: {', '.join(a)}."),
                    Run([f"python3 -m pip uninstall -y {' '.join(_q(n) for n in a)}"])]
        elif step.kind == "alternatives":
            out += [Comment(f"{a[0]} -> {a[2]} (update-alternatives, priority {a[3]})."),
                    Run([f"update-alternatives --install {_q(a[0])} {_q(a[1])} {_q(a[2])} {a[3]}"])]
        elif step.kind == "symlink":
            out += [Comment(f"{a[1]} -> {a[0]}."),
                    Run([f'mkdir -p "$(dirname {_q(a[1])})";', f"ln -sfn {_q(a[0])} {_q(a[1])}"])]
        elif step.kind == "ldconfig":
            out += [Comment(f"The dynamic linker cache, refreshed {when}."),
                    Run(["ldconfig"])]
        else:
            placed = "" if step.at == "after-components" else f", {when}"
            out += [Comment(f"A catalog `run` step{placed} (linted with cannery's Dockerfile "
                            "rules)."),
                    run_step_text(a[0])]
        out.append(Blank())
    return out


def runtime_env(spec: ImageSpec) -> tuple[tuple[str, str], ...]:
    """The image's own runtime ENV pairs: a value, or a path list appended to, prepended to or
    replacing what is already set (the toolkit's ENV, or the base's)."""
    # Earlier ENV instructions (the toolkit's) expand by themselves; within this one, a
    # reference to a variable it sets would see the old value, so those are substituted.
    known: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for e in spec.runtime_env:
        joined = ":".join(_expand(v, known) for v in e.values)
        var = e.name
        if e.mode == "append":
            text = f"${{{var}:+${{{var}}}:}}{joined}"
        elif e.mode == "prepend":
            text = f"{joined}${{{var}:+:${{{var}}}}}"
            if e.appended:
                text += ":" + ":".join(_expand(v, known) for v in e.appended)
        else:  # set, replace
            text = joined
            known[var] = text
        pairs.append((var, text))
    return tuple(pairs)


def _settings_head(spec: ImageSpec) -> list[Instruction]:
    """The running container's settings: set after every build step, so changing one rebuilds
    nothing before it and no build step runs with them."""
    out: list[Instruction] = []
    if spec.user:
        # Created only if the base lacks it; the same useradd on Debian and openEuler.
        out += [Comment(f"The user the container runs as ({spec.user}), created if missing."),
                Run([f"id -u {spec.user} >/dev/null 2>&1 || useradd --create-home "
                     f"--user-group {spec.user}"])]
    pairs = runtime_env(spec)
    if pairs:
        out += [Comment("Runtime environment of the image (catalog env), for the running "
                        "container."), Env(pairs)]
    if spec.workdir:
        out.append(Workdir(spec.workdir))
    if out:
        out.append(Blank())
    return out
