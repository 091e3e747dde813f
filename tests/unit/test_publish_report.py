"""A publish that failed on a mirror says which registries serve the new tags and which do
not, in the summary and in --json."""

from __future__ import annotations

import json

import pytest

from cannery.builder.execute import ImageResult
from cannery.commands.build import _report


def _failed() -> ImageResult:
    r = ImageResult("img", "quay.io/a/img", ["t1"])
    r.error, r.exit_code = "swr: swr.example.com refused …", 2
    r.registries = [
        {"name": "quay", "repository": "quay.io/a/img", "media_types": "oci",
         "index_digest": "sha256:" + "1" * 64, "tags_moved": ["t1"], "has_new_tags": True,
         "error": None, "copied": None},
        {"name": "swr", "repository": "swr.example.com/a/img", "media_types": "oci",
         "index_digest": None, "tags_moved": [], "has_new_tags": False,
         "error": "swr.example.com refused …", "copied": None},
    ]
    return r


def test_summary_names_registries_with_and_without_the_new_tags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _report([_failed()], as_json=False)
    out = capsys.readouterr().out
    assert "img: FAILED: swr: swr.example.com refused" in out
    assert "the new tags are in: quay.io/a/img; not in: swr.example.com/a/img" in out


def test_json_has_each_registry(capsys: pytest.CaptureFixture[str]) -> None:
    _report([_failed()], as_json=True)
    regs = json.loads(capsys.readouterr().out)["images"][0]["registries"]
    assert [(r["name"], r["has_new_tags"]) for r in regs] == [("quay", True), ("swr", False)]
