"""Nothing silent, as a property over the schema: every field of every catalog model, set on a
minimal catalog, either changes what is rendered or built (the Dockerfiles, the workflow, the
bake file, the tags doc, the plan the builder runs, the warnings) or makes validation fail with
an error that names the field.

The fields are read from the models themselves: a field added with no probe below fails
`test_every_field_has_a_probe`, and a probe whose field has no effect fails the property.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import pytest
import tomli_w
import tomllib
from pydantic import BaseModel

from cannery.catalog.models import Catalog
from cannery.commands.render import KINDS, Context, render_kind
from cannery.errors import CatalogError
from cannery.lock import Lock, PythonEntry
from cannery.plan import plan
from cannery.pydeps import ci_requests
from cannery.render.checks import load_checked
from tests.catalogs import minimal

Path_ = tuple[str | int, ...]
Edit = tuple[str, Any]  # ("images.one.soc", "ascend910b2"); a value of DELETE removes the key
DELETE = object()


def _model_in(ann: Any) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in get_args(ann):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def schema_fields(model: type[BaseModel] = Catalog) -> list[str]:
    """``Model.field`` for every field of every model reachable from the catalog, once."""
    seen: list[str] = []
    todo = [model]
    while todo:
        m = todo.pop(0)
        for name, info in m.model_fields.items():
            key = f"{m.__name__}.{name}"
            if key not in seen:
                seen.append(key)
            sub = _model_in(info.annotation)
            if sub is not None and sub not in todo and not any(
                s.startswith(f"{sub.__name__}.") for s in seen
            ):
                todo.append(sub)
    return seen


STEP = {"run": "echo hi"}
ALT = {"name": "py", "link": "/usr/bin/python", "path": "/usr/bin/python3", "priority": 5}
STAGE = {"name": "b", "packages": ["gcc"], "steps": [{"run": "make"}], "outputs": ["/opt/x"]}
OTHER_REGISTRY = ("registries.other", {"repository": "registry.example.com/other/images"})
SOURCE_PY = {"version": "3.11.10", "install": "source",
             "url": "https://www.python.org/ftp/python/{version}/Python-{version}.tgz"}
# A family of the catalog's own, with the SoC of image one (families.A2 has it too)
def three(**keys: Any) -> Edit:
    """A third image, like ``one`` but for ``keys`` (it uses what a probe adds)."""
    return ("images.three", {"extends": "one", "recipe": "t", **keys})


SOURCE = "org.opencontainers.image.source"
UNACK = ("images.one.acknowledge", DELETE)
FAMILY = ("families.X9", {"chip": "910b", "socs": ["ascendx9"]})
ROW = {"vllm_ascend": "v0.18.0", "vllm": "v0.18.0", "python": ">=3.10,<3.12", "cann": "8.5.2",
       "torch": "2.9.0", "torch_npu": "2.9.0"}
ROWS = ("compat.rows", [ROW])
DL = {"name": "tool", "url": "https://files.example.com/x", "path": "/opt/x"}
DLS = ("images.one.downloads", [DL])
# A matrix of two images, each with its own packages and tag
MATRIX = ("images.three", {"extends": "one", "tag": "m-{matrix.extra}", "matrix": {
    "extra": [{"value": "a", "packages": ["jq"]}, {"value": "b", "packages": ["curl"]}]}})

# Model.field → (edits both sides start from, the edit of the field itself). The minimal catalog
# (tests/catalogs.py) already sets many fields; a probe then changes its value.
PROBES: dict[str, tuple[list[Edit], list[Edit]]] = {
    # [catalog]
    "Catalog.catalog": ([], [("catalog.name", "other")]),
    "CatalogMeta.name": ([], [("catalog.name", "other")]),
    "CatalogMeta.source": ([], [("catalog.source", "https://example.com/other")]),
    "CatalogMeta.registry": ([OTHER_REGISTRY, ("images.two.registry", "local"),
                              three(registry="other")],
                             [("catalog.registry", "other")]),
    "CatalogMeta.mirrors": ([OTHER_REGISTRY, ("images.two.mirrors", ["other"])],
                            [("catalog.mirrors", ["other"])]),
    "CatalogMeta.version": ([], [("catalog.version", "1.0")]),
    "CatalogMeta.python_index": ([], [("catalog.python_index", "https://pypi.example.com/simple")]),
    # [registries.NAME]
    "Catalog.registries": ([], [OTHER_REGISTRY]),
    "PushTarget.repository": ([], [("registries.local.repository", "registry.example.com/x/y")]),
    "PushTarget.user_secret": ([], [("registries.local.user_secret", "QUAY_USER")]),
    "PushTarget.user_var": ([], [("registries.local.user_var", "QUAY_USER")]),
    "PushTarget.password_secret": ([], [("registries.local.password_secret", "QUAY_TOKEN")]),
    "PushTarget.media_types": ([], [("registries.local.media_types", "docker")]),
    # [bases.NAME]
    "Catalog.bases": ([], [("bases.spare", {"image": "example.com/os:1", "os": "ubuntu",
                                            "os_version": "22.04", "chip": "910b"})]),
    "Base.extends": ([("bases.b2", {"extends": "b910", "os_version": "24.04"}),
                      ("bases.b3", {"image": "example.com/b3:1", "python": "3.11", "os": "ubuntu",
                                    "os_version": "20.04", "chip": "910b",
                                    "toolkit_version": "8.5.1"}),
                      ("images.two.base", "b2"), three(base="b3")],
                     [("bases.b2.extends", "b3")]),
    "Base.image": ([], [("bases.b910.image", "registry.example.com/cann:other")]),
    "Base.python": ([], [("bases.b910.python", "3.10")]),
    "Base.os": ([], [("bases.b910.os", "debian")]),
    "Base.os_version": ([], [("bases.b910.os_version", "24.04")]),
    "Base.package_manager": ([("bases.b910.os", "rhel"), ("bases.b910.os_version", "9")],
                             [("bases.b910.package_manager", "microdnf")]),
    "Base.chip": ([("images.one.soc", DELETE), ("images.two.soc", DELETE),
                   ("components.vllm-ascend.toolkit_build", DELETE),
                   ("components.vllm-ascend.jobs", DELETE), ("toolkits.cann852.devlib", DELETE)],
                  [("bases.b910.chip", "a3")]),
    "Base.toolkit_version": ([], [("bases.b910.toolkit_version", "8.5.2")]),
    # [envs.NAME]
    "Catalog.envs": ([], [("envs.cann.EXTRA", "1")]),
    # [toolkits.NAME]
    "Catalog.toolkits": ([], [("toolkits.spare", {"version": "9.0.0", "env": "cann"})]),
    "Toolkit.version": ([], [("toolkits.cann852.version", "8.5.3")]),
    "Toolkit.provided": ([("toolkits.cann852.devlib", DELETE), ("images.one.soc", DELETE),
                          ("envs.cann", DELETE), ("toolkits.cann852.env", "cann-8"),
                          ("toolkits.cann852.packages", DELETE),
                          ("components.vllm-ascend.toolkit_build", DELETE),
                          ("components.vllm-ascend.jobs", DELETE)],
                         [("toolkits.cann852.provided", "host"),
                          ("toolkits.cann852.env", DELETE)]),
    "Toolkit.layout": ([], [("toolkits.cann852.layout", "ascend-toolkit")]),
    "Toolkit.env": ([("toolkits.t2", {"version": "8.5.2", "env": "cann"}),
                     ("images.two.toolkit", "t2")],
                    [("toolkits.cann852.env", "cann-8")]),
    "Toolkit.devlib": ([], [("toolkits.cann852.devlib", "/usr/local/Ascend/cann-{version}/lib")]),
    "Toolkit.env_scripts": ([], [("toolkits.cann852.env_scripts",
                                  ["/usr/local/Ascend/cann-{version}/set_env.sh"])]),
    "Toolkit.install_args": ([], [("toolkits.cann852.install_args", ["--install"])]),
    "Toolkit.packages": ([], [("toolkits.cann852.packages", [])]),
    "Package.name": ([], [("toolkits.cann852.packages.0.name", "kit")]),
    "Package.url": ([], [("toolkits.cann852.packages.0.url",
                          "https://files.example.com/x/{version}-{uname_arch}.run")]),
    "Package.family": ([("toolkits.cann852.packages.1",
                         {"name": "ops", "url": "https://f.example.com/ops-{uname_arch}.run",
                          "family": "A2"}),
                        ("toolkits.cann852.packages.2",
                         {"name": "ops3", "url": "https://f.example.com/o3-{uname_arch}.run",
                          "family": "A3"})],
                       [("toolkits.cann852.packages.2.family", "A2")]),
    # [components.NAME]
    "Catalog.components": ([], [("components.spare", {"pip": ["six==1.16.0"]})]),
    "Component.extends": ([("components.six", {"pip": ["six==1.16.0"]}),
                           ("components.six2", {"pip": ["six==1.17.0"]}),
                           ("components.child", {"extends": "six"}),
                           ("images.one.components", ["torch", "vllm", "vllm-ascend", "child"]),
                           ("images.two.components", ["torch", "vllm", "vllm-ascend", "six2"]),
                           three(components=["torch", "vllm", "vllm-ascend", "six"])],
                          [("components.child.extends", "six2")]),
    "Component.git": ([], [("components.vllm.git", "https://git.example.com/w.git")]),
    "Component.pip": ([], [("components.torch.pip", ["torch==2.9.1", "torch_npu==2.9.0"])]),
    "Component.wheel": ([("components.w", {"wheel": "https://f.example.com/w-{uname_arch}.whl"}),
                         ("images.one.components", ["torch", "vllm", "vllm-ascend", "w"])],
                        [("components.w.wheel", "https://f.example.com/v-{uname_arch}.whl")]),
    "Component.bundle_wheels": ([("components.w", {"wheel": "https://f.example.com/w.zip"}),
                                 ("images.one.components", ["torch", "vllm", "vllm-ascend", "w"])],
                                [("components.w.bundle_wheels", ["w-*.whl"])]),
    "Component.path": ([("components.p", {"path": "."}),
                        ("images.one.components", ["torch", "vllm", "vllm-ascend", "p"])],
                       [("components.p.path", "src")]),
    "Component.dest": ([], [("components.vllm.dest", "/opt/vllm")]),
    "Component.ref": ([], [("components.vllm.ref", "v0.18.1")]),
    "Component.package": ([], [("components.vllm.package", "vllm-x")]),
    "Component.version": ([], [("components.vllm.version", "v0.18.1")]),
    "Component.install": ([], [("components.vllm.install", "pip")]),
    "Component.subdir": ([], [("components.vllm.subdir", "python")]),
    "Component.extras": ([], [("components.vllm.extras", ["all"])]),
    "Component.pyproject": ([], [("components.vllm.pyproject", "pyproject.npu.toml")]),
    "Component.requirements": ([], [("components.vllm.requirements", ["requirements.txt"])]),
    "Component.pip_args": ([], [("components.vllm.pip_args", ["--no-deps"])]),
    "Component.build_env": ([], [("components.vllm.build_env", {"VLLM_TARGET_DEVICE": "empty"})]),
    "Component.toolkit_build": ([], [("components.vllm.toolkit_build", True)]),
    "Component.jobs": ([], [("components.vllm.jobs", {"limit": 2, "reason": "memory"})]),
    "Jobs.limit": ([], [("components.vllm-ascend.jobs.limit", 2)]),
    "Jobs.reason": ([], [("components.vllm-ascend.jobs.reason", "out of memory")]),
    "Component.pin": ([], [("components.torch.pin", False)]),
    "Component.extra_index": ([], [("components.vllm.extra_index",
                                    {"amd64": "https://download.example.com/whl/cpu"})]),
    # [images.NAME]
    "Catalog.images": ([], [("images.three", {"extends": "one", "recipe": "t"})]),
    "Image.extends": ([("images.three", {"extends": "one", "recipe": "t",
                                         "platforms": ["linux/amd64"]})],
                      [("images.two.extends", "three")]),
    "Image.base": ([("bases.b2", {"extends": "b910", "image": "example.com/b2:1"}),
                    three(base="b2")],
                   [("images.one.base", "b2")]),
    "Image.toolkit": ([("toolkits.other", {"version": "8.5.3", "env": "cann"}),
                       three(toolkit="other")],
                      [("images.two.toolkit", "other")]),
    "Image.soc": ([], [("images.one.soc", "ascend910b2")]),
    "Image.python": ([], [("images.one.python", {"version": "3.11.9", "install": "packages",
                                                 "packages": ["python3.11"]})]),
    "PythonInstall.version": ([("images.one.python", SOURCE_PY)],
                              [("images.one.python.version", "3.11.9")]),
    "PythonInstall.install": ([("images.one.python", {"version": "3.11.10", "install": "packages",
                                                      "packages": ["python3.11"]})],
                              [("images.one.python", SOURCE_PY)]),
    "PythonInstall.packages": ([("images.one.python", {"version": "3.11.10", "install": "packages",
                                                       "packages": ["python3.11"]})],
                               [("images.one.python.packages", ["python3.11-dev"])]),
    "PythonInstall.url": ([("images.one.python", SOURCE_PY)],
                          [("images.one.python.url", "https://python.example.com/{version}.tgz")]),
    "PythonInstall.build_packages": ([("images.one.python", SOURCE_PY)],
                                     [("images.one.python.build_packages", ["gcc", "make"])]),
    "Image.stages": ([], [("images.one.stages", [STAGE])]),
    "Stage.name": ([("images.one.stages", [STAGE])], [("images.one.stages.0.name", "c")]),
    "Stage.base": ([("images.one.stages", [STAGE]),
                    ("bases.b2", {"extends": "b910", "image": "example.com/b2:1"}),
                    three(base="b2")],
                   [("images.one.stages.0.base", "b2")]),
    "Stage.packages": ([("images.one.stages", [STAGE])],
                       [("images.one.stages.0.packages", ["make"])]),
    "Stage.steps": ([("images.one.stages", [STAGE])],
                    [("images.one.stages.0.steps", [{"run": "make all"}])]),
    "Stage.outputs": ([("images.one.stages", [STAGE])],
                      [("images.one.stages.0.outputs", ["/opt/y"])]),
    "Step.uninstall": ([("images.one.steps", [{"uninstall": ["six"]}])],
                       [("images.one.steps.0.uninstall", ["seven"])]),
    "Step.alternatives": ([], [("images.one.steps", [{"alternatives": ALT}])]),
    "Alternative.name": ([("images.one.steps", [{"alternatives": ALT}])],
                         [("images.one.steps.0.alternatives.name", "python")]),
    "Alternative.link": ([("images.one.steps", [{"alternatives": ALT}])],
                         [("images.one.steps.0.alternatives.link", "/usr/local/bin/python")]),
    "Alternative.path": ([("images.one.steps", [{"alternatives": ALT}])],
                         [("images.one.steps.0.alternatives.path", "/usr/bin/python3.11")]),
    "Alternative.priority": ([("images.one.steps", [{"alternatives": ALT}])],
                             [("images.one.steps.0.alternatives.priority", 7)]),
    "Step.symlink": ([], [("images.one.steps", [{"symlink": {"target": "/a", "link": "/b"}}])]),
    "Symlink.target": ([("images.one.steps", [{"symlink": {"target": "/a", "link": "/b"}}])],
                       [("images.one.steps.0.symlink.target", "/c")]),
    "Symlink.link": ([("images.one.steps", [{"symlink": {"target": "/a", "link": "/b"}}])],
                     [("images.one.steps.0.symlink.link", "/c")]),
    "Step.ldconfig": ([], [("images.one.steps", [{"ldconfig": True}])]),
    "Step.run": ([("images.one.steps", [STEP])], [("images.one.steps.0.run", "echo bye")]),
    "Step.at": ([("images.one.steps", [STEP])], [("images.one.steps.0.at", "before-toolkit")]),
    "Image.recipe": ([], [("images.one.recipe", "q")]),
    "Image.platforms": ([], [("images.one.platforms", ["linux/amd64"])]),
    "Image.tag": ([], [("images.one.tag", "u-{cann}")]),
    "Image.registry": ([OTHER_REGISTRY, three(registry="other")],
                       [("images.two.registry", "other")]),
    "Image.mirrors": ([OTHER_REGISTRY, ("images.two.mirrors", ["other"])],
                      [("images.one.mirrors", ["other"])]),
    "Image.packages": ([], [("images.one.packages", ["jq"])]),
    "Image.pip_tools": ([], [("images.one.pip_tools", ["wheel==0.45.1"])]),
    "Image.installer": ([("images.one.pip_tools", ["uv==0.13.9"])],
                        [("images.one.installer", "uv")]),
    "Image.components": ([("components.six", {"pip": ["six==1.16.0"]}),
                          ("images.two.components", ["torch", "vllm", "vllm-ascend", "six"])],
                         [("images.one.components", ["torch", "vllm", "vllm-ascend", "six"])]),
    "Image.revision_from": ([], [("images.one.revision_from", "vllm")]),
    "Image.smoke_imports": ([], [("images.one.smoke_imports", ["vllm"])]),
    "Image.acknowledge": ([], [("images.one.acknowledge", ["compat-cann"])]),
    "Image.labels": ([], [("images.one.labels", {"org.example.team": "npu"})]),
    "Image.env": ([], [("images.one.env", {"HF_HOME": "/data"})]),
    "Override.value": ([("images.one.labels", {SOURCE: {"value": "https://a.example.com",
                                                         "override": True}})],
                       [("images.one.labels.org\x00opencontainers\x00image\x00source.value",
                         "https://b.example.com")]),
    "Override.override": ([], [("images.one.labels", {SOURCE: {"value": "https://a.example.com",
                                                               "override": True}})]),
    "PathEdit.append": ([], [("images.one.env", {"LD_LIBRARY_PATH": {"append": ["/opt/lib"]}})]),
    "PathEdit.prepend": ([], [("images.one.env", {"LD_LIBRARY_PATH": {"prepend": ["/opt/lib"]}})]),
    "PathEdit.replace": ([], [("images.one.env", {"LD_LIBRARY_PATH": {"replace": ["/opt/lib"]}})]),
    "Image.workdir": ([], [("images.one.workdir", "/work")]),
    "Image.user": ([], [("images.one.user", "npu")]),
    "Image.entrypoint": ([], [("images.one.entrypoint", ["/bin/sh", "-c"])]),
    "Image.cmd": ([], [("images.one.cmd", ["/bin/sh"])]),
    "Image.aliases": ([], [("images.one.aliases", ["latest"])]),
    "Image.steps": ([], [("images.one.steps", [STEP])]),
    # (the minimal catalog's CANN 8.5.2 on 910b has the table's driver and no firmware)
    "Image.downloads": ([], [("images.one.downloads", [DL])]),
    "FileDownload.name": ([DLS], [("images.one.downloads.0.name", "other")]),
    "FileDownload.url": ([DLS], [("images.one.downloads.0.url", "https://files.example.com/y")]),
    "FileDownload.url_secret": ([DLS], [("images.one.downloads.0.url", DELETE),
                                        ("images.one.downloads.0.url_secret", "DATA_URL")]),
    "FileDownload.path": ([DLS], [("images.one.downloads.0.path", "/opt/y")]),
    "FileDownload.unpack": ([DLS], [("images.one.downloads.0.unpack", True)]),
    "FileDownload.executable": ([DLS], [("images.one.downloads.0.executable", True)]),
    "FileDownload.at": ([DLS], [("images.one.downloads.0.at", "before-toolkit")]),
    # (a budget is in the plan verify checks the pushed image against)
    "Image.budget": ([], [("images.one.budget", {"layer": "2GB"})]),
    "Catalog.budget": ([], [("budget", {"layer": "2GB"})]),
    "Budget.compressed": ([], [("budget", {"compressed": "20GB"})]),
    "Budget.layer": ([], [("images.one.budget", {"layer": "500MB"})]),
    "Budget.wasted": ([], [("images.one.budget", {"wasted": 0.1})]),
    "Image.host": ([], [("images.one.host", {"firmware": "7.8.0.2.212"})]),
    "HostOverride.chips": ([], [("images.one.host", {"chips": ["910b", "a3"]})]),
    "HostOverride.driver": ([], [("images.one.host", {"driver": "26.0.rc1"})]),
    "HostOverride.firmware": ([], [("images.one.host", {"firmware": "7.8.0.2.212"})]),
    # [images.NAME.matrix]: an entry expanded into one image per word of each axis
    "Image.matrix": ([], [MATRIX]),
    "Matrix.name": ([MATRIX], [("images.three.matrix.name", "m-{matrix.extra}")]),
    "Matrix.exclude": ([MATRIX], [("images.three.matrix.exclude", [{"extra": "b"}])]),
    "Matrix.include": ([MATRIX], [("images.three.matrix.include",
                                   [{"extra": "a", "env": {"MODE": "x"}}])]),
    # [families.NAME]
    "Catalog.families": ([], [FAMILY]),
    "Family.chip": ([FAMILY, ("images.two.soc", "ascendx9")], [("families.X9.chip", "910c")]),
    "Family.socs": ([FAMILY, ("images.two.soc", "ascendx9")],
                    [("families.X9.socs", ["ascendx8"])]),
    # [compat]
    # (the warnings are part of what is observed: the probes acknowledge none)
    "Catalog.compat": ([UNACK], [("compat.rows", [ROW])]),
    "Compat.source": ([UNACK], [("compat.source", "https://example.com/table")]),
    "Compat.date": ([UNACK], [("compat.date", "2026-01-01")]),
    "Compat.rows": ([UNACK], [("compat.rows", [ROW])]),
    "CompatRow.vllm_ascend": ([UNACK, ROWS], [("compat.rows.0.vllm_ascend", "v0.18.1")]),
    "CompatRow.vllm": ([UNACK, ROWS], [("compat.rows.0.vllm", "v0.18.1")]),
    "CompatRow.python": ([UNACK, ROWS], [("compat.rows.0.python", ">=3.12")]),
    "CompatRow.cann": ([UNACK, ROWS], [("compat.rows.0.cann", "8.5.1")]),
    "CompatRow.torch": ([UNACK, ROWS], [("compat.rows.0.torch", "2.8.0")]),
    "CompatRow.torch_npu": ([UNACK, ROWS], [("compat.rows.0.torch_npu", "2.8.0")]),
    # [ci]
    "Catalog.ci": ([], [("ci.python", "3.11")]),
    "Ci.runners": ([], [("ci.runners", {"linux/amd64": "big", "linux/arm64": "big-arm"})]),
    "Ci.branches": ([], [("ci.branches", ["release"])]),
    "Ci.branch_pushes": ([], [("ci.branch_pushes", False)]),
    "Ci.schedule": ([], [("ci.schedule", "0 3 * * *")]),
    "Ci.pull_requests": ([], [("ci.pull_requests", False)]),
    "Ci.pr_label": ([], [("ci.pr_label", "build images")]),
    "Ci.dispatch_tags": ([], [("ci.dispatch_tags", True)]),
    "Ci.build_branches": ([], [("ci.build_branches", ["dev/**"])]),
    "Ci.release_tags": ([], [("ci.release_tags", ["v*"])]),
    "Ci.releases": ([], [("ci.releases", True)]),
    "Ci.max_parallel": ([], [("ci.max_parallel", 1)]),
    "Ci.free_disk": ([], [("ci.free_disk", True)]),
    "Ci.lock_update": ([("ci.schedule", "0 3 * * *")], [("ci.lock_update", False)]),
    "Ci.install": ([], [("ci.install", "cannery==0.1")]),
    "Ci.install_action": ([], [("ci.install_action", "o/r@" + "a" * 40)]),
    "Ci.requirements": ([("ci.install", "cannery==0.1")], [("ci.requirements", "req.txt")]),
    "Ci.environment": ([], [("ci.environment", "prod")]),
    "Ci.python": ([], [("ci.python", "3.11")]),
    "Ci.workflow": ([], [("ci.workflow", ".github/workflows/x.yml")]),
    "Ci.dockerfiles": ([], [("ci.dockerfiles", "docker")]),
    "Ci.bake": ([], [("ci.bake", "bake.json")]),
    "Ci.docs": ([], [("ci.docs", "IMAGES.md")]),
    # [build_mirrors]
    "Catalog.build_mirrors": ([], [("build_mirrors.packages",
                                    {"http://archive.ubuntu.com/ubuntu/":
                                     "https://mirror.example.com/ubuntu/"})]),
    "BuildMirrors.packages": ([], [("build_mirrors.packages",
                                    {"http://archive.ubuntu.com/ubuntu/":
                                     "https://mirror.example.com/ubuntu/"})]),
    "BuildMirrors.python": ([], [("build_mirrors.python",
                                  {"https://127.0.0.1:9/simple/":
                                   "https://mirror.example.com/pypi/"})]),
}

# Probes refused where the catalog contradicts the value, not where the value is written: a
# compatibility row at the image's value it contradicts, a family at the image's soc.
NAMED_AT = {
    "CompatRow.python": "images.one.base",
    "CompatRow.torch": "images.one.components",
    "CompatRow.torch_npu": "images.one.components",
    "Family.chip": "images.two.soc",
    "Family.socs": "images.two.soc",
}

# Fields whose effect is on a command other than render and build, with where that is tested.
ELSEWHERE = {
    "Image.original": "`cannery compare` pairs the image's Dockerfile with it (test_compare.py)",
    "Ci.original": "`cannery compare` pairs the workflow with it (test_compare.py)",
    # free text, as a comment is: the built-in table (catalog/data/ascend.toml) names each family
    "Family.description": "a note for the reader of the table, like a TOML comment",
}


def _edit(doc: dict[str, Any], dotted: str, value: Any) -> None:
    # (a '\x00' stands for a '.' inside one key: a label key has dots)
    parts: list[str | int] = [int(p) if p.isdigit() else p.replace("\x00", ".")
                              for p in dotted.split(".")]
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        node.pop(last, None)
    elif isinstance(node, list) and isinstance(last, int) and last == len(node):
        node.append(copy.deepcopy(value))
    else:
        node[last] = copy.deepcopy(value)


def _document(edits: list[Edit]) -> str:
    doc = tomllib.loads(minimal())
    for dotted, value in edits:
        _edit(doc, dotted, value)
    return tomli_w.dumps(doc)


def observe(tmp_path: Path, text: str) -> str | list[str]:
    """What the catalog renders and plans, and the legs `cannery ci plan` gives a manual run
    (one string), or its validation errors."""
    from cannery.commands.ci import Event, plan_outputs

    path = tmp_path / "catalog.toml"
    path.write_text(text)
    try:
        loaded = load_checked(path)
    except CatalogError as exc:
        return list(exc.problems)
    # CI's pins of cannery, as `cannery lock` would record them (the workflow needs them)
    pin = "cannery==0.1 --hash=sha256:" + "a" * 64
    lock = Lock(ci={r.arch: PythonEntry(inputs=r.digest(), requirements=[pin],
                                        resolved_at="2026-01-01T00:00:00+00:00")
                    for r in ci_requests(loaded.catalog)})
    ctx = Context(loaded, lock, tmp_path, "catalog.toml")
    specs = plan(loaded.catalog, lock)
    parts = [repr(specs), *map(str, loaded.warnings)]
    # what the workflow builds is data `cannery ci plan` writes at run time (runners, legs)
    parts.append(repr(plan_outputs(loaded.catalog, specs, Event("workflow_dispatch"))))
    for kind in KINDS:
        for where, rendered in sorted(render_kind(kind, ctx, None).items()):
            parts += [str(where.relative_to(tmp_path)), rendered]
    return "\n".join(parts)


def _dotted(edit: Edit) -> str:
    return edit[0]


def test_every_field_has_a_probe() -> None:
    fields = set(schema_fields())
    assert fields - set(PROBES) - set(ELSEWHERE) == set(), "add a probe for each new field"
    assert set(PROBES) - fields == set(), "a probe names a field that no longer exists"


@pytest.mark.parametrize("field", sorted(PROBES))
def test_a_field_changes_the_output_or_is_refused(tmp_path: Path, field: str) -> None:
    setup, change = PROBES[field]
    before = observe(tmp_path, _document(setup))
    assert isinstance(before, str), f"the probe's starting catalog is invalid: {before}"
    after = observe(tmp_path, _document([*setup, *change]))
    if isinstance(after, list):
        # refused: the error is at the key the probe set (its dotted path names it)
        named = {_dotted(e).rsplit(".", 1)[0] if _dotted(e).rsplit(".", 1)[-1].isdigit()
                 else _dotted(e) for e in change}
        if field in NAMED_AT:
            named = {NAMED_AT[field]}
        assert any(n in p for p in after for n in named), (field, after)
    else:
        assert after != before, f"{field} was accepted and changed nothing"
