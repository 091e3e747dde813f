from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import basename, downloaded_file

CACHES = (
    (re.compile(r"^/var/lib/apt/lists"), ("apt-get", "apt"), "update", "the apt lists"),
    (re.compile(r"^/var/cache/(dnf|yum)"), ("dnf", "yum", "microdnf"), "install",
     "the dnf/yum cache"),
    (re.compile(r"^/root/\.cache/pip|^~/\.cache/pip|^\$HOME/\.cache/pip"), ("pip",), "install",
     "the pip cache"),
)


RPM_TOOLS = ("dnf", "yum", "microdnf")


def absolute(path: str, workdir: str) -> str:
    """A relative path as the instruction's WORKDIR makes it (a `cd` in the step is not
    followed; basenames are compared too)."""
    if path.startswith(("/", "~", "$")):
        return path.rstrip("/")
    return f"{workdir.rstrip('/')}/{path}".rstrip("/")


def _created(inst: Instruction) -> set[str]:
    out: set[str] = set()
    if inst.keyword in ("COPY", "ADD") and len(inst.value) >= 2:
        out.add(absolute(inst.value[-1], inst.workdir))
    if inst.script is None:
        return out
    for c in inst.script.commands:
        f = downloaded_file(c) if c.name in ("wget", "curl") else None
        if f:
            out.add(absolute(f, inst.workdir))
        if c.name == "git" and c.subcommand() == "clone":
            pos = [w.value for w in c.operands()]
            if len(pos) >= 2:
                out.add(absolute(pos[1], inst.workdir))
            elif pos:
                out.add(absolute(basename(pos[0]).removesuffix(".git"), inst.workdir))
    return out


class CleanupInLaterLayer(Rule):
    """## What it does
    Finds clean-up that runs in a later `RUN` than the one that made the files: `rm` of a
    file downloaded, cloned or copied by an earlier instruction, `apt-get clean` or
    `rm -rf /var/lib/apt/lists/*` in a step that ran no apt, `dnf`/`yum clean` or
    `rm -rf /var/cache/dnf` in a step that installed nothing, `pip cache purge` in a step
    that installed nothing. Only the stages that ship are checked (the last stage, or the
    configured `target`, and the stages it is built `FROM`): a builder stage's size does not
    reach the image through `COPY --from`.

    ## Why is this bad?
    Layers only add. The earlier layer keeps the files; deleting them later hides them but
    the image is just as large, and one more layer is pushed.

    ## Example
    ```dockerfile
    RUN curl -fsSLO https://example.com/big.run && bash big.run
    RUN rm -f big.run
    ```

    ## Use instead
    ```dockerfile
    RUN curl -fsSLO https://example.com/big.run && bash big.run && rm -f big.run
    ```
    """

    name = "cleanup-in-later-layer"
    code = "CD007"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.shipping(ctx.target):
            made: dict[str, int] = {}
            for inst in stage.instructions:
                if inst.script is not None:
                    subs = {(c.name, c.subcommand()) for c in inst.script.commands}
                    for c in inst.script.commands:
                        if c.name == "rm":
                            for w in c.positional():
                                target = absolute(w.value, inst.workdir)
                                if target in made or basename(target) in made:
                                    line = made.get(target) or made[basename(target)]
                                    yield self.at(facts.path, w.pos, f"{w.value} was created by "
                                                  f"the instruction at line {line}; removing it "
                                                  "in a later layer does not shrink the image",
                                                  hint="remove it in the step that creates it")
                                for rx, tools, sub, what in CACHES:
                                    if rx.match(target) and not any(
                                            (t, sub) in subs for t in tools):
                                        yield self.at(facts.path, w.pos, f"clearing {what} in a "
                                                      "step that did not fill them: the layer "
                                                      "that did keeps them",
                                                      hint="clean up in the same RUN")
                        elif c.name in ("apt-get", "apt") and c.subcommand() == "clean" and not (
                                {("apt-get", "install"), ("apt", "install")} & subs):
                            yield self.at(facts.path, c.pos, "apt-get clean in a step that "
                                          "installed nothing: the earlier layer keeps its cache")
                        elif c.name in RPM_TOOLS and c.subcommand() == "clean" and not (
                                {(t, "install") for t in RPM_TOOLS} & subs):
                            yield self.at(facts.path, c.pos, f"{c.name} clean in a step that "
                                          "installed nothing: the earlier layer keeps its cache",
                                          hint="clean up in the same RUN")
                        elif (c.name == "pip" and c.argv[:2] == ["cache", "purge"]
                              and ("pip", "install") not in subs):
                            yield self.at(facts.path, c.pos, "pip cache purge in a step that "
                                          "installed nothing: the earlier layer keeps its cache",
                                          hint="use pip install --no-cache-dir")
                for path in _created(inst):
                    made.setdefault(path, inst.line)
                    made.setdefault(basename(path), inst.line)
