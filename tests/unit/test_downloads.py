"""An image's pinned downloads (`[[images.NAME.downloads]]`): `cannery lock` resolves each
platform's URL, the plan carries its sha256, the rendered step fetches it over verified TLS,
checks it (naming the URL and both digests on a mismatch) before placing it, each at its place
among the steps; what cannot work is refused at validation, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError
from cannery.lock import Lock, Resolvers, required_inputs, update_lock
from cannery.plan import plan_image
from cannery.render.dockerfile import render_dockerfile
from tests.catalogs import tiny

TOOL = """
[[images.one.downloads]]
name = "tool"
url = "https://files.example.com/tool-{uname_arch}"
path = "/usr/local/bin/tool"
executable = true
at = "before-toolkit"

[[images.one.downloads]]
name = "data"
url = "https://files.example.com/data-{arch}.tar.gz"
path = "/opt/data"
unpack = true
"""


def _catalog(tmp_path: Path, extra: str = TOOL) -> Path:
    path = tmp_path / "cannery.toml"
    path.write_text(tiny("fam", "registry.example.com/fam/images", "registry.example.com/b:1",
                         "t-{chip}") + extra)
    return path


def _locked(path: Path) -> tuple[object, Lock]:
    cat = load_catalog(path).catalog
    lock = update_lock(cat, Lock(), Resolvers(
        base=lambda image: "sha256:" + "a" * 64, git=lambda url, ref: "b" * 40,
        url=lambda url: (f"{abs(hash(url)):064d}"[:64], 1)))
    return cat, lock


def test_lock_resolves_each_platforms_url(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path)).catalog
    urls = {i.key for i in required_inputs(cat) if i.kind == "url"}
    assert urls == {"https://files.example.com/tool-x86_64", "https://files.example.com/tool-aarch64",
                    "https://files.example.com/data-amd64.tar.gz",
                    "https://files.example.com/data-arm64.tar.gz"}


def test_the_step_checks_before_it_places_and_names_both_digests(tmp_path: Path) -> None:
    cat, lock = _locked(_catalog(tmp_path))
    spec = plan_image(cat, "one", lock)  # type: ignore[arg-type]
    assert not spec.unlocked()
    tool_sha = lock.urls["https://files.example.com/tool-x86_64"].sha256
    text = render_dockerfile(spec)
    assert f"amd64) tool_url=https://files.example.com/tool-x86_64; tool_sha256={tool_sha} ;;" \
        in text
    check = text.index('if ! echo "${tool_sha256}  /tmp/tool.run" | sha256sum -c - >/dev/null')
    assert 'echo "cannery: ${tool_url}: sha256 ${got%% *}, but cannery.lock has ' \
        '${tool_sha256}" >&2; exit 1; fi' in text
    placed = text.index("install -D -T -m 0755 /tmp/tool.run /usr/local/bin/tool")
    assert check < placed
    assert "tar -xf /tmp/data.run -C /opt/data --no-same-owner" in text
    assert "install -D -m 0644" not in text  # the unpacked one is not installed as a file
    # each at its place: the tool before the toolkit, the data after the installs
    toolkit = text.index("ENV ASCEND_TOOLKIT_HOME")
    assert placed < toolkit < text.index("tar -xf /tmp/data.run")
    # provenance and the input digest see them as inputs
    assert {d.url for d in spec.downloads} >= {"https://files.example.com/data-arm64.tar.gz"}


def test_unlocked_downloads_refuse_to_build(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path)).catalog
    spec = plan_image(cat, "one", Lock())
    assert "download tool for amd64 (no sha256)" in spec.unlocked()
    text = render_dockerfile(spec)
    assert "cannery: UNLOCKED tool download has no sha256 for this platform" in text


def test_the_rendered_step_lints_clean(tmp_path: Path) -> None:
    from cannery.lint.config import LintConfig
    from cannery.lint.engine import Engine

    cat, lock = _locked(_catalog(tmp_path))
    text = render_dockerfile(plan_image(cat, "one", lock))  # type: ignore[arg-type]
    assert Engine(LintConfig()).lint_text("one.Dockerfile", text, "dockerfile") == []


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ('url = "http://files.example.com/x"', "downloads[0].url", "must be https://"),
        ('url = "https://files.example.com/x?X-Amz-Signature=1"', "downloads[0].url", "credential"),
        ('url = "https://files.example.com/x-{version}"', "downloads[0].url",
         "unknown template field"),
        ('url = "https://files.example.com/x"\nunpack = true\nexecutable = true', "downloads[0]",
         "executable has no effect with unpack"),
        ('url = "https://files.example.com/x"\npath = "/"', "downloads[0]", "give the file"),
        ('url = "https://files.example.com/x"\nname = "9p"', "downloads[0].name",
         "starting with a letter"),
        ('url = "https://files.example.com/x"\npath = "/opt/../etc/x"', "downloads[0]",
         "without '.', '..' or '//'"),
    ],
)
def test_what_cannot_work_is_refused(tmp_path: Path, body: str, field: str, words: str) -> None:
    path_line = "" if "path =" in body else 'path = "/opt/x"\n'
    name_line = "" if "name =" in body else 'name = "x"\n'
    extra = f'\n[[images.one.downloads]]\n{name_line}{path_line}{body}\n'
    with pytest.raises(CatalogError) as exc:
        load_catalog(_catalog(tmp_path, extra))
    assert f"images.one.{field}" in str(exc.value) and words in str(exc.value)


def test_two_downloads_of_one_name_are_refused_at_the_second(tmp_path: Path) -> None:
    """Their build variables would be one (the second URL written over the first, its bytes
    then placed at the first's path with a passing check)."""
    extra = "".join(f'\n[[images.one.downloads]]\nname = "{n}"\n'
                    f'url = "https://files.example.com/{n}"\npath = "/opt/{n}"\n'
                    for n in ("tool-a", "tool.a"))
    path = _catalog(tmp_path, extra)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    assert "images.one.downloads[1].name: 'tool.a': another download of this image is named " \
        "'tool-a'" in str(exc.value)
