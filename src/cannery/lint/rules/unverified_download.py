from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, expand
from cannery.lint.facts.shell import Command, Script, with_assigned
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import (
    CHECKSUM_TOOLS,
    DOWNLOADERS,
    SIGNATURE_TOOLS,
    basename,
    consumer_kind,
    downloaded_file,
    is_verification,
    mentions,
    names_file,
    url_of,
    use_kind,
)

VAR = lazy_re(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
EXTRACTORS = ("tar", "bsdtar", "cpio")


class _Tracker:
    """Downloaded files of one stage (or job) waiting for a check, in execution order."""

    __slots__ = ("fetched", "pending", "reported", "written")

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}  # path → URL it came from
        self.fetched: dict[str, str] = {}  # every download: path → URL
        self.written: dict[str, str] = {}  # file → text echo/printf wrote
        self.reported: set[int] = set()  # ids of commands already reported

    def clear(self, names: list[str]) -> None:
        for path in list(self.pending):
            if any(names_file(n, path) for n in names):
                self.pending.pop(path)

    def clear_from(self, url: str) -> None:
        """A checksum list fetched from ``url`` checks what was fetched next to it."""
        folder = url.rsplit("/", 1)[0]
        for path, src in list(self.pending.items()):
            if src.rsplit("/", 1)[0] == folder:
                self.pending.pop(path)


def _compared(cmd: Command) -> bool:
    """A checksum whose output is compared: `[ "$(sha256sum f | cut …)" = … ]`, `… | grep`."""
    return cmd.name in CHECKSUM_TOOLS and (cmd.depth > 0 or bool(
        cmd.pipeline and cmd.pipe_index + 1 < len(cmd.pipeline)))


class UnverifiedDownload(Rule):
    """## What it does
    Follows each file that `wget`/`curl` or `ADD <url>` downloads through the rest of its
    stage and reports the first place it is executed, sourced, extracted or installed with no
    checksum or signature check (`sha256sum -c`, `gpg --verify`, `cosign verify`, …) of that
    file in between. URLs and paths are expanded from ARG/ENV defaults and the RUN's own
    assignments; a file counts as used when run by any path (`./x.run`, `~/x.run`,
    `${DIR}/x.run`) or named through a glob (`unzip pkg*.zip`). `curl URL | tar -x` is
    reported as an unchecked extraction, and the members it names stay unchecked. A check
    clears only the files it covers: the ones named in `echo "<sum>  FILE" | sha256sum -c -`
    or in a list written earlier, the ones fetched next to a downloaded list, the signed file
    of `gpg --verify`.

    ## Why is this bad?
    TLS proves who served the file, not that it is the file you reviewed: a moved release, a
    compromised mirror or a truncated download runs as root in the build.

    ## Example
    ```dockerfile
    RUN curl -fsSLO https://example.com/Ascend-cann-toolkit_8.5.2_linux-aarch64.run && \\
        bash Ascend-cann-toolkit_8.5.2_linux-aarch64.run --quiet --install
    ```

    ## Use instead
    ```dockerfile
    RUN curl -fsSLO https://example.com/Ascend-cann-toolkit_8.5.2_linux-aarch64.run && \\
        echo "<sha256>  Ascend-cann-toolkit_8.5.2_linux-aarch64.run" | sha256sum -c - && \\
        bash Ascend-cann-toolkit_8.5.2_linux-aarch64.run --quiet --install
    ```
    """

    name = "unverified-download"
    code = "CD002"
    severity = Severity.ERROR
    targets = ("dockerfile", "workflow")

    def check(self, facts: DockerfileFacts | WorkflowFacts, ctx: LintContext
              ) -> Iterator[Finding]:
        if isinstance(facts, WorkflowFacts):
            # a tool fetched in one step of a job and run in a later step of the same job
            for job in facts.jobs:
                track = _Tracker()
                for step in job.steps:
                    if step.run is not None:
                        yield from self._script(facts.path, step.run, track, lambda t: t)
            return
        for stage in facts.stages:
            track = _Tracker()
            for inst in stage.instructions:
                if inst.keyword == "ADD":
                    self._add(inst, track)
                elif inst.script is not None:
                    def outer(text: str, inst: Instruction = inst) -> str:
                        assert inst.stage is not None
                        return expand(text, inst.stage.instructions, inst.index)

                    yield from self._script(facts.path, inst.script, track, outer)

    @staticmethod
    def _add(inst: Instruction, track: _Tracker) -> None:
        """`ADD <url> <dest>` downloads; `--checksum=` verifies it."""
        if any(f.startswith("--checksum") for f in inst.flags) or len(inst.value) < 2:
            return
        assert inst.stage is not None
        dest = expand(inst.value[-1], inst.stage.instructions, inst.index)
        for src in inst.value[:-1]:
            url = expand(src, inst.stage.instructions, inst.index)
            if re.match(r"^(https?|ftp)://", url):
                path = (f"{dest.rstrip('/')}/{basename(url)}" if dest.endswith("/")
                        or len(inst.value) > 2 else dest)
                track.pending[path] = track.fetched[path] = url

    def _script(self, path: str, script: Script, track: _Tracker,
                outer: Callable[[str], str]) -> Iterator[Finding]:
        for cmd, local in with_assigned(script):

            def resolve(text: str, env: dict[str, str] = local) -> str:
                # variables defined from variables (A="/tmp/${NAME}", NAME="x-${V}.tgz"):
                # a few rounds, then the workflow/Dockerfile values
                for _ in range(4):
                    if "$" not in text:
                        break
                    new = VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)
                    if new == text:
                        break
                    text = new
                return outer(text) if "$" in text else text

            if is_verification(cmd) or _compared(cmd):
                self._verify(cmd, track, resolve)
                continue
            if cmd.name in ("echo", "printf"):
                for op, target in cmd.redirects:
                    if op in (">", ">>"):
                        track.written[resolve(target.value)] = " ".join(cmd.argv)
            if cmd.name in DOWNLOADERS:
                out = downloaded_file(cmd, resolve)
                url = url_of(cmd, resolve)
                if out:
                    track.pending[out] = track.fetched[out] = url.value if url else ""
                    continue
                if url is not None:
                    yield from self._piped(path, cmd, track, url.value)
                continue
            if id(cmd) in track.reported:
                continue
            for file in list(track.pending):
                kind = use_kind(cmd, file, resolve)
                if kind is None:
                    continue
                track.pending.pop(file)
                yield self.at(
                    path, cmd.pos,
                    f"{file} is {kind} here without a checksum or signature check "
                    "since it was downloaded",
                    hint="check it first: echo \"<sha256>  FILE\" | sha256sum -c -",
                )

    def _piped(self, path: str, cmd: Command, track: _Tracker, url: str) -> Iterator[Finding]:
        """`curl URL | tar -x`: extracted with nothing checked; named members stay pending."""
        if not cmd.pipeline or cmd.pipe_index + 1 >= len(cmd.pipeline):
            return
        nxt = cmd.pipeline[cmd.pipe_index + 1]
        if nxt.name not in EXTRACTORS or consumer_kind(nxt) != "extracted":
            return
        track.reported.add(id(nxt))
        yield self.at(path, nxt.pos, f"{basename(url) or url} is extracted straight from "
                      f"{cmd.name} without a checksum or signature check",
                      hint="download to a file, check it (sha256sum -c), then extract")
        values = {w.value for w in (nxt.flag_value("-C", "--directory"),
                                    nxt.flag_value("-f", "--file")) if w is not None}
        for w in nxt.args:
            v = w.value
            if not v.startswith("-") and v not in values and not re.fullmatch(r"[a-zA-Z]+", v):
                track.pending[v] = url

    @staticmethod
    def _verify(cmd: Command, track: _Tracker, resolve: Callable[[str], str]) -> None:
        """Clear what this check covers, and only that."""
        if cmd.name in CHECKSUM_TOOLS and cmd.has_flag("-c", "--check"):
            lists = [resolve(w.value) for w in cmd.args
                     if not w.value.startswith("-") or w.value == "-"]
            for lst in lists or ["-"]:
                if lst == "-":  # echo "<sum>  FILE" | sha256sum -c -
                    feeders = (cmd.pipeline or [])[: cmd.pipe_index]
                    texts = [" ".join(c.argv) for c in feeders]
                    texts += [cmd.stdin.value] if cmd.stdin is not None else []
                    # `grep " NAME$" SUMS | sha256sum -c -`: regex anchors are not the name
                    track.clear([resolve(t).strip("^$'\"") for text in texts
                                 for t in text.split()])
                    for c in feeders:  # lines picked from a downloaded checksum list
                        for w in c.args:
                            lst_path = resolve(w.value)
                            src = next((track.fetched[f] for f in track.fetched
                                        if names_file(lst_path, f)), None)
                            if src is not None:
                                track.clear_from(src)
                elif lst in track.written:
                    track.clear([resolve(t) for t in track.written[lst].split()])
                elif any(names_file(lst, f) for f in track.fetched):
                    src = next(track.fetched[f] for f in track.fetched if names_file(lst, f))
                    track.clear_from(src)
                else:  # a list we cannot read: assume it names what is pending
                    track.pending.clear()
            return
        if cmd.name in SIGNATURE_TOOLS or cmd.name in CHECKSUM_TOOLS:
            named = [resolve(w.value) for w in cmd.args if not w.value.startswith("-")]
            # `gpg --verify x.tar.gz.asc` checks x.tar.gz
            named += [re.sub(r"\.(asc|sig|sign|gpg|minisig|sigstore|bundle)$", "", n)
                      for n in named]
            track.clear(named)
            return
        for file in list(track.pending):
            if mentions(cmd, file, resolve) is not None:
                track.pending.pop(file)
