"""Workflow knowledge shared by rules: build steps, their options, tags and Dockerfiles."""

from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts import ParseFailure
from cannery.lint.facts.shell import Command, Word
from cannery.lint.facts.workflow import Job, Step, Value, WorkflowFacts
from cannery.lint.rules._image_tools import is_docker_build

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from cannery.lint.rule import LintContext


class Build:
    __slots__ = (
        "args",
        "cache_from",
        "cache_to",
        "file",
        "job",
        "outputs",
        "platforms",
        "step",
        "tags",
        "target",
    )

    def __init__(self, job: Job, step: Step, file: Value | None, platforms: Value | None,
                 tags: Value | None, outputs: Value | None, cache_from: Value | None,
                 cache_to: Value | None, args: dict[str, str] | None = None,
                 target: str = "") -> None:
        self.job = job
        self.step = step
        self.file = file
        self.platforms = platforms
        self.tags = tags
        self.outputs = outputs
        self.cache_from = cache_from
        self.cache_to = cache_to
        self.args: dict[str, str] = {} if args is None else args  # build args given
        self.target = target  # the bake target this build is ("": not a bake build)


def builds(wf: WorkflowFacts, ctx: LintContext | None = None, runs: bool = False) -> list[Build]:
    """Each build a step runs: `docker/build-push-action`; with ``ctx`` (to read files) each
    target a `docker/bake-action` step builds from its bake files, JSON or HCL (`files:`, or
    bake's default names; `targets:`; `set:` overrides such as `*.cache-to=…`), reported at
    the step's `files:` (a value `set:` gives, at the `set:`); with ``runs``,
    each `docker build`/`docker buildx build` of a `run:` step (`-f`, `--platform`, `-t`,
    `--cache-from`, `--cache-to`, `--output`), reported at its `-f` (else at the command)."""
    out = []
    for job in wf.jobs:
        for step in job.steps:
            action = step.uses.split("@")[0]
            if action == "docker/build-push-action":
                w = step.with_
                out.append(Build(job, step, w.get("file"), w.get("platforms"), w.get("tags"),
                                 w.get("outputs"), w.get("cache-from"), w.get("cache-to"),
                                 _pairs(w["build-args"].text) if "build-args" in w else {}))
            elif action == "docker/bake-action" and ctx is not None:
                out += _bake_builds(wf, job, step, ctx)
            elif runs and step.run is not None:
                out += [_run_build(job, step, cmd) for cmd in step.run.commands
                        if is_docker_build(cmd)]
    return out


def _run_build(job: Job, step: Step, cmd: Command) -> Build:
    def values(*flags: str) -> Value | None:
        """Every value given with ``flags`` (`-t a -t b`, `--tag=a`), one a line, at the first."""
        got: list[Word] = []
        args = cmd.args
        for i, w in enumerate(args):
            for f in flags:
                if w.value == f and i + 1 < len(args):
                    got.append(args[i + 1])
                elif f.startswith("--") and w.value.startswith(f + "="):
                    got.append(Word(w.text, w.value[len(f) + 1:], w.pos, w.start, w.end))
        if not got:
            return None
        return Value("\n".join(g.value for g in got), got[0].pos.line, got[0].pos.column)

    file = values("-f", "--file")
    if file is None:  # the context's Dockerfile: the last operand
        context = next((w for w in reversed(cmd.args) if not w.value.startswith("-")), None)
        where = context.pos if context is not None else cmd.pos
        name = f"{context.value.rstrip('/')}/Dockerfile" if context is not None else "Dockerfile"
        file = Value(name, where.line, where.column)
    return Build(job, step, file, values("--platform"), values("-t", "--tag"),
                 values("-o", "--output"), values("--cache-from"), values("--cache-to"))


def _pairs(text: str) -> dict[str, str]:
    """`NAME=value` lines (build-args) as a mapping."""
    out = {}
    for line in text.split("\n"):
        name, eq, value = line.strip().partition("=")
        if eq and name:
            out[name] = value
    return out


def bake_files(wf: WorkflowFacts, step: Step, ctx: LintContext
               ) -> list[tuple[str, dict[str, object] | ParseFailure]]:
    """The bake files a `docker/bake-action` step reads (its `files:`, else bake's default
    names that exist), each with what it holds or why it does not parse. A file lint may not
    read, or that does not exist, is left out."""
    from cannery.lint.facts.bake import DEFAULT_FILES, parse_bake

    files = step.with_.get("files")
    names = (split_list(expand_env(files.text, wf, None, step)) if files is not None
             else list(DEFAULT_FILES))
    out: list[tuple[str, dict[str, object] | ParseFailure]] = []
    for name in names:
        if "${{" in name or name.endswith((".yml", ".yaml")):  # compose files: not read
            continue
        text = ctx.read(name)
        if text is None:
            continue
        try:
            out.append((name, parse_bake(name, text)))
        except ParseFailure as exc:
            out.append((name, exc))
    return out


def _bake_builds(wf: WorkflowFacts, job: Job, step: Step, ctx: LintContext) -> list[Build]:
    from cannery.lint.facts.bake import interpolate, merge

    w = step.with_
    files = w.get("files")
    at = (files.line, files.column) if files is not None else (step.line, 1)
    docs = [doc for _, doc in bake_files(wf, step, ctx) if not isinstance(doc, ParseFailure)]
    if not docs:
        return []
    # bake fills `${VAR}` from the environment it runs in, before the variable's default
    env = {k: v.text for k, v in {**wf.env, **step.env}.items() if "${{" not in v.text}
    bake = interpolate(merge(docs), env)
    wanted = split_list(w["targets"].text) if "targets" in w else ["default"]
    overrides: dict[tuple[str, str], tuple[str, Value]] = {}  # (target or *, key) → value
    # one override a line: bake-action reads `set:` ignoring commas, which its values hold;
    # a block's lines are the file's lines from its first, at one indentation
    for i, line in enumerate(w["set"].text.split("\n") if "set" in w else []):
        if not line.strip():
            continue
        key, _, given = line.partition("=")
        target, _, field = key.strip().rpartition(".")
        overrides[(target, field)] = (given.strip(),
                                      Value(line, w["set"].line + i, w["set"].column))
    out: list[Build] = []
    for target, spec in _bake_targets(bake, wanted):

        def value(key: str, target: str = target, spec: dict[str, object] = spec
                  ) -> Value | None:
            got = overrides.get((target, key), overrides.get(("*", key)))
            if got is not None:  # reported where it is given: the `set:` a user edits
                return Value(got[0], got[1].line, got[1].column)
            raw = spec.get(key)
            if raw is None:
                return None
            return Value("\n".join(map(str, raw)) if isinstance(raw, list) else str(raw), *at)

        context = str(spec.get("context", "."))
        dockerfile = str(spec.get("dockerfile", "Dockerfile"))
        path = dockerfile if context in (".", "./") else f"{context.rstrip('/')}/{dockerfile}"
        raw_args = spec.get("args")
        args = ({str(k): str(v) for k, v in raw_args.items() if v is not None}
                if isinstance(raw_args, dict) else {})
        out.append(Build(job, step, Value(path, *at), value("platforms"), value("tags"),
                         value("output"), value("cache-from"), value("cache-to"), args,
                         target))
    return out


def _bake_targets(
    bake: dict[str, object], wanted: list[str]
) -> list[tuple[str, dict[str, object]]]:
    """(name, spec with what it inherits merged in) of each target ``wanted`` names, groups
    followed."""
    targets = bake.get("target")
    groups = bake.get("group")
    targets = targets if isinstance(targets, dict) else {}
    groups = groups if isinstance(groups, dict) else {}

    def members(n: str, seen: frozenset[str]) -> list[str]:
        group = groups.get(n)
        if isinstance(group, dict) and n not in seen and isinstance(group.get("targets"), list):
            return [m for t in group["targets"] for m in members(str(t), seen | {n})]
        return [n]

    def resolve(t: str, seen: frozenset[str]) -> dict[str, object]:
        spec = targets.get(t)
        if not isinstance(spec, dict) or t in seen:
            return {}
        merged: dict[str, object] = {}
        parents = spec.get("inherits")
        for parent in parents if isinstance(parents, list) else []:
            merged.update(resolve(str(parent), seen | {t}))
        merged.update(spec)
        return merged

    out = []
    for t in dict.fromkeys(m for n in wanted for m in members(n, frozenset())):
        spec = resolve(t, frozenset())
        if spec:
            out.append((t, spec))
    return out


def dockerfiles(
    wf: WorkflowFacts, ctx: LintContext | None = None, runs: bool = False
) -> Iterator[tuple[Build, Value, str]]:
    """Each build step that names a Dockerfile: (build, its `file:` value, the path with
    `${{ env.X }}` filled in). Paths that still hold an expression are skipped. With
    ``ctx``, the targets of bake files too, and with ``runs`` the `docker build` of
    `run:` steps (see builds)."""
    for b in builds(wf, ctx, runs):
        if b.file is None:
            continue
        name = expand_env(b.file.text, wf, b.job, b.step)
        if "${{" not in name:
            yield b, b.file, name


def split_list(text: str) -> list[str]:
    return [t.strip() for t in re.split(r"[,\n]", text) if t.strip()]


def expand_env(text: str, wf: WorkflowFacts, job: Job | None = None, step: Step | None = None
               ) -> str:
    env = {k: v.text for k, v in wf.env.items()}
    if step is not None:
        env.update({k: v.text for k, v in step.env.items()})

    def sub(m: re.Match[str]) -> str:
        return env.get(m.group(1), m.group(0))

    for _ in range(3):
        text = re.sub(r"\$\{\{\s*env\.([A-Za-z_]\w*)\s*\}\}", sub, text)
    return text


_INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")
_MATRIX = re.compile(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}")


def calls_to(caller: WorkflowFacts, called: str) -> list[Job]:
    """The jobs of ``caller`` that run the reusable workflow ``called`` (a path) of the same
    repository: `uses: ./.github/workflows/NAME.yml`."""
    from pathlib import PurePosixPath

    name = PurePosixPath(called.replace("\\", "/")).name
    return [j for j in caller.jobs
            if j.uses.startswith("./") and "@" not in j.uses
            and PurePosixPath(j.uses).parent.as_posix().endswith(".github/workflows")
            and PurePosixPath(j.uses).name == name]


def leg_inputs(job: Job) -> list[tuple[dict[str, str], dict[str, str]]]:
    """(matrix leg, the inputs that leg passes) for each leg of a job that calls a reusable
    workflow: its `with:` with `${{ matrix.X }}` filled in from the leg."""
    out = []
    for leg in job.legs or [{}]:

        def fill(m: re.Match[str], leg: dict[str, str] = leg) -> str:
            return leg.get(m.group(1), m.group(0))

        out.append((leg, {k: _MATRIX.sub(fill, v.text) for k, v in job.with_.items()}))
    return out


def with_inputs(wf: WorkflowFacts, inputs: dict[str, str]) -> WorkflowFacts:
    """``wf`` as a caller runs it: `${{ inputs.X }}` in its steps' `with:` and `env:` filled
    in from ``inputs`` (positions kept, so findings point into ``wf``)."""
    import copy

    def fill(v: Value) -> Value:
        text = _INPUT.sub(lambda m: inputs.get(m.group(1), m.group(0)), v.text)
        return v if text == v.text else Value(text, v.line, v.column)

    out = copy.copy(wf)
    out.jobs = []
    for job in wf.jobs:
        new_job = copy.copy(job)
        new_job.steps = []
        for step in job.steps:
            new_step = copy.copy(step)
            new_step.with_ = {k: fill(v) for k, v in step.with_.items()}
            new_step.env = {k: fill(v) for k, v in step.env.items()}
            new_job.steps.append(new_step)
        out.jobs.append(new_job)
    return out
