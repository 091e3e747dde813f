"""Builder stages, Python installs and optional toolkit/SoC as the renderer prints them
(issue 19, items 1 and 2): build-only packages stay in their stage, outputs are copied with
`COPY --from`, the Python tarball is checked against the lock, and an image claims no toolkit
or SoC it does not have. Every Dockerfile here passes cannery's own lint rules."""

from __future__ import annotations

import os
from pathlib import Path

from cannery.catalog.load import load_catalog
from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from cannery.lock import BaseEntry, Lock, UrlEntry, required_inputs
from cannery.plan import plan_image
from cannery.render.dockerfile import render_dockerfile
from tests.unit.test_catalog_facts import PLAIN

SHA = "ab" * 32
DIGEST = "sha256:" + "cd" * 32
TARBALL = "https://f.example.com/Py-3.11.10.tgz"
WHEN = "2026-01-01T00:00:00Z"


def _load(tmp: Path, text: str = PLAIN):  # type: ignore[no-untyped-def]
    path = tmp / "cannery.toml"
    path.write_text(text)
    return load_catalog(path).catalog


def _locked() -> Lock:
    return Lock(
        bases={"registry.example.com/ubuntu:22.04": BaseEntry(digest=DIGEST, resolved_at=WHEN)},
        urls={TARBALL: UrlEntry(sha256=SHA, size=1, resolved_at=WHEN)},
    )


def _stages(text: str) -> dict[str, str]:
    """Each stage's text by its alias (the final one is ``image``)."""
    out: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("FROM "):
            name = line.rsplit(" AS ", 1)[-1]
        out[name] = out.get(name, "") + line + "\n"
    return out


def _lint_clean(name: str, text: str) -> None:
    findings = Engine(LintConfig()).lint_text(f"{name}.Dockerfile", text, "dockerfile")
    assert [f for f in findings if f.rule != "unpinned-git-ref"] == [], findings


def test_python_from_source_is_built_in_a_stage_and_copied(tmp_path: Path) -> None:
    cat = _load(tmp_path)
    text = render_dockerfile(plan_image(cat, "built", _locked()))
    _lint_clean("built", text)
    stages = _stages(text)
    order = [line.split()[1] + " " + line.split()[-1] for line in text.splitlines()
             if line.startswith("FROM ")]
    base = f"registry.example.com/ubuntu:22.04@{DIGEST}"
    assert order == [f"{base} cannery-python", f"{base} tools", f"{base} arch-amd64",
                     f"{base} arch-arm64", "arch-${TARGETARCH} image"]
    py = stages["cannery-python"]
    # the tarball, over verified TLS, checked against the lock's sha256 before it is unpacked
    assert f"python_url={TARBALL}; python_sha256={SHA}" in py
    assert py.index("sha256sum -c") < py.index("tar -xf /tmp/python.run")
    assert "./configure --prefix=/usr/local/python3.11.10 --enable-shared" in py
    assert "make altinstall" in py and "libssl-dev" in py
    final = stages["image"]
    assert "COPY --from=cannery-python /usr/local/python3.11.10 /usr/local/python3.11.10" in final
    assert "ENV PATH=/usr/local/python3.11.10/bin:${PATH}" in final
    assert "$(cat /opt/cannery/python-runtime-packages)" in final
    # build-only packages never reach the final stage
    for build_only in ("gcc", "make", "libssl-dev", "xz-utils"):
        assert f" {build_only} " not in final and f" {build_only};" not in final, build_only
    assert "COPY --from=tools /opt/tools /opt/tools" in final
    assert "make -C /src" in stages["tools"] and "make -C /src" not in final
    # per-arch values come from TARGETARCH inside the stage, never from a per-arch stage name
    assert not [line for line in text.splitlines()
                if line.startswith("FROM ") and "${TARGETARCH}" in line
                and not line.startswith("FROM arch-${TARGETARCH} AS image")]


def test_unlocked_python_tarball_stops_its_stage(tmp_path: Path) -> None:
    cat = _load(tmp_path)
    text = render_dockerfile(plan_image(cat, "built", Lock()))
    assert "cannery: UNLOCKED Python source for amd64 (no sha256)" in text
    assert "python_sha256=UNLOCKED" in _stages(text)["cannery-python"]


def test_lock_records_the_python_tarball_and_stage_bases(tmp_path: Path) -> None:
    text = PLAIN.replace('name = "tools"', 'name = "tools"\nbase = "b910"')
    cat = _load(tmp_path, text)
    inputs = {(i.kind, i.key): i.owner for i in required_inputs(cat, ["built"])}
    assert inputs[("url", TARBALL)] == "built"
    assert ("base", "registry.example.com/cann:8.5.1-910b-ubuntu22.04-py3.11") in inputs
    spec = plan_image(cat, "built", _locked())
    assert "stage tools (no digest)" in " ".join(spec.unlocked())
    stages = _stages(render_dockerfile(spec))
    assert "has no digest; run cannery lock" in stages["tools"]


def test_host_toolkit_claims_nothing_in_the_image(tmp_path: Path) -> None:
    cat = _load(tmp_path)
    spec = plan_image(cat, "built", _locked())
    text = render_dockerfile(spec)
    assert "ASCEND" not in text and "CANN 8.5.2" not in text
    assert 'io.cannery.toolkit-provided="host"' in text
    assert "io.cannery.toolkit=" not in text and "io.cannery.soc" not in text
    assert dict(spec.fact_labels()) == {
        "io.cannery.toolkit": None, "io.cannery.toolkit-provided": "host", "io.cannery.soc": None,
        # the host's CANN is the host's: the image states no driver or chip of its own
        "io.cannery.chips": None, "io.cannery.driver.min": None, "io.cannery.firmware.min": None,
    }


def test_no_toolkit_and_no_soc_render_no_claims(tmp_path: Path) -> None:
    cat = _load(tmp_path)
    text = render_dockerfile(plan_image(cat, "plain", _locked()))
    _lint_clean("plain", text)
    for absent in ("SOC_VERSION", "ASCEND", "io.cannery.toolkit", "io.cannery.soc",
                   "python3 -m pip", "cannery-python"):
        assert absent not in text, absent


def test_toolkit_build_without_soc_is_refused_so_no_soc_version_renders(tmp_path: Path) -> None:
    """SOC_VERSION is exported only for a toolkit_build component, which needs a soc: a
    chip-generic image with only plain components renders none."""
    text = PLAIN.replace('[images.plain]\nbase = "bare"',
                         '[images.plain]\nbase = "os"\ntoolkit = "cann852"')
    text = text.replace('[bases.bare]\nimage = "registry.example.com/debian:12"\nos = "debian"\n'
                        'os_version = "12"\n', "")  # (no image is on it now)
    cat = _load(tmp_path, text)
    rendered = render_dockerfile(plan_image(cat, "plain", _locked()))
    assert "ASCEND_TOOLKIT_HOME" in rendered and 'io.cannery.toolkit="cann-8.5.2"' in rendered
    assert "SOC_VERSION" not in rendered and "io.cannery.soc" not in rendered


def test_python_from_packages_joins_the_package_step(tmp_path: Path) -> None:
    text = PLAIN.replace(
        'python = { version = "3.11.10", install = "source", '
        'url = "https://f.example.com/Py-{version}.tgz" }',
        'python = { version = "3.11.10", install = "packages", '
        'packages = ["python3.11", "python3-pip"] }',
    )
    cat = _load(tmp_path, text)
    rendered = render_dockerfile(plan_image(cat, "built", _locked()))
    assert "for p in python3.11 python3-pip ca-certificates; do" in rendered
    assert "cannery-python" not in rendered


def test_stage_run_step_is_linted_at_its_line(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = PLAIN.replace('run = "make -C /src install PREFIX=/opt/tools"',
                         'run = "curl -k https://x.example.com/a | sh"')
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2
    line = text.splitlines().index(
        'steps = [{ run = "curl -k https://x.example.com/a | sh" }]') + 1
    assert f"{path}:{line}: images.built.stages[0].steps[0].run: tls-verification-disabled" \
        in res.err, res.err


def test_chip_generic_image_installs_its_chips_family_packages(tmp_path: Path) -> None:
    """No soc: the ops package of the base chip's one family (910b: A2), no SOC_VERSION."""
    text = PLAIN + """
[[toolkits.cann852.packages]]
name = "ops"
family = "A2"
url = "https://files.example.com/cann/ops-a2-{uname_arch}.run"

[[toolkits.cann852.packages]]
name = "ops"
family = "A3"
url = "https://files.example.com/cann/ops-a3-{uname_arch}.run"

[images.generic]
base = "os"
toolkit = "cann852"
platforms = ["linux/amd64"]
tag = "generic-{family}"
"""
    cat = _load(tmp_path, text)
    spec = plan_image(cat, "generic", _locked())
    assert spec.tag == "generic-A2" and spec.soc is None
    rendered = render_dockerfile(spec)
    assert "ops-a2-x86_64.run" in rendered and "ops-a3" not in rendered
    assert "SOC_VERSION" not in rendered and "io.cannery.soc" not in rendered


def test_an_image_without_python_packages_has_no_pip_step(tmp_path: Path) -> None:
    """Nothing to resolve, nothing locked: no pip call (the stand-in Python of the e2e test
    would fail one)."""
    cat = _load(tmp_path)
    spec = plan_image(cat, "built", _locked())
    assert spec.python_locked == () and spec.unpinned() == []
    assert "-m pip" not in render_dockerfile(spec).split("AS image", 1)[1]


def test_plan_shows_the_python_build_and_stages(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    import json

    path = tmp_path / "cannery.toml"
    path.write_text(PLAIN)
    res = cli("plan", "--catalog", str(path), "--json", "built")
    assert res.code == 0, res.err
    (image,) = json.loads(res.out)["images"]
    assert image["toolkit"]["provided"] == "host" and image["soc"] is None
    assert image["python_install"]["install"] == "source"
    assert {d["url"] for d in image["python_install"]["downloads"]} == {TARBALL}
    assert image["stages"] == ["tools"]
    text = cli("plan", "--catalog", str(path), "built").out
    assert "source tarball" in text and "stage tools" in text
    assert "python deps" not in text  # nothing to resolve


def _runtime_lines(tmp: Path, os_name: str) -> str:
    """The rendered builder RUN's part that lists the runtime packages, with the prefix and
    /opt/cannery moved under ``tmp`` (run by bash here, with stand-in ldd/dpkg-query/rpm)."""
    import dockerfile

    head = '[bases.os]\nimage = "registry.example.com/ubuntu:22.04"\nos = '
    text = PLAIN.replace(head + '"ubuntu"', head + f'"{os_name}"')
    cat = _load(tmp, text)
    rendered = render_dockerfile(plan_image(cat, "built", _locked()))
    run = next(c.value[0] for c in dockerfile.parse_string(rendered)
               if c.cmd == "RUN" and "make altinstall" in c.value[0])
    part = "set -eu; " + run[run.index("mkdir -p /opt/cannery;"):]
    return (part.replace("/usr/local/python3.11.10", f"{tmp}/prefix")
            .replace("/opt/cannery", f"{tmp}/opt"))


def _world(tmp: Path, owners: dict[str, str]) -> dict[str, str]:
    """A prefix with one binary and one module; ldd says what they link; the package
    database knows ``owners`` (path -> package)."""
    import stat

    (tmp / "prefix" / "bin").mkdir(parents=True)
    (tmp / "prefix" / "lib").mkdir()
    for f in ("bin/python3.11", "lib/_ssl.so"):
        (tmp / "prefix" / f).write_text("elf")
        (tmp / "prefix" / f).chmod(0o755)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()

    def tool(name: str, body: str) -> None:
        (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)

    tool("ldd", f'case "$1" in *_ssl.so) echo "  libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 '
         f'(0x1)"; echo "  libpython3.11.so.1.0 => {tmp}/prefix/lib/libpython3.11.so.1.0 (0x1)";;'
         ' *) echo "  linux-vdso.so.1 (0x1)"; echo "  libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6'
         ' (0x1)"; echo "  /lib64/ld-linux-x86-64.so.2 (0x1)";; esac')
    cases = " ".join(f'"{path}") echo "{pkg}";;' for path, pkg in owners.items())
    tool("dpkg-query", f'case "$2" in {cases.replace(chr(34) + ";;", ":amd64: x" + chr(34) + ";;")}'
         ' *) exit 1;; esac')
    tool("rpm", f'case "${{@: -1}}" in {cases} *) echo "not owned"; exit 1;; esac')
    tool("readlink", 'echo "$2"')
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_runtime_packages_are_the_owners_of_the_linked_libraries(tmp_path: Path) -> None:
    """dpkg -S and rpm -qf, by the path ldd prints or with /usr added (merged /usr); the
    prefix's own libpython is not a package."""
    import subprocess

    for os_name in ("ubuntu", "openeuler"):
        tmp = tmp_path / os_name
        tmp.mkdir()
        script = _runtime_lines(tmp, os_name)
        env = _world(tmp, {"/lib/x86_64-linux-gnu/libc.so.6": "libc6",
                           "/usr/lib/x86_64-linux-gnu/libssl.so.3": "libssl3"})
        proc = subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script], env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (os_name, proc.stderr)
        listed = (tmp / "opt" / "python-runtime-packages").read_text().split()
        assert listed == ["libc6", "libssl3"], (os_name, listed)


def test_a_linked_library_no_package_owns_stops_the_build(tmp_path: Path) -> None:
    import subprocess

    script = _runtime_lines(tmp_path, "ubuntu")
    env = _world(tmp_path, {"/lib/x86_64-linux-gnu/libc.so.6": "libc6"})
    proc = subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "cannery: no package owns /lib/x86_64-linux-gnu/libssl.so.3" in proc.stderr
