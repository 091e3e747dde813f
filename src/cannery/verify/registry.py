"""Registry checks: the index holds exactly the catalog's platforms; each platform's config env
is what the catalog renders (no empty search-path element, no build-only devlib); labels and
input digests agree; nothing credential-like in env (names and values), labels (keys and
values) or history (commands and comments)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from cannery.builder.jobs import INPUTS_LABEL
from cannery.oci import Reference
from cannery.oci.client import malformed
from cannery.oci.manifest import (
    INDEX_TYPES,
    Descriptor,
    MalformedManifest,
    parse_index,
    platform_string,
)
from cannery.plan import ImageSpec
from cannery.render.dockerfile import SEARCH_PATHS
from cannery.util.env import is_credential_name
from cannery.verify.expect import empty_element, env_matches, expected_env
from cannery.verify.model import Check

# buildx attaches provenance/SBOM as extra index entries; they are not platform images.
ATTESTATION = "vnd.docker.reference.type"
# A credential in a value: key=value pairs with secret-sounding keys, or user:password@ in a URL.
_SECRET_PAIR = re.compile(
    r"(?i)\b[\w.-]*(password|passwd|secret|token|api[_-]?key|auth)[\w.-]*\s*[=:]\s*['\"]?[^\s'\"$]{4,}"
)
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.I)
# Words (split at _ . -) that make an env name or label key look like it holds a secret.
_SECRET_WORDS = frozenset(
    {"PASSWORD", "PASSWD", "PASS", "SECRET", "SECRETS", "TOKEN", "TOKENS", "CREDENTIAL",
     "CREDENTIALS", "APIKEY", "KEY", "KEYS"}
)
_NAME_WORDS = re.compile(r"[._-]+")
# Public by design: the python images' ENV GPG_KEY is the release key's fingerprint.
_PUBLIC_NAMES = frozenset({"GPG_KEY"})


def secret_name(name: str) -> bool:
    """An env name or label key that says it holds a secret: child_env's rule
    (``cannery.util.env``), plus any word AUTH… but AUTHOR(S) (``NPM_AUTH``,
    ``X_AUTHORIZATION``) and dotted label keys (``com.example.api-key``)."""
    if name.upper() in _PUBLIC_NAMES:
        return False
    if is_credential_name(name):
        return True
    words = [w.upper() for w in _NAME_WORDS.split(name) if w]
    return any(
        w in _SECRET_WORDS or (w.startswith("AUTH") and w not in ("AUTHOR", "AUTHORS"))
        for w in words
    )


def _secret_text(text: str) -> bool:
    return bool(_SECRET_PAIR.search(text) or _URL_USERINFO.search(text))


@dataclass(frozen=True)
class PlatformImage:
    platform: str
    descriptor: Descriptor
    config: dict[str, object]


def credential_findings(config: dict[str, object]) -> list[str]:
    """Where a credential-like string sits in an image config: an env variable with a
    secret-sounding name (and a value), or a value with ``key=secret`` or ``user:pass@``; a
    label likewise, by key or value; a history entry's command or comment."""
    found = []
    cfg = config.get("config") or {}
    if not isinstance(cfg, dict):
        cfg = {}
    for item in cfg.get("Env") or []:
        name, _, value = str(item).partition("=")
        if value and (secret_name(name) or _secret_text(value)):
            found.append(f"env {name}")
    labels = cfg.get("Labels") or {}
    for key, value in (labels.items() if isinstance(labels, dict) else []):
        if (str(value) and secret_name(str(key))) or _secret_text(str(value)):
            found.append(f"label {key}")
    history = config.get("history") or []
    for n, entry in enumerate(history if isinstance(history, list) else []):
        if not isinstance(entry, dict):
            continue
        for field in ("created_by", "comment"):
            if _secret_text(str(entry.get(field) or "")):
                found.append(f"history[{n}].{field}")
    return found


def platforms_check(found: list[str], spec: ImageSpec) -> Check:
    """The index lists each catalog platform exactly once, and nothing else."""
    platforms = sorted(found)
    want = sorted(spec.platforms)
    return Check(
        "platforms",
        platforms == want,
        f"index has {', '.join(platforms) or 'none'}; catalog wants {', '.join(want)}",
    )


class ManifestReader(Protocol):
    """The two reads the checks make: an OCIClient (a registry) or a Layout (a directory)."""

    def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]: ...

    def image_config(self, ref: Reference) -> tuple[Descriptor, dict[str, object]]: ...


def registry_checks(
    client: ManifestReader,
    ref: Reference,
    spec: ImageSpec,
    inputs: dict[str, str] | None = None,
    index: tuple[bytes, Descriptor] | None = None,
) -> tuple[list[Check], list[PlatformImage]]:
    """``inputs``: platform → the input digest this catalog and lock give it (a build from an
    older lock, or another catalog, is reported). ``index``: ``ref``'s manifest as already
    read (else it is read here)."""
    checks: list[Check] = []
    body, desc = index or client.get_manifest(ref)
    if desc.media_type not in INDEX_TYPES:
        return [Check("index", False, f"{ref} is a {desc.media_type}, not a multi-arch index")], []
    try:
        children, _ = parse_index(body, f"{ref} index")
    except MalformedManifest as exc:
        raise malformed(ref, exc) from None
    entries = [c for c in children if ATTESTATION not in (c.annotations or {})]
    found = [platform_string(c.platform) or "(no platform)" for c in entries]
    checks.append(platforms_check(found, spec))
    images = []
    repo = Reference(ref.host, ref.repository)
    for child in entries:
        platform = platform_string(child.platform) or ""
        if platform not in spec.platforms:
            continue  # already a failed "platforms" check; nothing to compare it with
        _, config = client.image_config(repo.with_digest(child.digest))
        images.append(PlatformImage(platform, child, config))
        checks += _config_checks(spec, platform, child, config, (inputs or {}).get(platform))
    return checks, images


def _config_checks(
    spec: ImageSpec,
    platform: str,
    child: Descriptor,
    config: dict[str, object],
    planned: str | None,
) -> list[Check]:
    out: list[Check] = []
    arch = platform.split("/")[1]
    cfg = config.get("config") or {}
    if not isinstance(cfg, dict):
        cfg = {}
    env = dict(str(e).partition("=")[::2] for e in cfg.get("Env") or [])
    labels = {str(k): str(v) for k, v in (cfg.get("Labels") or {}).items()}
    arch_ok = config.get("architecture") == arch
    out.append(Check("config architecture", arch_ok, str(config.get("architecture")), platform))
    for name, (value, inherits) in expected_env(spec, arch).items():
        ok = env_matches(env.get(name), value, inherits)
        detail = "" if ok else f"image has {env.get(name)!r}; catalog renders {value!r}"
        out.append(Check(f"env {name}", ok, detail, platform))
    for name in SEARCH_PATHS:
        if name in env and empty_element(env[name]):
            why = "empty search-path element (means '.')"
            out.append(Check(f"env {name}", False, why, platform))
    devlib = [k for k, v in env.items() if "devlib" in v]
    out.append(Check("no devlib in env", not devlib, ", ".join(devlib), platform))
    annotated = (child.annotations or {}).get(INPUTS_LABEL)
    have_inputs = labels.get(INPUTS_LABEL)
    out.append(
        Check(
            "inputs label",
            bool(have_inputs) and (annotated is None or have_inputs == annotated),
            f"label {have_inputs}; index annotation {annotated}",
            platform,
        )
    )
    if planned is not None:
        ok = have_inputs == planned
        detail = "" if ok else f"built from {have_inputs}; catalog and lock give {planned}"
        out.append(Check("inputs match catalog and lock", ok, detail, platform))
    expected_labels: dict[str, str | None] = {
        "org.opencontainers.image.source": dict(spec.labels).get(
            "org.opencontainers.image.source", spec.source),
        **dict(spec.fact_labels()),
        **{f"io.cannery.component.{c.name}": c.label_version for c in spec.components},
    }
    for key, want in expected_labels.items():
        ok = labels.get(key) == want
        detail = "" if ok else f"image has {labels.get(key)!r}; catalog says {want!r}"
        out.append(Check(f"label {key}", ok, detail, platform))
    secrets = credential_findings(config)
    out.append(Check("no credentials", not secrets, ", ".join(secrets), platform))
    return out
