"""The pure half of cannery build: input digests, timestamps, engine command lines."""

from __future__ import annotations

from pathlib import Path

from cannery.builder.buildah import BuildahEngine, normalize_config
from cannery.builder.engine import BuildOptions
from cannery.builder.jobs import input_digest, plan_build, source_date_epoch
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _job(name: str = "qwen3-5-a2"):  # type: ignore[no-untyped-def]
    cat = load_catalog(None).catalog
    lock = read_lock(GOLDEN / "cannery.lock")
    (spec,) = plan(cat, lock, [name])
    return spec, lock, plan_build(spec, render_dockerfile(spec), lock)


def test_input_digest_covers_platform_instructions_pins_and_clock() -> None:
    entries = {"base:b": ("sha256:" + "1" * 64, "2026-01-01T00:00:00+00:00")}
    text = "# image one\nFROM b\nRUN true\n"
    d = input_digest(text, "linux/amd64", entries, 1767225600)
    assert d != input_digest(text, "linux/arm64", entries, 1767225600)
    assert d != input_digest(text + "RUN false\n", "linux/amd64", entries, 1767225600)
    other = {"base:b": ("sha256:" + "2" * 64, "x")}
    assert d != input_digest(text, "linux/amd64", other, 1767225600)
    # The clock (--timestamp, SOURCE_DATE_EPOCH) changes every file time: another image.
    assert d != input_digest(text, "linux/amd64", entries, 1767225601)
    # Comments (which name the image) and an entry's own time (when not the clock) do not.
    assert d == input_digest(text.replace("one", "two"), "linux/amd64", entries, 1767225600)
    later = {"base:b": ("sha256:" + "1" * 64, "2027-01-01T00:00:00+00:00")}
    assert d == input_digest(text, "linux/amd64", later, 1767225600)


def test_a_relocked_base_time_changes_the_clock_and_so_the_input_digests() -> None:
    """Same pins, a newer base time: the image bytes differ (every timestamp in them), so
    must the input digest (else the second build would be skipped as "unchanged")."""
    spec, lock, job = _job()
    key = spec.base_image
    moved = lock.bases[key].model_copy(update={"resolved_at": "2027-02-02T00:00:00+00:00"})
    relocked = lock.model_copy(update={"bases": {key: moved}})
    again = plan_build(spec, job.dockerfile, relocked)
    assert again.epoch != job.epoch
    for a, b in zip(again.platforms, job.platforms, strict=True):
        assert a.input_digest != b.input_digest


def test_a_renamed_image_keeps_its_input_digests() -> None:
    spec, lock, job = _job()
    other = type(spec)(**{**spec.__dict__, "name": "renamed", "catalog_name": "other"})
    again = plan_build(other, render_dockerfile(other), lock)
    assert [p.input_digest for p in again.platforms] == [p.input_digest for p in job.platforms]


def test_each_platform_gets_its_own_digest_and_the_lock_sets_the_clock() -> None:
    spec, lock, job = _job()
    assert [p.platform for p in job.platforms] == list(spec.platforms)
    assert len({p.input_digest for p in job.platforms}) == len(job.platforms)
    assert job.epoch > 0
    entries = {
        "git:a": ("x", "2026-01-01T00:00:00+00:00"),
        "base:b": ("y", "2026-06-01T00:00:00Z"),  # the base's: 2026-06-01 00:00 UTC
        "url:c": ("z", "2026-03-01T09:00:00+09:00"),
    }
    assert source_date_epoch(entries) == 1780272000
    # Re-locking a component (a newer time) does not move it: cached steps stay valid.
    assert source_date_epoch({**entries, "git:a": ("w", "2027-01-01T00:00:00Z")}) == 1780272000
    del entries["base:b"]
    assert source_date_epoch(entries) == 1767225600  # no base entry: the oldest
    assert source_date_epoch({}) == 0
    assert job.tags == (spec.tag,)
    assert plan_build(spec, job.dockerfile, lock, tag_suffix="-rc1").tags == (spec.tag + "-rc1",)
    only = plan_build(spec, job.dockerfile, lock, platforms=["linux/arm64"])
    assert [p.platform for p in only.platforms] == ["linux/arm64"]


def test_buildah_steps_pin_time_label_and_export_to_a_layout(tmp_path: Path) -> None:
    _, _, job = _job()
    opts = BuildOptions(
        context=tmp_path, dockerfile=tmp_path / "Dockerfile", work=tmp_path / "w",
        push_repository="r.example/x", oci_output=False, cert_dir=tmp_path / "certs",
        network="host",
    )
    engine = BuildahEngine()
    (build,) = engine.steps(job, job.platforms[1], opts)
    assert build[:4] == ["buildah", "build", "--platform", "linux/arm64"]
    assert build[build.index("--timestamp") + 1] == str(job.epoch)
    assert f"SOURCE_DATE_EPOCH={job.epoch}" in build
    # the inputs label goes into the config cannery pushes (--label would add a build step)
    assert "--label" not in build
    assert "--no-cache" not in build and "--layers" in build
    push = engine.export_step(job.platforms[1], opts)
    assert push[-1] == f"oci:{tmp_path / 'w' / 'export'}" and "v2s2" in push
    forced = BuildOptions(**{**opts.__dict__, "no_cache": True, "oci_output": True})
    (build,) = engine.steps(job, job.platforms[0], forced)
    assert "--no-cache" in build and "oci" in engine.export_step(job.platforms[0], forced)


def test_normalized_config_drops_build_machine_identity_only() -> None:
    config = {
        "architecture": "arm64",
        "container": "4d55",
        "parent": "sha256:e8e6",
        "config": {"Hostname": "dcf60bb28525", "Env": ["A=1"], "Labels": {"k": "v"}},
        "container_config": {"Hostname": "dcf60bb28525", "Cmd": ["/bin/sh"]},
        "history": [{"created": "t", "created_by": "RUN x", "comment": "FROM 0fce47364d47"}],
    }
    out = normalize_config(config)
    assert out == {
        "architecture": "arm64",
        "config": {"Env": ["A=1"], "Labels": {"k": "v"}},
        "container_config": {"Cmd": ["/bin/sh"]},
        "history": [{"created": "t", "created_by": "RUN x"}],
    }


def test_a_lock_time_without_timezone_is_refused_at_its_line(tmp_path: Path) -> None:
    """Read in local time, it would make SOURCE_DATE_EPOCH (and every digest) depend on TZ."""
    import pytest

    from cannery.errors import LockError

    text = (GOLDEN / "cannery.lock").read_text()
    first = text.index("resolved_at = ")
    end = text.index("\n", first)
    bad = text[:first] + 'resolved_at = "2026-01-01T00:00:00"' + text[end:]
    path = tmp_path / "cannery.lock"
    path.write_text(bad)
    with pytest.raises(LockError, match=r"cannery.lock:\d+: .*resolved_at: .*timezone"):
        read_lock(path)


def test_inputs_label_is_written_as_buildah_label_writes_it() -> None:
    """Both config sections, keys in Go's map order, and a last history entry: a config from
    `buildah build --label` (compared byte for byte on a real build while writing this)."""
    from cannery.builder.buildah import with_inputs_label

    config = {
        "created": "2026-01-01T00:00:00Z",
        "config": {"Env": ["A=1"], "Labels": {"org.z": "9", "a": "1"}},
        "container_config": {"Cmd": ["/bin/sh"]},
        "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "RUN x"}],
    }
    out = with_inputs_label(config, "sha256:" + "2" * 64)
    want = {"a": "1", "io.cannery.inputs": "sha256:" + "2" * 64, "org.z": "9"}
    assert out["config"] == {"Env": ["A=1"], "Labels": want}
    assert list(out["config"]["Labels"]) == sorted(want)  # type: ignore[index]
    assert out["container_config"] == {"Cmd": ["/bin/sh"],
                                       "Labels": {"io.cannery.inputs": "sha256:" + "2" * 64}}
    assert out["history"] == [
        {"created": "2026-01-01T00:00:00Z", "created_by": "RUN x"},
        {"created": "2026-01-01T00:00:00Z",
         "created_by": f'/bin/sh -c #(nop) LABEL "io.cannery.inputs"="sha256:{"2" * 64}"',
         "empty_layer": True},
    ]
    assert config["config"]["Labels"] == {"org.z": "9", "a": "1"}  # type: ignore[index]


def test_extra_tags_come_after_the_tag_and_aliases_and_are_checked(cli) -> None:  # type: ignore[no-untyped-def]
    spec, lock, _ = _job()
    job = plan_build(spec, render_dockerfile(spec), lock, extra_tags=("nightly", spec.tag))
    assert job.tags == (*spec.tags, "nightly")  # one already named is not moved twice
    # a bad one is refused before anything is resolved or built
    res = cli("build", "qwen3-5-a2", "--extra-tag", "$(id)", "--extra-tag", "ok")
    assert res.code == 2
    assert "--extra-tag '$(id)': not a valid image tag" in res.err
    # the embedded catalog's images share a repository: a tag can name only one index
    res = cli("build", "qwen3-5-a2", "qwen3-5-a3", "--extra-tag", "nightly")
    assert res.code == 2 and "--extra-tag names one index per repository" in res.err
    # another image's tag in the same repository is that image's: not moved to this one
    res = cli("build", "qwen3-5-a2", "--extra-tag", _job("qwen3-5-a3")[0].tag)
    assert res.code == 2 and "the catalog's image qwen3-5-a3 owns that tag" in res.err
    res = cli("build", "qwen3-5-a2", "--extra-tag", "latest\n")
    assert res.code == 2 and "not a valid image tag" in res.err
