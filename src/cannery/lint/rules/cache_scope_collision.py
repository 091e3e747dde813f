from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts.workflow import Value, WorkflowFacts
from cannery.lint.model import Finding, Severity, Span
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import Build, builds, calls_to, leg_inputs, with_inputs


def _siblings(path: Path, ctx: LintContext) -> list[tuple[Path, WorkflowFacts]]:
    """The other workflows in the same directory, parsed. Each is read as lint reads any file
    (LintContext.read): one it may not read, or that does not parse, is left out."""
    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.workflow import parse_workflow

    out: list[tuple[Path, WorkflowFacts]] = []
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
            out.append((other, parse_workflow(str(other), text)))
        except ParseFailure:
            continue
    return out


def _sibling_caches(
    siblings: list[tuple[Path, WorkflowFacts]]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Cache keys written by the other workflows in the same directory: key → [(file, image)]."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for other, wf in siblings:
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
    `platforms:`). A reusable workflow (`on: workflow_call`) is linted as each caller in
    its directory runs it: a caller job's matrix (`target: ${{ matrix.target }}`) fills its
    `${{ inputs.X }}` (`targets: ${{ inputs.target }}` of a bake step), and legs that build
    different images into one scope (`set: *.cache-to=type=gha,mode=max`, no scope) are
    reported at the reusable workflow's cache-to, where the scope is fixed, naming the
    caller's matrix. A `cache-from` only reads: every leg may read one
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
    and in a reusable workflow each caller leg runs, a scope per input:
    ```yaml
          targets: ${{ inputs.target }}
          set: |
            *.cache-to=type=gha,mode=max,scope=${{ inputs.target }}
    ```
    """

    name = "cache-scope-collision"
    code = "CW001"
    severity = Severity.WARNING
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        siblings = _siblings(Path(facts.path), ctx)
        others = _sibling_caches(siblings)
        if "workflow_call" in facts.events:
            yield from self._called(facts, ctx, siblings)
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
                    names = names or ["another build here"]
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

    def _called(self, facts: WorkflowFacts, ctx: LintContext,
                siblings: list[tuple[Path, WorkflowFacts]]) -> Iterator[Finding]:
        """A reusable workflow run by a caller's matrix, one leg per input value (`target:
        ${{ matrix.target }}` → `targets: ${{ inputs.target }}`): legs that build different
        images and write one cache scope evict each other. Reported here, at the cache-to
        (for a bake file's, at the step's `files:`): the scope is fixed in this file."""
        for other, caller in siblings:
            for job in calls_to(caller, facts.path):
                legs = leg_inputs(job)
                if len(legs) < 2:
                    continue
                # key → where the cache-to is → the images the legs write there
                writes: dict[tuple[str, str], dict[tuple[int, int], set[str]]] = {}
                for _leg, inputs in legs:
                    for b in builds(with_inputs(facts, inputs), ctx, runs=True):
                        if b.cache_to is None:
                            continue
                        image = (b.file.text if b.file else "Dockerfile") + (
                            f" (bake target {b.target})" if b.target else "")
                        for spec in [x for x in b.cache_to.text.split("\n") if x.strip()]:
                            key = _key(spec.strip())
                            if key is not None and "${{" not in key[1]:
                                at = (b.cache_to.line, b.cache_to.column)
                                writes.setdefault(key, {}).setdefault(at, set()).add(image)
                varying = sorted({k for _, i in legs for k in i
                                  if len({ins.get(k) for _, ins in legs}) > 1})
                for key, places in writes.items():
                    images = {img for imgs in places.values() for img in imgs}
                    if len(images) < 2:
                        continue
                    where = Span(str(other), job.matrix_line or job.line, 1)
                    given = ", ".join(
                        f"{k}: {', '.join(dict.fromkeys(i.get(k, '') for _, i in legs))}"
                        for k in varying)
                    for line, column in places:
                        yield self.finding(
                            facts.path, line, column,
                            f"{key[0]} cache {key[1]!r} is written by every leg of job "
                            f"{job.id} in {other.name} ({given}), each building another "
                            "image: the legs evict each other's cache",
                            hint=("add scope=${{ inputs." + varying[0] + " }} to the cache-to"
                                  if varying else "give each leg its own scope"),
                            related=((where, f"the matrix of job {job.id}"),))


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
