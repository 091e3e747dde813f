"""Image reference parsing, printing and the loopback rule (a trust boundary: plain HTTP is
allowed only for loopback registries)."""

from __future__ import annotations

import pytest

from cannery.oci import Reference

D = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "host", "repo", "tag", "digest"),
    [
        ("quay.io/ascend/verl:v1", "quay.io", "ascend/verl", "v1", None),
        ("quay.io/ascend/verl", "quay.io", "ascend/verl", "latest", None),
        (f"quay.io/ascend/verl@{D}", "quay.io", "ascend/verl", None, D),
        (f"quay.io/ascend/verl:v1@{D}", "quay.io", "ascend/verl", "v1", D),
        ("127.0.0.1:5000/a/b:t", "127.0.0.1:5000", "a/b", "t", None),
        ("localhost/a", "localhost", "a", "latest", None),
        ("[::1]:5000/a:t", "[::1]:5000", "a", "t", None),
        ("ubuntu", "registry-1.docker.io", "library/ubuntu", "latest", None),
        ("ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04", None),
        ("ascendai/cann:8.5", "registry-1.docker.io", "ascendai/cann", "8.5", None),
        ("docker.io/ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04", None),
        ("index.docker.io/a/b:1", "registry-1.docker.io", "a/b", "1", None),
    ],
)
def test_parse(text: str, host: str, repo: str, tag: str | None, digest: str | None) -> None:
    ref = Reference.parse(text)
    assert (ref.host, ref.repository, ref.tag, ref.digest) == (host, repo, tag, digest)
    assert Reference.parse(str(ref)) == ref
    assert ref.reference == (digest or tag)


@pytest.mark.parametrize(
    "bad", ["quay.io/Upper/x:t", "quay.io/a:t@sha256:short", "quay.io/a:-t", "quay.io/a@md5:00"]
)
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        Reference.parse(bad)


def test_with_tag_and_digest() -> None:
    ref = Reference.parse("quay.io/a/b:t")
    assert str(ref.with_digest(D)) == f"quay.io/a/b:t@{D}"
    assert ref.with_digest(D).reference == D
    assert str(ref.with_digest(D).with_tag("u")) == "quay.io/a/b:u"
    with pytest.raises(ValueError):
        ref.with_digest("sha256:zz")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("localhost:5000", True),
        ("127.0.0.1:5000", True),
        ("127.9.8.7", True),
        ("[::1]:5000", True),
        ("[::1]", True),
        ("127.attacker.example", False),
        ("127.attacker.example:5000", False),
        ("localhost.attacker.example", False),
        ("0.0.0.0:5000", False),
        ("10.0.0.1:5000", False),
        ("[::2]:5000", False),
        ("quay.io", False),
    ],
)
def test_loopback_is_an_ip_literal_or_localhost(host: str, loopback: bool) -> None:
    assert Reference(host, "a/b", "t").loopback is loopback
