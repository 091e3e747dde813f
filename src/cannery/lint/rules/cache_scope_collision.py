from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts.workflow import Value, WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import Build, builds


def _sibling_caches(
    path: Path, ctx: LintContext
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Cache keys written by the other workflows in the same directory: key → [(file, image)].
    Each is read as lint reads any file (LintContext.read): one it may not read is left out."""
    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.workflow import parse_workflow

    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    try:
        siblings = sorted(p for p in path.parent.iterdir()
                          if p.suffix in (".yml", ".yaml") and p.name != path.name)
    except OSError:
        return out
    for other in siblings:
        text = ctx.read(str(other.absolute()))
        if text is None:
            continue
        try:
            wf = parse_workflow(str(other), text)
        except ParseFailure:
            continue
        for b in builds(wf):
            if b.cache_to is None:
                continue
            for spec in b.cache_to.text.split("\n"):
                key = _key(spec.strip())
                if key is not None and "${{" not in key[1]:
                    out.setdefault(key, []).append(
                        (other.name, b.file.text if b.file else "Dockerfile"))
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
    Finds BuildKit cache *writes* (`cache-to` with a `type=gha` scope or a `type=registry`
    ref) shared between matrix platforms or between different images. The matrix is
    expanded as GitHub does (lists, `include:`, `exclude:`); the platform variable is the one
    `platforms: ${{ matrix.X }}` names. A `cache-to` is per-platform when the matrix
    variables in its scope differ between every two legs that build different platforms.
    Two build steps (or two workflows) writing one scope for different images are reported
    at each `cache-to`, naming the other; so are two build steps of one image for different
    platforms given outright (an amd64 job and an arm64 job, each with its own
    `platforms:`). A `cache-from` only reads: every leg may read one
    common cache (a warm start from the main branch's cache, say), so it is never reported.

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
        others = _sibling_caches(Path(facts.path), ctx)
        # key → (cache-to, image, the platforms that build writes for)
        sites: dict[tuple[str, str], list[tuple[Value, str, str | None, str]]] = {}
        for b in builds(facts, ctx, runs=True):
            image = (b.file.text if b.file else "Dockerfile")
            if b.target:  # two bake targets are two images, even from one Dockerfile
                image += f" (bake target {b.target})"
            platform = _platform_var(b)
            # only a write collides: legs reading one cache-from share it without harm
            for value in (b.cache_to,):
                if value is None:
                    continue
                for spec in [x for x in value.text.split("\n") if x.strip()]:
                    key = _key(spec.strip())
                    if key is None:
                        continue
                    if platform is not None and not _per_platform(key[1], b.job.legs,
                                                                  platform):
                        yield self.finding(
                            facts.path, value.line, value.column,
                            f"{key[0]} cache {key[1]!r} is shared by every matrix.{platform} "
                            f"of job {b.job.id}: the platforms overwrite each other's cache",
                            hint=f"add ${{{{ matrix.{platform} }}}} to the cache-to scope/ref")
                    sites.setdefault(key, []).append((value, image, _fixed_platforms(b),
                                                      b.target))
        for key, where in sites.items():
            images = {img for _, img, _, _ in where}
            said: set[tuple[int, int]] = set()  # one bake step's targets: one finding there
            for value, image, platforms, _target in where:
                # one image built for other platforms elsewhere (an amd64 job and an arm64
                # job, each with its own `platforms:`), writing the same scope
                apart = [(v, p) for v, img, p, _ in where
                         if img == image and p is not None and platforms is not None
                         and p != platforms]
                if apart:
                    lines = ", ".join(f"{p} at line {v.line}" for v, p in apart)
                    yield self.finding(
                        facts.path, value.line, value.column,
                        f"{key[0]} cache {key[1]!r} of {platforms} is also written for {lines}: "
                        "the platforms overwrite each other's cache",
                        hint="give each platform's build its own scope")
                if len(images) > 1:
                    if (value.line, value.column) in said:
                        continue
                    said.add((value.line, value.column))
                    here = [t for v, _, _, t in where
                            if (v.line, v.column) == (value.line, value.column) and t]
                    rows = sorted({v.line for v, img, _, _ in where
                                   if img != image and v.line != value.line})
                    names = ([f"bake targets {', '.join(dict.fromkeys(here))} here"]
                             if len(set(here)) > 1 else [])
                    names += [f"line {', '.join(map(str, rows))}"] if rows else []
                    yield self.finding(
                        facts.path, value.line, value.column,
                        f"{key[0]} cache {key[1]!r} is written for more than one image "
                        f"({'; '.join(names)}): the images evict each other's cache",
                        hint="give each image its own scope")
                elif any(img != image for _, img in others.get(key, [])):
                    other_file, other_image = next(
                        (f, img) for f, img in others[key] if img != image)
                    yield self.finding(
                        facts.path, value.line, value.column,
                        f"{key[0]} cache {key[1]!r} is also written by {other_file} for "
                        f"{other_image}: GitHub's cache is shared by every workflow of the "
                        "repository, so the images evict each other",
                        hint="give each image its own scope")


def _fixed_platforms(b: Build) -> str | None:
    """The platforms a build step names outright (`linux/arm64`), if it does."""
    if b.platforms is None or "${{" in b.platforms.text:
        return None
    return ",".join(sorted(p.strip() for p in re.split(r"[,\n]", b.platforms.text) if p.strip()))


def _platform_var(b: Build) -> str | None:
    """The matrix variable that picks the platform: the one `platforms:` names, else one
    whose name says so (arch, platform, runner, os), if the matrix gives it several values."""
    legs = b.job.legs
    names: list[str] = []
    if b.platforms is not None:
        names = re.findall(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", b.platforms.text)
    if not names:
        keys = {k for leg in legs for k in leg}
        names = sorted(k for k in keys if re.search(r"plat|arch|runner|os", k, re.I))
    for name in names:
        if len({leg.get(name) for leg in legs}) > 1:
            return name
    return None


def _per_platform(scope: str, legs: list[dict[str, str]], platform: str) -> bool:
    """Whether the scope differs between every two legs that build different platforms
    (it names matrix variables whose values tell those legs apart)."""
    used = re.findall(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", scope)
    if not used:
        return False
    by_scope: dict[tuple[str | None, ...], set[str | None]] = {}
    for leg in legs:
        by_scope.setdefault(tuple(leg.get(v) for v in used), set()).add(leg.get(platform))
    return all(len(platforms) == 1 for platforms in by_scope.values())
