"""Text a build writes into a tool's configuration file, and what in it persists a setting.

Files: pip, git, npm, conda, apt (`sources.list*`, `apt.conf*`) and yum/dnf (`yum.repos.d`,
`yum.conf`, `dnf.conf`) configuration. Writes are `echo`/`printf` redirected into the file,
`… | tee FILE`, a heredoc fed to `cat > FILE` or `tee FILE`, `sed -i` on the file, and
`COPY <<EOF FILE` in a Dockerfile.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.facts.shell import Command
from cannery.lint.rule import lazy_re

# (tool, file pattern)
FILES = (
    ("pip", lazy_re(r"(^|/)pip\.(conf|ini)$")),
    ("git", lazy_re(r"(^|/)(\.gitconfig|gitconfig|\.git/config)$")),
    ("npm", lazy_re(r"(^|/)\.?npmrc$")),
    ("conda", lazy_re(r"(^|/)\.?condarc$")),
    ("apt", lazy_re(r"^/etc/apt/(sources\.list(\.d/.*)?|apt\.conf(\.d/.*)?)$")),
    ("yum", lazy_re(r"^/etc/(yum\.repos\.d/.*|yum\.conf|yum/.*\.conf|dnf/dnf\.conf|"
                    r"dnf/.*\.conf|distro\.repos\.d/.*)$")),
)

# tool → settings that turn certificate or signature checks off
INSECURE = {
    "pip": lazy_re(r"^\s*trusted[-_]host\s*[=:]", re.I),
    "git": lazy_re(r"^\s*sslverify\s*=\s*(false|no|off|0)\b", re.I),
    "npm": lazy_re(r"^\s*strict-ssl\s*=\s*false\b", re.I),
    "conda": lazy_re(r"^\s*ssl_verify\s*:\s*(false|no|off)\b", re.I),
    # quotes as typed, typographic ones too (“true”, seen in MindSpeed-RL's Dockerfile)
    "apt": lazy_re(r"\[[^\]]*trusted=yes|allow-?(unauthenticated|insecure-?repositories|"
                   r"downgrade-?to-?insecure-?repositories)\s*[\"'“”‘’]?\s*(true|yes|1)|"
                   r"verify-?(peer|host)\s*[\"'“”‘’]?\s*(false|no|0)", re.I),
    "yum": lazy_re(r"(?<![\w.])(sslverify|gpgcheck|localpkg_gpgcheck)\s*=\s*(0|false|no|off)"
                   r"\b", re.I),
}
# tool → settings that keep a package index in the image
INDEX = {
    "pip": lazy_re(r"^\s*(extra-)?index[-_]url\s*[=:]|^\s*find[-_]links\s*[=:]", re.I),
    "npm": lazy_re(r"^\s*(@[\w-]+:)?registry\s*=", re.I),
    "conda": lazy_re(r"^\s*channel_alias\s*:|^\s*default_channels\s*:", re.I),
}


class Setting:
    __slots__ = ("column", "file", "line", "text", "tool")

    def __init__(self, tool: str, file: str, text: str, line: int, column: int) -> None:
        self.tool = tool
        self.file = file
        self.text = text  # the line as written
        self.line = line
        self.column = column


def tool_of(path: str) -> str | None:
    path = path.replace("~/", "/root/").replace("$HOME/", "/root/").replace("${HOME}/", "/root/")
    return next((tool for tool, pattern in FILES if pattern.search(path)), None)


def _printed(cmd: Command) -> str:
    """What echo/printf print, `\\n` taken as a line break (echo -e, printf)."""
    words = cmd.argv
    if cmd.name == "echo":
        while words and re.fullmatch(r"-[neE]+", words[0]):
            words = words[1:]
    return " ".join(words).replace("\\n", "\n")


def _writes(cmd: Command) -> Iterator[tuple[str, str, int, int]]:
    """(file, text, line, column) for each config file ``cmd`` writes text into."""
    targets = [w.value for op, w in cmd.redirects if op in (">", ">>", ">|")]
    if cmd.name == "tee":
        targets += [w.value for w in cmd.args if not w.value.startswith("-")]
    if cmd.name == "sed" and cmd.has_flag("-i", "--in-place"):
        exprs = [w for w in cmd.args if not w.value.startswith("-")]
        for w in exprs[:-1] if len(exprs) > 1 else []:
            for target in exprs[1:]:
                yield target.value, w.value, w.pos.line, w.pos.column
        return
    if not targets:
        return
    if cmd.stdin is not None:  # a heredoc: each line where it stands
        text, line, col = cmd.stdin.text, cmd.stdin.pos.line, cmd.stdin.pos.column
    elif cmd.name in ("echo", "printf"):
        text = _printed(cmd)
        line, col = cmd.pos.line, cmd.pos.column
    elif cmd.name == "tee" and cmd.pipeline and cmd.pipe_index > 0:
        src = cmd.pipeline[cmd.pipe_index - 1]
        if src.name not in ("echo", "printf"):
            return
        text = _printed(src)
        line, col = src.pos.line, src.pos.column
    else:
        return
    for t in targets:
        yield t, text, line, col


def settings(facts: DockerfileFacts) -> Iterator[Setting]:
    """Every line the Dockerfile writes into a known configuration file."""
    for inst in facts.instructions:
        if inst.keyword == "COPY" and inst.heredoc and len(inst.value) >= 2:
            tool = tool_of(inst.value[-1])
            if tool is None:
                continue
            for n, text in enumerate(inst.original.split("\n")[1:]):
                yield Setting(tool, inst.value[-1], text, inst.line + 1 + n,
                              len(text) - len(text.lstrip()) + 1)
        if inst.script is None:
            continue
        for cmd in inst.script.commands:
            for file, text, line, col in _writes(cmd):
                tool = tool_of(file)
                if tool is None:
                    continue
                heredoc = cmd.stdin is not None
                for n, row in enumerate(text.split("\n")):
                    if row.strip():  # a heredoc's lines stand where they are written
                        yield Setting(tool, file, row, line + n if heredoc else line,
                                      len(row) - len(row.lstrip()) + 1 if heredoc and n
                                      else col)


def insecure(s: Setting) -> bool:
    pattern = INSECURE.get(s.tool)
    return bool(pattern and pattern.search(s.text))


def index(s: Setting) -> bool:
    pattern = INDEX.get(s.tool)
    return bool(pattern and pattern.search(s.text))
