"""No silent drop in the component model: every field × kind (git, pip, wheel, path) that used
to be accepted and then ignored is now honoured (the rendered Dockerfile shows it) or refused
(`catalog validate` names the field at its line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import plan_image
from cannery.render.dockerfile import render_dockerfile
from tests.catalogs import line_of, minimal, only_components

GOOD = minimal()


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("cannery: error:")]


def _rendered(tmp_path: Path, text: str, image: str = "one") -> str:
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    cat = load_catalog(path).catalog
    return render_dockerfile(plan_image(cat, image, Lock()))


def _step(dockerfile: str, needle: str) -> str:
    """The RUN step (with its comment) whose text contains ``needle``."""
    return next(s for s in dockerfile.split("\n\n") if needle in s)


# ------------------------------------------------------------------ honoured


def test_requirements_of_a_not_installed_tree_are_installed(tmp_path: Path) -> None:
    """MindSpeed-RL's case: the tree is only fetched (install = "none"), its requirements
    file is installed (it used to be dropped: ray, transformers… were missing)."""
    text = GOOD.replace(
        'version = "v0.18.0"\ninstall = "editable"',
        'version = "v0.18.0"\ninstall = "none"\nrequirements = ["requirements.txt"]',
    )
    step = _step(_rendered(tmp_path, text), "/opt/src/vllm ")
    assert "-r /opt/src/vllm/requirements.txt;" in step
    assert "pip install --no-cache-dir -c /opt/cannery/constraints.txt -e" not in step
    assert step.rstrip().endswith("rm -rf /opt/src/vllm/.git")  # the tree stays


def test_requirements_of_a_not_installed_checkout_are_installed(tmp_path: Path) -> None:
    text = GOOD.replace(
        'git = "https://git.example.com/v.git"\nref = "v0.18.0"\nversion = "v0.18.0"\n'
        'install = "editable"',
        'path = "."\ninstall = "none"\nrequirements = ["requirements.txt"]',
    )
    dockerfile = _rendered(tmp_path, text)
    assert "COPY . /opt/src/vllm" in dockerfile
    assert "-r /opt/src/vllm/requirements.txt" in dockerfile


@pytest.mark.parametrize("kind", ["git", "path"])
def test_pip_args_apply_to_requirements_installs(kind: str, tmp_path: Path) -> None:
    """A component's pip_args reach its requirements install too (they used to reach only
    its own install); `--no-deps` stays the component's own (the lock resolves a
    requirements file with its dependencies, and so does the build without a lock)."""
    source = 'path = "."' if kind == "path" else 'git = "https://git.example.com/v.git"\nref = "v1"'
    text = GOOD.replace(
        'git = "https://git.example.com/v.git"\nref = "v0.18.0"\nversion = "v0.18.0"\n'
        'install = "editable"',
        f'{source}\ninstall = "editable"\nrequirements = ["r.txt"]\n'
        'pip_args = ["--no-build-isolation", "--no-deps"]',
    )
    step = _step(_rendered(tmp_path, text), "-r /opt/src/vllm/r.txt")
    req = next(ln for ln in step.splitlines() if "-r /opt/src/vllm/r.txt" in ln)
    assert "--no-build-isolation -r /opt/src/vllm/r.txt" in req and "--no-deps" not in req
    own = next(ln for ln in step.splitlines() if "-e /opt/src/vllm" in ln)
    assert "--no-build-isolation --no-deps -e /opt/src/vllm" in own


# ------------------------------------------------------------------ refused


def _refused(cli, tmp_path: Path, text: str, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    assert text != GOOD
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2, res.err
    errors = _errors(res.err)
    assert len(errors) == 1, res.err
    assert errors[0].startswith(f"cannery: error: {path}:{line_of(text, needle)}: {words}"), (
        res.err
    )


NOT_INSTALLED = [
    ("subdir", 'subdir = "python"'),
    ("extras", 'extras = ["all"]'),
    ("pyproject", 'pyproject = "pyproject.npu.toml"'),
    ("pip_args", 'pip_args = ["--no-build-isolation"]'),
    ("build_env", 'build_env = { MAX_JOBS = "2" }'),
    ("toolkit_build", "toolkit_build = true"),
    ("jobs", 'jobs = { limit = 2, reason = "memory" }'),
]


@pytest.mark.parametrize(("field", "line"), NOT_INSTALLED, ids=[f for f, _ in NOT_INSTALLED])
@pytest.mark.parametrize("kind", ["git", "path"])
def test_build_fields_refused_on_a_tree_that_is_not_installed(  # type: ignore[no-untyped-def]
    kind: str, field: str, line: str, tmp_path: Path, cli
) -> None:
    source = ('path = "."' if kind == "path"
              else 'git = "https://git.example.com/v.git"\nref = "v0.18.0"')
    text = GOOD.replace(
        'git = "https://git.example.com/v.git"\nref = "v0.18.0"\nversion = "v0.18.0"\n'
        'install = "editable"',
        f'{source}\nversion = "v0.18.0"\ninstall = "none"\n{line}',
    )
    _refused(cli, tmp_path, text, line, f'components.vllm.{field}: {field} has no effect with '
             'install = "none" (the tree is only fetched, and its requirements files installed)')


ON_PIP_OR_WHEEL = [
    ("pip", "build_env", 'build_env = { A = "1" }', "build_env has no effect on a pip component"),
    ("pip", "pip_args", 'pip_args = ["--pre"]',
     "pip_args has no effect on a pip component: `cannery lock` resolves its specifiers"),
    ("wheel", "requirements", 'requirements = ["r.txt"]',
     "requirements has no effect on a wheel component"),
    ("wheel", "build_env", 'build_env = { A = "1" }',
     "build_env has no effect on a wheel component"),
    ("wheel", "install", 'install = "editable"  # w', "install has no effect on a wheel component"),
]


@pytest.mark.parametrize(("kind", "field", "line", "words"), ON_PIP_OR_WHEEL,
                         ids=[f"{k}-{f}" for k, f, _, _ in ON_PIP_OR_WHEEL])
def test_build_fields_refused_on_pip_and_wheel(  # type: ignore[no-untyped-def]
    kind: str, field: str, line: str, words: str, tmp_path: Path, cli
) -> None:
    name = "torch" if kind == "pip" else "w"
    text = GOOD.replace("pin = true\n", f"pin = true\n{line}\n") if kind == "pip" else (
        GOOD.replace("[images.one]", f'[components.w]\nwheel = "https://f.example.com/w.whl"\n'
                     f"{line}\n\n[images.one]")
    )
    _refused(cli, tmp_path, text, line, f"components.{name}.{field}: {words}")


def test_dest_refused_on_a_git_tree_that_is_removed(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """install = "pip" removes a git tree once installed: a dest would name nothing."""
    text = GOOD.replace('ref = "main"\n', 'ref = "main"\ndest = "/workspace/vllm-ascend"\n')
    _refused(cli, tmp_path, text, "dest = ",
             'components.vllm-ascend.dest: dest has no effect with install = "pip"')


def test_extra_index_of_a_checkout_reaches_its_pip_call_under_a_lock(tmp_path: Path) -> None:
    """With every platform's Python pinned, a git component resolves nothing at build time;
    a checkout still does (its dependencies and requirements change with it), so its
    extra_index must reach its pip calls there too (it used to be dropped)."""
    from dataclasses import replace

    text = GOOD.replace(
        'git = "https://git.example.com/v.git"\nref = "v0.18.0"\nversion = "v0.18.0"\n'
        'install = "editable"',
        'path = "."\ninstall = "editable"\nrequirements = ["r.txt"]\n'
        'extra_index = { arm64 = "https://idx.example.com/simple" }',
    )
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    spec = plan_image(load_catalog(path).catalog, "one", Lock())
    pinned = replace(spec, python_locked=tuple(
        (a, ("torch==2.9.0 --hash=sha256:" + "0" * 64,)) for a in spec.arches))
    assert pinned.python_pinned
    step = _step(render_dockerfile(pinned), "COPY . /opt/src/vllm")
    assert "arm64) set -- --extra-index-url=https://idx.example.com/simple ;;" in step
    assert '"$@" -r /opt/src/vllm/r.txt;' in step and step.endswith('"$@" -e /opt/src/vllm')


def test_a_build_locks_the_requirements_of_a_tree_that_is_not_installed(tmp_path: Path) -> None:
    """`cannery build` (without --locked) resolves what the lock lacks: an image whose only
    Python install is the requirements file of an install = "none" tree lacks its pins (it
    used to count as installing nothing, so the build resolved them with pip instead)."""
    from cannery.lock import GitEntry, _python_unpinned, git_key

    text = GOOD.replace(
        'version = "v0.18.0"\ninstall = "editable"',
        'version = "v0.18.0"\ninstall = "none"\nrequirements = ["requirements.txt"]',
    )
    text = only_components(text, "vllm")
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    cat = load_catalog(path).catalog
    url = "https://git.example.com/v.git"
    lock = Lock(git={git_key(url, "v0.18.0"): GitEntry(
        url=url, ref="v0.18.0", commit="c" * 40, resolved_at="2026-01-01T00:00:00+00:00")})
    assert _python_unpinned(cat, lock, "one")


def test_plan_names_a_checkout_component_as_one(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`plan` called a path component a wheel (kind, source and a sha256 pin it has none of)."""
    import json

    text = GOOD.replace(
        'git = "https://git.example.com/v.git"\nref = "v0.18.0"\nversion = "v0.18.0"\n'
        'install = "editable"',
        'path = "."\ninstall = "editable"',
    )
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    res = cli("plan", "--catalog", str(path), "--json", "one")
    vllm = next(c for c in json.loads(res.out)["images"][0]["components"] if c["name"] == "vllm")
    assert vllm["kind"] == "path"
    res = cli("plan", "--catalog", str(path), "one")
    row = next(ln for ln in res.out.splitlines() if ln.startswith("│ vllm "))
    assert "checkout (.)" in row and "commit at" in row and "wheel" not in row
