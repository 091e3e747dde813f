from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, Pair
from cannery.lint.fixes import delete_instruction, insert_before_script, replace_pairs
from cannery.lint.model import Finding, Fix, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import builds_from_source

LOW = 4  # at most this many jobs is a throttle; more is a fixed count (reported as info)
THROTTLES = ("MAX_JOBS", "MAKEFLAGS", "CMAKE_BUILD_PARALLEL_LEVEL", "NINJAFLAGS",
             "NPY_NUM_BUILD_JOBS", "CARGO_BUILD_JOBS", "BAZEL_JOBS", "NVCC_THREADS")


def _is_throttle(key: str, value: str | None) -> bool:
    if key not in THROTTLES or value is None:
        return False
    if key in ("MAKEFLAGS", "NINJAFLAGS"):
        return bool(re.search(r"-j\s*\d+|--jobs", value))
    return bool(re.fullmatch(r"\s*\d+\s*", value))


def _compiles(inst: Instruction) -> bool:
    return inst.script is not None and any(builds_from_source(c) for c in inst.script.commands)


class GlobalBuildThrottle(Rule):
    """## What it does
    Finds build-parallelism limits (`MAX_JOBS`, `MAKEFLAGS=-jN`, `CMAKE_BUILD_PARALLEL_LEVEL`,
    …) set with `ENV`, where they apply to every later step and to every user of the image.
    A low limit (at most 4 jobs) is a warning; a higher fixed count is info.

    ## Why is this bad?
    A limit added to dodge one out-of-memory compile (vllm-ascend's kernels) throttles every
    other build in the file to the same job count, and ships in the image: whoever builds an
    extension in the container later gets one job too.

    ## Example
    ```dockerfile
    ENV MAX_JOBS=1
    RUN pip install -v -e vllm-ascend
    ```

    ## Use instead
    ```dockerfile
    RUN MAX_JOBS=1 pip install -v -e vllm-ascend
    ```

    The fix moves the variables into each later `RUN` that compiles (as `export …`), or
    drops them when no later step compiles.
    """

    name = "global-build-throttle"
    code = "CD005"
    severity = Severity.WARNING
    targets = ("dockerfile",)
    fix = "safe"

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.keyword != "ENV" or inst.stage is None:
                continue
            throttles = [pr for pr in inst.pairs if _is_throttle(pr.key, pr.value)]
            if not throttles:
                continue
            later = [i for i in inst.stage.instructions if i.index > inst.index and _compiles(i)]
            fix = self._fix(facts, inst, throttles, later)
            for pr in throttles:
                where = (f"line {later[0].line}" if len(later) == 1 else
                         f"{len(later)} build steps" if later else "no later build step")
                jobs = re.search(r"\d+", pr.value or "")
                low = jobs is None or int(jobs.group()) <= LOW
                effect = ("throttles every later step and every user of the image" if low else
                          "fixes the job count of every later step and every user of the image")
                yield self.finding(
                    facts.path, pr.line, pr.column,
                    f"ENV {pr.key}={pr.value} {effect} (it is needed by {where})",
                    end_column=pr.column + len(pr.key), fix=fix,
                    hint=f"set {pr.key} only in the RUN that needs it",
                    severity=None if low else Severity.INFO,
                )

    def _fix(self, facts: DockerfileFacts, inst: Instruction, throttles: list[Pair],
             later: list[Instruction]) -> Fix | None:
        if any(i.json or i.heredoc for i in later):
            return None
        exports = "export " + " ".join(f"{pr.key}={_q(pr.value)}" for pr in throttles)
        edits = []
        keep = [pr for pr in inst.pairs if pr not in throttles]
        edits.append(replace_pairs(facts, inst, keep) if keep else delete_instruction(facts, inst))
        for target in later:
            edits.append(insert_before_script(facts, target, exports + " && "))
        what = ("moved into " + ", ".join(f"line {t.line}" for t in later)) if later else "dropped"
        return Fix(f"{', '.join(pr.key for pr in throttles)} {what}", tuple(edits), safe=True)


def _q(value: str | None) -> str:
    v = value or ""
    return v if re.fullmatch(r"[\w./:=+-]+", v) else "'" + v.replace("'", "'\\''") + "'"
