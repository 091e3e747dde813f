"""Where registry credentials come from, and how a 401 challenge is read.

Order, per registry host (first hit wins):

0. ``CANNERY_REGISTRY_<NAME>_USER`` / ``_PASSWORD`` for the catalog registry ``NAME`` (upper
   case, ``-`` and ``.`` as ``_``), sent to that registry's host only: an image published to
   several registries gets each registry's own secrets, never another's.
1. ``CANNERY_REGISTRY_USER`` / ``CANNERY_REGISTRY_PASSWORD`` from the environment. They apply to
   the host named by ``CANNERY_REGISTRY_HOST`` when that is set, else to every host (so CI can
   log in to its one registry with two secrets).
2. The Docker config file (``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``):
   ``credHelpers[host]``, then ``credsStore``, each through the ``docker-credential-<name> get``
   protocol (server on stdin, JSON on stdout: the secret is never in an argv), then ``auths``.

Secrets are returned to the caller and never logged, put in an error message or a repr.
Identity tokens (a helper's ``<token>`` user, an ``identitytoken`` entry: OAuth refresh tokens
some logins store) are not supported; they are reported as such rather than sent as a password.

A child that reads Docker's config rather than asking cannery (BuildKit, through ``docker
buildx``, pushing and exporting its cache itself) gets cannery's logins for the registries it
talks to through :meth:`Credentials.docker_config`: a temporary config directory of its own,
never an argument or an environment variable holding a secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from cannery.errors import FatalError, InputError
from cannery.oci.reference import DOCKER_HUB, HUB_ALIASES, Reference
from cannery.util.env import credential_helper_env

ENV_USER = "CANNERY_REGISTRY_USER"
ENV_PASSWORD = "CANNERY_REGISTRY_PASSWORD"
ENV_HOST = "CANNERY_REGISTRY_HOST"
# The config keys that hold or find credentials: a temporary config (docker_config) has its own.
CREDENTIAL_KEYS = ("auths", "credsStore", "credHelpers")
# What a temporary config links to in the user's config directory: docker CLI plugins (buildx
# itself, when installed per user) and docker contexts (the daemon a builder runs on).
CONFIG_LINKS = ("cli-plugins", "contexts")
NO_HOST = "-"  # an env_host that matches no registry: the env credentials go nowhere
# `docker login` with no server stores Docker Hub under this key, in auths and in helpers.
HUB_KEY = "https://index.docker.io/v1/"
IDENTITY_TOKEN = (
    "an identity token, which cannery does not support: log in with a username and password "
    "(or a registry access token), or set CANNERY_REGISTRY_USER and CANNERY_REGISTRY_PASSWORD"
)


class Credentials:
    """Looks up (user, password) per registry host; reads the Docker config once, lazily."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        config_dir: Path | None = None,
        env_host: str | None = None,
        registries: Mapping[str, str] | None = None,
    ) -> None:
        """``env_host``: the registry the command pushes to. CANNERY_REGISTRY_USER/_PASSWORD
        then go to that host only (CANNERY_REGISTRY_HOST, when set, names it instead), never to
        a base image's registry; with neither, they apply to every host. ``registries``: catalog
        registry name → its host, for the per-registry variables."""
        self._registries = dict(registries or {})
        self._env = dict(os.environ if env is None else env)
        self._env_host = env_host
        if config_dir is None:
            docker_config = self._env.get("DOCKER_CONFIG")
            config_dir = Path(docker_config) if docker_config else Path.home() / ".docker"
        self.config_file = config_dir / "config.json"
        self._config: dict[str, object] | None = None

    def __repr__(self) -> str:
        return f"Credentials(config_file={str(self.config_file)!r})"

    def lookup(self, host: str) -> tuple[str, str] | None:
        for name, registry_host in self._registries.items():
            if _same_host(registry_host, host):
                user, password = env_credentials(self._env, name)
                if user and password:
                    return user, password
        user, password = self._env.get(ENV_USER), self._env.get(ENV_PASSWORD)
        only = self._env.get(ENV_HOST) or self._env_host
        if user and password and (not only or _same_host(only, host)):
            return user, password
        config = self._load()
        keys = _keys(host)
        helpers = config.get("credHelpers")
        if isinstance(helpers, dict):
            for key in keys:
                if isinstance(helpers.get(key), str):
                    return self._helper(helpers[key], _server(host))
        store = config.get("credsStore")
        if isinstance(store, str) and store:
            found = self._helper(store, _server(host))
            if found:
                return found
        auths = config.get("auths")
        if isinstance(auths, dict):
            for key in keys:
                entry = auths.get(key)
                if isinstance(entry, dict):
                    found = self._entry(key, entry)
                    if found:
                        return found
        return None

    @contextmanager
    def docker_config(self, hosts: Iterable[str]) -> Iterator[dict[str, str]]:
        """A Docker config directory holding cannery's login for each of ``hosts`` (those it
        has one for, looked up as :meth:`lookup` does: cannery's variables, then the user's
        Docker config and its helpers), for a child that reads Docker's config itself.

        Yields the variables to give that child: ``REGISTRY_AUTH_FILE`` (buildah and the other
        containers/image tools read the same ``auths`` form) naming that config.json, and
        ``DOCKER_CONFIG``, a new directory (mode 0700,
        from :func:`tempfile.mkdtemp`) whose ``config.json`` (mode 0600, created exclusively)
        is the user's own config without its credential keys (``auths``, ``credsStore``,
        ``credHelpers``, in any case) plus an ``auths`` entry per host; and ``BUILDX_CONFIG``,
        the user's buildx directory (unless already set), so ``--builder`` still finds the builders
        `docker buildx create` stored there. ``cli-plugins`` and ``contexts`` are symlinks to
        the user's. The directory is removed when the block ends, however it ends. Nothing
        of it is logged."""
        found: dict[str, dict[str, str]] = {}
        for host in dict.fromkeys(hosts):
            creds = self.lookup(host)
            if creds is not None:
                # `docker login`'s form: base64 of user:password, as in a Basic header
                found[HUB_KEY if host in HUB_ALIASES else host] = {
                    "auth": basic(creds).removeprefix("Basic ")
                }
        # Docker reads its config with Go's encoding/json, which matches keys without regard
        # to case: "CredHelpers" or "Auths" would still name a helper or a login.
        dropped = {k.lower() for k in CREDENTIAL_KEYS}
        config = {k: v for k, v in self._load().items() if k.lower() not in dropped}
        config["auths"] = found
        own = self.config_file.parent
        try:
            where = Path(tempfile.mkdtemp(prefix="cannery-docker-"))
        except OSError as exc:
            raise FatalError(f"cannot make a temporary docker config: {exc.strerror}") from None
        try:
            try:
                fd = os.open(where / "config.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(config, fh)
                for name in CONFIG_LINKS:
                    if (own / name).is_dir():
                        (where / name).symlink_to(own / name)
            except OSError as exc:
                raise FatalError(f"{where}: cannot write a docker config: {exc.strerror}") from None
            env = {"DOCKER_CONFIG": str(where), "REGISTRY_AUTH_FILE": str(where / "config.json")}
            if not self._env.get("BUILDX_CONFIG"):
                env["BUILDX_CONFIG"] = str(own / "buildx")
            yield env
        finally:
            shutil.rmtree(where, ignore_errors=True)

    def _load(self) -> dict[str, object]:
        if self._config is None:
            try:
                text = self.config_file.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = "{}"
            except OSError as exc:
                raise InputError(f"{self.config_file}: cannot read: {exc.strerror}") from None
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise InputError(
                    f"{self.config_file}:{getattr(exc, 'lineno', '?')}: not valid JSON"
                ) from None
            if not isinstance(data, dict):
                raise InputError(f"{self.config_file}: not a JSON object")
            self._config = data
        return self._config

    def _entry(self, key: str, entry: dict[str, object]) -> tuple[str, str] | None:
        if entry.get("identitytoken") and not entry.get("auth"):
            raise InputError(f"{self.config_file}: auths.{key}: {IDENTITY_TOKEN}")
        auth = entry.get("auth")
        if isinstance(auth, str) and auth:
            try:
                user, sep, password = base64.b64decode(auth, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                sep = ""
            if not sep:
                raise InputError(
                    f"{self.config_file}: auths.{key}.auth: not base64 of 'user:password'"
                ) from None
            return user, password
        name, secret = entry.get("username"), entry.get("password")
        if isinstance(name, str) and isinstance(secret, str) and name:
            return name, secret
        return None

    def _helper(self, name: str, server: str) -> tuple[str, str] | None:
        """Run ``docker-credential-NAME get`` with the server on stdin (the helper protocol)."""
        binary = f"docker-credential-{name}"
        found = shutil.which(binary, path=self._env.get("PATH"))
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or found is None:
            raise InputError(f"{self.config_file}: credential helper {binary} not found on PATH")
        # Not cannery.util.cmd.run: the protocol needs stdin, and stdout holds the secret, which
        # must stay out of every log line.
        try:
            proc = subprocess.run(
                [found, "get"],
                input=server,
                capture_output=True,
                text=True,
                timeout=60,
                # The helper needs no secret of ours (but may need e.g. AWS_*: see util/env).
                env=credential_helper_env(self._env),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"{binary}: could not run: {type(exc).__name__}") from None
        if proc.returncode != 0:
            # The protocol's "no such entry": anonymous access, as Docker does.
            if "credentials not found" in (proc.stdout + proc.stderr).lower():
                return None
            raise InputError(f"{binary} get {server}: exit {proc.returncode}")
        try:
            data = json.loads(proc.stdout)
            user, secret = data["Username"], data["Secret"]
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{binary} get {server}: malformed answer") from None
        if not isinstance(user, str) or not isinstance(secret, str):
            raise InputError(f"{binary} get {server}: malformed answer")
        if user == "<token>":
            raise InputError(f"{binary} get {server}: {IDENTITY_TOKEN}")
        return user, secret


def env_names(registry: str) -> tuple[str, str]:
    """The variables holding one catalog registry's credentials: ``quay-cn`` →
    ``CANNERY_REGISTRY_QUAY_CN_USER``, ``CANNERY_REGISTRY_QUAY_CN_PASSWORD``."""
    stem = "CANNERY_REGISTRY_" + re.sub(r"[^A-Z0-9]", "_", registry.upper())
    return f"{stem}_USER", f"{stem}_PASSWORD"


def env_credentials(env: Mapping[str, str], registry: str) -> tuple[str | None, str | None]:
    user, password = env_names(registry)
    return env.get(user), env.get(password)


def _same_host(a: str, b: str) -> bool:
    return a == b or (a in HUB_ALIASES and b in HUB_ALIASES)


def _keys(host: str) -> list[str]:
    """The keys `docker login` may have stored this host under, most specific first."""
    hosts = [host]
    if host in HUB_ALIASES:
        hosts = [HUB_KEY, DOCKER_HUB, "index.docker.io", "docker.io"]
    keys: list[str] = []
    for h in hosts:
        if h.startswith("https://"):
            keys.append(h)
            continue
        keys += [h, f"https://{h}", f"https://{h}/v1/", f"https://{h}/v2/", f"http://{h}"]
    return keys


def _server(host: str) -> str:
    """What to ask a credential helper for: Docker asks for the Hub key for Hub, else the host."""
    return HUB_KEY if host in HUB_ALIASES else host


def challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="…",service="…",scope="…"`` → ("bearer", {realm, service, scope})."""
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', rest)}
    return scheme.lower(), params


class KeyedLocks:
    """One lock per key, made on first use: threads asking for the same key (a registry host
    and token scopes) take turns; other keys do not wait for them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield


def basic(creds: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()


def push_host(repositories: list[str]) -> str:
    """The one registry host images are pushed to: where CANNERY_REGISTRY_USER/_PASSWORD may
    go. Several hosts: none of them (name the one with CANNERY_REGISTRY_HOST)."""
    hosts = {Reference.parse(r).host for r in repositories}
    return hosts.pop() if len(hosts) == 1 else NO_HOST
