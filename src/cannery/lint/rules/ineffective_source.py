from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Edit, Finding, Fix, Severity
from cannery.lint.rule import LintContext, Rule

# Commands that cannot make use of environment a source or export just set.
INERT = {"rm", "echo", "true", ":", "printf", "ls", "cd", "apt-get", "apt", "sync", "df", "du"}


def _inert(cmd) -> bool:  # type: ignore[no-untyped-def]
    if cmd.name == "pip" and cmd.argv[:2] == ["cache", "purge"]:
        return True
    if cmd.name in ("apt-get", "apt"):
        return cmd.subcommand() in ("clean", "autoclean")
    return cmd.name in INERT


class IneffectiveSource(Rule):
    """## What it does
    Finds `source FILE` (or `. FILE`) and `export VAR=…` in a `RUN` after which nothing in
    that `RUN` could use them: only clean-up (`rm`, `apt-get clean`, `pip cache purge`) or
    nothing at all follows.

    ## Why is this bad?
    It reads as if it set up the environment for the image, but the shell exits right after:
    the step does nothing. It usually marks a missing `ENV` (see env-not-persisted).

    ## Example
    ```dockerfile
    RUN bash toolkit.run --install && source /usr/local/Ascend/ascend-toolkit/set_env.sh
    ```

    ## Use instead
    ```dockerfile
    RUN bash toolkit.run --install
    ENV ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-8.5.2
    ```

    The fix drops a trailing `source` when it is the last command of the step.
    """

    name = "ineffective-source"
    code = "CD010"
    severity = Severity.WARNING
    targets = ("dockerfile",)
    fix = "safe"

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            s = inst.script
            if s is None:
                continue
            top = [c for c in s.commands if not c.in_substitution]
            for cmd in top:
                if cmd.name not in ("source", ".") or not cmd.args:
                    continue
                after = [c for c in top if c.index > cmd.index]
                if all(_inert(c) for c in after):
                    fix = self._fix(facts, inst, cmd) if not after else None
                    yield self.at(facts.path, cmd.pos, f"{cmd.name} {cmd.args[0].value}: nothing "
                                  "after it in this RUN uses the environment it sets",
                                  hint="drop it, and persist what the image needs with ENV",
                                  fix=fix)
            for a in s.assignments:
                if not a.exported:
                    continue
                after = [c for c in top if c.index >= a.index]
                if all(_inert(c) for c in after) and not any(
                        n == a.name and p.line > a.pos.line for n, p in s.expansions):
                    yield self.at(facts.path, a.pos, f"export {a.name}: nothing after it in this "
                                  "RUN uses it", hint="drop it, or persist it with ENV")

    def _fix(self, facts: DockerfileFacts, inst, cmd) -> Fix | None:  # type: ignore[no-untyped-def]
        """Remove ``<op> source FILE`` at the end of the RUN (the operator before it too)."""
        if inst.heredoc:
            return None
        text = facts.text
        i = cmd.start - 1
        # walk back over whitespace and line continuations to the operator
        while i >= inst.start and (text[i] in " \t\n" or (text[i] == "\\" and text[i + 1] == "\n")):
            i -= 1
        if text[i - 1 : i + 1] == "&&":
            op_start = i - 1
        elif text[i] == ";":
            op_start = i
        else:
            return None
        # keep text up to the operator, trim trailing whitespace before it
        start = op_start
        while start > inst.start and text[start - 1] in " \t":
            start -= 1
        end = cmd.end
        # swallow trailing ';' and spaces up to end of the instruction
        rest = text[end : inst.end]
        if rest.strip(" \t;") != "":
            return None
        end = inst.end
        edit = Edit(start, end, "")
        return Fix(f"drop trailing {cmd.name} {cmd.args[0].value}", (edit,), safe=True)
