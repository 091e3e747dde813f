"""The buildx backend, against a fake ``docker`` on PATH and the real registry.

``docker buildx`` cannot be installed here, so this is the one place a fake stands in: a
script named ``docker`` that records its argv and environment, "pushes" by answering with the
descriptor of an image the test pushed to the real registry beforehand, and writes the
``--metadata-file`` the way buildx does. Everything after that is real: cannery reads the
metadata, checks the manifests are in the registry, merges the index and moves the tag.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.catalogs import tiny
from tests.services.registry import LocalRegistry, push_image

pytestmark = pytest.mark.e2e

FAKE_DOCKER = """#!{python}
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as fh:
    fh.write(json.dumps({{"argv": argv, "env": sorted(os.environ)}}) + "\\n")
platform = argv[argv.index("--platform") + 1]
arch = platform.split("/")[1]
if os.environ.get("FAKE_DOCKER_FAIL") == arch:
    print("#12 ERROR: process did not complete successfully: exit code: 1")
    sys.exit(1)
meta = argv[argv.index("--metadata-file") + 1]
desc = json.loads(os.environ["FAKE_DOCKER_" + arch.upper()])
with open(meta, "w") as fh:
    json.dump({{"containerimage.descriptor": desc, "containerimage.digest": desc["digest"],
               "image.name": "ignored"}}, fh)
print("#1 [image 1/1] RUN true")
"""


def catalog_text(host: str) -> str:
    """The one-image catalog: its base and its pushes in ``host``'s registry, two platforms."""
    return tiny("buildx", f"{host}/bx/image", f"{host}/bx/base:1", "bx-{cann}")


def fake_docker_dir(tmp_path: Path, script: str) -> Path:
    """``tmp_path/bin``, holding ``script`` as an executable named ``docker`` (for PATH)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "docker"
    fake.write_text(script)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return bindir


def _setup(tmp_path: Path, registry: LocalRegistry) -> tuple[Path, dict[str, str]]:
    base = registry.url
    push_image(base, "bx/base", "1", "amd64")
    descs = {}
    for arch in ("amd64", "arm64"):
        digest = push_image(base, "bx/image", f"tmp-{arch}", arch, note="built by buildx")
        size = len(
            httpx.get(
                f"{base}/v2/bx/image/manifests/{digest}",
                headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
            ).content
        )
        descs[arch] = {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": size,
        }
    bindir = fake_docker_dir(tmp_path, FAKE_DOCKER.format(python=sys.executable))
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(catalog_text(registry.host))
    env = dict(
        os.environ,
        PATH=f"{bindir}:{os.environ['PATH']}",
        FAKE_DOCKER_LOG=str(tmp_path / "docker.log"),
        FAKE_DOCKER_AMD64=json.dumps(descs["amd64"]),
        FAKE_DOCKER_ARM64=json.dumps(descs["arm64"]),
        CANNERY_REGISTRY_USER="someone",
        CANNERY_REGISTRY_PASSWORD="s3cret-not-for-docker",
    )
    return catalog, env


def _storage(registry: LocalRegistry) -> dict[str, tuple[int, int]]:
    """Every file of the registry's storage with its mtime and size (a PUT rewrites files)."""
    return {
        str(p): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in (registry.root / "data").rglob("*")
        if p.is_file()
    }


def _tag_status(registry: LocalRegistry, tag: str) -> int:
    return httpx.get(
        f"{registry.url}/v2/bx/image/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.index.v1+json"},
    ).status_code


def _cannery(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cannery", *args], env=env, capture_output=True, text=True,
        check=False, timeout=300,
    )


def test_buildx_argv_metadata_and_merge(tmp_path: Path, registry: LocalRegistry) -> None:
    catalog, env = _setup(tmp_path, registry)
    proc = _cannery(
        "build", "--catalog", str(catalog), "--backend", "buildx", "--builder", "k8s-arm",
        "--push", "--json", "--registry-cache", "--log-dir", str(tmp_path / "logs"), env=env,
    )
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in (tmp_path / "docker.log").read_text().splitlines()]
    assert [c["argv"][c["argv"].index("--platform") + 1] for c in calls] == [
        "linux/amd64",
        "linux/arm64",
    ]
    summary = json.loads(proc.stdout)["images"][0]
    for call, plat in zip(calls, summary["platforms"], strict=True):
        argv = call["argv"]
        assert argv[:3] == ["buildx", "build", "--builder"] and argv[3] == "k8s-arm"
        out = argv[argv.index("--output") + 1].split(",")
        assert out[0] == "type=image" and f"name={registry.host}/bx/image" in out
        assert {"push-by-digest=true", "name-canonical=true", "push=true"} <= set(out)
        assert not any(o.startswith("tag") for o in out)  # no tag is written by a leg
        assert f"io.cannery.inputs={plat['input_digest']}" in argv
        assert "--provenance=false" in argv and "--metadata-file" in argv
        # A registry cache of this image and platform alone.
        arch = plat["platform"].split("/")[1]
        ref = f"{registry.host}/bx/image:cache-one-{arch}"
        assert argv[argv.index("--cache-from") + 1] == f"type=registry,ref={ref}"
        assert argv[argv.index("--cache-to") + 1] == f"type=registry,ref={ref},mode=max"
        # cannery's own registry credentials never reach the engine (docker has its own).
        assert not any(name.startswith("CANNERY_REGISTRY_") for name in call["env"])
        assert "s3cret-not-for-docker" not in " ".join(argv)
    index = httpx.get(
        f"{registry.url}/v2/bx/image/manifests/bx-9.1.0",
        headers={"Accept": "application/vnd.oci.image.index.v1+json"},
    ).json()
    got = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    want = {json.loads(env[f"FAKE_DOCKER_{a.upper()}"])["digest"]: a for a in ("amd64", "arm64")}
    assert got == {a: d for d, a in want.items()}
    assert summary["tags_moved"] == ["bx-9.1.0"]


def test_buildx_leg_failure_moves_no_tag_and_shows_the_log(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    catalog, env = _setup(tmp_path, registry)
    catalog.write_text(catalog.read_text().replace('tag = "bx-{cann}"', 'tag = "bx-fail"'))
    env["FAKE_DOCKER_FAIL"] = "arm64"
    proc = _cannery(
        "build", "--catalog", str(catalog), "--backend", "buildx", "--push",
        "--log-dir", str(tmp_path / "logs"), env=env,
    )
    assert proc.returncode == 1
    assert "linux/arm64" in proc.stdout and "no tag moved" in proc.stdout
    assert "process did not complete successfully" in proc.stderr  # the leg's last lines
    resp = httpx.get(f"{registry.url}/v2/bx/image/manifests/bx-fail")
    assert resp.status_code == 404


def test_locked_and_frozen_refuse_a_lock_that_would_change(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    """uv/cargo semantics, before anything is built: --locked names what the lock lacks,
    --frozen refuses to resolve, the default resolves and writes the lock saying what it added."""
    catalog, env = _setup(tmp_path, registry)
    lock = tmp_path / "cannery.lock"
    common = ["build", "--catalog", str(catalog), "--backend", "buildx", "--push",
              "--log-dir", str(tmp_path / "logs")]
    locked = _cannery(*common, "--locked", env=env)
    assert locked.returncode == 2
    assert "the lock would change (--locked)" in locked.stderr
    assert f"add base {registry.host}/bx/base:1" in locked.stderr
    assert not lock.exists() and not (tmp_path / "docker.log").exists()
    frozen = _cannery(*common, "--frozen", env=env)
    assert frozen.returncode == 2
    assert "--frozen never resolves" in frozen.stderr and "no digest" in frozen.stderr
    assert not lock.exists() and not (tmp_path / "docker.log").exists()
    default = _cannery(*common, env=env)
    assert default.returncode == 0, default.stderr
    assert f"lock: added base {registry.host}/bx/base:1" in default.stderr
    assert lock.is_file()
    again = _cannery(*common, "--locked", env=env)
    assert again.returncode == 0, again.stderr


def test_ci_legs_then_merge_then_a_nightly_no_op(tmp_path: Path, registry: LocalRegistry) -> None:
    """The generated workflow's shape: one leg per platform writes its descriptor and moves no
    tag; the merge job tags; a nightly run of the legs over unchanged inputs builds nothing but
    still hands the merge job its descriptors, and the merge then writes nothing."""
    catalog, env = _setup(tmp_path, registry)
    catalog.write_text(catalog.read_text().replace('tag = "bx-{cann}"', 'tag = "bx-ci"'))
    base = ["build", "--catalog", str(catalog), "--backend", "buildx", "--push",
            "--log-dir", str(tmp_path / "logs")]
    for night, digests in enumerate((tmp_path / "d1", tmp_path / "d2")):
        before = _storage(registry)
        for platform in ("linux/amd64", "linux/arm64"):
            leg = _cannery(*base, "--platform", platform, "--digest-dir", str(digests), "--json",
                           env=env)
            assert leg.returncode == 0, leg.stderr
            (result,) = json.loads(leg.stdout)["images"][0]["platforms"]
            assert bool(result["skipped"]) == bool(night)  # the second night builds nothing
            arch = platform.split("/")[1]
            assert json.loads((digests / "one" / f"linux-{arch}.json").read_text())["digest"]
        assert _tag_status(registry, "bx-ci") == (404 if night == 0 else 200)  # legs never tag
        merge = _cannery(*base, "--merge-only", "--digest-dir", str(digests), "--json", env=env)
        assert merge.returncode == 0, merge.stderr
        image = json.loads(merge.stdout)["images"][0]
        assert image["tags_moved"] == ([] if night else ["bx-ci"])
        if night:  # the registry's files are untouched: nothing was written at all
            assert _storage(registry) == before
    calls = (tmp_path / "docker.log").read_text().splitlines()
    assert len(calls) == 2  # only the first night's legs ran the engine


def test_merge_only_refuses_a_broken_or_foreign_descriptor(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    catalog, env = _setup(tmp_path, registry)
    catalog.write_text(catalog.read_text().replace('tag = "bx-{cann}"', 'tag = "bx-bad"'))
    digests = tmp_path / "digests"
    base = ["build", "--catalog", str(catalog), "--backend", "buildx", "--push",
            "--digest-dir", str(digests), "--log-dir", str(tmp_path / "logs")]
    for platform in ("linux/amd64", "linux/arm64"):
        assert _cannery(*base, "--platform", platform, env=env).returncode == 0
    good = (digests / "one" / "linux-arm64.json").read_text()
    for text in ("[]", '{"mediaType": "x", "digest": "sha256:zz", "size": 1}', "not json"):
        (digests / "one" / "linux-arm64.json").write_text(text)
        proc = _cannery(*base, "--merge-only", env=env)
        assert proc.returncode == 2, (text, proc.stderr)
        assert "linux-arm64.json" in proc.stdout and "Traceback" not in proc.stderr
        assert _tag_status(registry, "bx-bad") == 404
    # A descriptor from other inputs (another catalog or lock) is not merged either.
    foreign = json.loads(good)
    foreign["annotations"]["io.cannery.inputs"] = "sha256:" + "0" * 64
    (digests / "one" / "linux-arm64.json").write_text(json.dumps(foreign))
    proc = _cannery(*base, "--merge-only", env=env)
    assert proc.returncode == 2 and "other inputs" in proc.stdout
    (digests / "one" / "linux-arm64.json").write_text(good)
    # A subset of the platforms is no image to tag: the guard in _publish refuses it.
    proc = _cannery(*base, "--merge-only", "--platform", "linux/amd64", env=env)
    assert proc.returncode == 2, proc.stdout
    assert "missing: linux/arm64" in proc.stdout and "no tag moved" in proc.stdout
    assert _tag_status(registry, "bx-bad") == 404
    assert _cannery(*base, "--merge-only", env=env).returncode == 0
    assert _tag_status(registry, "bx-bad") == 200


def test_options_that_cannot_work_are_refused_before_anything_is_resolved(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    catalog, env = _setup(tmp_path, registry)
    cases = [
        (["--backend", "buildx"], "add --push"),
        (["--push", "--platform", "linux/s390x"], "is not one of its platforms"),
        (["--push", "--tag-suffix", "/bad"], "not a valid image tag"),
        (["--output", "dir:x"], "expected oci:DIR"),
        (["--digest-dir", str(tmp_path / "d")], "add --push"),
    ]
    for extra, message in cases:
        proc = _cannery("build", "--catalog", str(catalog), *extra, env=env)
        assert proc.returncode == 2 and message in proc.stderr, (extra, proc.stderr)
        assert not (tmp_path / "cannery.lock").exists()  # nothing resolved, nothing written


def test_a_build_from_an_older_lock_does_not_move_the_tag_back(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    """An older checkout's build finishing after a newer one: the tag's index says (in
    io.cannery.lock-epoch) it came from a newer lock, so the tag stays (exit 2); --force moves
    it anyway."""
    import re

    catalog, env = _setup(tmp_path, registry)
    catalog.write_text(catalog.read_text().replace('tag = "bx-{cann}"', 'tag = "bx-back"'))
    base = ["build", "--catalog", str(catalog), "--backend", "buildx", "--push", "--json",
            "--log-dir", str(tmp_path / "logs")]
    first = _cannery(*base, env=env)
    assert first.returncode == 0, first.stderr
    newer = json.loads(first.stdout)["images"][0]["index_digest"]
    lock = tmp_path / "cannery.lock"
    # The same pins, resolved earlier: an older lock (and so another clock, another index).
    lock.write_text(re.sub(r'resolved_at = "[^"]+"', 'resolved_at = "2020-01-01T00:00:00Z"',
                           lock.read_text()))
    old = _cannery(*base, "--frozen", env=env)
    assert old.returncode == 2, old.stdout
    image = json.loads(old.stdout)["images"][0]
    assert "newer lock" in image["error"] and "--force" in image["error"]
    assert image["tags_moved"] == [] and image["tags_not_moved"] == ["bx-back"]
    index = httpx.get(f"{registry.url}/v2/bx/image/manifests/bx-back",
                      headers={"Accept": "application/vnd.oci.image.index.v1+json"})
    assert "sha256:" + hashlib.sha256(index.content).hexdigest() == newer
    forced = _cannery(*base, "--frozen", "--force", env=env)
    assert forced.returncode == 0, forced.stdout
    assert json.loads(forced.stdout)["images"][0]["tags_moved"] == ["bx-back"]
