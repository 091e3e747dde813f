"""cannery.lock: every moving reference resolved once, so builds use only immutable inputs.

base image tag → manifest digest, git tag/branch/commit prefix → full commit, download URL →
sha256.
The file is TOML, sorted, and only entries whose value changed get a new timestamp (an entry
re-resolved to the same value keeps its time), so re-running ``cannery lock``, even with
``--update``, leaves it byte-identical when nothing moved.

One module per concept: ``file`` (the model, read and write), ``inputs`` (what must be pinned),
``bases``, ``git`` and ``urls`` (each kind of reference), ``resolvers`` (the table of how each
kind is resolved, and the real one), ``update`` (``cannery lock`` and what a build does with
the lock). Python pins are resolved by ``cannery.pydeps``. The names importers use are
re-exported here.
"""

from cannery.lock.bases import os_contradictions, pin_image_bases
from cannery.lock.file import (
    HEADER,
    LOCK_LIMIT,
    BaseEntry,
    GitEntry,
    Lock,
    PythonEntry,
    Timestamp,
    UrlEntry,
    dump_lock,
    git_key,
    lock_epoch,
    now,
    parse_time,
    read_lock,
)
from cannery.lock.git import resolve_git, resolve_prefix
from cannery.lock.inputs import Input, _python_unpinned, lock_changes, required_inputs
from cannery.lock.resolvers import Resolvers, network_resolvers
from cannery.lock.update import (
    PYTHON_WORKERS,
    RESOLVE_WORKERS,
    CiInstallError,
    PendingLock,
    RefError,
    ensure_locked,
    update_lock,
)
from cannery.lock.urls import _secret_or_plain, secret_url

__all__ = [
    "HEADER",
    "LOCK_LIMIT",
    "PYTHON_WORKERS",
    "RESOLVE_WORKERS",
    "BaseEntry",
    "CiInstallError",
    "GitEntry",
    "Input",
    "Lock",
    "PendingLock",
    "PythonEntry",
    "RefError",
    "Resolvers",
    "Timestamp",
    "UrlEntry",
    "_python_unpinned",
    "_secret_or_plain",
    "dump_lock",
    "ensure_locked",
    "git_key",
    "lock_changes",
    "lock_epoch",
    "network_resolvers",
    "now",
    "os_contradictions",
    "parse_time",
    "pin_image_bases",
    "read_lock",
    "required_inputs",
    "resolve_git",
    "resolve_prefix",
    "secret_url",
    "update_lock",
]
