from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, Stage, expand
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._cann import BASE_VERSION, INSTALLER

_VERSION = r"\d+\.\d+\.(?:\d+|rc\d+)(?:[.-]\w+)*?"
# A toolkit tree named by its version: CANN >= 8.5's /usr/local/Ascend/cann-X, and the
# versioned directory of the older ascend-toolkit/ layout (ascend-toolkit/latest is a link).
# $X and ${X}, as expand() reads them
VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
TOOLKIT_PATH = lazy_re(
    r"/usr/local/Ascend/(?:cann-|ascend-toolkit/)(?P<v>" + _VERSION + r")(?=/|[\s\"':;]|$)", re.I)


class ToolkitPathVersion(Rule):
    """## What it does
    Finds a path into a CANN toolkit tree that names another version than the toolkit the
    stage has: the one its installer installs (`Ascend-cann-toolkit_9.0.1_…run`), else the
    one its base image's tag says it ships (`cann:9.0.1-…`). Paths are read in `ENV` values
    and in `RUN` commands, with `ARG`/`ENV` values substituted:
    `/usr/local/Ascend/cann-9.0.0/…` and the older layout's
    `/usr/local/Ascend/ascend-toolkit/9.0.0/…`.

    ## Why is this bad?
    That tree does not exist in the image: the variable or command points nowhere, and
    `import torch_npu` or a kernel build fails on the cluster, not in the build. It happens
    when a base or installer is bumped and a path written out by hand is not.

    ## Example
    ```dockerfile
    FROM quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.11
    ENV LD_LIBRARY_PATH=/usr/local/Ascend/cann-9.0.0/lib64:${LD_LIBRARY_PATH}
    ```

    ## Use instead
    ```dockerfile
    FROM quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.11
    ENV LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${LD_LIBRARY_PATH}
    ```
    (the base's `ASCEND_TOOLKIT_HOME` moves with it)
    """

    name = "toolkit-path-version"
    code = "CD027"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            has, where = _provided(stage)
            # what ARG and ENV have set so far, kept as the stage is read (expand() looking it
            # up again per word was quadratic: 8,000 ARGs took minutes)
            known: dict[str, str] = {}
            for inst in stage.instructions:
                installed = _installs(inst, stage)
                if installed is not None:  # from here on the stage has this one
                    has, where = installed, f"the installer at line {inst.line}"
                if has is not None:
                    yield from self._paths(facts.path, inst, has, where, known)
                if inst.keyword in ("ARG", "ENV"):
                    known.update({p.key: p.value for p in inst.pairs if p.value is not None})

    def _paths(self, path: str, inst: Instruction, has: str, where: str,
               known: dict[str, str]) -> Iterator[Finding]:
        def sub(m: re.Match[str]) -> str:
            return known.get(m.group(1) or m.group(2), m.group(0))

        def wrong(text: str) -> str | None:
            if "$" in text:
                text = VARIABLE.sub(sub, text)
            for m in TOOLKIT_PATH.finditer(text):
                if m.group("v").lower() != has:
                    return m.group("v")
            return None

        hint = "name the toolkit through ${ASCEND_TOOLKIT_HOME} (or the version the stage has)"
        if inst.keyword == "ENV":
            for pr in inst.pairs:
                v = wrong(pr.raw)
                if v is not None:
                    yield self.finding(path, pr.line, pr.column, _message(v, has, where),
                                       end_column=pr.column + len(pr.key), hint=hint)
        elif inst.script is not None:
            for a in inst.script.assignments:  # `export X=…`, `X=… cmd`
                v = wrong(a.value.text) if a.value is not None else None
                if v is not None:
                    yield self.at(path, a.pos, _message(v, has, where), hint=hint)
            for cmd in inst.script.commands:
                for w in cmd.args:
                    v = wrong(w.value)
                    if v is not None and "=" not in w.value.split("/", 1)[0]:
                        yield self.at(path, w.pos, _message(v, has, where), hint=hint)


def _message(named: str, has: str, where: str) -> str:
    return (f"this path names CANN {named}, but the stage's toolkit is {has} ({where}): "
            "that tree is not in the image")


def _provided(stage: Stage) -> tuple[str | None, str]:
    """The toolkit version a stage starts with, and where it comes from: its root's base image
    tag, then the last installer of the stages it is built FROM (root first)."""
    root = stage.root
    m = BASE_VERSION.search(root.image)
    has, where = (m.group("v").lower(), f"the base image at line {root.line}") if m else (None, "")
    earlier: list[Stage] = []
    s = stage.parent
    while s is not None:
        earlier.append(s)
        s = s.parent
    for s in reversed(earlier):
        for inst in s.instructions:
            v = _installs(inst, s)
            if v is not None:
                has, where = v, f"the installer at line {inst.line}"
    return has, where


def _installs(inst: Instruction, stage: Stage) -> str | None:
    """The toolkit version a RUN installs: one that runs a `.run` installer and names a toolkit
    installer of that version anywhere (downloaded under another name, `curl -o
    /tmp/toolkit.run …/Ascend-cann-toolkit_8.5.2_…run && bash /tmp/toolkit.run`, counts)."""
    if inst.script is None:
        return None
    found = None
    commands = [[cmd.name, *(w.value for w in cmd.args)] for cmd in inst.script.commands]
    if not any(words[0].endswith(".run") or (
            words[0] in ("bash", "sh") and any(w.endswith(".run") for w in words[1:]))
            for words in commands):
        return None  # (checked first: expanding every word of every RUN was quadratic)
    for words in commands:
        for w in words:
            m = INSTALLER.search(expand(w, stage.instructions, inst.index) if "$" in w else w)
            if m:
                found = m.group("v").lower()
    return found
