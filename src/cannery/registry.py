"""A small OCI distribution client: resolve a tag to its manifest digest.

Auth as registries expect it: try anonymously, and on a 401 follow the ``WWW-Authenticate``
challenge (Bearer token service, or Basic) with credentials from the Docker config file if it
has them. Loopback registries speak plain HTTP, as Docker treats them; every other is HTTPS,
verified.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx

from cannery.errors import NetworkError

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
DOCKER_HUB = "registry-1.docker.io"


@dataclass(frozen=True)
class Reference:
    host: str
    repository: str
    tag: str

    @classmethod
    def parse(cls, ref: str) -> Reference:
        name, _, digest = ref.partition("@")
        if digest:
            raise ValueError(f"{ref}: already a digest reference")
        slash = name.find("/")
        first = name[:slash] if slash >= 0 else ""
        if slash >= 0 and ("." in first or ":" in first or first == "localhost"):
            host, rest = first, name[slash + 1 :]
        else:
            host, rest = DOCKER_HUB, name if "/" in name else f"library/{name}"
        repo, sep, tag = rest.rpartition(":")
        if not sep or "/" in tag:
            repo, tag = rest, "latest"
        return cls(host, repo, tag)

    @property
    def loopback(self) -> bool:
        hostname = self.host.rsplit(":", 1)[0] if not self.host.startswith("[") else self.host
        return hostname in ("localhost", "[::1]") or hostname.startswith("127.")


def _docker_credentials(host: str) -> tuple[str, str] | None:
    cfg_dir = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker"))
    try:
        data = json.loads((cfg_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    auths = data.get("auths", {})
    for key in (host, f"https://{host}", f"https://{host}/v1/", f"https://{host}/v2/"):
        entry = auths.get(key)
        if entry and entry.get("auth"):
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            return user, password
    return None


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.partition(" ")
    params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    return scheme.lower(), params


class RegistryClient:
    def __init__(self, verify: ssl.SSLContext, timeout: float = 30.0) -> None:
        self._client = httpx.Client(verify=verify, timeout=timeout, follow_redirects=True)

    def close(self) -> None:
        self._client.close()

    def _get(self, url: str, ref: Reference, headers: dict[str, str]) -> httpx.Response:
        try:
            resp = self._client.get(url, headers=headers)
            if resp.status_code == 401:
                auth = self._authorize(ref, resp.headers.get("www-authenticate", ""))
                if auth:
                    resp = self._client.get(url, headers={**headers, "Authorization": auth})
            return resp
        except httpx.HTTPError as exc:
            err = NetworkError(f"{ref.host}: registry unreachable: {http_reason(exc)}")
            err.plain_http = "WRONG_VERSION_NUMBER" in str(exc) or "record layer" in str(exc)
            raise err from None

    def _authorize(self, ref: Reference, header: str) -> str | None:
        scheme, params = _challenge(header)
        creds = _docker_credentials(ref.host)
        if scheme == "basic":
            if not creds:
                return None
            return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        if scheme != "bearer" or "realm" not in params:
            return None
        query = {
            "service": params.get("service", ""),
            "scope": params.get("scope", f"repository:{ref.repository}:pull"),
        }
        try:
            resp = self._client.get(
                params["realm"], params=query, auth=httpx.BasicAuth(*creds) if creds else None
            )
        except httpx.HTTPError as exc:
            reason = http_reason(exc)
            raise NetworkError(f"{ref.host}: token service unreachable: {reason}") from None
        if resp.status_code != 200:
            raise NetworkError(f"{ref.host}: token service refused ({resp.status_code})")
        body = resp.json()
        token = body.get("token") or body.get("access_token")
        return f"Bearer {token}" if token else None

    def resolve(self, image: str) -> str:
        """``host/repo:tag`` → ``sha256:…`` of the manifest (or index) the tag points to now."""
        try:
            ref = Reference.parse(image)
        except ValueError as exc:
            raise NetworkError(str(exc)) from None
        path = f"{ref.host}/v2/{ref.repository}/manifests/{ref.tag}"
        headers = {"Accept": MANIFEST_TYPES}
        try:
            resp = self._get(f"https://{path}", ref, headers)
        except NetworkError as exc:
            # Like Docker: a registry on this machine may speak plain HTTP. Only a server that
            # does not speak TLS at all falls back; a certificate that fails to verify does not.
            if not (ref.loopback and exc.plain_http):
                raise
            resp = self._get(f"http://{path}", ref, headers)
        if resp.status_code == 404:
            raise NetworkError(f"{image}: no such tag in the registry")
        if resp.status_code in (401, 403):
            raise NetworkError(
                f"{image}: registry refused access ({resp.status_code}): add credentials to the "
                "Docker config file (`docker login` or DOCKER_CONFIG)"
            )
        if resp.status_code != 200:
            raise NetworkError(f"{image}: registry answered {resp.status_code}")
        computed = "sha256:" + hashlib.sha256(resp.content).hexdigest()
        header = resp.headers.get("docker-content-digest")
        if header and header != computed:
            raise NetworkError(
                f"{image}: registry digest {header} does not match content {computed}"
            )
        return computed


def http_reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "TLS certificate not trusted (give its CA with --ca-cert or CANNERY_CA_CERT)"
    return text.splitlines()[0]
