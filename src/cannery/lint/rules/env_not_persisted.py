from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

from cannery.knowledge import env_script_vars
from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

INSTALLER = lazy_re(r"Ascend-cann-(toolkit|nnal)_", re.I)


class EnvNotPersisted(Rule):
    """## What it does
    Finds environment set up inside a `RUN` that later instructions or the running container
    need, with no `ENV` persisting it: CANN's or ATB's `set_env.sh` sourced after installing a
    toolkit, or a variable exported in one `RUN` and read (`$VAR`) by a later one.

    ## Why is this bad?
    Each `RUN` is a new shell: what it sources or exports is gone in the next step and in
    `docker run`. The image then runs with the base's toolkit paths (or none), which shows up
    only on the NPU host as a missing library or the wrong CANN.

    ## Example
    ```dockerfile
    RUN bash Ascend-cann-toolkit_8.5.2_linux-x86_64.run --install && \\
        source /usr/local/Ascend/ascend-toolkit/set_env.sh
    ```

    ## Use instead
    ```dockerfile
    ENV ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-8.5.2 \\
        LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}
    ```
    (every variable set_env.sh sets; `cannery render` writes them from the catalog)
    """

    name = "env-not-persisted"
    code = "CD009"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            insts = stage.instructions
            installs_toolkit = any(
                i.script is not None and INSTALLER.search(i.script.text) for i in insts)
            # each name → the last ENV setting it, and the instructions (all, and RUNs) that
            # read it as $NAME or ${NAME…}: one pass over the stage, then lookups (it was
            # quadratic: every RUN rescanned every later instruction)
            last_env: dict[str, int] = {}
            readers: dict[str, list[Instruction]] = {}
            run_readers: dict[str, list[Instruction]] = {}
            for i in insts:
                if i.keyword == "ENV":
                    last_env.update((p.key, i.index) for p in i.pairs)
                if "$" in i.original:
                    for name in dict.fromkeys(REF.findall(i.original)):
                        readers.setdefault(name, []).append(i)
                        if i.keyword == "RUN":
                            run_readers.setdefault(name, []).append(i)
            defined = {p.key for i in insts if i.keyword in ("ENV", "ARG") for p in i.pairs}
            for inst in insts:
                if inst.script is None:
                    continue
                for cmd in inst.script.commands:
                    if cmd.name not in ("source", ".") or not cmd.args:
                        continue
                    path = cmd.args[0].value
                    known = env_script_vars(path)
                    if known is None:
                        continue
                    key = known[0]
                    if last_env.get(key, -1) > inst.index:
                        continue  # a later ENV persists it
                    reader = _first_after(readers, key, inst, insts)
                    if not installs_toolkit and reader is None:
                        continue
                    need = (f"line {reader.line} reads ${key}" if reader else
                            "the running container needs it")
                    yield self.at(facts.path, cmd.pos,
                                  f"{path} sets {', '.join(known[:4])}… only for this RUN; "
                                  f"{need}, and no ENV persists it",
                                  hint="persist the variables with ENV")
                for a in inst.script.assignments:
                    if not a.exported or last_env.get(a.name, -1) > inst.index:
                        continue
                    reader = _first_after(run_readers, a.name, inst, insts, "RUN")
                    if reader is not None and a.name not in defined:
                        yield self.at(facts.path, a.pos,
                                      f"export {a.name} lasts only for this RUN, but line "
                                      f"{reader.line} reads ${a.name}",
                                      hint=f"ENV {a.name}=… (or export it in that RUN)")


# `$NAME` or `${NAME…}`: every name a text reads, in one pass
REF = lazy_re(r"\$\{?(\w+)")
WORD = lazy_re(r"\w+")


def _first_after(readers: dict[str, list[Instruction]], name: str, inst: Instruction,
                 insts: list[Instruction], keyword: str | None = None) -> Instruction | None:
    """The first instruction after ``inst`` that reads ``name`` (a RUN, with ``keyword``)."""
    if WORD.fullmatch(name) is None:  # not a word: no index holds it; look as before
        return next((i for i in insts if i.index > inst.index and keyword in (None, i.keyword)
                     and re.search(rf"\$\{{?{re.escape(name)}\b", i.original)), None)
    found = readers.get(name, [])
    at = bisect_right(found, inst.index, key=lambda i: i.index)
    return found[at] if at < len(found) else None
