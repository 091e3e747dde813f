"""The toolkit (CANN) in the image: its env persisted with ENV, its installers fetched, checked
and run, and the check that the ENV is what its env scripts set."""

from __future__ import annotations

from cannery.plan import ImageSpec
from cannery.render.dockerfile.fragments import _downloads_run, _expand, _finish, _q
from cannery.render.instructions import Blank, Comment, Env, Instruction, Run

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
