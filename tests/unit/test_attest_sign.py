"""DSSE envelopes signed by cannery, checked by an independent verifier (securesystemslib's
``dsse.Envelope.verify``, not cannery's code); keys from files and env variables only."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from cannery.attest.sign import (
    BadSignature,
    PrivateKey,
    Signer,
    envelope,
    keyid,
    load_public_key,
    load_signer,
    verify_envelope,
)
from cannery.errors import InputError

PAYLOAD = json.dumps({"_type": "https://in-toto.io/Statement/v1", "x": 1}).encode()


def _pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _independent_verify(data: bytes, key: PrivateKey) -> bytes:
    """securesystemslib's DSSE verifier; the key id is the one anyone computes from the key."""
    pub = key.public_key()
    env = Envelope.from_dict(json.loads(data))
    ssl_key = SSlibKey.from_crypto(pub, keyid=keyid(pub))
    env.verify([ssl_key], 1)
    return env.payload


@pytest.mark.parametrize(
    "key", [ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate()],
    ids=["ecdsa-p256", "ed25519"],
)
def test_envelope_verifies_with_securesystemslib_and_tampering_does_not(
    tmp_path: Path, key: PrivateKey
) -> None:
    path = tmp_path / "key.pem"
    path.write_bytes(_pem(key))
    signer = load_signer(str(path))
    data = envelope(PAYLOAD, signer)
    assert _independent_verify(data, key) == PAYLOAD
    # One byte of the payload changed: the independent verifier refuses it.
    env = json.loads(data)
    env["payload"] = base64.b64encode(PAYLOAD.replace(b"1", b"2")).decode()
    with pytest.raises(VerificationError):
        _independent_verify(json.dumps(env).encode(), key)
    # Another key: refused by it too, and by cannery's own check.
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(VerificationError):
        _independent_verify(data, other)
    with pytest.raises(BadSignature, match="no signature verifies"):
        verify_envelope(data, [other.public_key()])
    assert verify_envelope(data, [key.public_key()]) == PAYLOAD


def test_unsigned_envelope_never_verifies() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    with pytest.raises(BadSignature, match="unsigned"):
        verify_envelope(envelope(PAYLOAD, None), [key.public_key()])


def test_key_from_env_is_removed_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    monkeypatch.setenv("MY_SIGNING_KEY", _pem(key).decode())
    signer = load_signer("env:MY_SIGNING_KEY")
    assert "MY_SIGNING_KEY" not in os.environ  # no child process inherits it
    assert signer.keyid == keyid(key.public_key())
    with pytest.raises(InputError, match="env:MY_SIGNING_KEY: the environment variable is not"):
        load_signer("env:MY_SIGNING_KEY")


def test_bad_keys_are_one_line_and_never_echo_the_key(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN PRIVATE KEY-----\nTOPSECRETMATERIAL\n-----END PRIVATE KEY-----\n")
    with pytest.raises(InputError) as exc:
        load_signer(str(junk))
    assert "TOPSECRET" not in exc.value.message and "not a PEM private key" in exc.value.message
    p384 = tmp_path / "p384.pem"
    p384.write_bytes(_pem(ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(InputError, match="secp384r1; use P-256"):
        load_signer(str(p384))
    with pytest.raises(InputError, match="cannot read"):
        load_signer(str(tmp_path / "absent.pem"))
    with pytest.raises(InputError, match="not a PEM public key"):
        load_public_key(junk)


def test_encrypted_key_takes_its_password_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "enc.pem"
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"hunter22"),
    ))
    monkeypatch.delenv("CANNERY_SIGN_KEY_PASSWORD", raising=False)
    with pytest.raises(InputError, match="CANNERY_SIGN_KEY_PASSWORD"):
        load_signer(str(path))
    monkeypatch.setenv("CANNERY_SIGN_KEY_PASSWORD", "hunter22")
    assert isinstance(load_signer(str(path)), Signer)
    assert "CANNERY_SIGN_KEY_PASSWORD" not in os.environ  # no child process inherits it
