"""Keyless verification without a registry: Sigstore bundles minted by a STAND-IN Sigstore (a
test Fulcio CA, CT log and Rekor, tests/services/sigstore.py: the public-good ones and GitHub's
OIDC issuer cannot be reached here), checked by sigstore-python's offline verifier against the
stand-in's trusted root; and the options' rules (exit 2 before any network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cannery.verify.keyless import KeylessPolicy, _statement, load_verifier
from tests.services.sigstore import GITHUB_ISSUER, StandInSigstore

IDENTITY = "https://github.com/example/images/.github/workflows/images.yml@refs/heads/main"
DIGEST = "sha256:" + "ab" * 32


def _stmt(digest: str = DIGEST) -> bytes:
    return json.dumps({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "r.example.com/x", "digest": {"sha256": digest[7:]}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {},
    }).encode()


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> tuple[StandInSigstore, Path]:
    s = StandInSigstore()
    root = tmp_path_factory.mktemp("sigstore") / "trusted_root.json"
    root.write_bytes(s.trusted_root())
    return s, root


def _check(root: Path, bundle: bytes, identity: str = IDENTITY,
           issuer: str = GITHUB_ISSUER) -> dict[str, object]:
    verifier, policy = load_verifier(KeylessPolicy(identity, issuer, root))
    return _statement(verifier, policy, bundle, DIGEST, "bundle")


def test_a_bundle_for_the_identity_and_issuer_verifies(
    standin: tuple[StandInSigstore, Path],
) -> None:
    s, root = standin
    stmt = _check(root, s.bundle(_stmt(), IDENTITY))
    assert stmt["predicateType"] == "https://slsa.dev/provenance/v1"


@pytest.mark.parametrize(("identity", "issuer", "words"), [
    (IDENTITY.replace("images.yml", "evil.yml"), GITHUB_ISSUER, "SANs do not match"),
    (IDENTITY, "https://accounts.example.com", "OIDCIssuer does not match"),
], ids=["identity", "issuer"])
def test_another_identity_or_issuer_fails_naming_it(
    standin: tuple[StandInSigstore, Path], identity: str, issuer: str, words: str
) -> None:
    s, root = standin
    with pytest.raises(ValueError, match=words):
        _check(root, s.bundle(_stmt(), IDENTITY), identity, issuer)


def test_a_bundle_from_another_root_fails(standin: tuple[StandInSigstore, Path]) -> None:
    _, root = standin
    with pytest.raises(ValueError, match="certificate chain"):
        _check(root, StandInSigstore().bundle(_stmt(), IDENTITY))


def test_a_statement_about_another_manifest_fails(
    standin: tuple[StandInSigstore, Path],
) -> None:
    s, root = standin
    with pytest.raises(ValueError, match="subject is not"):
        _check(root, s.bundle(_stmt("sha256:" + "cd" * 32), IDENTITY))


def test_a_changed_payload_fails(standin: tuple[StandInSigstore, Path]) -> None:
    s, root = standin
    bundle = json.loads(s.bundle(_stmt(), IDENTITY))
    import base64

    bundle["dsseEnvelope"]["payload"] = base64.b64encode(_stmt("sha256:" + "cd" * 32)).decode()
    with pytest.raises(ValueError):
        _check(root, json.dumps(bundle).encode())


@pytest.mark.parametrize("bundle", [b"not json", b"[1]", b"{}", b'{"mediaType": "x"}'])
def test_a_malformed_bundle_is_a_failed_check_not_a_crash(
    standin: tuple[StandInSigstore, Path], bundle: bytes
) -> None:
    _, root = standin
    with pytest.raises(ValueError, match="bundle: failed to load bundle"):
        _check(root, bundle)


def test_a_trusted_root_that_is_not_one_is_exit_2_before_any_registry(
    cli, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    bad = tmp_path / "root.json"
    bad.write_text('{"mediaType": "x"}')
    res = cli("verify", "127.0.0.1:9/x:y", "--certificate-identity", IDENTITY,
              "--certificate-oidc-issuer", GITHUB_ISSUER, "--trusted-root", str(bad))
    assert res.code == 2 and "not a Sigstore trusted root" in res.err
    assert "Traceback" not in res.err and "127.0.0.1:9" not in res.err


@pytest.mark.parametrize(("args", "words"), [
    (["--certificate-identity", IDENTITY], "go together"),
    (["--certificate-oidc-issuer", GITHUB_ISSUER], "go together"),
    (["--trusted-root", "root.json"], "give --certificate-identity"),
    (["--certificate-identity", IDENTITY, "--certificate-oidc-issuer", GITHUB_ISSUER,
      "--trusted-root", "/nonexistent/root.json"], "no such file"),
], ids=["identity-only", "issuer-only", "root-only", "root-missing"])
def test_keyless_options_are_checked_first(cli, args: list[str], words: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("verify", "127.0.0.1:9/x:y", *args)
    assert res.code == 2 and words in res.err and "Traceback" not in res.err


def test_a_layout_has_no_keyless_bundles_to_check(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("verify", f"oci:{tmp_path}", "--image", "one", "--certificate-identity",
              IDENTITY, "--certificate-oidc-issuer", GITHUB_ISSUER)
    assert res.code == 2 and "not a layout" in res.err, res.err
