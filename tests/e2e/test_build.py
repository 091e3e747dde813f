"""cannery build and verify end to end: real buildah (arm64 under qemu), real registries with
TLS and htpasswd, the stand-in CANN installers over HTTPS, a real git host, a real wheel index.

The only stand-ins are for what cannot be fetched here: the CANN installers (a self-extracting
``.run`` the tests build, installing the real layout and an env script with the real variable
names) and the Ascend base image (a Debian root filesystem). Tests run in file order and share
one world: the first build is what the later ones compare against.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, working_containers
from tests.e2e.imagediff import describe_across
from tests.services.tlsca import LocalCA

ROOT = Path(__file__).resolve().parents[2]
CANNERY = [sys.executable, "-m", "cannery"]
pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:  # CI installs it (scripts/test.sh); a dev box may not have it
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


def cannery(
    world: BuildWorld, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CANNERY, *args],
        env=env if env is not None else world.env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def build(world: BuildWorld, catalog: Path, *extra: str, **kw: object) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    proc = cannery(
        world, "build", "--catalog", str(catalog), "--push", "--network", "host", "--json",
        "--log-dir", str(catalog.parent / "logs"), *extra, **kw,  # type: ignore[arg-type]
    )
    summary = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, summary, proc.stderr


def registry_get(world: BuildWorld, repo: str, ref: str) -> httpx.Response:
    accept = ", ".join(
        [
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        ]
    )
    return httpx.get(
        f"https://{world.push_registry.host}/v2/e2e/{repo}/manifests/{ref}",
        headers={"Accept": accept},
        auth=(world.user, world.password),
        verify=_ssl(world),
    )


TAG = "e2e-8.5.2-910b-py3.11"


def _ssl(world: BuildWorld) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(world.ca.ca_cert))


class _ArgvWatcher:
    """Reads every process's argv from /proc while a command runs (the password must be in none)."""

    def __init__(self, needle: str) -> None:
        self.needle = needle.encode()
        self.seen: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    argv = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if self.needle in argv:
                    self.seen.append(argv.replace(b"\0", b" ").decode(errors="replace"))
            self.scans += 1
            time.sleep(0.05)

    def __enter__(self) -> _ArgvWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture(scope="module")
def first(world: BuildWorld) -> dict:  # type: ignore[type-arg]
    """The first build of the e2e catalog, both platforms, pushed, merged and tagged, with a
    watch on every process's argv for the registry password throughout."""
    catalog = world.catalog(world.root / "main")
    before = working_containers()
    with _ArgvWatcher(world.password) as watch:
        rc, summary, err = build(world, catalog)
    assert rc == 0, err[-3000:]
    assert watch.scans > 10 and watch.seen == [], watch.seen
    return {"catalog": catalog, "summary": summary, "stderr": err,
            "containers": (before, working_containers())}


def test_a_build_leaves_no_working_container_behind(first: dict) -> None:  # type: ignore[type-arg]
    """buildah 1.28 leaves a mounted working container for a stage that is only a FROM
    (containers/buildah#4572): the rendered Dockerfile has none, so storage does not fill up
    with one container per platform per build."""
    before, after = first["containers"]
    assert after == before, after


def test_build_pushes_each_platform_by_digest_then_tags_one_index(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    image = first["summary"]["images"][0]
    assert image["error"] is None and image["tags_moved"] == [TAG]
    platforms = {p["platform"]: p for p in image["platforms"]}
    assert set(platforms) == {"linux/amd64", "linux/arm64"}
    resp = registry_get(world, "standin", TAG)
    assert resp.status_code == 200
    assert resp.headers["docker-content-digest"] == image["index_digest"]
    index = resp.json()
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    listed = {
        f"{m['platform']['os']}/{m['platform']['architecture']}": m for m in index["manifests"]
    }
    assert set(listed) == set(platforms)
    for name, entry in listed.items():
        assert entry["digest"] == platforms[name]["digest"]
        assert entry["annotations"]["io.cannery.inputs"] == platforms[name]["input_digest"]
    # The platform manifests were pushed by digest; each carries only its per-platform tag
    # (kept from "delete untagged" GC), the index the release tag (the others are the
    # referrers fallback's sha256-<hex> tags, one per attested manifest).
    tags = httpx.get(
        f"https://{world.push_registry.host}/v2/e2e/standin/tags/list",
        auth=(world.user, world.password), verify=_ssl(world),
    ).json()["tags"]
    assert sorted(t for t in tags if not t.startswith("sha256-")) == [
        TAG, f"{TAG}-amd64", f"{TAG}-arm64"
    ]


def test_lock_written_with_what_the_build_resolved(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    lock = (first["catalog"].parent / "cannery.lock").read_text()
    assert world.fastops_commit in lock  # the git tag v1.0, resolved to its commit
    assert "Ascend-cann-toolkit_8.5.2_linux-aarch64.run" in lock
    assert "lock: added git" in first["stderr"]
    assert world.password not in lock


def test_verify_passes_on_cannerys_image_including_runtime_env(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    ref = f"{world.push_registry.host}/e2e/standin:{TAG}"
    proc = cannery(world, "verify", ref, "--catalog", str(first["catalog"]), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    names = {(c["platform"], c["name"]) for c in report["checks"] if c["ok"]}
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "runtime env") in names
        assert (platform, "import fastops") in names
        assert (platform, "env LD_LIBRARY_PATH") in names
        assert (platform, "no credentials") in names
    assert (None, "platforms") in names


def test_compiled_component_was_built_with_its_job_limit_on_each_arch(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    """The stand-in compile records the MAX_JOBS it saw; the catalog limits it to 1."""
    for p in first["summary"]["images"][0]["platforms"]:
        arch = p["platform"].split("/")[1]
        ref = f"{world.push_registry.host}/e2e/standin@{p['digest']}"
        auth = world.root / "auth.json"
        auth.write_text(json.dumps({"auths": {world.push_registry.host: {"auth": __import__(
            "base64").b64encode(f"{world.user}:{world.password}".encode()).decode()}}}))
        env = dict(os.environ, REGISTRY_AUTH_FILE=str(auth))
        ctr = subprocess.run(
            ["buildah", "from", "--quiet", "--arch", arch, "--cert-dir", str(world.cert_dir), ref],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()
        try:
            out = subprocess.run(
                ["buildah", "run", ctr, "--", "python3", "-c",
                 "import fastops, platform; print(fastops.JOBS, fastops.add(2, 3), "
                 "platform.machine())"],
                env=env, capture_output=True, text=True, check=True,
            ).stdout.split()
        finally:
            subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
        assert out == ["1", "5", {"amd64": "x86_64", "arm64": "aarch64"}[arch]]


def _storage(world: BuildWorld) -> dict[str, tuple[int, int]]:
    """The push registry's files with mtime and size: any write (a PUT) changes them."""
    root = world.push_registry.root / "data"
    files = [p for p in root.rglob("*") if p.is_file()]
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in files}


def test_second_build_of_unchanged_inputs_is_a_no_op(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    before = registry_get(world, "standin", TAG).headers["docker-content-digest"]
    files = _storage(world)
    started = time.monotonic()
    rc, summary, err = build(world, first["catalog"])
    took = time.monotonic() - started
    assert rc == 0, err[-2000:]
    image = summary["images"][0]
    assert all(p["skipped"] for p in image["platforms"])
    assert image["tags_moved"] == []
    assert image["index_digest"] == before
    assert registry_get(world, "standin", TAG).headers["docker-content-digest"] == before
    assert _storage(world) == files  # nothing was written at all
    print(f"no-op build: {took:.2f}s")


def test_same_lock_gives_the_same_digests_from_scratch(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    """A second build from scratch (no layer cache) into another repository, with the same lock:
    every platform manifest and the index come out byte-identical."""
    catalog = world.catalog(world.root / "repro", repo="repro")
    shutil.copyfile(first["catalog"].parent / "cannery.lock", catalog.parent / "cannery.lock")
    rc, summary, err = build(world, catalog, "--force", "--frozen")
    assert rc == 0, err[-3000:]
    ours = {p["platform"]: p["digest"] for p in summary["images"][0]["platforms"]}
    theirs = {p["platform"]: p["digest"] for p in first["summary"]["images"][0]["platforms"]}
    why = []
    with httpx.Client(auth=(world.user, world.password), verify=_ssl(world)) as client:
        for platform in ours:
            if ours[platform] != theirs[platform]:
                # Both builds' blobs are in their own repositories; mount-free: compare via ours.
                base = f"https://{world.push_registry.host}/v2/e2e"
                why.append(f"{platform}:\n" + describe_across(
                    client, f"{base}/standin", theirs[platform], f"{base}/repro", ours[platform]
                ))
    print("\n".join(why) or "reproducible: every platform digest and the index are equal")
    assert ours == theirs, "\n".join(why)
    assert summary["images"][0]["index_digest"] == first["summary"]["images"][0]["index_digest"]


def test_rebuild_exports_only_layers_the_registry_lacks_with_equal_digests(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    """Forced rebuild of linux/amd64 into the same repository: buildah writes none of the layers
    the registry already has (stand-ins in the export), and the manifest is byte-identical to
    the first build's, whose export wrote every layer."""
    rc, summary, err = build(world, first["catalog"], "--force", "--frozen",
                             "--platform", "linux/amd64")
    assert rc == 0, err[-3000:]
    (platform,) = summary["images"][0]["platforms"]
    theirs = {p["platform"]: p["digest"] for p in first["summary"]["images"][0]["platforms"]}
    assert platform["digest"] == theirs["linux/amd64"]
    log = Path(platform["log"]).read_text()
    exported = re.search(r"^# exported (\d+) of (\d+) layers", log, re.M)
    assert exported and exported[1] == "0" and int(exported[2]) > 1, log[-3000:]


def test_tampered_installer_fails_at_sha256sum_before_it_runs_and_no_tag_moves(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    catalog = world.catalog(world.root / "tampered", repo="tampered")
    shutil.copyfile(first["catalog"].parent / "cannery.lock", catalog.parent / "cannery.lock")
    # arm64 is built second: amd64 is built and pushed by digest first, then arm64 fails.
    installer = world.installer("arm64")
    good = installer.read_bytes()
    # Still a working installer (it would run and install), but not the locked bytes.
    bad = good.replace(b"set -eu\n", b"set -eu\necho TAMPERED-RAN\n", 1)
    installer.write_bytes(bad)
    try:
        rc, summary, err = build(world, catalog, "--force", "--frozen")
    finally:
        installer.write_bytes(good)
    assert rc == 1
    image = summary["images"][0]
    assert image["tags_moved"] == [] and image["index_digest"] is None
    assert "linux/arm64" in image["error"]
    amd64, arm64 = image["platforms"]
    assert amd64["digest"] and not amd64["error"]  # pushed by digest, yet no tag names it
    log = Path(arm64["log"]).read_text()
    # the check names the URL and both digests
    url = f"{world.files.url}/Ascend-cann-toolkit_8.5.2_linux-aarch64.run"
    got, locked = hashlib.sha256(bad).hexdigest(), hashlib.sha256(good).hexdigest()
    assert f"cannery: {url}: sha256 {got}, but cannery.lock has {locked}" in log
    assert "TAMPERED-RAN" not in log
    assert f"cannery: {url}: sha256 {got}" in err  # the failing platform's last lines
    assert registry_get(world, "tampered", TAG).status_code == 404


def _table_toml(name: str, table: dict[str, str | list[str]]) -> str:
    lines = [f"[envs.{name}]"]
    for key, value in table.items():
        lines.append(f"{key} = {json.dumps(value)}")  # a JSON string or list is TOML too
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_install_step_fails_naming_what_the_env_table_lacks_of_set_env(
    world: BuildWorld, first: dict, arch: str  # type: ignore[type-arg]
) -> None:
    """The first build passed the install step's env check with the built-in cann-8 table
    against the stand-in's env scripts (all three, the full set). A table without one variable
    and one search-path element renders an ENV that lacks them: the build stops at the install
    step, before any push, naming both."""
    from cannery.catalog.load import load_catalog

    table = dict(load_catalog(None).catalog.envs["cann-8"])
    del table["LCCL_PARALLEL"]
    gone = "${ASCEND_TOOLKIT_LATEST_HOME}/tools/aml/lib64/plugin"
    ld = table["LD_LIBRARY_PATH"]
    assert isinstance(ld, list) and gone in ld
    table["LD_LIBRARY_PATH"] = [e for e in ld if e != gone]
    catalog = world.catalog(world.root / f"envgap-{arch}", repo="envgap")
    text = catalog.read_text().replace('env = "cann-8"', 'env = "gap"')
    catalog.write_text(text + "\n" + _table_toml("gap", table))
    shutil.copyfile(first["catalog"].parent / "cannery.lock", catalog.parent / "cannery.lock")
    rc, summary, err = build(world, catalog, "--frozen", "--platform", f"linux/{arch}")
    assert rc == 1, err[-3000:]
    image = summary["images"][0]
    assert image["tags_moved"] == [] and image["index_digest"] is None
    (platform,) = image["platforms"]
    assert not platform["digest"]  # nothing was pushed
    log = Path(platform["log"]).read_text()
    assert "cannery: ENV lacks LCCL_PARALLEL, which the CANN env scripts set to '0'" in log, (
        log[-3000:])
    lacking = "/usr/local/Ascend/ascend-toolkit/latest/tools/aml/lib64/plugin"
    assert f"cannery: ENV LD_LIBRARY_PATH lacks {lacking}, which" in log, log[-3000:]
    # only those two (the build's own output lines; the RUN's text is in the log too): the
    # rest of the table is what the scripts set
    said = [line for line in log.splitlines() if line.startswith("cannery: ENV ")]
    assert len(said) == 2, said
    assert registry_get(world, "envgap", TAG).status_code == 404


def test_untrusted_registry_certificate_is_one_line_exit_2(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    ref = f"{world.push_registry.host}/e2e/standin:{TAG}"
    env = world.env()
    env.pop("CANNERY_CA_CERT")
    proc = cannery(world, "verify", ref, "--catalog", str(first["catalog"]), env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "certificate" in lines[0] and "--ca-cert" in lines[0], lines
    assert "Traceback" not in proc.stderr
    ok = cannery(
        world, "verify", ref, "--catalog", str(first["catalog"]), "--no-runtime",
        "--ca-cert", str(world.ca.ca_cert), env=env,
    )
    assert ok.returncode == 0, ok.stdout[-2000:]
    rc, summary, err = build(world, first["catalog"], "--frozen", env=env)
    error = summary["images"][0]["error"]
    assert rc == 2 and "certificate" in error and "--ca-cert" in error, (summary, err[-2000:])
    assert "\n" not in error and "Traceback" not in err
    assert summary["images"][0]["tags_moved"] == []


def test_wrong_password_is_a_clear_error_and_never_shown(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    wrong = "wrong-" + world.password[::-1]
    env = world.env(CANNERY_REGISTRY_PASSWORD=wrong)
    # --force and one platform: the build runs, and the password is first needed at the push.
    with _ArgvWatcher(wrong) as watch:
        rc, _, err = build(
            world, first["catalog"], "--force", "--platform", "linux/amd64", env=env
        )
    assert rc == 2
    assert "401" in err or "credentials" in err or "refused" in err, err
    assert wrong not in err and world.password not in err
    for log in (first["catalog"].parent / "logs").rglob("*.log"):
        text = log.read_text()
        assert wrong not in text and world.password not in text
    assert watch.seen == []


SEED_STYLE = """\
FROM {base}
ARG TARGETARCH
SHELL ["/bin/bash", "-c"]
# The review's third finding: the toolkit env is sourced in a RUN and persisted nowhere.
RUN set -eu; case "$TARGETARCH" in amd64) a=x86_64 ;; arm64) a=aarch64 ;; esac; \\
    curl -fsSL -o /tmp/tk.run "{files}/Ascend-cann-toolkit_8.5.2_linux-$a.run"; \\
    bash /tmp/tk.run --quiet --install; rm -f /tmp/tk.run
RUN source /usr/local/Ascend/ascend-toolkit/set_env.sh && python3 -c "import cann_standin"
"""


def test_verify_fails_on_a_seed_style_image_naming_the_variables(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    """The dynamic proof of the review's finding 3: a hand-written image that sources the env
    script in a RUN builds fine, yet its containers lack every variable the script sets."""
    ctx = world.root / "seed"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(SEED_STYLE.format(base=world.base, files=world.files.url))
    ref = f"{world.registry.host}/e2e/seed:{TAG}"
    manifest = f"localhost/cannery-seed-{os.getpid()}"
    subprocess.run(["buildah", "manifest", "rm", manifest], capture_output=True, check=False)
    subprocess.run(
        ["buildah", "build", "--format", "docker", "--network", "host", "--cert-dir",
         str(world.cert_dir), "--platform", "linux/amd64,linux/arm64", "--manifest", manifest,
         str(ctx)],
        check=True, capture_output=True,
    )
    subprocess.run(
        ["buildah", "manifest", "push", "--all", "--cert-dir", str(world.cert_dir), manifest,
         f"docker://{ref}"],
        check=True, capture_output=True,
    )
    proc = cannery(
        world, "verify", ref, "--catalog", str(first["catalog"]), "--image", "standin", "--json"
    )
    assert proc.returncode == 1, proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    failed = {(c["platform"], c["name"]) for c in checks if not c["ok"]}
    # What the container part said, so a failure to run one is told apart from a missing var.
    runtime = [c for c in checks if c["name"].startswith(("runtime", "container", "import"))]
    for platform in ("linux/amd64", "linux/arm64"):
        for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "LD_LIBRARY_PATH", "PYTHONPATH"):
            assert (platform, f"runtime env {var}") in failed, runtime
            assert (platform, f"env {var}") in failed


def test_output_oci_layout_needs_no_registry(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    """`--output oci:DIR`: a multi-arch OCI image layout on disk, readable by other tools."""
    out = world.root / "layout"
    env = world.env()
    for var in ("CANNERY_REGISTRY_USER", "CANNERY_REGISTRY_PASSWORD"):
        env.pop(var)
    proc = cannery(
        world, "build", "--catalog", str(first["catalog"]), "--output", f"oci:{out}",
        "--network", "host", "--frozen", "--json", "--log-dir", str(world.root / "oci-logs"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    top = json.loads((out / "index.json").read_text())
    (entry,) = top["manifests"]
    # The tag names the index in the layout's index.json; the index itself names no tag.
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == TAG
    blobs = out / "blobs" / "sha256"
    index = json.loads((blobs / entry["digest"].split(":")[1]).read_bytes())
    # Its one annotation is the lock epoch that guards tag moves; no tag.
    assert list(index["annotations"]) == ["io.cannery.lock-epoch"]
    arches = set()
    for child in index["manifests"]:
        assert child["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        manifest = json.loads((blobs / child["digest"].split(":")[1]).read_bytes())
        config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_bytes())
        assert config["architecture"] == child["platform"]["architecture"]
        for layer in manifest["layers"]:
            assert (blobs / layer["digest"].split(":")[1]).is_file()
        arches.add(config["architecture"])
    assert arches == {"amd64", "arm64"}
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", f"oci:{out}:{TAG}"], capture_output=True, text=True,
        check=True,
    ).stdout
    assert json.loads(raw)["manifests"] == index["manifests"]


def _no_registry_env(world: BuildWorld) -> dict[str, str]:
    """A pull request's job: no registry login in the environment."""
    env = world.env()
    for var in ("CANNERY_REGISTRY_USER", "CANNERY_REGISTRY_PASSWORD"):
        env.pop(var, None)
    return env


def test_verify_reads_the_layout_of_every_platform(world: BuildWorld, first: dict) -> None:  # type: ignore[type-arg]
    """`cannery verify oci:DIR`: the layout the previous test wrote (both platforms), checked
    as a registry's image is, then a container of each platform made from it."""
    out = world.root / "layout"
    proc = cannery(world, "verify", f"oci:{out}", "--catalog", str(first["catalog"]),
                   "--image", "standin", "--json", env=_no_registry_env(world))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    checks = json.loads(proc.stdout)["checks"]
    names = {(c["platform"], c["name"]) for c in checks}
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "inputs match catalog and lock") in names
        assert (platform, "runtime env") in names  # a container was made from the layout
    assert ("index", "platforms") in {(c["platform"] or "index", c["name"]) for c in checks}


def test_pull_request_leg_builds_one_platform_and_verifies_it_from_the_layout(
    world: BuildWorld, first: dict  # type: ignore[type-arg]
) -> None:
    """What a generated pull-request leg runs, with no registry login: `build --platform P
    --output oci:DIR`, then `verify oci:DIR --platform P`. The tag names nothing partial."""
    out = world.root / "pr-layout"
    env = _no_registry_env(world)
    catalog = str(first["catalog"])
    proc = cannery(world, "build", "standin", "--catalog", catalog, "--locked",
                   "--platform", "linux/amd64", "--output", f"oci:{out}", "--network", "host",
                   "--log-dir", str(world.root / "pr-logs"), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    top = json.loads((out / "index.json").read_text())
    (entry,) = top["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == f"{TAG}-amd64"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    ok = cannery(world, "verify", f"oci:{out}", "--catalog", catalog, "--image", "standin",
                 "--platform", "linux/amd64", "--json", env=env)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    checks = json.loads(ok.stdout)["checks"]
    assert {c["platform"] for c in checks if c["platform"]} == {"linux/amd64"}
    assert any(c["name"] == "runtime env" and c["ok"] for c in checks)
    # Without --platform the catalog's platforms are expected under the tag: not there.
    whole = cannery(world, "verify", f"oci:{out}", "--catalog", catalog, "--image", "standin",
                    env=env)
    assert whole.returncode == 2 and f"no index is named '{TAG}'" in whole.stderr, whole.stderr
    # A blob whose bytes are not its digest is refused, naming it (the layout is not trusted).
    blobs = out / "blobs" / "sha256"
    manifest = json.loads((blobs / entry["digest"].split(":")[1]).read_bytes())
    config = blobs / manifest["config"]["digest"].split(":")[1]
    config.write_bytes(config.read_bytes().replace(b'"amd64"', b'"arm64"'))
    bad = cannery(world, "verify", f"oci:{out}", "--catalog", catalog, "--image", "standin",
                  "--platform", "linux/amd64", env=env)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert f"do not hash to {manifest['config']['digest']}" in bad.stderr
    assert "Traceback" not in bad.stderr


def _fastops_commit(world: BuildWorld, deps: str, branch: str) -> str:
    """A new commit of the fastops stand-in whose pyproject lists ``deps``, on ``branch``."""
    work = world.root / "git" / "fastops.git.work"
    pyproject = work / "pyproject.toml"
    pyproject.write_text(re.sub(r"dependencies = \[.*\]", f"dependencies = [{deps}]",
                                pyproject.read_text()))
    (work / "NEWS").write_text(f"{branch}\n")
    ident = ["-c", "user.name=e2e", "-c", "user.email=e2e@example.com"]
    for args in (["add", "-A"], [*ident, "commit", "-q", "-m", branch],
                 ["push", "-q", str(world.root / "git" / "fastops.git"), f"HEAD:{branch}"]):
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_bump_builds_from_the_earlier_pins_while_uv_resolves_and_checks_them_first(
    world: BuildWorld, tmp_path: Path
) -> None:
    """A component bump re-resolves the image's Python pins; the build starts at once from the
    earlier pins (a guess) while uv runs, and nothing is pushed before the guess is checked.
    Held: one build, and the pushed image is the lock's (a `--locked` build after it is a
    no-op). Moved (the new commit needs a new package): built again from the new pins, nothing
    pushed in between. Without the check, the image from the old pins would be pushed and
    tagged, and that `--locked` build would not be a no-op. Unresolvable: exit 2 naming the
    resolution, the tag and the lock as they were."""
    from tests.services.standin import make_wheelhouse

    cat = world.catalog(world.root / "guess", repo="guess")
    text = cat.read_text().replace('platforms = ["linux/amd64", "linux/arm64"]',
                                   'platforms = ["linux/amd64"]')
    cat.write_text(text.replace('ref = "v1.0"', f'ref = "{world.fastops_commit}"'))
    lock = cat.parent / "cannery.lock"
    rc, _, err = build(world, cat)
    assert rc == 0, err[-3000:]

    def bump(commit: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
        cat.write_text(re.sub(r'ref = "[0-9a-f]{40}"', f'ref = "{commit}"', cat.read_text()))
        return build(world, cat)

    def manifests() -> set[str]:  # every manifest the repository ever received
        revisions = world.push_registry.root / "data" / "docker" / "registry" / "v2"
        revisions = revisions / "repositories" / "e2e" / "guess" / "_manifests" / "revisions"
        return {p.parent.name for p in revisions.rglob("link")}

    def no_op() -> None:
        rc, summary, err = build(world, cat, "--locked")
        assert rc == 0, err[-3000:]
        assert all(p["skipped"] for p in summary["images"][0]["platforms"]), summary

    before = manifests()
    rc, summary, err = bump(_fastops_commit(world, "", "guess-held"))
    assert rc == 0, err[-3000:]
    held = manifests() - before  # one platform, its index, their attestations
    assert "building again" not in err
    assert not summary["images"][0]["platforms"][0]["skipped"]
    no_op()

    # a package the earlier pins lack, in the world's index
    make_wheelhouse(tmp_path / "wheels", name="guess_extra")
    made, wheels = tmp_path / "wheels", world.files_root / "wheels"
    shutil.copy(next((made / "files").glob("guess_extra-*.whl")), wheels / "files")
    shutil.copytree(made / "simple" / "guess-extra", wheels / "simple" / "guess-extra")
    before = manifests()
    rc, summary, err = bump(_fastops_commit(world, '"guess-extra"', "guess-moved"))
    assert rc == 0, err[-3000:]
    assert len(manifests() - before) == len(held)  # and not the guess's platform besides
    assert "the new Python pins differ from the earlier ones: building again" in err
    assert "guess-extra==1.0" in lock.read_text()
    no_op()

    before_tag = registry_get(world, "guess", TAG).headers["docker-content-digest"]
    before_lock = lock.read_text()
    rc, _, err = bump(_fastops_commit(world, '"no-such-standin"', "guess-unresolvable"))
    assert rc == 2, err[-3000:]
    assert "Python dependencies of standin/amd64" in err and "Traceback" not in err
    assert registry_get(world, "guess", TAG).headers["docker-content-digest"] == before_tag
    assert lock.read_text() == before_lock
