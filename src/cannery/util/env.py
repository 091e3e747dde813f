"""The environment of every child process cannery starts: its own, minus the secrets.

git, ``uv pip compile`` (which runs build backends and the ``setup.py`` of source packages),
buildah, docker and the rest are third-party code; a secret in cannery's environment is not
theirs to read. :func:`cannery.util.cmd.run` and :func:`~cannery.util.cmd.stream` build every
child's environment here, and so does the credential-helper call in ``oci/auth.py``.

The rule, by variable *name* (a value is never inspected):

- ``CANNERY_REGISTRY_*`` — cannery's own registry credentials, in every form (``_USER``,
  ``_PASSWORD``, ``_HOST``, per-registry ``CANNERY_REGISTRY_<NAME>_USER``/``_PASSWORD``): only
  cannery's registry client reads them.
- ``DOCKER_AUTH_CONFIG`` — a whole Docker config with ``auths`` inline (GitLab CI's form).
- Any name with a word (``_``-separated, case-insensitive) that says it holds a secret:
  ``PASSWORD``, ``PASSWD``, ``SECRET``, ``TOKEN``, ``APIKEY``, ``CREDENTIAL(S)``, or ending in
  ``_KEY`` — ``GITHUB_TOKEN``, ``ACTIONS_ID_TOKEN_REQUEST_TOKEN`` (mints OIDC tokens),
  ``AWS_SECRET_ACCESS_KEY``, ``TWINE_PASSWORD``, ``UV_INDEX_<NAME>_PASSWORD``.

Dropped too, though no secret: ``GIT_SSL_NO_VERIFY``, which turns git's certificate checks
off (cannery never disables TLS verification, nor lets its environment do it).

Kept, because tools need them to do their job and they hold no secret themselves: paths and
sockets (``DOCKER_CONFIG``, ``REGISTRY_AUTH_FILE``, ``SSH_AUTH_SOCK``, ``GIT_ASKPASS``,
``NETRC``): a child running as the same user can read the user's files anyway, so hiding a path
protects nothing, while buildah needs its auth file to pull a private base and git over ssh its
agent. Proxy variables (``HTTPS_PROXY`` …) are kept too: without them nothing reaches the
network. A credential a child truly needs (an index password for uv) belongs in a file it reads
itself (``~/.netrc``), not in cannery's environment.

The one exception, :func:`credential_helper_env`: a Docker credential helper's whole job is
credentials (``docker-credential-ecr-login`` reads ``AWS_*``), so it keeps everything but
cannery's own ``CANNERY_REGISTRY_*``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["child_env", "credential_helper_env", "hide_from_children", "is_credential_name"]

CANNERY_PREFIX = "CANNERY_REGISTRY_"
_EXACT = frozenset({"DOCKER_AUTH_CONFIG"})
# Variables that turn a child's certificate checks off: cannery never lets them through.
_NO_TLS = frozenset({"GIT_SSL_NO_VERIFY"})
_SECRET_WORD = re.compile(
    r"(?:^|_)(?:PASSWORD|PASSWD|SECRET|TOKEN|APIKEY|CREDENTIALS?)(?:_|$)|_KEY$", re.I
)


def is_credential_name(name: str) -> bool:
    """True for an environment variable that holds a secret by the rule above."""
    return (
        name.upper().startswith(CANNERY_PREFIX)
        or name.upper() in _EXACT
        or _SECRET_WORD.search(name) is not None
    )


# Variables the catalog names as secrets (a download's url_secret), once cannery has read
# one: no child gets them either (the build hands each to its RUN in a file; and buildah 1.28
# mounts an empty secret when a variable of the secret's id is in its environment).
_NAMED_SECRETS: set[str] = set()


def hide_from_children(name: str) -> None:
    """Treat the variable ``name`` as a credential from now on (see ``child_env``)."""
    _NAMED_SECRETS.add(name)


def child_env(
    extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default: this process's environment) plus ``extra``, without any credential
    variable. ``extra`` is filtered too: nothing can put a secret back into a child's env."""
    merged = {**(os.environ if base is None else base), **(extra or {})}
    return {k: v for k, v in merged.items()
            if not is_credential_name(k) and k not in _NO_TLS and k not in _NAMED_SECRETS}


def credential_helper_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``docker-credential-*`` helper: all but cannery's own secrets."""
    env = os.environ if base is None else base
    return {k: v for k, v in env.items() if not k.upper().startswith(CANNERY_PREFIX)}
