"""System packages: what of a list the base lacks, installed with the base's package manager
(apk, apt, dnf, microdnf, yum), from build_mirrors.packages when set, leaving no lists, caches
or logs; and bash on a base that has only busybox's sh."""

from __future__ import annotations

from cannery.render.dockerfile.fragments import _q
from cannery.render.instructions import Instruction, Run

# dnf's own state for the one transaction (persistdir: the history database with the time and
# the command line, repository state), so it is never written into the image's /var/lib/dnf;
# rpm's database stays the record of what is installed (rpm >= 4.18 takes its install times
# from SOURCE_DATE_EPOCH, which the build passes), so the layer is byte-reproducible.
DNF_STATE = "/tmp/cannery-dnf"
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


def _install_lines(
    manager: str, names: str, mirrors: tuple[tuple[str, str], ...] = ()
) -> list[str]:
    """Install what of ``names`` (shell words) is missing with ``manager``, then drop its lists,
    caches and logs in the same step. With build_mirrors.packages (``mirrors``), apt or dnf
    reads a rewritten copy of the base's sources in MIRROR_DIR, removed before the step ends."""
    mirror = _mirror_copy(manager, mirrors) if mirrors else []
    if manager == "apk":
        return _apk_lines(names, mirror)
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
        return _dnf_lines(manager, names, mirror)
    return _apt_lines(names, mirror)


def _apk_lines(names: str, mirror: list[str]) -> list[str]:
    done = [f"  rm -rf {MIRROR_DIR};"] if mirror else []
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


def _dnf_lines(manager: str, names: str, mirror: list[str]) -> list[str]:
    done = [f"  rm -rf {MIRROR_DIR};"] if mirror else []
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


def _apt_lines(names: str, mirror: list[str]) -> list[str]:
    done = [f"  rm -rf {MIRROR_DIR};"] if mirror else []
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
