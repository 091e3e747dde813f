"""The lock's update policy, with resolvers that answer from a table (no network): re-resolving
an entry to the same value keeps its time; a changed value gets a new one."""

from __future__ import annotations

from pathlib import Path

from cannery.catalog.load import load_catalog
from cannery.lock import Lock, Resolvers, read_lock, update_lock
from cannery.pydeps import PythonRequest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _same_values(lock: Lock) -> Resolvers:
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}

    def python(req: PythonRequest) -> list[str]:
        kept = lock.ci.get(req.arch) if req.image == "ci" else lock.python.get(req.key)
        return list(kept.requirements) if kept else [f"six==1.16.0 --hash=sha256:{'a' * 64}"]

    return Resolvers(
        base=lambda image: lock.bases[image].digest,
        git=lambda url, ref: commits[(url, ref)],
        url=lambda url: (lock.urls[url].sha256, lock.urls[url].size),
        python=python,
    )


def test_update_all_with_nothing_moved_keeps_every_time() -> None:
    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    old = update_lock(cat, golden, _same_values(golden))  # every python entry filled in
    asked: list[str] = []
    new = update_lock(cat, old, _same_values(old), {"all"}, progress=lambda i: asked.append(i.key))
    assert asked  # everything was resolved again
    assert new == old  # and nothing, not even a time, changed


def test_a_changed_value_gets_a_new_time_and_only_it() -> None:
    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    old = update_lock(cat, golden, _same_values(golden))
    moved = sorted(old.bases)[0]
    resolvers = _same_values(old)
    resolvers.base = lambda i: "sha256:" + "9" * 64 if i == moved else old.bases[i].digest
    new = update_lock(cat, old, resolvers, {"all"})
    assert new.bases[moved].digest == "sha256:" + "9" * 64
    assert new.bases[moved].resolved_at != old.bases[moved].resolved_at
    assert {k: v for k, v in new.bases.items() if k != moved} == {
        k: v for k, v in old.bases.items() if k != moved
    }
    assert new.git == old.git and new.urls == old.urls and new.python == old.python


def test_the_lock_knows_unpinned_python_as_the_planner_does() -> None:
    """lock.py may not import the planner; its own reading must agree with plan's."""
    from cannery.lock import _python_unpinned
    from cannery.plan import plan

    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    full = update_lock(cat, golden, _same_values(golden))
    half = full.model_copy(update={"python": dict(sorted(full.python.items())[::2])})
    for lock in (golden, full, half, Lock()):
        want = {s.name for s in plan(cat, lock) if s.unpinned()}
        assert {n for n in cat.images if _python_unpinned(cat, lock, n)} == want
    assert {s.name for s in plan(cat, half) if s.unpinned()}  # the comparison is not vacuous


def test_update_of_a_wheel_component_whose_bytes_moved_re_resolves_its_python(
    tmp_path: Path,
) -> None:
    """`--update NAME` of a wheel component re-resolves the Python pins of the images that
    install it when its bytes changed (a nightly wheel at a fixed URL): the request names the
    URL only, so the entry looked current and kept the old wheel's dependencies."""
    from tests.catalogs import minimal

    text = minimal().replace(
        "[images.one]",
        '[components.npu-wheel]\nwheel = "https://files.example.com/npu-{uname_arch}.whl"\n'
        'package = "npu"\n\n[images.one]',
    ).replace('components = ["torch", "vllm", "vllm-ascend"]',
              'components = ["torch", "vllm", "vllm-ascend", "npu-wheel"]')
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    cat = load_catalog(path).catalog
    sha = {"v": "1"}

    def python(req: PythonRequest) -> list[str]:
        if req.image == "ci":  # [ci] install: a pin of cannery itself, or lock refuses it
            return [f"cannery==0.1.0 --hash=sha256:{'c' * 64}"]
        return [f"dep=={sha['v']} --hash=sha256:{'a' * 64}"]

    resolvers = Resolvers(
        base=lambda image: "sha256:" + "b" * 64,
        git=lambda url, ref: "c" * 40,
        url=lambda url: ((sha["v"] if "npu-" in url else "0") * 64, 1),
        python=python,
    )
    old = update_lock(cat, Lock(), resolvers)
    sha["v"] = "2"  # the wheel at the same URL is new bytes, with a new dependency
    new = update_lock(cat, old, resolvers, {"npu-wheel"})
    moved = [u for u in new.urls if "npu-" in u]
    assert moved and all(new.urls[u].sha256 == "2" * 64 for u in moved)
    for key in ("one/amd64", "one/arm64", "two/amd64", "two/arm64"):
        assert new.python[key].requirements == [f"dep==2 --hash=sha256:{'a' * 64}"], key
    # nothing moved: nothing re-resolved, the Python entries keep their times
    assert update_lock(cat, new, resolvers, {"npu-wheel"}) == new
