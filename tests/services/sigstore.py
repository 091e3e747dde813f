"""A STAND-IN Sigstore: a test Fulcio CA, a test certificate-transparency log and a test Rekor
log, all keys made here, and the Sigstore bundles (v0.3) they would give a keyless signer.

The public-good Sigstore (fulcio.sigstore.dev, rekor.sigstore.dev, its TUF root) and GitHub's
OIDC issuer cannot be reached from these machines, so nothing here talks to them. What is real:
the bundles and the trusted root are in Sigstore's own formats, and they are checked by
sigstore-python's offline ``Verifier`` (given this trusted root instead of the public one) —
the certificate chain, the embedded SCT, the Rekor entry's inclusion proof, signed checkpoint
and signed entry timestamp, the DSSE signature and the identity policy, exactly as it checks
what ``actions/attest-build-provenance`` pushes. Each log here holds one entry (a tree of size
one), which the Merkle proof allows.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import struct
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
_START = "2020-01-01T00:00:00Z"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _der_spki(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _log_id(key: ec.EllipticCurvePrivateKey) -> bytes:
    return hashlib.sha256(_der_spki(key)).digest()


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def _der_octets(data: bytes) -> bytes:
    n = len(data)
    if n < 0x80:
        head = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        head = bytes([0x80 | len(raw)]) + raw
    return b"\x04" + head + data


def _der_utf8(text: str) -> bytes:
    data = text.encode()
    assert len(data) < 0x80
    return b"\x0c" + bytes([len(data)]) + data


def _pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


@dataclass
class StandInSigstore:
    """Keys and a CA made at construction; :meth:`trusted_root` and :meth:`bundle` give what a
    verifier is handed and what a keyless signer pushes."""

    ca_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    ct_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    rekor_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def __post_init__(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "stand-in"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "stand-in fulcio")])
        now = dt.datetime.now(dt.timezone.utc)
        ski = x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key())
        self.ca = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(ski, critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )

    def trusted_root(self) -> bytes:
        """A Sigstore trusted root (v0.1 JSON) naming only the stand-in CA and logs."""

        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, object]:
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {"rawBytes": _b64(_der_spki(key)),
                              "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                              "validFor": {"start": _START}},
                "logId": {"keyId": _b64(_log_id(key))},
            }

        root = {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.rekor_key, "https://rekor.stand-in.invalid")],
            "certificateAuthorities": [{
                "subject": {"organization": "stand-in", "commonName": "stand-in fulcio"},
                "uri": "https://fulcio.stand-in.invalid",
                "certChain": {"certificates": [
                    {"rawBytes": _b64(self.ca.public_bytes(serialization.Encoding.DER))}
                ]},
                "validFor": {"start": _START},
            }],
            "ctlogs": [log(self.ct_key, "https://ctfe.stand-in.invalid")],
            "timestampAuthorities": [],
        }
        return json.dumps(root).encode()

    def _leaf(self, key: ec.EllipticCurvePrivateKey, identity: str, issuer: str,
              now: dt.datetime) -> x509.Certificate:
        """A Fulcio-style short-lived certificate for ``identity`` (a URI SAN, as GitHub's
        workflow identities are) from ``issuer``, with an embedded SCT from the stand-in CT
        log over its precertificate."""
        serial = x509.random_serial_number()

        def build(sct_ext: bytes) -> x509.Certificate:
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([]))
                .issuer_name(self.ca.subject)
                .public_key(key.public_key())
                .serial_number(serial)
                .not_valid_before(now - dt.timedelta(minutes=1))
                .not_valid_after(now + dt.timedelta(minutes=10))
                .add_extension(x509.KeyUsage(True, False, False, False, False, False, False,
                                             False, False), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]),
                               critical=False)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self.ca_key.public_key()), critical=False)
                .add_extension(x509.SubjectAlternativeName(
                    [x509.UniformResourceIdentifier(identity)]), critical=True)
                .add_extension(x509.UnrecognizedExtension(_ISSUER_V1, issuer.encode()),
                               critical=False)
                .add_extension(x509.UnrecognizedExtension(_ISSUER_V2, _der_utf8(issuer)),
                               critical=False)
                .add_extension(x509.UnrecognizedExtension(_SCT_LIST, sct_ext), critical=False)
            )
            return builder.sign(self.ca_key, hashes.SHA256())

        def sct_list(signature: bytes, ms: int) -> bytes:
            sct = (b"\x00" + _log_id(self.ct_key) + struct.pack("!QH", ms, 0)
                   + b"\x04\x03" + struct.pack("!H", len(signature)) + signature)
            body = struct.pack("!H", len(sct)) + sct
            return _der_octets(struct.pack("!H", len(body)) + body)

        ms = int(now.timestamp() * 1000)
        draft = build(sct_list(b"\x00" * 70, ms))  # the precertificate TBS drops the SCTs
        tbs = draft.tbs_precertificate_bytes
        issuer_key_hash = hashlib.sha256(_der_spki(self.ca_key)).digest()
        signed = (struct.pack("!BBQH", 0, 0, ms, 1) + issuer_key_hash
                  + struct.pack("!I", len(tbs))[1:] + tbs + struct.pack("!H", 0))
        return build(sct_list(_sign(self.ct_key, signed), ms))

    def bundle(self, statement: bytes, identity: str, issuer: str = GITHUB_ISSUER,
               payload_type: str = "application/vnd.in-toto+json") -> bytes:
        """A Sigstore bundle v0.3 of a DSSE envelope of ``statement``, signed by a fresh key
        certified for ``identity``/``issuer``, logged in the stand-in Rekor (dsse 0.0.1)."""
        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._leaf(key, identity, issuer, now)
        sig = _sign(key, _pae(payload_type, statement))
        envelope = {"payload": _b64(statement), "payloadType": payload_type,
                    "signatures": [{"sig": _b64(sig), "keyid": ""}]}
        pem = cert.public_bytes(serialization.Encoding.PEM)
        body = json.dumps({
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(
                    json.dumps(envelope).encode()).hexdigest()},
                "payloadHash": {"algorithm": "sha256",
                                "value": hashlib.sha256(statement).hexdigest()},
                "signatures": [{"signature": _b64(sig), "verifier": _b64(pem)}],
            },
        }, separators=(",", ":"), sort_keys=True).encode()
        leaf_hash = hashlib.sha256(b"\x00" + body).digest()  # a tree of one: root = leaf
        log_id = _log_id(self.rekor_key)
        integrated = int(now.timestamp())
        note = f"rekor.stand-in.invalid - 1\n1\n{_b64(leaf_hash)}\n"
        note_sig = _b64(log_id[:4] + _sign(self.rekor_key, note.encode()))
        checkpoint = f"{note}\n\u2014 rekor.stand-in.invalid {note_sig}\n"
        canonical = json.dumps({"body": _b64(body), "integratedTime": integrated,
                                "logID": log_id.hex(), "logIndex": 0},
                               separators=(",", ":"), sort_keys=True).encode()
        bundle = {
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {
                "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [{
                    "logIndex": "0",
                    "logId": {"keyId": _b64(log_id)},
                    "kindVersion": {"kind": "dsse", "version": "0.0.1"},
                    "integratedTime": str(integrated),
                    "inclusionPromise": {"signedEntryTimestamp": _b64(
                        _sign(self.rekor_key, canonical))},
                    "inclusionProof": {"logIndex": "0", "rootHash": _b64(leaf_hash),
                                       "treeSize": "1", "hashes": [],
                                       "checkpoint": {"envelope": checkpoint}},
                    "canonicalizedBody": _b64(body),
                }],
            },
            "dsseEnvelope": envelope,
        }
        return json.dumps(bundle).encode()
