from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import builds


def _sibling_caches(path: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """Cache keys written by the other workflows in the same directory: key → (file, image)."""
    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.workflow import parse_workflow

    out: dict[tuple[str, str], tuple[str, str]] = {}
    try:
        siblings = sorted(p for p in path.parent.iterdir()
                          if p.suffix in (".yml", ".yaml") and p.name != path.name)
    except OSError:
        return out
    for other in siblings:
        try:
            wf = parse_workflow(str(other), other.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ParseFailure):
            continue
        for b in builds(wf):
            if b.cache_to is None:
                continue
            for spec in b.cache_to.text.split("\n"):
                key = _key(spec.strip())
                if key is not None and "${{" not in key[1]:
                    out.setdefault(key, (other.name, b.file.text if b.file else "Dockerfile"))
    return out


def _key(spec: str) -> tuple[str, str] | None:
    """(cache type, scope or ref) of a cache-from/cache-to entry."""
    parts = dict(p.split("=", 1) for p in spec.split(",") if "=" in p)
    kind = parts.get("type", "")
    if kind == "gha":
        return kind, parts.get("scope", "buildkit")
    if kind == "registry":
        return kind, parts.get("ref", "")
    return None


class CacheScopeCollision(Rule):
    """## What it does
    Finds BuildKit caches (`type=gha` scopes, `type=registry` refs) shared between matrix
    platforms or between different images: a `cache-to` whose scope does not include the
    matrix's platform/arch variable, or the same scope used by two build steps.

    ## Why is this bad?
    Each build overwrites the other's cache entry (`mode=max` exports replace the scope), so
    amd64 and arm64 evict each other every run and the cache never hits; with two images in
    one scope, one image's layers push out the other's.

    ## Example
    ```yaml
    strategy: {matrix: {platform: [linux/amd64, linux/arm64]}}
    steps:
      - uses: docker/build-push-action@v6
        with:
          platforms: ${{ matrix.platform }}
          cache-to: type=gha,mode=max
    ```

    ## Use instead
    ```yaml
          cache-from: type=gha,scope=qwen3-5-a2-${{ matrix.platform }}
          cache-to: type=gha,mode=max,scope=qwen3-5-a2-${{ matrix.platform }}
    ```
    """

    name = "cache-scope-collision"
    code = "CW001"
    severity = Severity.WARNING
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        seen: dict[tuple[str, str], tuple[int, str]] = {}
        others = _sibling_caches(Path(facts.path))
        for b in builds(facts):
            if b.cache_to is None:
                continue
            image = (b.file.text if b.file else "Dockerfile")
            for spec in [s for s in re.split(r"\n", b.cache_to.text) if s.strip()]:
                key = _key(spec.strip())
                if key is None:
                    continue
                matrix_vars = [k for k, vals in b.job.matrix.items() if len(vals) > 1]
                platform_vars = [k for k in matrix_vars
                                 if re.search(r"plat|arch|runner|os", k, re.I)]
                if platform_vars and not any(f"matrix.{k}" in key[1] for k in platform_vars):
                    yield self.finding(
                        facts.path, b.cache_to.line, b.cache_to.column,
                        f"{key[0]} cache {key[1]!r} is shared by every "
                        f"matrix.{platform_vars[0]} of job {b.job.id}: the platforms overwrite "
                        "each other's cache", hint=f"add ${{{{ matrix.{platform_vars[0]} }}}} "
                        "to the scope/ref")
                prev = seen.get(key)
                if prev is not None and prev[1] != image:
                    yield self.finding(
                        facts.path, b.cache_to.line, b.cache_to.column,
                        f"{key[0]} cache {key[1]!r} is also used for {prev[1]} (line "
                        f"{prev[0]}): two images evict each other's cache",
                        hint="give each image its own scope")
                elif prev is None and key in others and others[key][1] != image:
                    where, other_image = others[key]
                    yield self.finding(
                        facts.path, b.cache_to.line, b.cache_to.column,
                        f"{key[0]} cache {key[1]!r} is also written by {where} for "
                        f"{other_image}: GitHub's cache is shared by every workflow of the "
                        "repository, so the images evict each other",
                        hint="give each image its own scope")
                seen.setdefault(key, (b.cache_to.line, image))
