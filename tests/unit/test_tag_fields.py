"""Tag template fields: a component's version, the catalog's version and the lock's date;
unknown fields all reported in one run, each once; a field with no value for an image named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError
from cannery.lock import BaseEntry, GitEntry, Lock, git_key
from cannery.plan import plan_image
from tests.catalogs import line_of, minimal, only_components

GIT = "https://git.example.com/v.git"


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    return load_catalog(path)


def _errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(CatalogError) as exc:
        _load(tmp_path, text)
    return exc.value.problems


def test_component_catalog_version_and_date_fields(tmp_path: Path) -> None:
    text = (
        minimal()
        .replace('source = "https://example.com/test"',
                 'source = "https://example.com/test"\nversion = "1.2"')
        .replace('tag = "t-{cann}-{chip}-py{python}-{recipe}"',
                 'tag = "{version}-vllm{vllm_ascend}-{recipe}"\n'
                 'aliases = ["nightly-{name}-{date}", "{name}-{vllm}"]')
    )
    cat = _load(tmp_path, text).catalog
    # no lock: {date} says so, and is a valid tag
    spec = plan_image(cat, "one", Lock())
    assert spec.tags == ("1.2-vllmv0.18.0-r", "nightly-one-unlocked", "one-v0.18.0")
    assert dict(spec.tag_fields) == {
        "version": "1.2", "vllm_ascend": "v0.18.0", "recipe": "r", "date": "unlocked",
        "name": "one", "vllm": "v0.18.0",
    }
    # {date} is the UTC day of the newest lock entry the image uses, not the clock
    lock = Lock(
        bases={cat.bases["b910"].image: BaseEntry(
            digest="sha256:" + "a" * 64, resolved_at="2026-03-01T10:00:00+00:00")},
        git={git_key(GIT, "main"): GitEntry(
            url=GIT, ref="main", commit="b" * 40, resolved_at="2026-03-04T23:30:00-02:00")},
    )
    assert plan_image(cat, "one", lock).aliases[0] == "nightly-one-20260305"


def test_plan_shows_tags_and_their_fields(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cannery.toml"
    path.write_text(minimal().replace('-{recipe}"', '-{recipe}-v{vllm}"'))
    res = cli("plan", "--catalog", str(path), "--json", "one")
    assert res.code == 0, res.err
    one = json.loads(res.out)["images"][0]
    assert one["tags"] == ["t-8.5.2-910b-py3.11-r-vv0.18.0"]
    assert one["tag_fields"]["vllm"] == "v0.18.0"
    res = cli("plan", "--catalog", str(path), "one")
    assert "vllm=v0.18.0" in res.out


def test_every_unknown_field_once_even_when_inherited(tmp_path: Path) -> None:
    """Two unknown fields in the tag image `two` inherits, one in an alias: one run reports
    all three, each once, at the line where it is written."""
    text = minimal().replace(
        'tag = "t-{cann}-{chip}-py{python}-{recipe}"',
        'tag = "t-{model}-{torchnpu}-{recipe}"\naliases = ["x-{model}"]',
    )
    problems = _errors(tmp_path, text)
    tag_line = line_of(text, 'tag = "t-{model}')
    alias_line = line_of(text, 'aliases = ["x-{model}"]')
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{tmp_path}/cannery.toml:{tag_line}: images.one.tag: "
                                  "unknown tag template fields {model}, {torchnpu} "
                                  "(did you mean {torch}?")
    assert problems[1].startswith(f"{tmp_path}/cannery.toml:{alias_line}: images.one.aliases[0]: "
                                  "unknown tag template field {model} (")
    assert all(p.count("{model}") == 1 for p in problems)


@pytest.mark.parametrize(
    ("edit", "field", "why"),
    [
        (lambda t: t.replace('{recipe}"', '{recipe}-{version}"'), "version",
         "catalog.version is not set"),
        (lambda t: t.replace('{recipe}"', '{recipe}-{torch}"'), "torch",
         "component 'torch' has no version"),
        (lambda t: t.replace('{recipe}"', '{recipe}-{other}"')
         .replace("[images.one]", '[components.other]\npip = ["x"]\nversion = "1"\n\n[images.one]'),
         "other", "component 'other' is not one of its components"),
        # an empty value would vanish from the tag ("t{version}-x" → "t-x"), silently
        (lambda t: t.replace('{recipe}"', '{recipe}-{version}"')
         .replace('[catalog]\nname = "test"', '[catalog]\nname = "test"\nversion = ""'),
         "version", "catalog.version is empty"),
        (lambda t: t.replace('{recipe}"', '{recipe}-{torch}"')
         .replace("pin = true", 'pin = true\nversion = ""'),
         "torch", "component 'torch' has no version"),
    ],
    ids=["catalog-version", "component-without-version", "component-not-in-image",
         "catalog-version-empty", "component-version-empty"],
)
def test_field_without_a_value_names_image_and_field(edit, field, why, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    problems = _errors(tmp_path, edit(minimal()))
    assert len(problems) == 2  # images one and two (which inherits the tag): each named
    for image, problem in zip(("one", "two"), problems, strict=True):
        assert problem.endswith(f"images.one.tag: image {image}: tag field {{{field}}} has no "
                                f"value ({why})"), problem


def test_cann_is_lowercased_and_cann_exact_is_as_written(tmp_path: Path) -> None:
    """{cann} writes the toolkit's version as Ascend's tags do (8.0.RC3 → 8.0.rc3); a template
    that needs the version as written asks for {cann_exact}."""
    text = (
        only_components(minimal(), "torch")
        .replace('version = "8.5.2"\nenv = "cann"', 'version = "8.0.RC3"\nenv = "cann"')
        .replace('tag = "t-{cann}-{chip}-py{python}-{recipe}"',
                 'tag = "t-{cann}-{recipe}"\naliases = ["{cann_exact}-{recipe}"]')
    )
    loaded = _load(tmp_path, text)
    spec = plan_image(loaded.catalog, "one", Lock())
    assert (spec.tag, spec.aliases) == ("t-8.0.rc3-r", ("8.0.RC3-r",))
    assert ("cann_exact", "8.0.RC3") in spec.tag_fields
