"""Which command a simple command runs: wrappers (sudo, env, timeout …) looked through,
``python3 -m pip`` and ``uv pip`` named pip, a versioned Python or pip named by its tool, and a
name held in a variable resolved from the value it has there."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from cannery.lint.facts.script import Command, Script, Word

# Commands that run another command, with the options of theirs that take a separate value
# and how many operands they take before the command (`timeout 10 CMD`).
WRAPPERS: dict[str, tuple[tuple[str, ...], int]] = {
    "sudo": (("-u", "-g", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "-h", "--user",
              "--group", "--prompt", "--close-from", "--chdir", "--role", "--type",
              "--other-user", "--command-timeout", "--host", "--chroot"), 0),
    "doas": (("-u", "-C"), 0),
    "env": (("-u", "-C", "-S", "--unset", "--chdir", "--split-string"), 0),
    "nice": (("-n", "--adjustment"), 0),
    "ionice": (("-c", "-n", "-t", "--class", "--classdata"), 0),
    "timeout": (("-s", "-k", "--signal", "--kill-after"), 1),
    "time": (("-f", "-o", "--format", "--output"), 0),
    "nohup": ((), 0),
    "exec": (("-a",), 0),
    "command": ((), 0),
    "xargs": (("-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--max-args", "--max-procs",
               "--max-lines", "--delimiter", "--arg-file", "--replace"), 0),
    "stdbuf": (("-i", "-o", "-e"), 0),
    "taskset": ((), 1),
}


def _unwrap(base: str, args: list[Word], env: dict[str, Word]) -> tuple[str, list[Word]] | None:
    """The command a wrapper runs, or None when it runs none (``sudo -v``, ``env`` alone)."""
    takes_value, operands = WRAPPERS[base]
    i = 0
    while i < len(args):
        v = args[i].value
        if v == "--":
            i += 1
            break
        if v.startswith("-") and len(v) > 1:
            # `-u bob` takes the next word; `-ubob` and `--user=bob` carry it
            i += 2 if v in takes_value else 1
            continue
        if base == "env" and "=" in v:
            k, _, _v = v.partition("=")
            env[k] = args[i]
            i += 1
            continue
        break
    i += operands
    if i >= len(args):
        return None
    return args[i].value.rsplit("/", 1)[-1], args[i + 1 :]


# A version written after a tool's name, as digits or through a variable: `python3.9`,
# `pip3.10`, `pip${PY_VERSION}`, `python$PYV`.
_VERSIONED = r"(?:[0-9.]|\$\{?[A-Za-z_]\w*\}?)*"
# A command named only by a variable that names a Python (`${PYTHON} -m pip`) when its value
# is not known: the variable's name says so.
_PYTHON_VAR = r"\$\{?[A-Za-z_]*(?:PY|py|Py)[A-Za-z0-9_]*\}?"


def _normalise(name: str, args: list[Word], env: dict[str, Word]) -> tuple[str, list[Word]]:
    base = name.rsplit("/", 1)[-1]
    while base in WRAPPERS and args:
        inner = _unwrap(base, args, env)
        if inner is None:
            break
        base, args = inner
    if re.fullmatch(f"python{_VERSIONED}", base) or re.fullmatch(_PYTHON_VAR, base):
        if len(args) >= 2 and args[0].value == "-m":
            base, args = args[1].value, args[2:]
        elif base.startswith("python") and base not in ("python", "python3"):
            # one name for every versioned Python 3 (`python3.9 get-pip.py` runs a script
            # as `python3` does); a Python 2 is `python`
            base = "python" if re.fullmatch(r"python2[0-9.]*", base) else "python3"
    if re.fullmatch(f"pip{_VERSIONED}", base):
        base = "pip"
    if base in ("uv",) and args and args[0].value == "pip":
        base, args = "pip", args[1:]
    return base, args


def with_assigned(script: Script) -> Iterator[tuple[Command, dict[str, str]]]:
    """Each command of ``script``, with the values the script's own assignments before it give
    their variables (one dict, updated as the commands go by)."""
    assigned = sorted((a for a in script.assignments if a.value is not None),
                      key=lambda a: a.start)
    local: dict[str, str] = {}
    k = 0
    for cmd in script.commands:
        while k < len(assigned) and assigned[k].start < cmd.start:
            word = assigned[k].value
            local[assigned[k].name] = word.value if word is not None else ""
            k += 1
        yield cmd, local


def resolve_names(script: Script, outer: Callable[[str], str]) -> None:
    """Name again each command whose name still holds a variable (`${PYTHON} -m pip`,
    `$PIP install`), from the value the variable has there: the script's own assignments
    before the command, else ``outer`` (a Dockerfile's ARG/ENV values). A name whose value is
    unknown keeps what its shape said (see _normalise)."""
    for cmd, local in with_assigned(script):
        if "$" not in cmd.name:
            continue

        def sub(m: re.Match[str], local: dict[str, str] = local) -> str:
            name = m.group(1) or m.group(2)
            return local[name] if name in local else m.group(0)

        named = re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", sub, cmd.name)
        if "$" in named:
            named = outer(named)
        if "$" in named or not named.strip():
            continue
        words = named.split()  # `PIP="python3 -m pip"`: the value is the command's start
        pos = cmd.pos
        lead = [Word(w, w, pos, cmd.start, cmd.start) for w in words[1:]]
        cmd.name, cmd.args = _normalise(words[0], lead + cmd.args, dict(cmd.prefix_env))
