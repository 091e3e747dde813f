from __future__ import annotations

from pathlib import Path

from cannery.commands.common import err, load_with_lock, out, select
from cannery.lock import Input, Resolvers, dump_lock, resolve_git, resolve_url, update_lock
from cannery.oci import Credentials, OCIClient
from cannery.oci.auth import push_host
from cannery.plan import plan
from cannery.pydeps import resolve_python
from cannery.tls import git_ca_bundle, ssl_context
from cannery.util.fs import atomic_write


def lock_cmd(
    catalog: Path | None,
    lock: Path | None,
    update: list[str] | None,
    ca_cert: Path | None,
    images: list[str] | None = None,
) -> int:
    loaded, old, path = load_with_lock(catalog, lock)
    names = select(loaded, images) if images else None
    ctx = ssl_context(ca_cert)

    def progress(inp: Input) -> None:
        err.print(f"lock: {inp.kind} {inp.key}", markup=False, style="dim")

    # CANNERY_REGISTRY_USER/_PASSWORD are for the push registry, not the bases' registries.
    client = OCIClient(
        ctx,
        credentials=Credentials(
            env_host=push_host([s.repository for s in plan(loaded.catalog, old, names)])
        ),
    )
    try:
        with git_ca_bundle(ca_cert) as git_ca:
            resolvers = Resolvers(
                base=client.resolve,
                git=lambda url, ref: resolve_git(url, ref, git_ca),
                url=lambda url: resolve_url(url, ctx),
                python=lambda req: resolve_python(req, git_ca),
            )
            new = update_lock(loaded.catalog, old, resolvers, set(update or []), progress, names)
    finally:
        client.close()
    text = dump_lock(new)
    changed = not path.exists() or path.read_text(encoding="utf-8") != text
    if changed:
        atomic_write(path, text)
    total = len(new.bases) + len(new.git) + len(new.urls) + len(new.python)
    out.print(f"{path}: {total} entries ({'updated' if changed else 'unchanged'})", markup=False)
    return 0
