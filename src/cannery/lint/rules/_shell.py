"""Shell knowledge shared by rules: downloads, checksums, builds, uses of a file."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable

from cannery.lint.facts.shell import Command, Script, Word

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

CHECKSUM_TOOLS = {"sha256sum", "sha512sum", "sha384sum", "sha224sum", "sha1sum", "shasum",
                  "b2sum", "cksum"}
DOWNLOADERS = ("wget", "curl", "aria2c")
SIGNATURE_TOOLS = {"gpg", "gpg2", "gpgv", "cosign", "minisign", "signify", "slsa-verifier"}


def basename(path: str) -> str:
    path = path.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1]


def _same(text: str) -> str:
    return text


def url_of(cmd: Command, resolve: Callable[[str], str] = _same) -> Word | None:
    """The first argument that is (or, with ``resolve``, expands to) a URL; the returned
    word's value is the expanded URL."""
    for w in cmd.args:
        v = resolve(w.value)
        if re.match(r"^(https?|ftp)://", v):
            return w if v == w.value else Word(w.text, v, w.pos, w.start, w.end)
    return None


def downloaded_file(cmd: Command, resolve: Callable[[str], str] = _same) -> str | None:
    """The file a wget/curl/aria2c command writes, if it writes one (not stdout)."""
    url = url_of(cmd, resolve)
    if cmd.name == "wget":
        out = cmd.flag_value("-O", "--output-document")
        if out is not None:
            return None if out.value == "-" else resolve(out.value)
        if url is None:
            return None
        prefix = cmd.flag_value("-P", "--directory-prefix")
        name = basename(url.value)
        return f"{resolve(prefix.value).rstrip('/')}/{name}" if prefix else name
    if cmd.name == "aria2c":
        if url is None:
            return None
        out = cmd.flag_value("-o", "--out")
        folder = cmd.flag_value("-d", "--dir")
        name = resolve(out.value) if out is not None else basename(url.value)
        if folder is not None and not name.startswith("/"):
            return f"{resolve(folder.value).rstrip('/')}/{name}"
        return name
    if cmd.name == "curl":
        out = cmd.flag_value("-o", "--output")
        if out is not None:
            return None if out.value == "-" else resolve(out.value)
        if cmd.has_flag("-O", "--remote-name") and url is not None:
            return basename(url.value)
        for op, target in cmd.redirects:
            if op in (">", ">>"):
                return resolve(target.value)
    return None


def is_download(cmd: Command) -> bool:
    return cmd.name in DOWNLOADERS and url_of(cmd) is not None


def is_verification(cmd: Command) -> bool:
    if cmd.name in CHECKSUM_TOOLS:
        return cmd.has_flag("-c", "--check") or bool(cmd.pipeline and cmd.pipe_index > 0)
    if cmd.name in SIGNATURE_TOOLS:
        return cmd.name in ("gpgv", "minisign", "signify", "slsa-verifier") or any(
            "verify" in a for a in cmd.argv)
    return cmd.name == "pip" and cmd.has_flag("--require-hashes")


def _decoded(name: str) -> str:
    """A file name with URL percent-encoding undone: a wheel fetched as
    `torch-2.6.0%2Bcpu-….whl` is saved by wget (and named by pip) as `torch-2.6.0+cpu-….whl`."""
    if "%" not in name:
        return name
    from urllib.parse import unquote

    return unquote(name)


def names_file(value: str, path: str) -> bool:
    """Whether an argument names ``path``: same path, same file name (percent-encoded or
    not), or a glob matching it (``pkg*.whl``)."""
    want = _decoded(basename(path))
    if not want:
        return False
    if value == path or _decoded(basename(value)) == want:
        return True
    name = _decoded(basename(value))
    return any(ch in name for ch in "*?[") and fnmatch.fnmatchcase(want, name)


def mentions(cmd: Command, path: str, resolve: Callable[[str], str] = _same) -> Word | None:
    for w in cmd.args:
        if names_file(resolve(w.value), path):
            return w
    return None


def runs_file(cmd: Command, path: str, resolve: Callable[[str], str] = _same) -> bool:
    """``cmd`` executes ``path`` by a path (``./x.run``, ``~/x.run``, ``${DIR}/x.run``)."""
    raw = cmd.raw_name
    return "/" in raw and names_file(resolve(raw), path)


INTERPRETERS = ("bash", "sh", "zsh", "dash", "ksh", "python", "python3", "perl", "ruby",
                "node", "source", ".")


def script_operand(cmd: Command) -> Word | None:
    """The file an interpreter runs: its first operand (`python3 x.py data.json` runs x.py;
    data.json is only read). None with `-c`/`-m`, where no file is run."""
    for w in cmd.args:
        v = w.value
        if v in ("-c", "-m", "-e", "--command"):
            return None
        if v.startswith("-"):
            continue
        return w
    return None


def use_kind(cmd: Command, path: str, resolve: Callable[[str], str] = _same) -> str | None:
    """How ``cmd`` consumes a downloaded file: executed, sourced, extracted, installed. An
    interpreter executes only its script operand; a file it is handed as an argument is
    data, not code."""
    if runs_file(cmd, path, resolve):
        return "executed"
    if cmd.name in INTERPRETERS:
        script = script_operand(cmd)
        if script is None or not names_file(resolve(script.value), path):
            return None
    elif mentions(cmd, path, resolve) is None:
        return None
    return consumer_kind(cmd)


def consumer_kind(cmd: Command) -> str | None:
    """What a command does with the files it is given (None: nothing that runs them)."""
    if cmd.name in ("bash", "sh", "zsh", "dash", "python", "python3", "perl"):
        return "executed"
    if cmd.name in ("source", "."):
        return "sourced"
    if cmd.name in ("tar", "unzip", "7z", "gunzip", "bunzip2", "xz", "unxz", "cpio", "bsdtar",
                    "zstd", "unzstd"):
        return "extracted"
    if cmd.name in ("dpkg", "rpm", "apt-get", "apt", "yum", "dnf", "pip", "conda", "npm",
                    "install"):
        return "installed"
    return None


def builds_from_source(cmd: Command) -> bool:
    """pip/setup.py/make invocations that compile (and so link against what is installed)."""
    if cmd.name in ("make", "cmake", "ninja", "bazel", "meson"):
        return True
    if cmd.name in ("python", "python3") and any(a.endswith("setup.py") for a in cmd.argv):
        return True
    if cmd.name == "pip" and cmd.subcommand() in ("install", "wheel"):
        argv = cmd.argv
        if any(a.startswith(("-e", "--editable")) for a in argv) or (
                "--no-build-isolation" in argv):
            return True
        for a in argv[1:]:
            if a.startswith(("git+", "./", "../", "/")) or a == ".":
                return True
    return False


# pip install options that take a separate value (so the value is not a requirement)
PIP_VALUE_OPTIONS = {
    "-r", "-c", "-e", "-i", "-f", "-t", "-C", "--index-url", "--extra-index-url",
    "--find-links", "--requirement", "--constraint", "--editable", "--trusted-host",
    "--target", "--prefix", "--root", "--src", "--upgrade-strategy", "--platform",
    "--python-version", "--implementation", "--abi", "--only-binary", "--no-binary",
    "--config-settings", "--global-option", "--install-option", "--progress-bar",
    "--exists-action", "--log", "--cache-dir", "--proxy", "--retries", "--resume-retries",
    "--timeout", "--cert", "--client-cert", "--report", "--python", "--keyring-provider",
    "--group", "--index", "--default-index", "--extra-index",
}


def pip_packages(cmd: Command) -> list[tuple[str, str, Word]]:
    """(name, specifier, word) of each requirement a `pip install` names."""
    if cmd.name != "pip" or cmd.subcommand() != "install":
        return []
    out = []
    skip_next = False
    for w in cmd.args:
        v = w.value
        if skip_next:
            skip_next = False
            continue
        if v in PIP_VALUE_OPTIONS:
            skip_next = True
            continue
        if v.startswith("-") or v == "install":
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$", v)
        if m and not v.startswith(("git+", "http://", "https://", ".", "/", "~", "$")) and (
                "/" not in v) and (
                not re.search(r"\.(whl|tar\.gz|zip|tgz)$", v)) and not v.isdigit():
            out.append((m.group(1).lower().replace("-", "_"), m.group(3), w))
    return out


def host_of(url: str) -> str:
    from urllib.parse import urlparse

    return urlparse(url).hostname or ""


# git options that take a separate value, global (before the subcommand) and per subcommand
GIT_GLOBAL_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}
GIT_VALUE = {
    "clone": {"-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "--reference",
              "--reference-if-able", "-j", "--jobs", "--template", "--separate-git-dir", "-u",
              "--upload-pack", "--shallow-since", "--shallow-exclude", "--filter", "--bundle-uri",
              "--server-option"},
    "fetch": {"--depth", "--deepen", "--shallow-since", "--shallow-exclude", "-j", "--jobs",
              "--filter", "--negotiation-tip", "--server-option", "-o", "--upload-pack",
              "--refmap", "--recurse-submodules-default", "--submodule-prefix"},
    "checkout": {"-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"},
    "switch": {"-c", "-C", "--create", "--force-create", "--orphan", "--conflict"},
    "reset": {"--pathspec-from-file"},
}


class GitCommand:
    """A git command with the directory it acts in (a clone: the directory it creates)."""

    __slots__ = ("cmd", "operands", "owner", "sub", "where")

    def __init__(self, cmd: Command, sub: str, operands: list[Word], where: str,
                 owner: object) -> None:
        self.cmd = cmd
        self.sub = sub
        self.operands = operands  # after the subcommand, option values skipped
        self.where = where
        self.owner = owner  # what the command belongs to (an Instruction, a workflow Step)


def git_operands(cmd: Command) -> tuple[str, list[Word], list[str]]:
    """(subcommand, its operands, the -C directories) of a git command."""
    args = cmd.args
    i = 0
    dirs: list[str] = []
    while i < len(args) and args[i].value.startswith("-"):
        if args[i].value == "-C" and i + 1 < len(args):
            dirs.append(args[i + 1].value)
        i += 2 if args[i].value in GIT_GLOBAL_VALUE else 1
    if i >= len(args):
        return "", [], dirs
    sub = args[i].value
    takes = GIT_VALUE.get(sub, set())
    out: list[Word] = []
    i += 1
    while i < len(args):
        v = args[i].value
        if v == "--":  # pathspecs follow
            break
        if v.startswith("-") and len(v) > 1:
            i += 2 if v in takes else 1
            continue
        out.append(args[i])
        i += 1
    return sub, out, dirs


def _join(cwd: str, path: str) -> str:
    if path.startswith(("/", "~", "$HOME", "${HOME}")):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd, path))


def git_commands(scripts: list[tuple[Script, str, object]],
                 resolve: Callable[[object, str], str] | None = None) -> list[GitCommand]:
    """Every git command of ``scripts`` (each with its starting directory), with the directory
    it acts in, following `cd` and `git -C` (a `cd` inside `$( … )` changes nothing).
    ``resolve(owner, text)`` expands variables in paths and URLs (ARG/ENV values)."""
    out: list[GitCommand] = []
    for script, workdir, owner in scripts:

        def val(text: str, owner: object = owner) -> str:
            return resolve(owner, text) if resolve is not None and "$" in text else text

        cwd = workdir
        for cmd in script.commands:
            if cmd.name == "cd" and cmd.depth == 0:
                target = next((w.value for w in cmd.args if not w.value.startswith("-")), "~")
                cwd = _join(cwd, val(target))
                continue
            if cmd.name != "git":
                continue
            sub, operands, dirs = git_operands(cmd)
            where = cwd
            for d in dirs:
                where = _join(where, val(d))
            if sub == "clone" and operands:
                url = val(operands[0].value)
                target = (val(operands[1].value) if len(operands) > 1
                          else basename(url).removesuffix(".git"))
                where = _join(where, target)
            out.append(GitCommand(cmd, sub, operands, where, owner))
    return out


def stage_git_commands(insts: list[Any]) -> list[GitCommand]:
    """git_commands over a Dockerfile stage's RUNs, with ARG/ENV values expanded."""
    from cannery.lint.facts.dockerfile import expand

    def resolve(owner: object, text: str) -> str:
        inst = owner
        return expand(text, insts, getattr(inst, "index", 0))

    return git_commands([(i.script, i.workdir, i) for i in insts if i.script is not None],
                        resolve)


def same_repo_after(ops: list[GitCommand], i: int) -> list[GitCommand]:
    """The git commands after ``ops[i]`` (a clone) that act in its directory, up to the next
    clone into that directory."""
    where = ops[i].where
    out = []
    for op in ops[i + 1 :]:
        if op.where != where:
            continue
        if op.sub == "clone":
            break
        out.append(op)
    return out
