"""DSSE envelopes (https://github.com/secure-systems-lab/dsse) signed with a local key.

Keys: ECDSA P-256 (signature DER-encoded, SHA-256: securesystemslib's
``ecdsa-sha2-nistp256``) or Ed25519, as PEM (PKCS#8 private, SubjectPublicKeyInfo public).
A private key comes from a file or from an environment variable (``env:NAME``), never from the
command line; an encrypted key's password from ``CANNERY_SIGN_KEY_PASSWORD``. The key id is the
sha256 of the public key's DER bytes, so anyone holding the public key can compute it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cannery.errors import InputError
from cannery.oci.manifest import load_json

# cryptography is imported where a key is used: an unsigned envelope (every `cannery build
# --push`, --attest being the default) needs none of it, and it costs start-up.
if TYPE_CHECKING:
    from typing import TypeAlias

    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    PrivateKey: TypeAlias = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    PublicKey: TypeAlias = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
else:

    def __getattr__(name: str) -> object:
        """The key type aliases, for importers that use them at run time."""
        if name in ("PrivateKey", "PublicKey"):
            from cryptography.hazmat.primitives.asymmetric import ec, ed25519

            if name == "PrivateKey":
                return ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
            return ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
PASSWORD_ENV = "CANNERY_SIGN_KEY_PASSWORD"


class BadSignature(Exception):
    """The envelope is malformed, or no signature in it verifies with the keys given."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is actually signed."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def keyid(public: PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def scheme(public: PublicKey) -> str:
    """securesystemslib's name for the key's signing scheme."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return "ed25519" if isinstance(public, ed25519.Ed25519PublicKey) else "ecdsa-sha2-nistp256"


@dataclass(frozen=True)
class Signer:
    key: PrivateKey
    where: str  # "file KEY.pem" or "env CANNERY_SIGN_KEY": for messages, never the key itself

    @property
    def public(self) -> PublicKey:
        return self.key.public_key()

    @property
    def keyid(self) -> str:
        return keyid(self.public)

    def sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519

        if isinstance(self.key, ed25519.Ed25519PrivateKey):
            return self.key.sign(data)
        return self.key.sign(data, ec.ECDSA(hashes.SHA256()))


def _check_curve(key: object, where: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        if not isinstance(key.curve, ec.SECP256R1):
            raise InputError(f"{where}: an ECDSA key on {key.curve.name}; use P-256 (or Ed25519)")
    elif not isinstance(
        key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)
    ):
        raise InputError(f"{where}: not an ECDSA P-256 or Ed25519 key")


def load_signer(source: str) -> Signer:
    """``FILE`` or ``env:NAME`` (PEM in the variable). The variable, and the password's, are
    removed from this process's environment once read, so no build step or tool cannery runs
    inherits them."""
    if source.startswith("env:"):
        name = source[4:]
        where = f"--sign-key env:{name}"
        text = os.environ.pop(name, None)
        if not text:
            raise InputError(f"{where}: the environment variable is not set")
        data = text.encode()
    else:
        where = f"--sign-key {source}"
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(f"{where}: cannot read: {exc.strerror}") from None
    password = os.environ.pop(PASSWORD_ENV, None)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    try:
        key = serialization.load_pem_private_key(
            data, password.encode() if password else None
        )
    except TypeError:
        raise InputError(
            f"{where}: the key is encrypted; give its password in {PASSWORD_ENV}"
            if not password
            else f"{where}: {PASSWORD_ENV} is set but the key is not encrypted"
        ) from None
    except ValueError:
        # The library's message may quote the key's bytes; say only what is wrong.
        raise InputError(f"{where}: not a PEM private key (or a wrong password)") from None
    _check_curve(key, where)
    assert isinstance(key, (ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey))
    return Signer(key, where)


def load_public_key(path: Path, option: str = "--key") -> PublicKey:
    where = f"{option} {path}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror}") from None
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise InputError(f"{where}: not a PEM public key") from None
    _check_curve(key, where)
    assert isinstance(key, (ec.EllipticCurvePublicKey, ed25519.Ed25519PublicKey))
    return key


def envelope(payload: bytes, signer: Signer | None, payload_type: str = PAYLOAD_TYPE) -> bytes:
    """A DSSE envelope of ``payload``; with no signer it carries no signature (unsigned)."""
    sigs = []
    if signer is not None:
        sig = signer.sign(pae(payload_type, payload))
        sigs.append({"keyid": signer.keyid, "sig": base64.b64encode(sig).decode()})
    env = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": sigs,
    }
    return json.dumps(env, separators=(",", ":")).encode()


def open_envelope(data: bytes) -> tuple[str, bytes, list[tuple[str, bytes]]]:
    """(payloadType, payload, [(keyid, signature)]) of an envelope, read strictly; the
    signatures are not checked here."""
    try:
        env = load_json(data)
        payload_type = env["payloadType"]
        payload = base64.b64decode(env["payload"], validate=True)
        sigs = [(str(s.get("keyid", "")), base64.b64decode(s["sig"], validate=True))
                for s in env.get("signatures") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadSignature(f"not a DSSE envelope ({type(exc).__name__})") from None
    if not isinstance(payload_type, str):
        raise BadSignature("not a DSSE envelope (payloadType)")
    return payload_type, payload, sigs


def verify_envelope(data: bytes, keys: list[PublicKey]) -> bytes:
    """The payload, if a signature in the envelope verifies with one of ``keys``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    payload_type, payload, sigs = open_envelope(data)
    if not sigs:
        raise BadSignature("unsigned")
    signed = pae(payload_type, payload)
    for _kid, sig in sigs:
        for key in keys:
            try:
                if isinstance(key, ed25519.Ed25519PublicKey):
                    key.verify(sig, signed)
                else:
                    key.verify(sig, signed, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                continue
            return payload
    kids = ", ".join(k[:12] for k, _ in sigs)
    raise BadSignature(f"no signature verifies with the key given (signed by key id {kids})")
