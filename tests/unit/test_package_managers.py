"""The package manager follows the base's OS (apt, dnf, yum, microdnf, apk): what the rendered
package step runs for each, what a base may and may not name, and how the OS the lock read from
the base's /etc/os-release is compared with the catalog's.

No Alpine, CentOS 7 or UBI base image can be pulled on this machine (only Debian's, PyPI's
and npm's servers are reachable), so the yum, microdnf and apk steps are checked as rendered
text and by `cannery lint`; apt and dnf are built for real in tests/e2e.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError
from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from cannery.lock import BaseEntry, Lock, os_contradictions
from cannery.plan import plan_image
from cannery.render.dockerfile import render_dockerfile
from tests.catalogs import line_of, minimal, only_components

UBUNTU = 'os = "ubuntu"\nos_version = "22.04"\n'
PYTHON_SOURCE = """
[images.one.python]
version = "3.11.10"
install = "source"
url = "https://www.python.org/ftp/python/{version}/Python-{version}.tgz"
"""


def _catalog(tmp_path: Path, os_lines: str, extra: str = "") -> Path:
    text = only_components(minimal(), "torch").replace(UBUNTU, os_lines) + extra
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    return path


def _dockerfile(tmp_path: Path, os_lines: str, extra: str = "") -> str:
    cat = load_catalog(_catalog(tmp_path, os_lines, extra)).catalog
    return render_dockerfile(plan_image(cat, "one", Lock()))


@pytest.mark.parametrize(("os_lines", "manager", "install", "query"), [
    (UBUNTU, "apt", "apt-get install -y --no-install-recommends", "dpkg-query -W"),
    ('os = "openeuler"\nos_version = "24.03"\n', "dnf",
     "dnf install -y --setopt=persistdir=/tmp/cannery-dnf --setopt=install_weak_deps=False",
     "rpm -q --quiet"),
    ('os = "rocky"\nos_version = "9"\n', "dnf", "dnf install -y", "rpm -q --quiet"),
    ('os = "centos"\nos_version = "7"\n', "yum",
     "yum install -y --setopt=persistdir=/tmp/cannery-dnf ${missing}", "rpm -q --quiet"),
    ('os = "rhel"\nos_version = "9.4"\npackage_manager = "microdnf"\n', "microdnf",
     "microdnf install -y --nodocs --setopt=install_weak_deps=0", "rpm -q --quiet"),
    ('os = "alpine"\nos_version = "3.20"\n', "apk", "apk add --no-cache ${missing}",
     "apk info -e"),
])
def test_the_package_step_uses_the_bases_own_manager(
    tmp_path: Path, os_lines: str, manager: str, install: str, query: str
) -> None:
    cat = load_catalog(_catalog(tmp_path, os_lines)).catalog
    spec = plan_image(cat, "one", Lock())
    assert spec.package_manager == manager
    text = render_dockerfile(spec)
    assert install in text and query in text
    commands = {"apt": "apt-get install", "dnf": "dnf install", "yum": "yum install",
                "microdnf": "microdnf install", "apk": "apk add"}
    used = {m for m, c in commands.items() if re.search(rf"(?<![a-z]){c}", text)}
    assert used == {manager}, used
    # Alpine has no bash until the first step adds it, under its own sh, before SHELL.
    adds_bash = "RUN command -v bash >/dev/null || apk add --no-cache bash\nSHELL"
    assert (adds_bash in text) == (manager == "apk")
    found = [f for f in Engine(LintConfig()).lint_text("Dockerfile", text, "dockerfile")
             if f.rule in {"persisted-package-index", "cleanup-in-later-layer",
                           "missing-pipefail"}]
    assert found == [], found


def test_a_python_source_build_on_alpine_installs_musl_headers(tmp_path: Path) -> None:
    text = _dockerfile(tmp_path, 'os = "alpine"\nos_version = "3.20"\n', PYTHON_SOURCE)
    assert "build-base" in text and "openssl-dev" in text and "libssl-dev" not in text
    assert "apk info --who-owns" in text  # the runtime libraries' packages, found by owner


@pytest.mark.parametrize(("os_lines", "why"), [
    ('os = "ubuntu"\nos_version = "22.04"\npackage_manager = "dnf"\n',
     "package_manager 'dnf': ubuntu installs with apt"),
    ('os = "rocky"\nos_version = "9"\npackage_manager = "apk"\n',
     "package_manager 'apk': rocky installs with dnf or yum or microdnf"),
    ('os = "slackware"\nos_version = "15"\n', "'slackware' is not one of ubuntu, debian"),
])
def test_a_manager_of_another_family_is_refused_at_the_base(
    tmp_path: Path, os_lines: str, why: str
) -> None:
    path = _catalog(tmp_path, os_lines)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    (line,) = str(exc.value).splitlines()
    assert why in line and line.startswith(f"{path}:"), line
    assert "bases.b910" in line


def test_microdnf_cannot_take_a_package_mirror(tmp_path: Path) -> None:
    mirror = '\n[build_mirrors.packages]\n"https://cdn.redhat.com/" = "https://m.example.com/"\n'
    path = _catalog(tmp_path, 'os = "rhel"\nos_version = "9"\npackage_manager = "microdnf"\n',
                    mirror)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    (line,) = str(exc.value).splitlines()
    assert line.startswith(f"{path}:{line_of(path.read_text(), '[build_mirrors.packages]')}")
    assert "build_mirrors.packages: image one's base b910 installs with microdnf" in line


@pytest.mark.parametrize(("os_lines", "os_id", "version", "contradicts"), [
    ('os = "alpine"\nos_version = "3.20"\n', "alpine", "3.20.3", None),  # a point release
    ('os = "alpine"\nos_version = "3.19"\n', "alpine", "3.20.3", "os_version"),
    ('os = "alpine"\nos_version = "3.2"\n', "alpine", "3.20.3", "os_version"),  # not a prefix
    ('os = "centos"\nos_version = "7"\n', "rocky", "9.4", "os"),
    ('os = "rocky"\nos_version = "9"\n', "rocky", "9.4", None),
])
def test_the_os_the_lock_read_decides(
    tmp_path: Path, os_lines: str, os_id: str, version: str, contradicts: str | None
) -> None:
    cat = load_catalog(_catalog(tmp_path, os_lines)).catalog
    ref = cat.bases["b910"].image
    lock = Lock(bases={ref: BaseEntry(digest="sha256:" + "1" * 64,
                                      resolved_at="2026-12-01T00:00:00Z", os_id=os_id,
                                      os_version=version)})
    found = [field for _, field, _ in os_contradictions(cat, lock)]
    assert found == ([contradicts] if contradicts else [])


def test_alpines_bash_comes_from_the_package_mirror_too(tmp_path: Path) -> None:
    mirror = ('\n[build_mirrors.packages]\n"https://dl-cdn.alpinelinux.org/alpine/" = '
              '"https://mirror.example.com/alpine/"\n')
    text = _dockerfile(tmp_path, 'os = "alpine"\nos_version = "3.20"\n', mirror)
    head = text.split("\nSHELL ", 1)[0].rsplit("\nRUN ", 1)[1]
    assert "apk add --no-cache --repositories-file /tmp/cannery-mirror/repositories bash" in head
    rewrite = "s#https://dl-cdn\\.alpinelinux\\.org/alpine/#https://mirror.example.com/alpine/#"
    assert f"sed -e '{rewrite}'" in head
    assert "apk add --no-cache bash" not in text  # no fetch from the base's own repositories
