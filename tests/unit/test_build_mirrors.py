"""`[build_mirrors]`: the package and pip steps fetch from mirrors for that RUN only.

The rendered package steps are run here with stand-in `dpkg-query`/`apt-get` and `rpm`/`dnf`
that record what they were given (real dnf runs in tests/e2e/test_build_openeuler.py; real apt-get
is asked which URIs it would fetch, here);
/etc and /tmp are moved under the test's directory so the step's own file handling is what
runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dockerfile
import pytest

from cannery.catalog.load import load_catalog
from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from cannery.lock import Lock, PythonEntry
from cannery.plan import ImageSpec, plan
from cannery.pydeps import python_requests
from cannery.render.dockerfile import DNF_STATE, MIRROR_DIR, render_dockerfile
from tests.catalogs import minimal, only_components
from tests.unit.test_render_steps import _bash, _tool

MIRRORS = """
[build_mirrors]
packages = { "http://archive.ubuntu.com/ubuntu/" = "https://repo.huaweicloud.com/ubuntu/", \
"http://repo.openeuler.org/" = "https://repo.huaweicloud.com/openeuler/", \
"http://repo.openeuler.org/openEuler-24.03-LTS/EPOL/" = "https://epol.example.cn/" }
python = { "https://127.0.0.1:9/" = "https://repo.huaweicloud.com/repository/pypi/", \
"https://x.example.com/whl/cpu/" = "https://mirror.example.cn/whl/cpu/" }
"""
OPENEULER = ('os = "ubuntu"\nos_version = "22.04"', 'os = "openeuler"\nos_version = "24.03"')
INDEXED = """
[components.extras]
pip = ["accelerate==1.13.0"]
extra_index.amd64 = "https://x.example.com/whl/cpu"
"""


def _spec(tmp_path: Path, text: str) -> ImageSpec:
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return plan(load_catalog(path).catalog, Lock(), ["one"])[0]


def _package_step(spec: ImageSpec, root: Path) -> str:
    step = next(c.value[0] for c in dockerfile.parse_string(render_dockerfile(spec))
                if c.cmd == "RUN" and "missing=" in c.value[0])
    for path in ("/etc/", MIRROR_DIR, DNF_STATE, " /var/"):
        step = step.replace(path.strip(), f"{root}{path.strip()}")
    return step


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


SOURCES_LIST = "deb http://archive.ubuntu.com/ubuntu/ jammy main universe\n" \
    "deb http://security.ubuntu.com/ubuntu/ jammy-security main\n"
DEB822 = "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu/\nSuites: jammy-updates\n" \
    "Components: main\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n"


def test_apt_reads_a_rewritten_copy_and_the_base_sources_stay_as_they_were(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, minimal() + MIRRORS)
    root = tmp_path / "root"
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text(SOURCES_LIST)
    (root / "etc/apt/sources.list.d/ubuntu.sources").write_text(DEB822)
    before = _tree(root / "etc")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    _tool(bin_dir, "dpkg-query", "exit 1")  # nothing installed
    # apt-get records its options and the sources it was pointed at, as it saw them
    _tool(bin_dir, "apt-get", f'''echo "apt-get $*" >> {log}
for a in "$@"; do case "$a" in
  Dir::Etc::SourceList=*) cat "${{a#*=}}" >> {log} ;;
  Dir::Etc::SourceParts=*) cat "${{a#*=}}"/* >> {log} ;;
esac; done''')
    proc = _bash(_package_step(spec, root), tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = log.read_text()
    calls = [line for line in seen.splitlines() if line.startswith("apt-get")]
    assert calls[0].endswith(" update")
    assert calls[1].endswith(" install -y --no-install-recommends ca-certificates curl git")
    for call in calls:
        assert f"-o Dir::Etc::SourceList={root}{MIRROR_DIR}/sources.list" in call
        assert f"-o Dir::Etc::SourceParts={root}{MIRROR_DIR}/sources.list.d" in call
    # what apt read: the mirror in both formats; other hosts and the keyring left alone
    assert "deb https://repo.huaweicloud.com/ubuntu/ jammy main universe" in seen
    assert "URIs: https://repo.huaweicloud.com/ubuntu/" in seen
    assert "deb http://security.ubuntu.com/ubuntu/ jammy-security main" in seen
    assert "Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg" in seen
    assert "archive.ubuntu.com" not in seen.split("update", 1)[1]
    # the image keeps the base's own sources and no copy
    assert _tree(root / "etc") == before
    assert not (root / MIRROR_DIR.lstrip("/")).exists()


REPO = """[OS]
name=OS
baseurl=http://repo.openeuler.org/openEuler-24.03-LTS/OS/$basearch/
metalink=https://mirrors.openeuler.org/metalink?repo=$releasever/OS&arch=$basearch
enabled=1
gpgcheck=1
gpgkey=http://repo.openeuler.org/openEuler-24.03-LTS/OS/$basearch/RPM-GPG-KEY-openEuler

[EPOL]
name=EPOL
baseurl=http://repo.openeuler.org/openEuler-24.03-LTS/EPOL/main/$basearch/
gpgcheck=1

[other]
name=not mirrored
metalink=https://mirrors.example.org/metalink?repo=other
gpgcheck=1
"""


def test_dnf_reads_a_rewritten_copy_keys_and_other_repositories_untouched(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, minimal().replace(*OPENEULER) + MIRRORS)
    root = tmp_path / "root"
    (root / "etc/yum.repos.d").mkdir(parents=True)
    (root / "etc/yum.repos.d/openEuler.repo").write_text(REPO)
    (root / "var/lib/dnf").mkdir(parents=True)
    (root / "var/lib/dnf/history.sqlite").write_text("the base's history")
    (root / "var/lib/rpm").mkdir(parents=True)
    before = _tree(root / "etc")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    _tool(bin_dir, "rpm", "exit 1")
    _tool(bin_dir, "dnf", f'''echo "dnf $*" >> {log}
for a in "$@"; do case "$a" in
  --setopt=reposdir=*) cat "${{a#--setopt=reposdir=}}"/*.repo >> {log} ;;
  --setopt=persistdir=*) p="${{a#--setopt=persistdir=}}"; mkdir -p "$p"
    echo "$*" > "$p/history.sqlite" ;;
esac; done
[ "$1" = clean ] || echo changed > {root}/var/lib/rpm/rpmdb.sqlite-shm''')
    proc = _bash(_package_step(spec, root), tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = log.read_text()
    assert f"dnf install -y --setopt=reposdir={root}{MIRROR_DIR} " in seen
    sections = {s.split("]")[0]: s for s in seen.split("\n[")[1:]} | {
        "OS": seen[seen.index("[OS]"):seen.index("[EPOL]")]}
    os_ = sections["OS"]
    assert "baseurl=https://repo.huaweicloud.com/openeuler/openEuler-24.03-LTS/OS/$basearch/" \
        in os_
    assert "metalink=" not in os_  # the mirror only, not the original's mirror list
    # the key comes from where the base says, never from the mirror
    assert ("gpgkey=http://repo.openeuler.org/openEuler-24.03-LTS/OS/$basearch/"
            "RPM-GPG-KEY-openEuler") in os_
    assert "gpgcheck=1" in os_
    # the longest prefix wins
    assert "baseurl=https://epol.example.cn/main/$basearch/" in sections["EPOL"]
    assert "metalink=https://mirrors.example.org/metalink?repo=other" in sections["other"]
    assert _tree(root / "etc") == before
    assert not (root / MIRROR_DIR.lstrip("/")).exists()
    assert seen.splitlines()[-1] == "dnf clean all"
    # dnf's history of this step (time, command line) went to a persistdir that is gone; the
    # base's is as it was; rpm's WAL index (different bytes on every run) is not kept
    assert f"--setopt=persistdir={root}{DNF_STATE}" in seen
    assert not (root / DNF_STATE.lstrip("/")).exists()
    assert (root / "var/lib/dnf/history.sqlite").read_text() == "the base's history"
    assert not (root / "var/lib/rpm/rpmdb.sqlite-shm").exists()


@pytest.mark.parametrize("os_", ["ubuntu", "openeuler"])
def test_a_mirror_that_matches_no_source_of_the_base_stops_the_build(
    tmp_path: Path, os_: str
) -> None:
    text = minimal() + MIRRORS
    root = tmp_path / "root"
    if os_ == "openeuler":
        text = text.replace(*OPENEULER)
        (root / "etc/yum.repos.d").mkdir(parents=True)
        (root / "etc/yum.repos.d/a.repo").write_text("[a]\nbaseurl=http://elsewhere.org/a/\n")
    else:
        (root / "etc/apt").mkdir(parents=True)
        (root / "etc/apt/sources.list").write_text(
            "deb http://deb.debian.org/debian bookworm main\n")
    spec = _spec(tmp_path, text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dpkg-query", "rpm"):
        _tool(bin_dir, tool, "exit 1")
    for tool in ("apt-get", "dnf"):
        _tool(bin_dir, tool, f"touch {tmp_path}/ran")
    proc = _bash(_package_step(spec, root), tmp_path)
    assert proc.returncode == 1
    assert "build_mirrors.packages prefix" in proc.stderr
    assert not (tmp_path / "ran").exists()


def test_no_mirror_no_copy(tmp_path: Path) -> None:
    for text in (minimal(), minimal().replace(*OPENEULER)):
        out = render_dockerfile(_spec(tmp_path, text))
        assert MIRROR_DIR not in out and "Dir::Etc" not in out and "reposdir" not in out


def test_pip_steps_fetch_from_the_python_mirror_and_the_lock_resolves_from_the_original(
    tmp_path: Path,
) -> None:
    text = minimal() + MIRRORS + INDEXED
    text = text.replace('components = ["torch", "vllm", "vllm-ascend"]',
                        'components = ["torch", "extras", "vllm", "vllm-ascend"]')
    spec = _spec(tmp_path, text)
    out = render_dockerfile(spec)
    assert "--index-url https://repo.huaweicloud.com/repository/pypi/simple" in out
    assert "--extra-index-url=https://mirror.example.cn/whl/cpu" in out
    assert "127.0.0.1:9" not in out and "x.example.com" not in out
    # the torch pin step resolves too: it gets the (mirrored) index like every other
    pin = next(c.value[0] for c in dockerfile.parse_string(out)
               if c.cmd == "RUN" and "torch==2.9.0" in c.value[0])
    assert "--index-url https://repo.huaweicloud.com/repository/pypi/simple" in pin
    # `cannery lock` resolves against the catalog's own indexes; the lock records hashes
    path = tmp_path / "catalog.toml"
    cat = load_catalog(path).catalog
    commits = {(c.git, c.ref): "0" * 40 for c in cat.components.values() if c.git and c.ref}
    reqs = {r.arch: r for r in python_requests(cat, "one", commits) or []}
    assert reqs["amd64"].index_url == "https://127.0.0.1:9/simple"
    assert reqs["amd64"].extra_index_urls == ("https://x.example.com/whl/cpu",)


def test_locked_install_takes_hashes_from_the_lock_and_files_from_the_mirror(
    tmp_path: Path,
) -> None:
    """A mirror changes where pip downloads from, never what it accepts: the install step is
    the same --require-hashes line, the lock's hashes, with the mirror's URL."""
    pip_only = only_components(minimal(), "torch")
    path = tmp_path / "catalog.toml"
    path.write_text(pip_only + MIRRORS)
    cat = load_catalog(path).catalog
    lock = Lock()
    commits = {(c.git, c.ref): "0" * 40 for c in cat.components.values() if c.git and c.ref}
    for req in python_requests(cat, "one", commits) or []:
        lock.python[req.key] = PythonEntry(
            inputs=req.digest(), requirements=[f"torch==2.9.0 --hash=sha256:{'a' * 64}"],
            resolved_at="2026-12-01T00:00:00Z")
    spec = plan(cat, lock, ["one"])[0]
    path.write_text(pip_only)
    plain = plan(load_catalog(path).catalog, lock, ["one"])[0]
    assert spec.python_locked == plain.python_locked  # same lock entries, mirror or not
    step = next(c.value[0] for c in dockerfile.parse_string(render_dockerfile(spec))
                if c.cmd == "RUN" and "--require-hashes" in c.value[0])
    assert f"torch==2.9.0 --hash=sha256:{'a' * 64}" in step
    assert "--require-hashes --no-deps --index-url " \
        "https://repo.huaweicloud.com/repository/pypi/simple" in step


def test_rendered_mirror_steps_are_clean_under_the_package_rules(tmp_path: Path) -> None:
    """The copy in /tmp, read by apt/dnf and removed in the same RUN, is no persisted index;
    the rule still fires on the same mirror written into the base's own files."""
    engine = Engine(LintConfig())
    rules = {"persisted-package-index", "cleanup-in-later-layer", "tls-verification-disabled"}
    for text in (minimal() + MIRRORS, minimal().replace(*OPENEULER) + MIRRORS):
        out = render_dockerfile(_spec(tmp_path, text))
        found = [f for f in engine.lint_text("Dockerfile", out, "dockerfile") if f.rule in rules]
        assert found == [], found
    persisted = (
        "FROM ubuntu:22.04\n"
        "RUN sed -i 's#http://archive.ubuntu.com/ubuntu/#https://repo.huaweicloud.com/ubuntu/#'"
        " /etc/apt/sources.list && apt-get update\n"
        "FROM openeuler/openeuler:24.03-lts\n"
        "RUN sed -i 's#http://repo.openeuler.org/#https://repo.huaweicloud.com/openeuler/#'"
        " /etc/yum.repos.d/openEuler.repo && dnf install -y gcc\n"
    )
    found = [f.span.line for f in engine.lint_text("Dockerfile", persisted, "dockerfile")
             if f.rule == "persisted-package-index"]
    assert found == [2, 4]


@pytest.mark.parametrize(("table", "bad", "message"), [
    ("packages", '"http://a.org/ubuntu" = "https://m.cn/ubuntu/"', "ending in '/'"),
    ("packages", '"https://a.org/x/" = "http://m.cn/x/"',
     "http only as the mirror of an http original"),
    ("packages", '"http://a.org/x/" = "https://u:p@m.cn/x/"', "https://host/path/ prefix"),
    ("packages", "\"http://a.org/x/\" = \"https://m.cn/x'$(id)/\"", "https://host/path/ prefix"),
    ("python", '"http://pypi.org/simple/" = "https://m.cn/simple/"', "https://host/path/"),
    ("python", '"https://pypi.org/simple/" = "http://m.cn/simple/"', "https://host/path/"),
])
def test_bad_mirror_prefixes_are_refused_at_their_line(
    tmp_path: Path, cli, table: str, bad: str, message: str  # type: ignore[no-untyped-def]
) -> None:
    path = tmp_path / "catalog.toml"
    text = minimal() + f"\n[build_mirrors]\n{table} = {{ {bad} }}\n"
    path.write_text(text)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2, res.out + res.err
    line = text.splitlines().index(f"{table} = {{ {bad} }}") + 1
    assert f"catalog.toml:{line}: build_mirrors.{table}" in res.err, res.err
    assert message in res.err, res.err
    assert "Traceback" not in res.err


def test_http_original_may_keep_an_http_mirror(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """apt and dnf check signatures over http; a mirror is never weaker than the base."""
    path = tmp_path / "catalog.toml"
    path.write_text(minimal() + '\n[build_mirrors]\npackages = { "http://archive.ubuntu.com/'
                    'ubuntu/" = "http://mirror.internal/ubuntu/" }\n')
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 0, res.err


def test_the_docs_example_validates_and_renders_its_mirrors(tmp_path: Path) -> None:
    import re

    from tests.conftest import ROOT

    readme = (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"^```toml\n(.*?)^```", readme, flags=re.S | re.M)
                 if "[build_mirrors.packages]" in b)
    spec = _spec(tmp_path, minimal(index="https://pypi.org/simple") + "\n" + block)
    out = render_dockerfile(spec)
    assert "s#http://archive\\.ubuntu\\.com/ubuntu/#https://repo.huaweicloud.com/ubuntu/#" in out
    assert "--index-url https://repo.huaweicloud.com/repository/pypi/simple " in out


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian, Ubuntu)")
def test_real_apt_reads_only_the_rewritten_copy(tmp_path: Path) -> None:
    """The options the step gives apt are the ones apt honours: real apt-get, asked for the
    URIs of the update (`--print-uris`, nothing fetched), names the mirror only — not the
    originals, and not the sources of the machine the test runs on."""
    real = shutil.which("apt-get")
    spec = _spec(tmp_path, minimal() + MIRRORS)
    root = tmp_path / "root"
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text(SOURCES_LIST)
    (root / "etc/apt/sources.list.d/ubuntu.sources").write_text(DEB822)
    state = tmp_path / "state"
    for d in ("lists/partial", "cache/archives/partial"):
        (state / d).mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uris = tmp_path / "uris"
    _tool(bin_dir, "dpkg-query", "exit 1")
    _tool(bin_dir, "apt-get", f'''[ "${{@: -1}}" = update ] || exit 0
{real} "${{@:1:$#-1}}" -o Dir::State::Lists={state}/lists -o Dir::Cache={state}/cache \\
  -o Debug::NoLocking=1 update --print-uris > {uris}''')
    proc = _bash(_package_step(spec, root), tmp_path)
    assert proc.returncode == 0, proc.stderr
    hosts = {line.split("'")[1].split("/dists/")[0] for line in uris.read_text().splitlines()}
    assert hosts == {"https://repo.huaweicloud.com/ubuntu", "http://security.ubuntu.com/ubuntu"}
