"""A GitHub Actions workflow with line numbers kept (PyYAML's composed node tree)."""

from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts import ParseFailure
from cannery.lint.facts.shell import Command, Script, line_offsets, parse_script

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


# Plain classes, not dataclasses: see lint/facts/script.py.


class Value:
    __slots__ = ("column", "line", "text")

    def __init__(self, text: str, line: int, column: int) -> None:
        self.text = text
        self.line = line
        self.column = column


class Step:
    __slots__ = ("env", "if_", "index", "line", "name", "run", "run_value", "uses", "with_")

    def __init__(self, index: int, line: int, name: str, uses: str, with_: dict[str, Value],
                 env: dict[str, Value], run: Script | None, run_value: Value | None,
                 if_: Value | None = None) -> None:
        self.index = index
        self.line = line
        self.name = name
        self.uses = uses
        self.with_ = with_
        self.env = env
        self.run = run
        self.run_value = run_value
        self.if_ = if_


class Job:
    __slots__ = (
        "end_line",
        "id",
        "if_",
        "legs",
        "line",
        "matrix",
        "matrix_line",
        "needs",
        "runs_on",
        "secrets_inherit",
        "steps",
        "uses",
        "with_",
    )

    def __init__(self, id: str, line: int, runs_on: str, matrix: dict[str, list[str]],
                 matrix_line: int, steps: list[Step] | None = None,
                 legs: list[dict[str, str]] | None = None, if_: Value | None = None,
                 needs: list[str] | None = None, end_line: int = 0, uses: str = "",
                 secrets_inherit: bool = False, with_: dict[str, Value] | None = None) -> None:
        self.id = id
        self.line = line
        self.runs_on = runs_on
        self.matrix = matrix
        self.matrix_line = matrix_line
        self.steps: list[Step] = [] if steps is None else steps
        self.legs: list[dict[str, str]] = [] if legs is None else legs  # the expanded matrix
        self.if_ = if_
        self.needs: list[str] = [] if needs is None else needs
        self.end_line = end_line  # last line of the job's block
        self.uses = uses  # a reusable workflow the job calls
        self.secrets_inherit = secrets_inherit  # `secrets: inherit` (every secret to `uses:`)
        self.with_: dict[str, Value] = {} if with_ is None else with_  # inputs to `uses:`


MAX_LEGS = 256  # GitHub's own limit per workflow run


def expand_matrix(node: Any) -> list[dict[str, str]]:
    """The matrix's combinations as GitHub forms them: the product of the list keys, minus
    `exclude:` entries, with `include:` entries merged into the legs they do not contradict
    (or added as legs of their own). Values are scalars as written; at most MAX_LEGS."""
    import yaml

    keys: dict[str, list[str]] = {}
    include: list[dict[str, str]] = []
    exclude: list[dict[str, str]] = []
    for key, val in _mapping(node).items():
        if key in ("include", "exclude"):
            entries = [{k: _scalar(v) for k, v in _mapping(e).items()}
                       for e in getattr(val, "value", []) or []
                       if isinstance(e, yaml.MappingNode)]
            (include if key == "include" else exclude).extend(entries)
        elif isinstance(val, yaml.SequenceNode):
            keys[key] = [_scalar(v) for v in val.value]
    legs: list[dict[str, str]] = [{}] if keys else []
    for key, values in keys.items():
        legs = [{**leg, key: v} for leg in legs for v in values][:MAX_LEGS]
    legs = [leg for leg in legs
            if not any(all(leg.get(k) == v for k, v in ex.items()) for ex in exclude)]
    # an include merges only into the product's legs (never into a leg another include
    # added), and may not change a value the product gave
    base = [dict(leg) for leg in legs]
    product = legs[:]
    for entry in include:
        matched = False
        for leg, orig in zip(product, base, strict=True):
            if all(orig.get(k, v) == v for k, v in entry.items()):
                leg.update(entry)
                matched = True
        if not matched and len(legs) < MAX_LEGS:
            legs.append(dict(entry))
    return legs


class WorkflowFacts:
    __slots__ = ("env", "events", "jobs", "lines", "path", "text")

    def __init__(self, path: str, text: str, lines: list[str], jobs: list[Job],
                 env: dict[str, Value], events: dict[str, int] | None = None) -> None:
        self.path = path
        self.text = text
        self.lines = lines
        self.jobs = jobs
        self.env = env
        self.events: dict[str, int] = {} if events is None else events  # `on:` event → line

    def commands(self) -> Iterator[tuple[Job, Step, Command]]:
        """Every simple command of every `run:` step, in file order."""
        for job in self.jobs:
            for step in job.steps:
                if step.run is not None:
                    for cmd in step.run.commands:
                        yield job, step, cmd

    def shell_commands(self) -> Iterator[Command]:
        """The commands alone, for rules that read Dockerfiles and workflows alike."""
        return (entry[-1] for entry in self.commands())


def _scalar(node: Any) -> str:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return ",".join(_scalar(n) for n in node.value)
    return ""


def _mapping(node: Any) -> dict[str, Any]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _value(node: Any, lines: list[str] | None = None) -> Value:
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    if getattr(node, "style", None) in ("|", ">") and lines is not None:
        # a block scalar: point at its first line of content, not at the `|`
        first = node.start_mark.line + 1
        while first < node.end_mark.line and first < len(lines) and not lines[first].strip():
            first += 1
        if first < len(lines) and lines[first].strip():
            text = lines[first]
            line, col = first + 1, len(text) - len(text.lstrip()) + 1
    return Value(_scalar(node), line, col)


def _run_script(node: Any, lines: list[str], offsets: list[int]) -> Script:
    style = getattr(node, "style", None)
    if style in ("|", ">"):
        first = node.start_mark.line + 1  # 0-based index of the first content line
        last = node.end_mark.line  # exclusive
        body = lines[first:last]
        while body and not body[-1].strip():
            body.pop()
        indent = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        text = "\n".join(b[indent:] for b in body)
        return parse_script(text, first + 1, offsets[first : first + len(body)] or [0],
                            [indent] * max(1, len(body)))
    line = node.start_mark.line
    last = node.end_mark.line - (0 if node.end_mark.column else 1)
    if style is None and last > line and last < len(lines):
        # a plain scalar over several lines: YAML folds each line break into a space; a
        # trailing `\` makes bash read the same, and every word keeps its place in the file
        col0 = node.start_mark.column
        rows = [lines[line][col0:]] + [lines[i].lstrip() for i in range(line + 1, last + 1)]
        shift = [col0] + [len(lines[i]) - len(lines[i].lstrip())
                          for i in range(line + 1, last + 1)]
        text = " \\\n".join(r.rstrip() for r in rows)
        return parse_script(text, line + 1, offsets[line : last + 1], shift)
    col = node.start_mark.column + (1 if style in ("'", '"') else 0)
    return parse_script(str(node.value), line + 1, [offsets[line]], [col])


def _events(node: Any) -> dict[str, int]:
    """The events of `on:` (a name, a list of names, or a mapping), each with its line."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return {str(node.value): node.start_mark.line + 1}
    if isinstance(node, yaml.SequenceNode):
        return {str(n.value): n.start_mark.line + 1 for n in node.value
                if isinstance(n, yaml.ScalarNode)}
    if isinstance(node, yaml.MappingNode):
        return {str(k.value): k.start_mark.line + 1 for k, _v in node.value
                if isinstance(k, yaml.ScalarNode)}
    return {}


def parse_workflow(path: str, text: str) -> WorkflowFacts:
    import yaml

    if "\x00" in text:
        raise ParseFailure(text[: text.index("\x00")].count("\n") + 1, "file contains NUL bytes")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParseFailure(line, f"YAML: {problem}") from None
    except RecursionError:
        raise ParseFailure(1, "YAML nested too deeply") from None
    lines = text.split("\n")
    offsets = line_offsets(text)
    top = _mapping(root)
    wf = WorkflowFacts(path, text, lines, [],
                       {k: _value(v) for k, v in _mapping(top.get("env")).items()},
                       _events(top.get("on", top.get("true"))))
    jobs_node = top.get("jobs")
    key_lines = {str(k.value): k.start_mark.line + 1  # the job's own line: `build:`
                 for k, _v in (jobs_node.value if isinstance(jobs_node, yaml.MappingNode)
                               else []) if isinstance(k, yaml.ScalarNode)}
    for job_id, job_node in _mapping(top.get("jobs")).items():
        job_map = _mapping(job_node)
        strategy = _mapping(job_map.get("strategy"))
        matrix_node = strategy.get("matrix")
        matrix: dict[str, list[str]] = {}
        for key, val in _mapping(matrix_node).items():
            import yaml as _y

            if isinstance(val, _y.SequenceNode):
                matrix[key] = [_scalar(v) if isinstance(v, _y.ScalarNode) else
                               " ".join(f"{k}={_scalar(x)}" for k, x in _mapping(v).items())
                               for v in val.value]
        runs_on = job_map.get("runs-on")
        job = Job(job_id, key_lines.get(job_id, job_node.start_mark.line + 1),
                  _scalar(runs_on) if runs_on is not None else "", matrix,
                  matrix_node.start_mark.line + 1 if matrix_node is not None else 0,
                  legs=expand_matrix(matrix_node) if matrix_node is not None else [])
        if "if" in job_map:
            job.if_ = _value(job_map["if"])
        needs = job_map.get("needs")
        if needs is not None:
            job.needs = [n for n in _scalar(needs).split(",") if n]
        job.end_line = job_node.end_mark.line + (1 if job_node.end_mark.column else 0)
        job.uses = _scalar(job_map["uses"]) if "uses" in job_map else ""
        job.secrets_inherit = _scalar(job_map.get("secrets")) == "inherit"
        job.with_ = {k: _value(v, lines) for k, v in _mapping(job_map.get("with")).items()}
        steps = job_map.get("steps")
        import yaml as _yaml

        # only a sequence holds steps (a mapping's value is a list of key/value pairs)
        items = steps.value if isinstance(steps, _yaml.SequenceNode) else []
        for i, step_node in enumerate(items):
            sm = _mapping(step_node)
            run_node = sm.get("run")
            script = None
            if run_node is not None and getattr(run_node, "tag", "").endswith(":str"):
                script = _run_script(run_node, lines, offsets)
            job.steps.append(Step(
                i, step_node.start_mark.line + 1, _scalar(sm.get("name")) if "name" in sm else "",
                _scalar(sm["uses"]) if "uses" in sm else "",
                {k: _value(v, lines) for k, v in _mapping(sm.get("with")).items()},
                {k: _value(v, lines) for k, v in _mapping(sm.get("env")).items()},
                script, _value(run_node) if run_node is not None else None,
                _value(sm["if"]) if "if" in sm else None,
            ))
        wf.jobs.append(job)
    return wf
