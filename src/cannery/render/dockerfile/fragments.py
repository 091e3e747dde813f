"""Shell fragments every stage kind's RUN is made of: quoting, the per-platform ``case``,
downloads fetched and checked before use, the refusal of an unlocked input, pip's index."""

from __future__ import annotations

import re
import shlex

from cannery.catalog.inputs import SECRET_URL
from cannery.plan import Download, ImageSpec

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
# Where BuildKit and buildah mount a RUN's build secrets (each a file named by its id).
SECRETS = "/run/secrets"


def _q(text: str) -> str:
    return shlex.quote(text)


def _expand(value: str, known: dict[str, str]) -> str:
    """Substitute references to variables this table defines (one ENV sees only older values)."""
    value = value.replace("{uname_arch}", "${" + ARCH_VAR + "}")
    return re.sub(
        r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: known.get(m.group(1), m.group(0)), value
    )


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
