"""The generated CI for an image published to several registries: legs get the secrets of the
registry they push to only, the merge job those of every registry (each in its own
CANNERY_REGISTRY_<NAME>_* variable, which cannery sends to that registry's host alone), and
verify checks every registry; actionlint and zizmor find nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import plan
from cannery.pydeps import ci_requirements
from cannery.render.actions import load_pins
from cannery.render.workflow import render_workflow
from tests.catalogs import ci_entries, minimal
from tests.unit.test_publish_catalog import with_mirrors
from tests.unit.test_render_workflow import _tool

SWR_SECRETS = """
[registries.swr]
repository = "swr.cn-south-1.myhuaweicloud.com/example/images"
media_types = "docker"
user_secret = "SWR_USER"
password_secret = "SWR_PASSWORD"
"""


def _render(tmp_path: Path) -> str:
    text = with_mirrors(minimal()).replace(
        '[registries.swr]\nrepository = "swr.cn-south-1.myhuaweicloud.com/example/images"\n'
        'media_types = "docker"\n',
        SWR_SECRETS.lstrip(),
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    cat = load_catalog(path).catalog
    return render_workflow(
        cat, plan(cat, Lock(), ["one"]), load_pins(), catalog_file="catalog.toml",
        lock_file="cannery.lock", ci_pins=ci_requirements(cat, ci_entries(cat)),
    )


def _step(job: dict[str, Any], words: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if words in s.get("name", ""))


def test_merge_job_has_every_registrys_secrets_legs_only_their_own(tmp_path: Path) -> None:
    doc = yaml.safe_load(_render(tmp_path))
    leg = doc["jobs"]["build-one"]
    merge = doc["jobs"]["merge-one"]
    push = _step(leg, "Build and push")["env"]
    assert push["CANNERY_REGISTRY_LOCAL_USER"] == "${{ secrets.REGISTRY_USER }}"
    assert not any("SWR" in k or "GHCR" in k for k in push)
    publish = _step(merge, "Copy to every registry")["env"]
    assert publish["CANNERY_REGISTRY_SWR_USER"] == "${{ secrets.SWR_USER }}"
    assert publish["CANNERY_REGISTRY_SWR_PASSWORD"] == "${{ secrets.SWR_PASSWORD }}"
    assert "CANNERY_REGISTRY_GHCR_PASSWORD" in publish and "CANNERY_REGISTRY_USER" not in publish
    assert merge["environment"] == "image-registry"  # environment secrets and protection rules
    assert _step(merge, "Verify")["run"].endswith("--all-registries")


def test_multi_registry_workflow_is_lint_clean(tmp_path: Path) -> None:
    wf = tmp_path / ".github" / "workflows" / "images.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(_render(tmp_path), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    al = subprocess.run([_tool("actionlint"), "-no-color"], cwd=tmp_path, capture_output=True,
                        text=True, timeout=120)
    assert al.returncode == 0, al.stdout + al.stderr
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json", "."],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert zz.returncode == 0, zz.stdout + zz.stderr
