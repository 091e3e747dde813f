"""An image entry's matrix (issue 29): expansion into ordinary images, include/exclude, fields
set per axis word, errors that name the entry, the words and the line, and the same rendered
files as the catalog written out by hand."""

from __future__ import annotations

from pathlib import Path

import dockerfile
import pytest

from cannery.catalog.load import load_catalog
from cannery.commands.render import KINDS, Context, render_kind
from cannery.errors import CatalogError
from cannery.lock import Lock
from cannery.render.checks import load_checked
from tests.catalogs import ci_entries, line_of

HEAD = """\
[catalog]
name = "m"
source = "https://example.com/m"
registry = "local"

[registries.local]
repository = "registry.example.com/m/images"

[bases.ubuntu-910b]
image = "registry.example.com/ubuntu:22.04"
python = "3.11"
os = "ubuntu"
os_version = "22.04"
chip = "910b"

[bases.ubuntu-a3]
extends = "ubuntu-910b"
chip = "a3"

[bases.openeuler-910b]
image = "registry.example.com/openeuler:24.03"
python = "3.11"
os = "openeuler"
os_version = "24.03"
chip = "910b"

[envs.e]
ASCEND_TOOLKIT_HOME = "/usr/local/Ascend/cann-{version}"

[toolkits."cann-8.5.1"]
version = "8.5.1"
env = "e"

[toolkits."cann-8.5.2"]
version = "8.5.2"
env = "e"
"""

# version × chip × os × flavour, minus (a3, openeuler), plus one 8.5.1-only package
MATRIX = HEAD + """
[images.cann]
base = "{matrix.os}-{matrix.chip}"
toolkit = "cann-{matrix.version}"
platforms = ["linux/amd64", "linux/arm64"]
tag = "{cann}-{chip}-{os}{os_version}-{matrix.flavour}"
matrix.name = "cann-{matrix.version}-{matrix.chip}-{matrix.os}-{matrix.flavour}"
matrix.version = ["8.5.1", "8.5.2"]
matrix.chip = ["910b", "a3"]
matrix.os = [
  { value = "ubuntu", packages = ["libnuma-dev"] },
  { value = "openeuler", packages = ["numactl-devel"] },
]
matrix.flavour = [
  "runtime",
  { value = "devel", steps = [{ run = "echo devel tools" }], env = { DEVEL = "1" } },
]
matrix.exclude = [{ chip = "a3", os = "openeuler" }]
matrix.include = [{ version = "8.5.1", os = "ubuntu", labels = { "org.example.lts" = "no" } }]
"""


def _hand() -> str:
    """MATRIX, written out image by image."""
    out = HEAD
    for version in ("8.5.1", "8.5.2"):
        for chip in ("910b", "a3"):
            for os_ in ("ubuntu", "openeuler"):
                if (chip, os_) == ("a3", "openeuler"):
                    continue
                for flavour in ("runtime", "devel"):
                    pkg = "libnuma-dev" if os_ == "ubuntu" else "numactl-devel"
                    out += f"""
[images."cann-{version}-{chip}-{os_}-{flavour}"]
base = "{os_}-{chip}"
toolkit = "cann-{version}"
platforms = ["linux/amd64", "linux/arm64"]
tag = "{{cann}}-{{chip}}-{{os}}{{os_version}}-{flavour}"
packages = ["{pkg}"]
"""
                    if flavour == "devel":
                        out += 'steps = [{ run = "echo devel tools" }]\nenv = { DEVEL = "1" }\n'
                    if (version, os_) == ("8.5.1", "ubuntu"):
                        out += 'labels = { "org.example.lts" = "no" }\n'
    return out


def _write(tmp: Path, text: str, name: str = "cannery.toml") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / name
    path.write_text(text)
    return path


def _problems(tmp: Path, text: str) -> list[str]:
    with pytest.raises(CatalogError) as exc:
        load_checked(_write(tmp, text))
    return list(exc.value.problems)


def _rendered(path: Path) -> dict[str, str]:
    loaded = load_catalog(path)
    ctx = Context(loaded, Lock(ci=ci_entries(loaded.catalog)), path.parent, path.name)
    return {str(p.relative_to(path.parent)): text for kind in KINDS
            for p, text in render_kind(kind, ctx, None).items()}


# ---------------------------------------------------------------------- expansion


def test_the_matrix_expands_to_named_images_with_their_fields(tmp_path: Path) -> None:
    cat = load_catalog(_write(tmp_path, MATRIX)).catalog
    assert len(cat.images) == 2 * 3 * 2  # (2 chips × 2 OSes − 1) × 2 versions × 2 flavours
    assert "cann-8.5.1-a3-openeuler-runtime" not in cat.images
    img = cat.images["cann-8.5.2-a3-ubuntu-devel"]
    assert (img.base, img.toolkit, img.packages) == ("ubuntu-a3", "cann-8.5.2", ["libnuma-dev"])
    assert img.tag == "{cann}-{chip}-{os}{os_version}-devel"
    assert img.env == {"DEVEL": "1"} and img.steps[0].run == "echo devel tools"
    assert cat.images["cann-8.5.2-910b-openeuler-runtime"].packages == ["numactl-devel"]
    # the include sets its label on the images whose words match it, and on no other
    assert cat.images["cann-8.5.1-a3-ubuntu-devel"].labels == {"org.example.lts": "no"}
    assert cat.images["cann-8.5.2-a3-ubuntu-devel"].labels == {}


def test_the_default_name_is_the_entry_and_its_words(tmp_path: Path) -> None:
    text = MATRIX.replace('matrix.name = "cann-{matrix.version}-{matrix.chip}-{matrix.os}-'
                          '{matrix.flavour}"\n', "")
    cat = load_catalog(_write(tmp_path, text)).catalog
    assert "cann-8.5.1-910b-ubuntu-devel" in cat.images


def test_an_include_that_names_every_axis_adds_an_image(tmp_path: Path) -> None:
    text = MATRIX.replace(
        "matrix.include = [",
        'matrix.include = [{ version = "8.5.2", chip = "a3", os = "openeuler", '
        'flavour = "runtime", base = "openeuler-910b", tag = "{cann}-a3oe", env = { A3OE = "1" } '
        '}, ')
    cat = load_catalog(_write(tmp_path, text)).catalog
    added = cat.images["cann-8.5.2-a3-openeuler-runtime"]
    # the os word's table applies too (it is a known word); the include's keys win
    assert (added.base, added.packages, added.tag) == (
        "openeuler-910b", ["numactl-devel"], "{cann}-a3oe")
    assert "cann-8.5.1-a3-openeuler-runtime" not in cat.images


def test_plan_render_and_schema_see_the_expanded_images(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, MATRIX)
    res = cli("plan", "--catalog", str(path))
    assert res.code == 0, res.err
    assert "cann-8.5.2-a3-ubuntu-devel → registry.example.com/m/images:8.5.2-a3-ubuntu22.04-devel" \
        in res.out
    res = cli("render", "dockerfile", "--catalog", str(path))
    assert res.code == 0, res.err
    assert len(list((tmp_path / "dockerfiles").glob("*.Dockerfile"))) == 12
    import json

    import jsonschema

    schema = json.loads(cli("schema").out)
    from cannery.util import toml

    jsonschema.validate(toml.loads(MATRIX), schema)
    bad = toml.loads(MATRIX.replace('"runtime",\n', '{ value = "runtime", stepz = [] },\n'))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_a_matrix_renders_what_the_hand_written_catalog_renders(tmp_path: Path) -> None:
    matrix = _rendered(_write(tmp_path / "matrix", MATRIX))
    hand = _rendered(_write(tmp_path / "hand", _hand()))
    assert sorted(matrix) == sorted(hand)
    assert len([p for p in matrix if p.endswith(".Dockerfile")]) == 12
    for path, text in matrix.items():
        assert text == hand[path], path


def _instructions(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.cmd, c.value) for c in dockerfile.parse_string(text)]


def test_runtime_and_devel_share_every_layer_up_to_the_devel_step(tmp_path: Path) -> None:
    """Flavours: the rendered Dockerfile orders its steps from least to most often changed, so
    the devel twin's instructions are the runtime's (same base, same steps, so the same
    layers for the builder's cache) up to the devel's own, which come last but the labels."""
    files = _rendered(_write(tmp_path, MATRIX))
    runtime = _instructions(files["dockerfiles/cann-8.5.2-910b-ubuntu-runtime.Dockerfile"])
    devel = _instructions(files["dockerfiles/cann-8.5.2-910b-ubuntu-devel.Dockerfile"])
    common = next(i for i, (a, b) in enumerate(zip(runtime, devel, strict=False)) if a != b)
    # everything of the runtime image but its closing LABEL (it names the tag) is shared
    assert runtime[common:] == [runtime[-1]] and runtime[-1][0] == "LABEL"
    assert devel[:common] == runtime[:common] and common > 10
    assert any(cmd == "RUN" and "echo devel tools" in v[0] for cmd, v in devel[common:])
    assert {cmd for cmd, _ in runtime[:common]} >= {"FROM", "RUN", "ENV"}


# ---------------------------------------------------------------------- errors


def test_an_error_names_the_entry_the_words_and_the_line(tmp_path: Path) -> None:
    text = MATRIX.replace('matrix.version = ["8.5.1", "8.5.2"]',
                          'matrix.version = ["8.5.1", "8.5.3"]')
    (problem,) = _problems(tmp_path, text)
    path = tmp_path / "cannery.toml"
    assert problem.startswith(
        f"{path}:{line_of(text, 'toolkit = ')}: images.cann[version=8.5.3, chip=910b, "
        "os=ubuntu, flavour=runtime].toolkit: unknown toolkit 'cann-8.5.3'")
    # written once in the entry, said once, with how many other images have it
    assert problem.endswith("(and 5 more images of images.cann)")


def test_a_key_an_axis_word_sets_is_reported_at_the_word(tmp_path: Path) -> None:
    text = MATRIX.replace('{ value = "openeuler", packages = ["numactl-devel"] }',
                          '{ value = "openeuler", packages = ["numactl devel"] }')
    problems = _problems(tmp_path, text)
    line = line_of(text, '{ value = "openeuler"')
    assert problems and all(p.startswith(f"{tmp_path / 'cannery.toml'}:{line}: images.cann[")
                            for p in problems), problems
    assert "os=openeuler" in problems[0] and "].packages" in problems[0]


def test_an_unknown_key_in_an_axis_table_is_said_once_where_written(tmp_path: Path) -> None:
    text = MATRIX.replace('steps = [{ run = "echo devel tools" }]', "stepz = []")
    (problem,) = _problems(tmp_path, text)
    assert f":{line_of(text, 'stepz')}: images.cann.matrix.flavour[1].stepz: unknown key " \
        "'stepz'" in problem and "did you mean 'steps'?" in problem


@pytest.mark.parametrize(("edit", "needle", "words"), [
    # a name that leaves out an axis makes two images of one name
    (('matrix.name = "cann-{matrix.version}-{matrix.chip}-{matrix.os}-{matrix.flavour}"',
      'matrix.name = "cann-{matrix.version}-{matrix.chip}-{matrix.os}"'), "matrix.name",
     "are both named 'cann-8.5.1-910b-ubuntu': use every axis in matrix.name"),
    # an expanded name that a plain image has
    (("[toolkits.\"cann-8.5.1\"]",
      '[images."cann-8.5.1-910b-ubuntu-devel"]\nbase = "ubuntu-910b"\nplatforms = ["linux/amd64"]\n'
      'tag = "plain"\n\n[toolkits."cann-8.5.1"]'), "matrix.name",
     "is named 'cann-8.5.1-910b-ubuntu-devel', as the image images.cann-8.5.1-910b-ubuntu-devel"),
    (('tag = "{cann}-{chip}-{os}{os_version}-{matrix.flavour}"',
      'tag = "{cann}-{chip}-{os}{os_version}-{matrix.flavor}"'), "tag = ",
     "images.cann.tag: {matrix.flavor}: no axis 'flavor' (axes: version, chip, os, flavour)"),
    (('matrix.exclude = [{ chip = "a3", os = "openeuler" }]',
      'matrix.exclude = [{ chip = "a4", os = "openeuler" }]'), "matrix.exclude",
     "images.cann.matrix.exclude[0]: exclude names chip='a4', which is not an axis"),
    (('matrix.exclude = [{ chip = "a3", os = "openeuler" }]',
      'matrix.exclude = [{ chip = "a3", os = "openeuler" }, { chip = "a3", os = "openeuler" }]'),
     "matrix.exclude", "images.cann.matrix.exclude[1]: this exclude matches no image"),
    (('matrix.include = [{ version = "8.5.1", os = "ubuntu",',
      'matrix.include = [{ version = "8.5.0", os = "ubuntu",'), "matrix.include",
     "images.cann.matrix.include[0]: this include matches no image, and names no word of chip, "
     "flavour"),
    (('matrix.chip = ["910b", "a3"]', 'matrix.python = ["910b", "a3"]'), "matrix.python",
     "images.cann.matrix.python: axis 'python' has the name of an image field"),
    (('matrix.chip = ["910b", "a3"]', 'matrix.chip = ["910b", "910b"]'), "matrix.chip = ",
     "images.cann.matrix.chip[1]: axis chip: '910b' is listed twice"),
    (('matrix.chip = ["910b", "a3"]', 'matrix.chip = ["910b", "A 3"]'), "matrix.chip = ",
     "images.cann.matrix.chip[1]: axis chip: 'A 3' is not a word"),
    # two axis words that set one key of one image: no order decides
    (('"runtime",\n', '{ value = "runtime", packages = ["jq"] },\n'), '{ value = "runtime"',
     "].packages: [version=8.5.1, chip=910b, os=ubuntu, flavour=runtime]: packages is set by "
     "both images.cann.matrix.os[0] and images.cann.matrix.flavour[0]"),
    (('base = "{matrix.os}-{matrix.chip}"', 'base = "ubuntu-910b"\nenv = { X = "{matrix.x}" }'
      '\n\n[images.plain]\nbase = "ubuntu-910b"\nplatforms = ["linux/amd64"]\ntag = "p"\n'
      'env = { Y = "{matrix.os}" }\n\n[images.cann2]\nbase = "ubuntu-910b"'), "Y = ",
     "images.plain.env.Y: '{matrix.os}' holds a {matrix.AXIS} placeholder, but the image has no "
     "matrix"),
])
def test_matrix_mistakes_are_named_at_their_line(tmp_path: Path, edit: tuple[str, str],
                                                 needle: str, words: str) -> None:
    old, new = edit
    assert old in MATRIX
    text = MATRIX.replace(old, new, 1)
    problems = _problems(tmp_path, text)
    line = line_of(text, needle)
    assert any(p.startswith(f"{tmp_path / 'cannery.toml'}:{line}: ") and words in p
               for p in problems), problems


def test_an_axis_word_with_no_effect_is_an_error(tmp_path: Path) -> None:
    """A word that changes only the name and the tag would build the same image twice."""
    text = MATRIX.replace('{ value = "devel", steps = [{ run = "echo devel tools" }], env = { '
                          'DEVEL = "1" } },', '"devel",')
    problems = _problems(tmp_path, text)
    line = line_of(text, '"devel",')
    assert problems == [
        f"{tmp_path / 'cannery.toml'}:{line}: images.cann.matrix.flavour[1]: flavour=devel has "
        "no effect: images.cann[version=8.5.1, chip=910b, os=ubuntu, flavour=devel] and "
        "[version=8.5.1, chip=910b, os=ubuntu, flavour=runtime] would be built alike (they "
        "differ only in name and tags); drop the word, or give it the fields it changes "
        '({ value = "devel", ... })'
    ]


def test_the_cli_refuses_a_bad_matrix_with_exit_2_and_no_traceback(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, MATRIX.replace('matrix.chip = ["910b", "a3"]', "matrix.chip = 3"))
    res = cli("render", "--catalog", str(path))
    assert res.code == 2 and "Traceback" not in res.err
    assert "images.cann.matrix.chip: axis chip: give a non-empty array" in res.err
    assert not (tmp_path / "dockerfiles").exists()


def test_a_matrix_entry_extends_an_image_and_an_image_builds_on_an_expanded_one(
        tmp_path: Path) -> None:
    """`extends` is resolved first (the entry inherits the plain image's keys, and a mistake
    inherited from it is reported at the parent's line); another image can be built FROM an
    expanded one by its name."""
    text = HEAD + """
[images.plain]
base = "ubuntu-910b"
toolkit = "cann-8.5.1"
platforms = ["linux/amd64"]
tag = "plain-{cann}"
packages = ["jq"]

[images.m]
extends = "plain"
toolkit = "cann-{matrix.version}"
tag = "m-{cann}-{chip}"
base = "ubuntu-{matrix.chip}"
matrix.version = ["8.5.1", "8.5.2"]
matrix.chip = ["910b", "a3"]

[images.oe]
base = "openeuler-910b"
platforms = ["linux/amd64"]
tag = "oe"

[images.app]
base = "image:m-8.5.2-a3"
platforms = ["linux/amd64"]
tag = "app"
steps = [{ run = "echo app" }]
"""
    cat = load_catalog(_write(tmp_path, text)).catalog
    assert sorted(cat.images) == ["app", "m-8.5.1-910b", "m-8.5.1-a3", "m-8.5.2-910b",
                                  "m-8.5.2-a3", "oe", "plain"]
    assert cat.images["m-8.5.2-a3"].packages == ["jq"]
    assert cat.images["app"].base == "image:m-8.5.2-a3"
    bad = text.replace('packages = ["jq"]', 'packages = ["j q"]')
    problems = _problems(tmp_path / "bad", bad)
    line = line_of(bad, 'packages = ["j q"]')
    assert any(p.startswith(f"{tmp_path / 'bad' / 'cannery.toml'}:{line}: images.m[version=8.5.1, "
                            "chip=910b].packages") for p in problems), problems


def test_a_word_adds_to_the_entry_s_env_and_labels_key_by_key(tmp_path: Path) -> None:
    text = MATRIX.replace('"runtime",\n', '{ value = "runtime", env = {} },\n') \
        .replace("[images.cann]\n", '[images.cann]\nenv = { KEEP = "1" }\n')
    cat = load_catalog(_write(tmp_path, text)).catalog
    assert cat.images["cann-8.5.1-910b-ubuntu-runtime"].env == {"KEEP": "1"}
    assert cat.images["cann-8.5.1-910b-ubuntu-devel"].env == {"KEEP": "1", "DEVEL": "1"}


def test_the_schema_takes_a_placeholder_in_any_patterned_field_the_loader_takes(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli
) -> None:
    """`original` (a path pattern) and an include's `original` written with {matrix.AXIS}:
    the loader puts the words in before checking the pattern, and the schema lets the
    placeholder through; a value that is neither a path nor a placeholder still fails both."""
    import json

    import jsonschema

    from cannery.util import toml

    text = MATRIX.replace(
        'platforms = ["linux/amd64", "linux/arm64"]\ntag',
        'platforms = ["linux/amd64", "linux/arm64"]\n'
        'original = "orig/{matrix.version}/{matrix.chip}-{matrix.os}.Dockerfile"\ntag', 1)
    assert "{matrix.version}/{matrix.chip}" in text
    path = _write(tmp_path, text)
    res = cli("plan", "--catalog", str(path))
    assert res.code == 0, res.err
    schema = json.loads(cli("schema").out)
    jsonschema.validate(toml.loads(text), schema)
    bad = toml.loads(text.replace(
        'original = "orig/{matrix.version}/{matrix.chip}-{matrix.os}.Dockerfile"',
        'original = "/abs/x.Dockerfile"', 1))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
