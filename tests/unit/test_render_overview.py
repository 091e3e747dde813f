"""`cannery render docs`: per repository an OVERVIEW.md, the registry page's description and
Docker Hub's short description, from the catalog and its lock only (no registry here; the
digests and sizes read from one are tests/e2e/test_docs_from_registry.py's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import Lock, Resolvers, dump_lock, read_lock, update_lock
from cannery.plan import plan
from cannery.pydeps import PythonRequest
from cannery.render.overview import (
    FULL_LIMIT,
    SHORT_LIMIT,
    render_description,
    render_overview,
    render_short,
)
from cannery.util.pynames import requirement_name
from tests.catalogs import minimal

ROOT = Path(__file__).resolve().parents[2]


def _pins(req: PythonRequest) -> list[str]:
    """Version 1.16.0 of each requirement named (CI's: cannery)."""
    names = ["cannery"] if req.image == "ci" else [requirement_name(r) for r in req.requirements]
    return [f"{name}==1.16.0 --hash=sha256:{'d' * 64}" for name in names]


RESOLVE = Resolvers(
    base=lambda image: "sha256:" + "a" * 64,
    git=lambda url, ref: "b" * 40,
    url=lambda url: ("c" * 64, 1),
    python=_pins,
)


def _render(tmp_path: Path, lock: Lock | None) -> dict[str, str]:
    from cannery.cli import main

    cat = tmp_path / "cannery.toml"
    if not cat.exists():
        cat.write_text(minimal())
    if lock is not None:
        (tmp_path / "cannery.lock").write_text(dump_lock(lock))
    with pytest.raises(SystemExit) as exc:
        main(["render", "docs", "--catalog", str(cat)])
    assert exc.value.code == 0
    return {p.relative_to(tmp_path).as_posix(): p.read_text()
            for p in (tmp_path / "overview").rglob("*") if p.is_file()}


def _locked(tmp_path: Path) -> Lock:
    (tmp_path / "cannery.toml").write_text(minimal())
    return update_lock(load_catalog(tmp_path / "cannery.toml").catalog, Lock(), RESOLVE)


def test_each_repository_gets_an_overview_a_description_and_a_short_one(tmp_path: Path) -> None:
    files = _render(tmp_path, _locked(tmp_path))
    assert sorted(files) == [
        "overview/registry.example.com_test_images/OVERVIEW.md",
        "overview/registry.example.com_test_images/description.md",
        "overview/registry.example.com_test_images/short.txt",
    ]
    overview = files["overview/registry.example.com_test_images/OVERVIEW.md"]
    assert "# registry.example.com/test/images" in overview
    assert "Every input of every image" in overview and "not locked" not in overview
    assert "| Tags | Chip | OS | Architectures | CANN | Python | Components |" in overview
    assert f"@ {'b' * 12}" in overview  # the locked commit, not the ref alone
    assert "torch 1.16.0" in overview  # the locked pin, not the catalog's specifier


def test_a_lock_input_that_moves_moves_the_docs(tmp_path: Path) -> None:
    """The docs come from the lock: another locked commit is another overview."""
    lock = _locked(tmp_path)
    before = _render(tmp_path, lock)
    (key, entry), *_ = lock.git.items()
    moved = lock.model_copy(update={"git": {**lock.git, key: entry.model_copy(
        update={"commit": "e" * 40})}})
    after = _render(tmp_path, moved)
    name = "overview/registry.example.com_test_images/OVERVIEW.md"
    assert before[name] != after[name]
    assert f"@ {'e' * 12}" in after[name] and f"@ {'e' * 12}" not in before[name]


def test_nothing_unlocked_is_given_a_version(tmp_path: Path) -> None:
    """With no lock, no commit, pin or checksum appears: each says it is not locked."""
    files = _render(tmp_path, None)
    overview = files["overview/registry.example.com_test_images/OVERVIEW.md"]
    assert "not locked" in overview and "still have inputs the lock does not hold" in overview
    assert not re.search(r"@ [0-9a-f]{12}\b|==\d|sha256 [0-9a-f]{12}", overview)
    assert "inputs locked" not in files["overview/registry.example.com_test_images/short.txt"]


def test_the_registry_descriptions_keep_within_their_limits() -> None:
    cat = load_catalog(ROOT / "examples" / "vllm-ascend" / "cannery.toml").catalog
    lock = read_lock(ROOT / "examples" / "vllm-ascend" / "cannery.lock")
    specs = plan(cat, lock) * 150  # 2,400 rows
    text = render_description("quay.io/x/y", specs, "cannery.toml", "https://example.com/o")
    assert len(text) <= FULL_LIMIT
    assert re.search(r"… \d+ more tags: see https://example.com/o", text)
    assert len(render_short(specs)) <= SHORT_LIMIT + 1  # and its newline
    few = render_description("quay.io/x/y", specs[:2], "cannery.toml", "https://e.com/o")
    assert "more tags" not in few


def test_every_example_has_its_overview(tmp_path: Path) -> None:
    """`render --check` covers the overviews: each example has them committed."""
    for example in sorted((ROOT / "examples").iterdir()):
        if not (example / "cannery.toml").is_file():
            continue
        cat = load_catalog(example / "cannery.toml").catalog
        specs = plan(cat, read_lock(example / "cannery.lock"))
        assert list((example / Path(cat.ci.docs).parent / "overview").glob("*/OVERVIEW.md"))
        assert render_overview(specs[0].repository, specs, "cannery.toml").startswith("# ")


def test_a_hand_edit_is_caught_by_check(tmp_path: Path) -> None:
    from cannery.cli import main

    files = _render(tmp_path, _locked(tmp_path))
    name = "overview/registry.example.com_test_images/OVERVIEW.md"
    edited = files[name].replace("| 3.11 |", "| 3.12 |", 1)
    assert edited != files[name]
    (tmp_path / name).write_text(edited)
    with pytest.raises(SystemExit) as exc:
        main(["render", "--catalog", str(tmp_path / "cannery.toml"), "--check"])
    assert exc.value.code == 1
