"""`cannery render` with no kind and `--check`; the bake file and tags doc against the catalog;
the example family catalog kept in sync with the files committed beside it."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.plan import plan, platform_arch
from cannery.render.bake import render_bake
from cannery.render.docs import render_docs
from tests.conftest import GOLDEN, ROOT

EXAMPLE = ROOT / "examples" / "verl-ascend"
EMBEDDED = GOLDEN / "workflow" / "embedded"
LOCK = read_lock(GOLDEN / "cannery.lock")


def _embedded() -> tuple[list, dict[str, str]]:  # type: ignore[type-arg]
    cat = load_catalog().catalog
    specs = plan(cat, LOCK)
    return specs, {s.name: f"{cat.ci.dockerfiles}/{s.name}.Dockerfile" for s in specs}


def test_bake_and_docs_golden() -> None:
    """Refresh with tests/golden/refresh.sh and review the diff."""
    specs, dockerfiles = _embedded()
    assert render_bake(specs, dockerfiles) == (EMBEDDED / "docker-bake.json").read_text()
    assert render_docs(specs, dockerfiles, "TAGS.md", "verl-ascend") == (
        EMBEDDED / "TAGS.md"
    ).read_text()


def _bake_matches(bake: dict, catalog: Path | None, root: Path) -> None:  # type: ignore[type-arg]
    cat = load_catalog(catalog).catalog
    specs = plan(cat, read_lock(root / "cannery.lock"))
    assert set(bake) == {"group", "target"}
    assert bake["group"]["default"]["targets"] == [s.name for s in specs]
    targets = bake["target"]
    caches: set[str] = set()
    for s in specs:
        t = targets[s.name]
        assert t["platforms"] == list(s.platforms)
        assert t["tags"] == [f"{s.repository}:{tag}" for tag in s.tags]  # tag, then aliases
        assert t["tags"][0] == s.reference
        # SOC_VERSION is set inside the one RUN that compiles, not passed as a build arg; the
        # per-platform inputs label is `cannery build`'s, not the bake file's.
        assert "args" not in t and "io.cannery.inputs" not in t["labels"]
        assert t["labels"]["org.opencontainers.image.source"] == s.source
        assert (root / t["dockerfile"]).is_file()
        assert t["context"] == "."
        for p in s.platforms:
            leg = targets[f"{s.name}-{platform_arch(p)}"]
            assert leg["inherits"] == [s.name] and leg["platforms"] == [p]
            (src,), (dst,) = leg["cache-from"], leg["cache-to"]
            ref = src.removeprefix("type=registry,ref=")
            assert dst == f"type=registry,ref={ref},mode=max"
            caches.add(ref)
    assert len(caches) == sum(len(s.platforms) for s in specs)  # never shared
    for name, t in targets.items():  # only keys buildx bake knows
        assert set(t) <= {"context", "dockerfile", "platforms", "tags", "args", "labels",
                          "inherits", "cache-from", "cache-to"}, name
        for key in ("platforms", "tags", "inherits", "cache-from", "cache-to"):
            assert all(isinstance(v, str) for v in t.get(key, []))


def test_example_bake_matches_catalog() -> None:
    bake = json.loads((EXAMPLE / "docker-bake.json").read_text())
    _bake_matches(bake, EXAMPLE / "cannery.toml", EXAMPLE)


def test_embedded_bake_matches_catalog(tmp_path: Path) -> None:
    bake = json.loads((EMBEDDED / "docker-bake.json").read_text())
    (tmp_path / "dockerfiles").mkdir()
    for name in bake["group"]["default"]["targets"]:
        (tmp_path / "dockerfiles" / f"{name}.Dockerfile").write_text("")
    shutil.copy(GOLDEN / "cannery.lock", tmp_path / "cannery.lock")
    _bake_matches(bake, None, tmp_path)


def test_example_docs_rows_and_links() -> None:
    cat = load_catalog(EXAMPLE / "cannery.toml").catalog
    specs = plan(cat, read_lock(EXAMPLE / "cannery.lock"))
    text = (EXAMPLE / cat.ci.docs).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == len(specs)
    here = posixpath.dirname(cat.ci.docs)
    for row, s in zip(rows, specs, strict=True):
        assert f"`{s.reference}`" in row and s.soc in row and s.toolkit.version in row
        (link,) = re.findall(r"\]\(([^)]+)\)", row)
        assert (EXAMPLE / here / link).is_file()


def test_example_in_sync(cli) -> None:  # type: ignore[no-untyped-def]
    """The example's committed Dockerfiles, workflow, bake file and doc are what it renders."""
    res = cli("render", "--catalog", str(EXAMPLE / "cannery.toml"), "--check")
    assert res.code == 0, res.err


def test_example_line_count_target() -> None:
    lines = (EXAMPLE / "cannery.toml").read_text().count("\n")
    assert lines < 300
    assert len(load_catalog(EXAMPLE / "cannery.toml").catalog.images) == 8


@pytest.fixture
def example_copy(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(EXAMPLE / "cannery.toml", root / "cannery.toml")
    shutil.copy(EXAMPLE / "cannery.lock", root / "cannery.lock")  # its [ci] pins
    assert cli("render", "--catalog", str(root / "cannery.toml")).code == 0
    return root


KIND_FILES = {
    "dockerfile": "docker/ascend/vllm-a3.Dockerfile",
    "workflow": ".github/workflows/docker-build-ascend.yml",
    "bake": "docker-bake.json",
    "docs": "docker/ascend/supported_tags.md",
}


@pytest.mark.parametrize("kind", list(KIND_FILES))
def test_check_detects_one_character_edit(example_copy: Path, kind: str, cli) -> None:  # type: ignore[no-untyped-def]
    cat = str(example_copy / "cannery.toml")
    assert cli("render", "--catalog", cat, "--check").code == 0
    path = example_copy / KIND_FILES[kind]
    text = path.read_text()
    i = text.index("a", len(text) // 2)
    path.write_text(text[:i] + "b" + text[i + 1:])
    for args in (("render", "--catalog", cat, "--check"),
                 ("render", kind, "--catalog", cat, "--check")):
        res = cli(*args)
        assert res.code == 1, args
        assert str(path) in res.err and "differ from the catalog" in res.err
        assert "+" in res.err  # the diff is shown
    assert path.read_text() != text  # --check wrote nothing


def test_check_reports_missing_file(example_copy: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (example_copy / "docker-bake.json").unlink()
    res = cli("render", "--catalog", str(example_copy / "cannery.toml"), "--check")
    assert res.code == 1 and "docker-bake.json: missing" in res.err


def test_render_all_writes_every_kind_and_is_stable(example_copy: Path, cli) -> None:  # type: ignore[no-untyped-def]
    files = sorted(p for p in example_copy.rglob("*") if p.is_file())
    # catalog, lock, 8 Dockerfiles, workflow and the 3 reusable ones it calls, CI's
    # requirements, the lock update's list of paths, bake, docs, and the repository's overview,
    # description and short description
    assert len(files) == 2 + 8 + 8 + 3
    before = {p: p.read_bytes() for p in files}
    assert cli("render", "--catalog", str(example_copy / "cannery.toml")).code == 0
    assert {p: p.read_bytes() for p in files} == before
    for p in files:
        assert before[p] == (EXAMPLE / p.relative_to(example_copy)).read_bytes()


def test_render_one_kind_to_out(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "wf.yml"
    res = cli("render", "workflow", "--lock", str(GOLDEN / "cannery.lock"), "--out", str(out))
    assert res.code == 0
    assert out.read_text() == (EMBEDDED / "cannery-images.yml").read_text()
    # and, beside it, the reusable workflows it calls (named as [ci] workflow's, which
    # its call jobs name) and the hashed requirements its jobs install cannery from
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cannery-images-build.yml", "cannery-images-merge.yml", "cannery-images-pr.yml",
        "cannery-requirements.txt", "wf.yml"]
    assert (tmp_path / "cannery-requirements.txt").read_text() == (
        EMBEDDED / "cannery-requirements.txt").read_text()


def _runs(path: Path) -> list[str]:
    import dockerfile

    return [c.value[0] for c in dockerfile.parse_file(str(path)) if c.cmd == "RUN"]


def test_sglang_project_subdir_pyproject_and_extras() -> None:
    runs = _runs(EXAMPLE / "docker/ascend/sglang-a2.Dockerfile")
    (run,) = [r for r in runs if "git init -q /sglang;" in r]  # dest = "/sglang", as verl's
    cp = "cp /sglang/python/pyproject_npu.toml /sglang/python/pyproject.toml"
    install = "-e '/sglang/python[all_npu]'"
    assert cp in run and install in run
    assert run.index("checkout -q FETCH_HEAD") < run.index(cp) < run.index(install)


@pytest.mark.parametrize("image", ["sglang-a2", "sglang-a3"])
def test_wheel_zip_is_verified_before_it_is_opened(image: str) -> None:
    chip = "910b" if image.endswith("a2") else "a3"
    (run,) = [r for r in _runs(EXAMPLE / f"docker/ascend/{image}.Dockerfile")
              if "sgl-kernel-npu" in r]
    assert f"cann8.5.0-{chip}-x86_64.zip" in run and f"cann8.5.0-{chip}-aarch64.zip" in run
    check = run.index("sha256sum -c -")
    assert check < run.index("python3 -m zipfile -e") < run.index("xargs -0 python3 -m pip")
    assert "-c /opt/cannery/constraints.txt" in run  # torch stays at its pin
    assert "--no-check-certificate" not in run and "--proto =https" in run


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('git = "https://g/x.git"\nref = "v1"\nsubdir = "../etc"\n', "components.bad.subdir"),
        ('git = "https://g/x.git"\nref = "v1"\npyproject = "a b.toml"\n',
         "components.bad.pyproject"),
        ('git = "https://g/x.git"\nref = "v1"\nextras = ["npu];touch /x;["]\n',
         "components.bad.extras"),
        ('pip = ["x"]\nsubdir = "python"\n', "components.bad"),
    ],
)
def test_bad_project_fields(tmp_path: Path, cli, body: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    """These land in a RUN line: a path outside the source or shell text is rejected."""
    from tests.catalogs import minimal

    path = tmp_path / "c.toml"
    path.write_text(minimal() + "\n[components.bad]\n" + body)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2
    assert f"{path}:" in res.err and needle in res.err, res.err


def test_workflow_and_bake_agree() -> None:
    """The legs `cannery ci plan` hands the workflow on a manual run of every image are the
    bake file's targets: the same platforms, a target per (image, arch), the same tag."""
    from cannery.catalog.load import load_catalog
    from cannery.lock import read_lock
    from cannery.plan import plan
    from tests.unit.workflows import build_legs, merges, outputs

    doc = json.loads((EXAMPLE / "docker-bake.json").read_text())
    bake, images = doc["target"], doc["group"]["default"]["targets"]
    cat = load_catalog(EXAMPLE / "cannery.toml").catalog
    out = outputs(cat, plan(cat, read_lock(EXAMPLE / "cannery.lock")), "workflow_dispatch")
    assert sorted(m["image"] for m in merges(out)) == sorted(images)
    for name in images:
        legs = [leg for leg in build_legs(out) if leg["image"] == name]
        assert [leg["platform"] for leg in legs] == bake[name]["platforms"]
        assert {f"{name}-{leg['arch']}" for leg in legs} <= set(bake)
        (entry,) = [m for m in merges(out) if m["image"] == name]
        assert entry["reference"] == bake[name]["tags"][0]  # the tag; aliases follow
