from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import pip_packages

PINNED = lazy_re(r"^\s*(===?\s*[^*,;\s]+\s*(;.*)?|@\s*\S+)$")  # ==1.2 / ===x / @ URL
TOOLS = {"pip", "setuptools", "wheel", "packaging"}  # packaging tools: reported as info
LOCKISH = lazy_re(r"lock|constraint|pinned|frozen|hashes", re.I)


class UnpinnedPipRequirement(Rule):
    """## What it does
    Finds `pip install NAME` in an image build where NAME has no exact version (`==`), or
    only a range (`>=`, `~=`), and `pip install -r FILE` with neither a constraints file
    (`-c`) nor `--require-hashes` (unless FILE is itself a lock file by name). Installs
    constrained by `-c`, `--require-hashes`, local paths and wheels, and URLs are not
    reported; `git+` URLs are `unpinned-git-ref`'s. Upgrading pip, setuptools or wheel
    (or packaging) themselves is reported as info.

    ## Why is this bad?
    The image gets whatever was newest on the day of the build: two builds of the same
    Dockerfile differ, and a release upstream (a new transformers, a numpy 2) breaks an image
    that nobody changed.

    ## Example
    ```dockerfile
    RUN pip install --no-cache-dir transformers accelerate>=1.0
    ```

    ## Use instead
    ```dockerfile
    RUN pip install --no-cache-dir transformers==4.57.1 accelerate==1.13.0
    ```
    or `pip install -c constraints.txt …`, or a requirements file with `--require-hashes`.
    """

    name = "unpinned-pip-requirement"
    code = "CD026"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for _inst, cmd in facts.commands():
            if cmd.name != "pip" or cmd.subcommand() != "install":
                continue
            if cmd.flag_value("-c", "--constraint") is not None or cmd.has_flag(
                    "--require-hashes") or "$" in " ".join(w.text for w in cmd.args
                                                            if w.value.startswith("-c")):
                continue
            loose = [(name, spec, w) for name, spec, w in pip_packages(cmd)
                     if not PINNED.match(spec) and "$" not in w.value]
            if loose:
                names = ", ".join(w.value for _n, _s, w in loose)
                tools_only = all(n in TOOLS for n, _s, _w in loose)
                yield self.at(
                    facts.path, loose[0][2].pos,
                    f"pip install {names}: no exact version, so each build installs whatever "
                    "is newest", severity=Severity.INFO if tools_only else None,
                    hint="pin NAME==VERSION, or install with -c constraints.txt")
            req = cmd.flag_value("-r", "--requirement")
            if req is not None and not LOCKISH.search(req.value):
                yield self.at(facts.path, req.pos, f"pip install -r {req.value} with no "
                              "constraints file or hashes: unpinned lines resolve at build "
                              "time", severity=Severity.INFO,
                              hint="add -c constraints.txt, or --require-hashes with hashes")
