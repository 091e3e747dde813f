"""The generated CI for an image published to several registries: the legs' call job passes
the secrets of the registry they push to only, the merge's those of every registry (each in
its own CANNERY_REGISTRY_<NAME>_* variable, which cannery sends to that registry's host
alone), and verify checks every registry; actionlint and zizmor find nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import plan
from cannery.pydeps import ci_requirements
from cannery.render.workflow.common import registry_secrets
from tests.catalogs import ci_entries, minimal
from tests.unit.test_publish_catalog import with_mirrors
from tests.unit.test_render_workflow import _tool
from tests.unit.workflows import Rendered, merges, outputs
from tests.unit.workflows import render as render_files

SWR_SECRETS = """
[registries.swr]
repository = "swr.cn-south-1.myhuaweicloud.com/example/images"
media_types = "docker"
user_secret = "SWR_USER"
password_secret = "SWR_PASSWORD"
"""


def _catalog(tmp_path: Path) -> Path:
    text = with_mirrors(minimal()).replace(
        '[registries.swr]\nrepository = "swr.cn-south-1.myhuaweicloud.com/example/images"\n'
        'media_types = "docker"\n',
        SWR_SECRETS.lstrip(),
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return path


def _rendered(tmp_path: Path) -> Rendered:
    cat = load_catalog(_catalog(tmp_path)).catalog
    return render_files(cat, plan(cat, Lock(), ["one"]), "catalog.toml",
                        ci_pins=ci_requirements(cat, ci_entries(cat)))


def _render(tmp_path: Path) -> str:
    """The main workflow's text."""
    return _rendered(tmp_path).text


def _step(job: dict[str, Any], words: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if words in s.get("name", ""))


def test_merge_job_has_every_registrys_secrets_legs_only_their_own(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path)
    cat = load_catalog(_catalog(tmp_path)).catalog
    jobs = rendered.doc["jobs"]
    (build_id,) = [j for j in jobs if j.startswith("build-")]
    (merge_id,) = [j for j in jobs if j.startswith("merge-")]
    # the legs' call job passes the secrets of the registry they push to, and no other
    assert jobs[build_id]["secrets"] == {
        "REGISTRY_USER": "${{ secrets.REGISTRY_USER }}",
        "REGISTRY_PASSWORD": "${{ secrets.REGISTRY_PASSWORD }}"}
    merge_secrets = jobs[merge_id]["secrets"]
    assert {"REGISTRY_PASSWORD", "SWR_USER", "SWR_PASSWORD"} <= set(merge_secrets)
    assert len(merge_secrets) == len(registry_secrets(cat, tuple(cat.registries)))
    push = _step(rendered.job("build"), "Build and push")["env"]
    assert push["CANNERY_REGISTRY_LOCAL_USER"] == "${{ secrets.REGISTRY_USER }}"
    assert "CANNERY_REGISTRY_USER" not in push  # several registries: each its own variables
    merge = rendered.job("merge")
    publish = _step(merge, "Merge into one index")["env"]
    assert publish["CANNERY_REGISTRY_SWR_USER"] == "${{ secrets.SWR_USER }}"
    assert publish["CANNERY_REGISTRY_SWR_PASSWORD"] == "${{ secrets.SWR_PASSWORD }}"
    assert "CANNERY_REGISTRY_GHCR_PASSWORD" in publish and "CANNERY_REGISTRY_USER" not in publish
    assert merge["environment"] == "image-registry"  # environment secrets and protection rules
    verify = _step(merge, "Verify")
    assert verify["env"]["MIRRORS"] == "${{ matrix.mirrors }}"
    assert 'if [ "${MIRRORS}" = true ]; then set -- "$@" --all-registries; fi' in verify["run"]
    (entry,) = merges(outputs(cat, plan(cat, Lock(), ["one"]), "workflow_dispatch"))
    assert entry["mirrors"] is True and entry["registry"] == "local"


def test_multi_registry_workflow_is_lint_clean(tmp_path: Path) -> None:
    _rendered(tmp_path).write(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    al = subprocess.run([_tool("actionlint"), "-no-color"], cwd=tmp_path, capture_output=True,
                        text=True, timeout=120)
    assert al.returncode == 0, al.stdout + al.stderr
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json", "."],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert zz.returncode == 0, zz.stdout + zz.stderr
