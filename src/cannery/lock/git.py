"""Git refs in the lock: a tag, branch or commit prefix resolved to its full commit."""

from __future__ import annotations

from cannery.errors import LockError
from cannery.util.patterns import SHORT_COMMIT


def resolve_git(url: str, ref: str, ca_file: str | None = None) -> str:
    """``git ls-remote`` a tag or branch to its full commit (peeled, for annotated tags); a
    commit prefix (7-39 hex digits) goes to ``resolve_prefix`` instead.

    ``ca_file`` is a complete trust bundle for git (see ``cannery.tls.git_ca_bundle``).
    """
    from cannery.tls import git_env
    from cannery.util.cmd import CommandError, run

    env = git_env(url, ca_file)
    if SHORT_COMMIT.match(ref):
        return resolve_prefix(url, ref, env)
    try:
        out = run(["git", "ls-remote", "--", url, ref, f"{ref}^{{}}"], extra_env=env, timeout=120)
    except CommandError as exc:
        raise LockError(f"{url}: cannot list refs: {exc.message}") from None
    refs = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        refs[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in refs:
            return refs[name]
    raise LockError(f"{url}: no tag or branch named {ref!r}")


def resolve_prefix(url: str, prefix: str, env: dict[str, str]) -> str:
    """The one commit of ``url`` whose id starts with ``prefix``. ``git ls-remote`` lists only
    branch and tag tips, so the remote's branches and tags are cloned, commits only (a
    ``tree:0`` partial clone; a server without filter support sends everything), into a
    temporary bare repository, and the prefix is looked up there: a commit reachable from no
    branch or tag is not found."""
    import tempfile

    from cannery.util.cmd import CommandError, run

    with tempfile.TemporaryDirectory(prefix="cannery-git-") as tmp:
        bare = f"{tmp}/r.git"
        try:
            run(["git", "clone", "-q", "--bare", "--filter=tree:0", "--", url, bare],
                extra_env=env, timeout=1800)
            found = run(["git", f"--git-dir={bare}", "rev-parse", f"--disambiguate={prefix}"],
                        extra_env=env, timeout=120).split()
            commits = [o for o in found if run(
                ["git", f"--git-dir={bare}", "cat-file", "-t", o], extra_env=env, timeout=60
            ).strip() == "commit"]
        except CommandError as exc:
            raise LockError(f"{url}: cannot fetch to resolve commit prefix {prefix!r}: "
                            f"{exc.message}") from None
    if not commits:
        raise LockError(f"{url}: no commit starts with {prefix!r} (looked in every branch and tag)")
    if len(commits) > 1:
        raise LockError(f"{url}: commit prefix {prefix!r} is ambiguous ({len(commits)} commits: "
                        f"{', '.join(sorted(c[:12] for c in commits))}): give more digits")
    return commits[0]
