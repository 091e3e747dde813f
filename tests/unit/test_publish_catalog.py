"""The catalog's publishing settings: registries per image with a catalog default, media types
per registry, aliases with one owner; bad ones exit 2 naming file:line and field. And the plan
they give (registries in order, the first the one the image is built into)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.builder.jobs import plan_build
from cannery.builder.registries import platform_tag
from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import RegistryTarget, plan
from tests.catalogs import line_of, minimal

MIRRORS = """
[registries.ghcr]
repository = "ghcr.io/example/images"

[registries.swr]
repository = "swr.cn-south-1.myhuaweicloud.com/example/images"
media_types = "docker"
"""


def with_mirrors(text: str) -> str:
    text = text.replace('registry = "local"\n', 'registry = "local"\nmirrors = ["ghcr", "swr"]\n')
    return text.replace("[bases.b910]", MIRRORS.lstrip() + "\n[bases.b910]", 1)


GOOD = with_mirrors(minimal())

CASES = [
    (
        "unknown-default-mirror",
        lambda t: t.replace('mirrors = ["ghcr", "swr"]', 'mirrors = ["ghcr", "swt"]'),
        'mirrors = ["ghcr", "swt"]',
        "catalog.mirrors[1]: unknown registry 'swt' (did you mean 'swr'?)",
    ),
    (
        "image-mirror-is-its-own-registry",
        lambda t: t.replace('recipe = "s"', 'recipe = "s"\nmirrors = ["local"]'),
        'mirrors = ["local"]',
        "images.two.mirrors[0]: 'local' is the image's own registry, not a mirror",
    ),
    (
        "media-types",
        lambda t: t.replace('media_types = "docker"', 'media_types = "docker-v2"'),
        'media_types = "docker-v2"',
        "registries.swr.media_types",
    ),
]


@pytest.mark.parametrize(
    ("edit", "needle", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_publish_settings(tmp_path: Path, cli, edit, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    text = edit(GOOD)
    assert text != GOOD, "the edit did not apply"
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2, res.err
    assert words in res.err, res.err
    first = needle.split("\n")[0]
    line = line_of(text, first) if "\n" not in needle else text[: text.index(needle)].count(
        "\n"
    ) + 2
    assert f"{path}:{line}" in res.err, res.err
    assert "Traceback" not in res.err


def test_registries_in_order_first_is_built_into(tmp_path: Path) -> None:
    text = GOOD.replace('recipe = "s"', 'recipe = "s"\nmirrors = ["swr"]\naliases = ["latest"]')
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    cat = load_catalog(path).catalog
    one, two = plan(cat, Lock(), ["one", "two"])
    assert one.registries == (
        RegistryTarget("local", "registry.example.com/test/images", "oci"),
        RegistryTarget("ghcr", "ghcr.io/example/images", "oci"),
        RegistryTarget("swr", "swr.cn-south-1.myhuaweicloud.com/example/images", "docker"),
    )
    assert [r.name for r in two.registries] == ["local", "swr"]  # its own list, not the default
    assert two.aliases == ("latest",) and one.aliases == ()


def test_platform_tags(tmp_path: Path) -> None:
    path = tmp_path / "catalog.toml"
    path.write_text(GOOD)
    spec = plan(load_catalog(path).catalog, Lock(), ["one"])[0]
    job = plan_build(spec, "FROM scratch\n", Lock())
    assert [platform_tag(job.tags[0], p.platform) for p in job.platforms] == [
        f"{job.tags[0]}-amd64",
        f"{job.tags[0]}-arm64",
    ]
