"""The executor with jobs planned from a guessed lock (``Settings.settle``): nothing is
exported, pushed or written before the guess is checked, and a wrong guess ends the run
(GuessFailed) rather than one image. The engine is a stand-in whose build step is `true` and
whose export records that it ran: what is tested is the executor's order, which no real
engine could make fail on purpose (the e2e test in test_build.py runs buildah and uv)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from cannery.builder.engine import BuildOptions, Built, Present, Run
from cannery.builder.execute import GuessFailed, Settings, Target, build_image
from cannery.builder.jobs import ImageJob, PlatformJob, plan_build
from cannery.builder.progress import PlainReporter
from cannery.catalog.load import load_catalog
from cannery.errors import FatalError, LockError
from cannery.lock import read_lock
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


class _Engine:
    name = "stand-in"
    pushes_while_building = False

    def __init__(self, step: list[str]) -> None:
        self.step = step
        self.exported: list[str] = []

    def steps(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> list[list[str]]:
        return [self.step]

    def login_hosts(self, image: ImageJob, opts: BuildOptions) -> list[str]:
        return []

    def collect(
        self, image: ImageJob, job: PlatformJob, opts: BuildOptions, run: Run, present: Present
    ) -> Built:
        self.exported.append(job.platform)
        raise FatalError("stand-in: no export")  # a layout is not needed to see the order


def _image() -> ImageJob:
    lock = read_lock(GOLDEN / "cannery.lock")
    (spec,) = plan(load_catalog(None).catalog, lock, ["qwen3-5-a2"])
    return plan_build(spec, render_dockerfile(spec), lock)


def _run(tmp_path: Path, engine: _Engine, settle: object) -> None:
    settings = Settings(engine=engine, log_dir=tmp_path / "logs", settle=settle)  # type: ignore[arg-type]
    target = Target(oci_dir=tmp_path / "out")
    build_image(_image(), settings, target, PlainReporter(Console(file=io.StringIO())))


def test_a_wrong_guess_ends_the_run_before_any_export(tmp_path: Path) -> None:
    engine = _Engine(["true"])
    with pytest.raises(GuessFailed) as info:
        _run(tmp_path, engine, lambda: False)
    assert info.value.error is None
    assert engine.exported == [] and not (tmp_path / "out").exists()


def test_a_failed_resolution_ends_the_run_with_its_error(tmp_path: Path) -> None:
    def settle() -> bool:
        raise LockError("Python dependencies of qwen3-5-a2/amd64: no solution")

    engine = _Engine(["false"])  # a build that failed because of it: the lock error is said
    with pytest.raises(GuessFailed) as info:
        _run(tmp_path, engine, settle)
    assert isinstance(info.value.error, LockError) and engine.exported == []


def test_a_held_guess_goes_on_to_the_export(tmp_path: Path) -> None:
    engine = _Engine(["true"])
    asked: list[bool] = []

    def settle() -> bool:
        asked.append(True)
        return True

    _run(tmp_path, engine, settle)
    assert asked and engine.exported  # then the stand-in's export ends the image
