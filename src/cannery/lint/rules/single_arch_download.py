from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, expand
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity, Span
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import DOWNLOADERS, basename, url_of
from cannery.lint.rules._workflow import builds, expand_env, split_list
from cannery.lint.rules.arch_dispatch_no_fallback import ARCH_SUBJECT

ARCH = lazy_re(r"(?<![A-Za-z0-9])(x86_64|aarch64|amd64|arm64)(?![A-Za-z0-9])")


def _leg_value(text: str, leg: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}",
                  lambda m: leg.get(m.group(1), m.group(0)), text)


def _targets(wf: WorkflowFacts, ctx: LintContext) -> dict[tuple[str, int, int], set[str]]:
    """(Dockerfile name, line, column to report at) → platforms built, per build across its
    matrix legs (`file: ${{ matrix.dockerfile }}` too): build steps, bake targets and every
    `docker buildx build --platform A,B -f FILE` of a `run:` step (see _workflow.builds)."""
    out: dict[tuple[str, int, int], set[str]] = {}
    for b in builds(wf, ctx, runs=True):
        if b.platforms is None:
            continue
        for leg in b.job.legs or [{}]:
            plats = {p for p in split_list(_leg_value(b.platforms.text, leg)) if "${{" not in p}
            name = (_leg_value(expand_env(b.file.text, wf, b.job, b.step), leg)
                    if b.file is not None else "Dockerfile")
            if "${{" in name or "$" in name or not plats:
                continue
            out.setdefault((name, b.platforms.line, b.platforms.column), set()).update(plats)
    return out


def single_arch_downloads(facts: DockerfileFacts) -> Iterator[tuple[int, str, str]]:
    """(line, file, arch) of each download named for one architecture with no dispatch on
    the target architecture around it."""
    for inst in facts.instructions:
        if inst.stage is None:
            continue
        urls: list[tuple[int, str]] = []
        if inst.keyword == "ADD":
            urls = [(inst.line, v) for v in inst.value[:-1] if "://" in v]
        elif inst.script is not None:
            arch_spans = [(b.pos.line, b.pos.end_line) for b in inst.script.branches
                          if ARCH_SUBJECT.search(b.subject)]
            for cmd in inst.script.commands:
                if cmd.name not in DOWNLOADERS:
                    continue
                if any(a <= cmd.pos.line <= z for a, z in arch_spans):
                    continue  # inside an if/case on the architecture
                url = url_of(cmd)
                if url is None:
                    raw = next((w.value for w in cmd.args if "://" in w.value), None)
                    if raw is None:
                        continue
                    urls.append((cmd.pos.line, raw))
                else:
                    urls.append((cmd.pos.line, url.value))
        for line, raw in urls:
            if ARCH_SUBJECT.search(raw) and "$" in raw:
                continue  # the arch comes from a variable: $TARGETARCH, $(uname -m), ${ARCH}
            m = ARCH.search(basename(expand(raw, inst.stage.instructions, inst.index)))
            if m:
                yield line, basename(raw), m.group(1)


class SingleArchDownload(Rule):
    """## What it does
    Finds a workflow that builds a Dockerfile for several platforms — in one build step,
    across the legs of a matrix (`file:` and `platforms:` from `matrix`), or with `docker
    buildx build --platform A,B -f FILE` — while the Dockerfile downloads an artifact named
    for one architecture (`…_linux-x86_64.run`, `…-arm64.tar.gz`)
    with no dispatch on the target architecture (an `if`/`case` on `uname -m` or
    `$TARGETARCH`, or the arch taken from a variable in the URL).

    The Dockerfile is looked up under the workflow's repository root, or else among the
    Dockerfiles linted in the same run, whatever their directory (the one whose path ends
    with the name the workflow gives).

    ## Why is this bad?
    Every platform gets the same binary: the arm64 image carries an x86_64 toolkit that fails
    at its first use (`exec format error`), or the installer refuses to run and only that
    platform's build breaks.

    ## Example
    ```dockerfile
    RUN wget https://example.com/Ascend-cann-toolkit_8.5.2_linux-x86_64.run
    ```
    built by a workflow with `platforms: linux/amd64,linux/arm64`.

    ## Use instead
    ```dockerfile
    ARG TARGETARCH
    RUN case "$TARGETARCH" in amd64) a=x86_64 ;; arm64) a=aarch64 ;; *) exit 1 ;; esac && \\
        wget "https://example.com/Ascend-cann-toolkit_8.5.2_linux-${a}.run"
    ```
    """

    name = "single-arch-download"
    code = "CW008"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        from cannery.lint.bases import DEFAULT_SHELLS
        from cannery.lint.facts import ParseFailure
        from cannery.lint.facts.dockerfile import parse_dockerfile

        for (name, at_line, at_column), plats in _targets(facts, ctx).items():
            if len(plats) < 2:
                continue
            named = ctx.find_dockerfile(name)
            if named is None:
                continue
            found, text = named
            try:
                df = parse_dockerfile(found, text, DEFAULT_SHELLS)
            except ParseFailure:
                continue
            for line, artifact, arch in single_arch_downloads(df):
                yield self.finding(
                    facts.path, at_line, at_column,
                    f"{name} downloads {artifact} (line {line}), built for {arch} only, "
                    f"with no dispatch on the target arch, but this builds "
                    f"{', '.join(sorted(plats))}",
                    hint="pick the artifact by $TARGETARCH (or uname -m) in the Dockerfile",
                    related=((Span(found, line, 1, line, 0), "the download"),))
