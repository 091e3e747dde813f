from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.workflow import Value, WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._cann import INSTALLER
from cannery.lint.rules._workflow import dockerfiles, expand_env, split_list

VERSION = lazy_re(r"(?<![\d.])(\d+\.\d+\.(?:\d+|rc\d+|RC\d+))(?![\d.])")
CHIP = lazy_re(r"-(910b|a3|310p|950)-", re.I)
BASE = lazy_re(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.I | re.M)


def _given(text: str, args: dict[str, str] | None) -> str:
    """``text`` with each `ARG NAME=default` the build gives a value for set to that value
    (`build-args:`, a bake target's `args`), as the build sees it."""
    if not args:
        return text
    return re.sub(r"^(\s*ARG\s+)(\w+)(=\S*)?",
                  lambda m: (f"{m.group(1)}{m.group(2)}={args[m.group(2)]}"
                             if m.group(2) in args else m.group(0)), text, flags=re.M)


def dockerfile_versions(text: str, args: dict[str, str] | None = None
                        ) -> tuple[str | None, str | None]:
    """(effective CANN version, chip) of a Dockerfile: an installed toolkit wins over the base.
    ``args``: the build args the build gives."""
    text = _given(text, args)
    base = BASE.findall(text)
    base_ref = base[0] if base else ""
    v = None
    m = re.search(r"cann[^:/]*:(\d+\.\d+\.(?:\d+|rc\d+|RC\d+))", base_ref, re.I)
    if m:
        v = m.group(1)
    args = dict(re.findall(r"^\s*ARG\s+(\w+)=[\"']?([^\s\"']+)", text, re.M))
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)
    inst = [m.group("v") for m in INSTALLER.finditer(expanded)]
    if inst:
        v = inst[-1]
    c = CHIP.search(base_ref)
    return (v.lower() if v else None), (c.group(1).lower() if c else None)


NUM = r"(\d+(?:\.\d+)+(?:[.-]?post\d+|rc\d+)?)"
# what a tag says: name → pattern on the tag's name part (after the last `:`)
TAG_PARTS = {
    "CANN": lazy_re(r"(?:^|[-_])cann[-_]?v?(\d+\.\d+\.(?:\d+|rc\d+))(?![\d.])", re.I),
    "Python": lazy_re(r"(?:^|[-_])py(?:thon)?(\d+\.\d+)(?![\d])", re.I),
    "torch_npu": lazy_re(r"(?:^|[-_])(?:torch[_-]?npu|pta)[_-]?v?" + NUM, re.I),
    "torch": lazy_re(r"(?:^|[-_])(?:torch|pt)(?![_-]?npu)[_-]?v?" + NUM, re.I),
    "vllm-ascend": lazy_re(r"(?:^|[-_])vllm[-_]ascend[-_]?v?" + NUM, re.I),
    "vllm": lazy_re(r"(?:^|[-_])vllm(?![-_]?ascend)[-_]?v?" + NUM, re.I),
}
# what a Dockerfile installs (after ARG substitution); the last one wins
FILE_PARTS = {
    "Python": lazy_re(r"(?:\bpython[=:]|[-_]py|PYTHON_VERSION=[\"']?)(\d+\.\d+)(?![\d])",
                      re.I),
    "torch_npu": lazy_re(r"\btorch[_-]npu==" + NUM, re.I),
    "torch": lazy_re(r"\btorch==" + NUM, re.I),
    "vllm-ascend": lazy_re(r"\bvllm[_-]ascend==" + NUM + r"|--branch[= ]+v?" + NUM
                           + r"\s+\S*/vllm-ascend(?:\.git)?\b|\bVLLM_ASCEND_(?:VERSION|TAG)"
                           r"=[\"']?v?" + NUM, re.I),
    "vllm": lazy_re(r"\bvllm==" + NUM + r"|--branch[= ]+v?" + NUM
                    + r"\s+\S*/vllm(?:\.git)?(?![\w-])|\bVLLM_(?:VERSION|TAG)=[\"']?v?"
                    + NUM, re.I),
}


def said_versions(name: str) -> tuple[str | None, dict[str, str]]:
    """(CANN version, other versions by name) that a tag's name part says. CANN is the
    explicit `cann…` token, else the first version that no other part claims."""
    said: dict[str, str] = {}
    taken: list[tuple[int, int]] = []
    for what, pattern in TAG_PARTS.items():
        m = pattern.search(name)
        if m is not None:
            said[what] = m.group(1)
            taken.append(m.span())
    cann = said.pop("CANN", None)
    if cann is None:
        for m in VERSION.finditer(name):
            if not any(a < m.end() and m.start() < b for a, b in taken):
                cann = m.group(1)
                break
    return cann, said


def installed(text: str, given: dict[str, str] | None = None) -> dict[str, str]:
    """Python, torch and torch_npu versions a Dockerfile sets up (ARG defaults, or the build
    args ``given``, substituted)."""
    text = _given(text, given)
    args = dict(re.findall(r"^\s*(?:ARG|ENV)\s+(\w+)=[\"']?([^\s\"']+)", text, re.M))
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)
    out = {}
    for what, pattern in FILE_PARTS.items():
        found = [next(g for g in m.groups() if g) for m in pattern.finditer(expanded)]
        if found:
            out[what] = found[-1].lower()
    return out


def same_version(said: str, built: str) -> bool:
    """`2.9` in a tag agrees with 2.9.0 installed, `2.9.0` with 2.9.0.post1 (a tag may leave
    the post release out) but `2.9.0.post2` not with 2.9.0.post1; `-post1` is `.post1`; a
    local label (+cpu) is ignored."""
    def norm(v: str) -> str:
        return re.sub(r"[-_]?post", ".post", v.split("+")[0].lower()).replace("..", ".")

    said, built = norm(said), norm(built)
    return built == said or built.startswith(said + ".")


class TagVersionMismatch(Rule):
    """## What it does
    Compares the tag a workflow pushes with the Dockerfile it builds, for every version the
    tag names: the CANN version (`cann8.3.rc1`, or the first version no other part of the
    tag claims: `verl-8.5.2-910b-…`) against the toolkit the Dockerfile installs (or its
    base ships), the chip token against the base image's, and `py3.11`, `torch2.9.0`,
    `torch_npu2.9.0.post1` (or `pta…`, `-post1` alike), `vllm0.11.0` and
    `vllm-ascend-v0.11.0rc1` against the Python of the base or the install, the
    `torch==`/`torch_npu==`/`vllm==`/`vllm-ascend==` pins, the `--branch` of a vllm or
    vllm-ascend clone and `VLLM_VERSION`/`VLLM_ASCEND_VERSION`. A tag that leaves a post
    release out (`torch_npu2.9.0` for `2.9.0.post1`) agrees; one that names another does
    not, nor one that gives a package another's suffix (`torch2.9.0post2` over `torch==2.9.0`
    and `torch_npu==2.9.0.post2`). The tags read are the build step's, the build job's
    `docker … -t`, and those of a job that merges what that one job built (it `needs` that
    build job and no other).

    ## Why is this bad?
    A tag is the only thing users read. A `8.5.2` tag on an image that still runs CANN 8.5.1
    (the upgrade step was dropped, or the base was bumped without the tag) sends people
    debugging the wrong toolkit.

    ## Example
    ```yaml
    tags: quay.io/ascend/verl:verl-8.5.2-910b-ubuntu22.04-py3.11
    file: docker/Dockerfile.ascend_8.5.1_a2   # FROM cann:8.5.1-910b-…, no toolkit upgrade
    ```

    ## Use instead
    Derive the tag from the same data as the Dockerfile (`cannery render` writes both).
    """

    name = "tag-version-mismatch"
    code = "CW004"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        found = list(dockerfiles(facts, ctx, runs=True))
        builders = {b.job.id for b, _, _ in found}
        for b, file, name in found:
            text = ctx.read(name)  # None outside the repository: path-outside-repository
            if text is None:
                continue
            version, chip = dockerfile_versions(text, b.args)
            others = installed(text, b.args)
            tags: list[Value] = []
            if b.tags is not None:
                tags.append(b.tags)
            tags += [v for k, v in facts.env.items() if "TAG" in k.upper()]
            # the job itself, and a job that merges what only this job built (`needs` it and
            # no other build job: `docker buildx imagetools create -t …` of its digests)
            mergers = [j for j in facts.jobs
                       if b.job.id in j.needs and len(set(j.needs) & builders) == 1]
            for job in [b.job, *mergers]:
                for job_step in job.steps:
                    if job_step.run is None:
                        continue
                    for cmd in job_step.run.commands:
                        w = cmd.flag_value("-t", "--tag")
                        if w is not None and cmd.name == "docker":
                            tags.append(Value(w.value, w.pos.line, w.pos.column))
            for tag in tags:
                for t in split_list(expand_env(tag.text, facts, b.job, b.step)):
                    name = t.rsplit(":", 1)[-1] if ":" in t else t
                    cann, said = said_versions(name)
                    if cann and version and cann.lower() != version:
                        yield self.finding(facts.path, tag.line, tag.column,
                                           f"tag says CANN {cann} but {file.text} "
                                           f"builds CANN {version}",
                                           hint="derive the tag from the Dockerfile's inputs")
                    for what, value in said.items():
                        built = others.get(what)
                        if built and not same_version(value, built):
                            yield self.finding(facts.path, tag.line, tag.column,
                                               f"tag says {what} {value} but "
                                               f"{file.text} installs {what} {built}",
                                               hint="derive the tag from the Dockerfile's "
                                               "inputs")
                    tc = CHIP.search(f"-{name}-")
                    if tc and chip and tc.group(1).lower() != chip:
                        yield self.finding(facts.path, tag.line, tag.column,
                                           f"tag says chip {tc.group(1)} but {file.text} "
                                           f"starts from a {chip} base",
                                           hint="derive the tag from the Dockerfile's inputs")
