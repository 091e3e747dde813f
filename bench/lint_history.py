"""Replay a repository's history: when did each finding appear, and when was it fixed?

    .venv/bin/python bench/lint_history.py REPO [--paths docker .github/workflows]
        [--max-commits 300] [--rules a,b]

For every commit (oldest first) that touched the image files under --paths, the files as
they were at that commit are extracted (`git archive`) and linted. A finding is identified by
rule, file and message (line numbers ignored, as `--baseline-commit` matches them). The
report lists, per finding, the commit where it first appeared and the one where it went away
(`fixed`), or `open` if it is still there at the last commit; a finding whose file was deleted
is `file removed`, not fixed. The last lines summarise how many findings the maintainers later
fixed and how many commits each stayed, which is the number "how early would cannery have
caught what they fixed by hand". Not a test: the numbers depend on the repository.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                          check=True).stdout


def lint_commit(repo: Path, commit: str, paths: list[str], rules: set[str] | None
                ) -> set[tuple[str, str, str]]:
    from cannery.lint.baseline import fingerprint
    from cannery.lint.config import LintConfig
    from cannery.lint.engine import Engine, kind_of, read

    present = [p for p in paths if git(repo, "ls-tree", commit, p).strip()]
    if not present:
        return set()
    data = git(repo, "archive", "--format=tar", commit, *present)
    engine = Engine(LintConfig())
    out: set[tuple[str, str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="lint-history-") as tmp:
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        (Path(tmp) / ".git").mkdir()  # the repository root, for workflow paths
        for f in sorted(Path(tmp).rglob("*")):
            kind = kind_of(f)
            if kind is None or not f.is_file():
                continue
            rel = f.relative_to(tmp).as_posix()
            for finding in engine.lint_text(str(f), read(f), kind):
                if rules and finding.rule not in rules:
                    continue
                rule, _path, message = fingerprint(finding)
                out.add((rule, rel, message))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path)
    p.add_argument("--paths", nargs="+", default=["docker", ".github/workflows"])
    p.add_argument("--max-commits", type=int, default=300)
    p.add_argument("--rules", help="only these rules (comma-separated)")
    args = p.parse_args()
    rules = set(args.rules.split(",")) if args.rules else None

    log = git(args.repo, "log", "--reverse", "--format=%H %cs", "--", *args.paths)
    commits = [line.split() for line in log.decode().splitlines()][-args.max_commits :]
    seen: dict[tuple[str, str, str], tuple[int, str]] = {}  # finding → (index, commit) first
    ended: dict[tuple[str, str, str], tuple[int, str, str]] = {}  # → (index, commit, how)
    current: set[tuple[str, str, str]] = set()
    for i, (commit, date) in enumerate(commits):
        now = lint_commit(args.repo, commit, args.paths, rules)
        files_now = set(git(args.repo, "ls-tree", "-r", "--name-only", commit, "--",
                            *args.paths).decode().splitlines())
        for key in now - current:
            seen.setdefault(key, (i, f"{commit[:10]} {date}"))
            ended.pop(key, None)
        for key in current - now:
            how = "fixed" if key[1] in files_now else "file removed"
            ended[key] = (i, f"{commit[:10]} {date}", how)
        current = now
        print(f"[{i + 1}/{len(commits)}] {commit[:10]} {date}: {len(now)} findings",
              file=sys.stderr)

    print(f"| {'rule':<28} | {'file':<50} | {'appeared':<21} | {'ended':<34} |")
    print(f"|{'-' * 30}|{'-' * 52}|{'-' * 23}|{'-' * 36}|")
    stays: list[int] = []
    outcome: Counter[str] = Counter()
    for key, (start, first) in sorted(seen.items(), key=lambda kv: (kv[1][0], kv[0])):
        if key in ended:
            end, commit, how = ended[key]
            outcome[how] += 1
            if how == "fixed":
                stays.append(end - start)
            last = f"{how} {commit}"
        else:
            outcome["open"] += 1
            last = "open"
        print(f"| {key[0]:<28} | {key[1][-50:]:<50} | {first:<21} | {last:<34} |")
    print(f"\n{len(commits)} commits, {len(seen)} findings: {outcome['fixed']} fixed later, "
          f"{outcome['file removed']} gone with their file, {outcome['open']} still open")
    if stays:
        stays.sort()
        print(f"a fixed finding stayed {stays[len(stays) // 2]} commits (median; "
              f"max {stays[-1]}) of the image files' history before the fix")
    return 0


if __name__ == "__main__":
    sys.exit(main())
