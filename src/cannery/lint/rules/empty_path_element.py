from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Pair
from cannery.lint.model import Confidence, Edit, Finding, Fix, Severity
from cannery.lint.rule import LintContext, Rule

PATH_VARS = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
             "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "MANPATH",
             "ASCEND_CUSTOM_OPP_PATH", "LD_PRELOAD", "CLASSPATH", "GOPATH", "PERL5LIB"}


def _ref(name: str) -> str:
    return rf"\$(?:\{{{name}\}}|{name}\b)"


def _unguarded(key: str, raw: str) -> str:
    """``raw`` with ``${KEY:+…}`` and ``${KEY:-default}`` forms blanked out (they are safe)."""
    return re.sub(r"\$\{" + key + r":[+-](?:[^{}]|\$\{[^}]*\})*\}", "GUARDED", raw)


UNSET = "unset"  # what problem() says of `X=/new:$X` where X is not known to be set


def problem(key: str, raw: str, known_set: bool) -> str | None:
    """Why ``raw`` (an ENV/export value of ``key``) may hold an empty element, or None."""
    if key not in PATH_VARS:
        return None
    v = _unguarded(key, raw.strip("\"'"))
    if v.startswith(":") or v.endswith(":") or "::" in v:
        return "a literal empty element"
    if known_set:
        return None
    if re.search(":" + _ref(key) + r"(?!\w)", v) or re.search("^" + _ref(key) + ":", v):
        return UNSET
    return None


def rewrite(key: str, raw: str) -> str | None:
    """a:$X → a${X:+:$X}; $X:a → ${X:+$X:}a (keeping the original reference text)."""
    m = re.search(r":(" + _ref(key) + r")(?!\w)", raw)
    if m:
        ref = m.group(1)
        return raw[: m.start()] + "${" + key + ":+:" + ref + "}" + raw[m.end() :]
    m = re.search(r"^([\"']?)(" + _ref(key) + "):", raw)
    if m:
        ref = m.group(2)
        return m.group(1) + "${" + key + ":+" + ref + ":}" + raw[m.end() :]
    return None


class EmptyPathElement(Rule):
    """## What it does
    Finds search-path variables (`PATH`, `LD_LIBRARY_PATH`, `PYTHONPATH`, …) written as
    `X=/new:$X` where `X` may be unset, or with a literal leading, trailing or doubled `:`.
    A variable is known to be set when an earlier `ENV` sets it or the base image does
    (`base-image-env`; CANN bases persist what `set_env.sh` exports; manylinux2014,
    manylinux_2_28 and _2_34 set `LD_LIBRARY_PATH`, the others set it empty). `PATH` is
    always set: builders give every image a default one. On a base listed there
    (distribution bases such as `ubuntu` are, and NVIDIA's `nvidia/cuda`) `X=/new:$X` is
    reported with high confidence, naming the base. On a base lint does not know, which may
    set anything, it is reported with low confidence, naming the base and saying that lint
    does not know its config: hidden unless `--min-confidence low` (on files from projects
    lint was not tuned on, most such reports over NGC, sglang or TensorRT-LLM bases were
    variables the base sets). List what such a base sets under `base-image-env` to settle
    it either way. A literal empty element is reported on any base.

    ## Why is this bad?
    An empty element means "the current directory": `python` then imports from wherever the
    container happens to run, and the loader searches the working directory for libraries.

    ## Example
    ```dockerfile
    ENV LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/lib64:$LD_LIBRARY_PATH
    ```

    ## Use instead
    ```dockerfile
    ENV LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ```
    """

    name = "empty-path-element"
    code = "CD011"
    severity = Severity.WARNING
    targets = ("dockerfile",)
    fix = "safe"

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            image = stage.root.image
            # every image has PATH (builders give one when the config has none); a known
            # base sets what its base-image-env entry lists, an unknown one may set anything
            known = ctx.env_of_base(image)
            set_before: set[str] = {"PATH"} | (known or set())
            for inst in stage.instructions:
                if inst.keyword == "ENV":
                    for pr in inst.pairs:
                        yield from self._pair(facts.path, pr, set_before, image,
                                              known is not None)
                    set_before.update(pr.key for pr in inst.pairs)
                elif inst.script is not None:
                    for a in inst.script.assignments:
                        if a.value is None:
                            continue
                        why = problem(a.name, a.value.text, a.name in set_before)
                        if why:
                            yield self.at(facts.path, a.pos,
                                          _worded(a.name, why, image, known is not None),
                                          hint=f"use ${{{a.name}:+:${a.name}}}",
                                          confidence=_confidence(why, known is not None))

    def _pair(self, path: str, pr: Pair, set_before: set[str], image: str,
              known_base: bool) -> Iterator[Finding]:
        why = problem(pr.key, pr.raw, pr.key in set_before)
        if not why:
            return
        new = rewrite(pr.key, pr.raw)
        fix = None
        # offered only when it removes the problem (a literal `::` stays)
        if new is not None and problem(pr.key, new, False) is None:
            vstart = pr.end - len(pr.raw)
            fix = Fix(f"guard ${pr.key} with ${{{pr.key}:+…}}", (Edit(vstart, pr.end, new),),
                      safe=True)
        yield self.finding(path, pr.line, pr.column,
                           f"{_worded(pr.key, why, image, known_base)} (an empty element "
                           "means the current directory)",
                           end_column=pr.column + len(pr.key), fix=fix,
                           hint=f"use ${{{pr.key}:+:${pr.key}}}",
                           confidence=_confidence(why, known_base))


def _confidence(why: str, known_base: bool) -> Confidence:
    """Low only for `X=/new:$X` over a base lint does not know: that base may set ``X``."""
    return Confidence.LOW if why == UNSET and not known_base else Confidence.HIGH


def _worded(key: str, why: str, image: str, known_base: bool) -> str:
    """The message; of `X=/new:$X`, the base it is sure does not set ``key``, or the base
    whose config it does not know."""
    if why != UNSET:
        return f"{key}: {why}"
    if not known_base:
        return (f"{key}: ${key} is empty here unless the base image {image} sets it, and "
                "cannery does not know that base's config")
    return (f"{key}: ${key} is unset or empty in {image} and not set earlier in the stage, "
            "so this leaves an empty element")
