"""No catalog string escapes its field (issue 33, defect 7).

A property over the schema: every string of the catalog models (values, list items and table
keys), found by walking the pydantic models, not from a hand-written list, is set in turn to
its value with a hostile suffix appended: a line break, a carriage return, a GitHub expression
`${{`, a backtick, `$(`, and the last two behind a quote. Each catalog is then either

- refused at load, with a one-line error that names the field, or
- rendered inert: every Dockerfile parses (BuildKit's parser, the `dockerfile` package) to the
  same instructions as the unchanged catalog's, only values differ; the workflow's YAML has
  the same jobs, steps and keys and no more `${{` expressions; and no hostile command
  substitution is live in any RUN or `run:` script (only single quotes make it inert).

The catalog is tests/catalogs.every_field(): minimal() with every field set. A string field
the models gain and that catalog does not set fails `test_every_string_field_is_exercised`,
so a new field is covered (or the test fails) without anyone editing a list here.
"""

from __future__ import annotations

import copy
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, NamedTuple

import dockerfile
import pytest
import yaml
from pydantic import BaseModel

from cannery.catalog.load import load_catalog
from cannery.catalog.models import Catalog
from cannery.commands.render import Context, render_kind
from cannery.errors import CatalogError
from cannery.lock import Lock
from cannery.util import toml
from tests.catalogs import ci_entries, every_field, line_of, minimal, toml_inline

MARK = "touch /pwned"
PAYLOADS = {
    "newline": f"\nRUN {MARK}",
    "carriage-return": f"\rRUN {MARK}",
    "expression": "${{ github.token }}",
    "backtick": f"`{MARK}`",
    "substitution": f"$({MARK})",
    "single-quoted": f"'$({MARK})'",
    "double-quoted": f'"`{MARK}`"',
}
# A `run` step is the catalog author's own shell, rendered as written (and linted at load):
# a substitution in it is what it says. Line breaks and `${{` are still held to the rule.
OWN_SHELL = {("Step", "run")}
# Fields the seed cannot set beside another one it sets (`install_action` excludes `install`):
# each has its own test below with every payload.
BESIDE_SEED = {("Ci", "install_action")}


class Site(NamedTuple):
    path: tuple[str | int, ...]  # where the string is in the catalog document
    field: tuple[str | int, ...]  # the path of the model field that holds it
    owner: tuple[str, str]  # (model, field)
    key: bool  # the string is a table key (renamed), not a value


def _arms(ann: Any) -> list[Any]:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [a for arm in typing.get_args(ann) for a in _arms(arm)]
    return [ann]


def _holds_str(ann: Any) -> bool:
    if ann is str:
        return True
    if typing.get_origin(ann) is Literal:
        return any(isinstance(a, str) for a in typing.get_args(ann))
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return False
    return any(_holds_str(a) for a in typing.get_args(ann))


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> None:
    seen[model.__name__] = model
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                if ann.__name__ not in seen:
                    _models(ann, seen)
            else:
                stack += typing.get_args(ann)


def string_fields() -> set[tuple[str, str]]:
    """(model, field) of every field of the catalog models that holds a string anywhere."""
    models: dict[str, type[BaseModel]] = {}
    _models(Catalog, models)
    return {(name, f) for name, m in models.items()
            for f, info in m.model_fields.items() if _holds_str(info.annotation)}


def _walk(ann: Any, raw: Any, path: tuple[str | int, ...], field: tuple[str | int, ...],
          owner: tuple[str, str]) -> list[Site]:
    """The strings of ``raw``, a value of type ``ann`` (the arm of a union that fits it)."""
    for arm in _arms(ann):
        origin = typing.get_origin(arm)
        if isinstance(arm, type) and issubclass(arm, BaseModel) and isinstance(raw, dict):
            return [site for name, info in arm.model_fields.items() if name in raw
                    for site in _walk(info.annotation, raw[name], (*path, name),
                                      (*path, name), (arm.__name__, name))]
        if origin is dict and isinstance(raw, dict):
            value_ann = typing.get_args(arm)[1]
            out = [Site((*path, k), field, owner, True) for k in raw]
            return out + [s for k, v in raw.items()
                          for s in _walk(value_ann, v, (*path, k), field, owner)]
        if origin is list and isinstance(raw, list):
            item = typing.get_args(arm)[0]
            return [s for i, v in enumerate(raw) for s in _walk(item, v, (*path, i), field, owner)]
        if (arm is str or origin is Literal) and isinstance(raw, str):
            return [Site(path, field, owner, False)]
    return []


SEED_TEXT = every_field()
SEED = toml.loads(SEED_TEXT)
SITES = _walk(Catalog, SEED, (), (), ("Catalog", ""))


def _fmt(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def test_every_string_field_is_exercised() -> None:
    """A string field the seed catalog does not set would go untested: it must set them all."""
    missing = string_fields() - {s.owner for s in SITES} - BESIDE_SEED
    assert not missing, (
        f"set these fields in tests/catalogs.EVERY_FIELD so the property covers them: "
        f"{sorted(missing)}"
    )
    assert len(SITES) > 150


def _mutated(site: Site, payload: str) -> dict[str, Any]:
    doc = copy.deepcopy(SEED)
    node: Any = doc
    for part in site.path[:-1]:
        node = node[part]
    last = site.path[-1]
    if site.key:
        node_items = list(node.items())
        node.clear()
        node.update({(k + payload if k == last else k): v for k, v in node_items})
    else:
        node[last] = node[last] + payload
    return doc


def _write(doc: dict[str, Any], where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "cannery.toml"
    path.write_text("\n".join(f"{json.dumps(k)} = {toml_inline(v)}" for k, v in doc.items()) + "\n")
    return path


class Rendered(NamedTuple):
    instructions: dict[str, list[tuple[Any, ...]]]
    scripts: list[str]  # every shell script: RUN (shell form) and the workflow's `run:`
    shape: Any
    expressions: int


def _instruction(c: Any) -> tuple[Any, ...]:
    keys: tuple[str, ...] = ()
    if c.cmd in ("LABEL", "ENV"):
        keys = c.value[::2]
    elif c.cmd == "ARG":
        keys = tuple(v.split("=", 1)[0] for v in c.value)
    flags = tuple(f.split("=", 1)[0] for f in c.flags)
    return (c.cmd, c.sub_cmd, c.json, flags, keys, len(c.value) if c.json else None)


def _shape(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return type(node).__name__


def _runs(node: Any) -> list[str]:
    if isinstance(node, dict):
        here = [node["run"]] if isinstance(node.get("run"), str) else []
        return here + [s for k, v in node.items() if k != "run" for s in _runs(v)]
    if isinstance(node, list):
        return [s for v in node for s in _runs(v)]
    return []


def _render(path: Path) -> Rendered:
    loaded = load_catalog(path)
    # CI's pins of cannery, current for this catalog: the workflow is rendered only with them
    ctx = Context(loaded, Lock(ci=ci_entries(loaded.catalog)), path.parent, path.name)
    files = render_kind("dockerfile", ctx, None)
    parsed = {p.name: dockerfile.parse_string(t) for p, t in files.items()
              if p.suffix == ".Dockerfile"}
    workflow = render_kind("workflow", ctx, None)[path.parent / loaded.catalog.ci.workflow]
    data = yaml.load(workflow, Loader=yaml.CSafeLoader)
    scripts = [c.value[0] for cmds in parsed.values() for c in cmds
               if c.cmd == "RUN" and not c.json]
    return Rendered({n: [_instruction(c) for c in cmds] for n, cmds in parsed.items()},
                    scripts + _runs(data), _shape(data), workflow.count("${{"))


def live_substitutions(script: str) -> list[int]:
    """Where MARK starts inside a command substitution (``$(…)`` or backticks) that the shell
    runs: quoting state is followed as POSIX sh does (single quotes make everything literal,
    double quotes do not stop a substitution, a backslash escapes the next character)."""
    stack = ["plain"]
    live: list[int] = []
    i = 0
    while i < len(script):
        top, ch = stack[-1], script[i]
        # every payload opens its substitution right before MARK: live if that opener was
        if script.startswith(MARK, i) and top in ("sub", "tick"):
            live.append(i)
        if top == "single":
            if ch == "'":
                stack.pop()
        elif ch == "\\":
            i += 1
        elif script.startswith("$(", i):
            stack.append("sub")
            i += 1
        elif ch == "`":
            if top == "tick":
                stack.pop()
            else:
                stack.append("tick")
        elif top == "double":
            if ch == '"':
                stack.pop()
        elif ch == "'":
            stack.append("single")
        elif ch == '"':
            stack.append("double")
        elif ch == ")" and top == "sub":
            stack.pop()
        i += 1
    return live


def test_live_substitutions_follows_shell_quoting() -> None:
    assert live_substitutions(f"echo '$({MARK})'") == []
    assert live_substitutions(f"echo \\$({MARK})") == []
    assert live_substitutions(f"echo 'a'$({MARK})''") == [10]
    assert live_substitutions(f'echo "a$({MARK})"') == [9]
    assert live_substitutions(f"echo \"'`{MARK}`'\"") == [8]
    assert live_substitutions(f"x=\"$(printf '%s' a)\" y='`{MARK}`'") == []
    assert live_substitutions(f"x=$(printf '%s' 'a$({MARK})')") == []
    assert live_substitutions(f"x=$(printf '%s' a$({MARK}))") == [19]


BASELINE: list[Rendered] = []


def _baseline(tmp: Path) -> Rendered:
    if not BASELINE:
        BASELINE.append(_render(_write(copy.deepcopy(SEED), tmp / "seed")))
    return BASELINE[0]


def _problem(site: Site, payload: str, tmp: Path) -> str | None:
    """What is wrong with the catalog that has ``payload`` appended at ``site`` (None: it
    was refused naming the field, or it renders inert)."""
    path = _write(_mutated(site, payload), tmp)
    shown = f"{_fmt(site.path)!s} ({'key' if site.key else 'value'})"
    try:
        got = _render(path)
    except CatalogError as exc:
        for line in exc.problems:
            if "\n" in line or "\r" in line:
                return f"{shown}: error is not one line: {line!r}"
        # (an image a matrix made is named with its words: images.four[extra=a].tag)
        fields = [re.sub(r"\[[a-z][a-z0-9_]*=[^\]]*\]", "", p.split(": ", 2)[1])
                  for p in exc.problems if p.split(": ", 2)[1:2]]
        named = [f for f in fields if (
            (f + ".").startswith(_fmt(site.field) + ".")
            or (f + "[").startswith(_fmt(site.field) + "[")
            or f == _fmt(site.field)
        )]
        if not named:
            return f"{shown}: refused without naming {_fmt(site.field)}: {exc.problems}"
        return None
    base = _baseline(tmp.parent)
    if got.instructions != base.instructions:
        return f"{shown}: the Dockerfile instructions changed"
    if got.shape != base.shape:
        return f"{shown}: the workflow's jobs, steps or keys changed"
    if got.expressions != base.expressions:
        return f"{shown}: the workflow has {got.expressions} `${{{{` (was {base.expressions})"
    if site.owner not in OWN_SHELL:
        live = [s for s in got.scripts if live_substitutions(s)]
        if live:
            return f"{shown}: a live command substitution in {live[0][:300]!r}"
    return None


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_every_catalog_string_is_refused_or_inert(payload: str, tmp_path: Path) -> None:
    problems = [p for i, site in enumerate(SITES)
                if (p := _problem(site, payload, tmp_path / f"s{i}")) is not None]
    assert not problems, "\n".join(problems)


def test_the_seed_renders_every_kind_of_site(tmp_path: Path) -> None:
    """The comparison has something to compare: the seed renders Dockerfiles with RUN, ENV
    and LABEL instructions and a workflow with `run:` steps and expressions."""
    base = _baseline(tmp_path)
    cmds = {c[0] for cmds in base.instructions.values() for c in cmds}
    assert {"FROM", "RUN", "ENV", "LABEL", "ARG", "COPY"} <= cmds
    assert base.expressions > 0 and len(base.scripts) > 10


# The fields that gained a character set here, each with the issue's kind of value: one line
# naming file, line and field, exit 2. (id, text replaced in minimal(), its replacement, what
# the reported line holds, the message after "file:line: ")
REFUSED = [
    ("version-newline", 'version = "v0.18.0"\ninstall', 'version = "v0.18.0\\nRUN x"\ninstall',
     'version = "v0.18.0\\n', "components.vllm.version: 'v0.18.0\\nRUN x' holds the control "
     "character '\\n'"),
    ("version-substitution", 'version = "v0.18.0"\ninstall', 'version = "v0.18.0$(id)"\ninstall',
     "$(id)", "components.vllm.version: version must look like a release"),
    ("ref-substitution", 'ref = "v0.18.0"', 'ref = "v0.18.0;$(id)"', "$(id)",
     "components.vllm.ref: ref 'v0.18.0;$(id)': give a tag, branch or commit"),
    ("ref-option", 'ref = "main"', 'ref = "--upload-pack=x"', "upload-pack",
     "components.vllm-ascend.ref: ref '--upload-pack=x'"),
    ("ref-dots", 'ref = "main"', 'ref = "a/../b"', "a/../b",
     "components.vllm-ascend.ref: ref 'a/../b'"),
    ("ref-lock", 'ref = "main"', 'ref = "x.lock"', "x.lock",
     "components.vllm-ascend.ref: ref 'x.lock'"),
    ("package", "pin = true", 'pin = true\npackage = "torch $(id)"', "package =",
     "components.torch.package: package must be a name like vllm-ascend"),
    ("label-key", 'recipe = "r"', 'recipe = "r"\nlabels = { "a b" = "c" }', "labels =",
     "images.one.labels: label key 'a b'"),
    ("label-value", 'recipe = "r"', 'recipe = "r"\nlabels = { "a" = "b\\rLABEL c=d" }',
     "labels =", "images.one.labels.a: 'b\\rLABEL c=d' holds the control character '\\r'"),
    ("key-newline", 'recipe = "r"', 'recipe = "r"\nenv = { "A\\nRUN x" = "1" }', "env = {",
     "images.one.env: key 'A\\nRUN x' holds the control character '\\n'"),
    ("devlib", 'devlib = "/usr/local/Ascend/cann-{version}/devlib"', 'devlib = "/opt/$(id)"',
     "devlib =", "toolkits.cann852.devlib: devlib must be an absolute path"),
    ("catalog-name", 'name = "test"', 'name = "${{ github.token }}"', "name = ",
     "catalog.name: name must hold no '$'"),
    ("ci-install", "\n[images.one]", '\n[ci]\ninstall = "${{ secrets.X }}"\n\n[images.one]',
     'install = "$', "ci.install: install must hold no '$'"),
    ("ci-branch", "\n[images.one]", '\n[ci]\nbranches = ["${{ github.head_ref }}"]\n\n'
     "[images.one]", "branches = ", "ci.branches: branch pattern '${{ github.head_ref }}'"),
]


@pytest.mark.parametrize(("old", "new", "needle", "words"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_injection_is_refused_at_its_line(tmp_path: Path, cli, old: str, new: str,  # type: ignore[no-untyped-def]
                                          needle: str, words: str) -> None:
    good = minimal()
    assert old in good
    text = good.replace(old, new, 1)
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2, res.err
    assert f"{path}:{line_of(text, needle)}: {words}" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


def test_the_issues_catalog_is_refused_by_a_real_process(tmp_path: Path) -> None:
    """Issue 33's reproducer: `version = "v0.18.0\\nRUN touch /pwned"` rendered a RUN."""
    from tests.conftest import run_subprocess

    path = tmp_path / "cannery.toml"
    path.write_text(minimal().replace('version = "v0.18.0"\ninstall',
                                      'version = "v0.18.0\\nRUN touch /pwned"\ninstall'))
    res = run_subprocess("render", "--catalog", str(path))
    assert res.code == 2
    assert res.err.count("\n") == 1 and "components.vllm.version" in res.err
    assert not (tmp_path / "dockerfiles").exists()


# ------------------------------------------------------------ the primitives, on their own


def test_label_values_are_quoted_whole() -> None:
    """A LABEL value is one double-quoted word: quotes, backslashes and `$` inside it are
    escaped, so BuildKit reads back exactly the text (and the label count does not change)."""
    from cannery.render.instructions import Label

    value = 'a" b=c \\" $HOME ${X} `id` $(id) \' \\'
    text = Label((("k", value), ("z", "1"))).render()
    (cmd,) = dockerfile.parse_string(text + "\n")
    assert cmd.value[::2] == ("k", "z")
    assert cmd.value[1] == '"' + value.replace("\\", "\\\\").replace('"', '\\"')\
        .replace("$", "\\$") + '"'


@pytest.mark.parametrize("bad", ["\n", "\r", "\x00", "\x1b", "\x85", "\u2028"])
def test_no_primitive_prints_a_control_character(bad: str) -> None:
    """The catalog refuses these; a value that reaches a primitive some other way (the lock, a
    bug) stops the render rather than end an instruction early."""
    from cannery.render import instructions as i

    for value in (f"v1{bad}RUN touch /pwned", f"v1{bad}"):
        for inst in (i.Label((("k", value),)), i.Env((("K", value),)), i.Arg("A", value),
                     i.From(value), i.Workdir(value), i.User(value), i.Copy(value, "/x"),
                     i.Run([value])):
            with pytest.raises(ValueError, match="cannot hold"):
                inst.render()


def test_a_comment_is_comment_lines_only() -> None:
    """Every line break Python knows (BuildKit ends a line at \\n only) starts another `# `
    line; nothing of the text becomes an instruction."""
    from cannery.render.instructions import Comment

    text = Comment("a\nRUN b\rRUN c\u2028RUN d\x0bRUN e").render()
    assert dockerfile.parse_string(text + "\nFROM x\n")[0].cmd == "FROM"
    assert all(line.startswith("# ") for line in text.split("\n"))
    with pytest.raises(ValueError, match="cannot hold"):
        Comment("a\x00b").render()


@pytest.mark.parametrize("value", ["a\n", "main\n", "a\r", "${{ x }}\n"])
def test_a_workflow_scalar_keeps_its_line_breaks_inside_quotes(value: str) -> None:
    """A YAML scalar with a trailing line break is quoted, not written plain (where the break
    would end the line and the value would lose it)."""
    from cannery.render.yamltext import scalar

    text = scalar(value)
    assert text.startswith('"') and "\n" not in text
    assert yaml.safe_load(f"k: {text}\nj: 1\n") == {"k": value, "j": 1}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_install_action_is_refused_with_any_payload(payload: str, tmp_path: Path) -> None:
    """`[ci] install_action` (beside the seed: it excludes `install`) holds only
    owner/repo[/path]@<40-hex SHA>: every payload is refused at load, naming the field."""
    good = "example/setup-cannery@" + "0" * 40
    text = minimal() + f"\n[ci]\ninstall_action = {json.dumps(good + PAYLOADS[payload])}\n"
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert "install_action" in str(err.value) and "\n" not in str(err.value).strip()
    path.write_text(minimal() + f"\n[ci]\ninstall_action = {json.dumps(good)}\n")
    assert load_catalog(path).catalog.ci.install_action == good
