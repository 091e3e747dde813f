from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts.workflow import Value, WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import dockerfiles, expand_env, split_list

VERSION = re.compile(r"(?<![\d.])(\d+\.\d+\.(?:\d+|rc\d+|RC\d+))(?![\d.])")
CHIP = re.compile(r"-(910b|a3|310p|950)-", re.I)
BASE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.I | re.M)
INSTALLER = re.compile(r"Ascend-cann-toolkit_(\d+\.\d+\.(?:\d+|rc\d+|RC\d+))_", re.I)


def dockerfile_versions(text: str) -> tuple[str | None, str | None]:
    """(effective CANN version, chip) of a Dockerfile: an installed toolkit wins over the base."""
    base = BASE.findall(text)
    base_ref = base[0] if base else ""
    v = None
    m = re.search(r"cann[^:/]*:(\d+\.\d+\.(?:\d+|rc\d+|RC\d+))", base_ref, re.I)
    if m:
        v = m.group(1)
    args = dict(re.findall(r"^\s*ARG\s+(\w+)=[\"']?([^\s\"']+)", text, re.M))
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)
    inst = INSTALLER.findall(expanded)
    if inst:
        v = inst[-1]
    c = CHIP.search(base_ref)
    return (v.lower() if v else None), (c.group(1).lower() if c else None)


NUM = r"(\d+(?:\.\d+)+(?:\.?post\d+|rc\d+)?)"
# what a tag says: name → pattern on the tag's name part (after the last `:`)
TAG_PARTS = {
    "Python": re.compile(r"(?:^|[-_])py(?:thon)?(\d+\.\d+)(?![\d])", re.I),
    "torch_npu": re.compile(r"(?:^|[-_])(?:torch[_-]?npu|pta)[_-]?" + NUM, re.I),
    "torch": re.compile(r"(?:^|[-_])(?:torch|pt)(?![_-]?npu)[_-]?" + NUM, re.I),
}
# what a Dockerfile installs (after ARG substitution); the last one wins
FILE_PARTS = {
    "Python": re.compile(r"(?:\bpython[=:]|[-_]py|PYTHON_VERSION=[\"']?)(\d+\.\d+)(?![\d])",
                         re.I),
    "torch_npu": re.compile(r"\btorch[_-]npu==" + NUM, re.I),
    "torch": re.compile(r"\btorch==" + NUM, re.I),
}


def installed(text: str) -> dict[str, str]:
    """Python, torch and torch_npu versions a Dockerfile sets up (ARG defaults substituted)."""
    args = dict(re.findall(r"^\s*(?:ARG|ENV)\s+(\w+)=[\"']?([^\s\"']+)", text, re.M))
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)
    out = {}
    for what, pattern in FILE_PARTS.items():
        found = pattern.findall(expanded)
        if found:
            out[what] = found[-1].lower()
    return out


def same_version(said: str, built: str) -> bool:
    """`2.9` in a tag agrees with 2.9.0 installed; a local label (+cpu) is ignored."""
    said, built = said.lower(), built.split("+")[0].lower()
    return built == said or built.startswith(said + ".")


class TagVersionMismatch(Rule):
    """## What it does
    Compares the tag a workflow pushes with the Dockerfile it builds, for every version the
    tag names: the CANN version (`verl-8.5.2-910b-…`) against the toolkit the Dockerfile
    installs (or its base ships), the chip token against the base image's, and `py3.11`,
    `torch2.9.0`, `torch_npu2.9.0` (or `pta…`) against the Python of the base or the install
    and the `torch==`/`torch_npu==` pins.

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
        root = Path(ctx.root)
        for b, file, name in dockerfiles(facts):
            path = root / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            version, chip = dockerfile_versions(text)
            others = installed(text)
            tags: list[Value] = []
            if b.tags is not None:
                tags.append(b.tags)
            tags += [v for k, v in facts.env.items() if "TAG" in k.upper()]
            for job_step in b.job.steps:
                if job_step.run is None:
                    continue
                for cmd in job_step.run.commands:
                    w = cmd.flag_value("-t", "--tag")
                    if w is not None and cmd.name == "docker":
                        tags.append(Value(w.value, w.pos.line, w.pos.column))
            for tag in tags:
                for t in split_list(expand_env(tag.text, facts, b.job, b.step)):
                    name = t.rsplit(":", 1)[-1] if ":" in t else t
                    tv = VERSION.search(name)
                    if tv and version and tv.group(1).lower() != version:
                        yield self.finding(facts.path, tag.line, tag.column,
                                           f"tag says CANN {tv.group(1)} but {file.text} "
                                           f"builds CANN {version}",
                                           hint="derive the tag from the Dockerfile's inputs")
                    for what, pattern in TAG_PARTS.items():
                        said = pattern.search(name)
                        built = others.get(what)
                        if said and built and not same_version(said.group(1), built):
                            yield self.finding(facts.path, tag.line, tag.column,
                                               f"tag says {what} {said.group(1)} but "
                                               f"{file.text} installs {what} {built}",
                                               hint="derive the tag from the Dockerfile's "
                                               "inputs")
                    tc = CHIP.search(f"-{name}-")
                    if tc and chip and tc.group(1).lower() != chip:
                        yield self.finding(facts.path, tag.line, tag.column,
                                           f"tag says chip {tc.group(1)} but {file.text} "
                                           f"starts from a {chip} base",
                                           hint="derive the tag from the Dockerfile's inputs")
