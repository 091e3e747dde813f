from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

ARCH_SUBJECT = lazy_re(r"ARCH|uname\s+-m|TARGETPLATFORM|dpkg\s+--print-architecture|arch\b",
                       re.I)
ARCH_NAMES = lazy_re(r"x86_64|aarch64|amd64|arm64")


class ArchDispatchNoFallback(Rule):
    """## What it does
    Finds an `if`/`elif` chain or `case` on the architecture (`$(uname -m)`, `$TARGETARCH`,
    `$ARCH`, …) with no `else` / `*)` branch.

    ## Why is this bad?
    On any other architecture (or a typo such as `arm64` vs `aarch64`) no branch runs, the
    step succeeds, and the image silently lacks the toolkit it was supposed to install.

    ## Example
    ```dockerfile
    RUN if [ "$(uname -m)" = "x86_64" ]; then ./install-x86.sh; \\
        elif [ "$(uname -m)" = "aarch64" ]; then ./install-arm.sh; fi
    ```

    ## Use instead
    ```dockerfile
    RUN case "$(uname -m)" in \\
          x86_64) ./install-x86.sh ;; aarch64) ./install-arm.sh ;; \\
          *) echo "unsupported arch $(uname -m)" >&2; exit 1 ;; esac
    ```
    """

    name = "arch-dispatch-no-fallback"
    code = "CD016"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.script is None:
                continue
            for b in inst.script.branches:
                if b.has_default:
                    continue
                # a dispatch names two architectures or more; `if x86_64 then extra` is not one
                names = set(ARCH_NAMES.findall(" ".join(b.labels) + " " + b.subject))
                if b.kind == "case":
                    arch = len(names) >= 2 or (bool(ARCH_SUBJECT.search(b.subject))
                                               and len(b.labels) >= 2)
                else:
                    arch = bool(ARCH_SUBJECT.search(b.subject)) and len(names) >= 2
                if arch:
                    what = "case" if b.kind == "case" else "if/elif"
                    yield self.at(facts.path, b.pos, f"{what} on the architecture has no "
                                  "fallback branch: another arch silently runs nothing",
                                  hint='add a branch that fails: *) echo "unsupported" >&2; '
                                  "exit 1")
