"""The checks of a loaded catalog that need its images planned or rendered, run by every
command right after loading (`load_checked`). Catalog loading cannot run them itself: the
catalog layer imports nothing of resolution or render (.importlinter)."""

from __future__ import annotations

from pathlib import Path

from cannery.catalog.load import LoadedCatalog, load_catalog
from cannery.catalog.models import Catalog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cannery.lint.engine import Engine

Found = list[tuple[tuple[str | int, ...], str]]

# Lint rules whose finding on a `run` step refuses the catalog (the review defects cannery's
# own output never has), besides any error-level finding.
REVIEW_RULES = (
    "tls-verification-disabled",
    "unverified-download",
    "env-not-persisted",
    "ineffective-source",
    "global-build-throttle",
)


def load_checked(path: Path | None = None) -> LoadedCatalog:
    """``load_catalog(path)``, then `check_loaded`: what every command loads."""
    loaded = load_catalog(path)
    check_loaded(loaded)
    return loaded


def check_loaded(loaded: LoadedCatalog) -> None:
    """Refuse (CatalogError, each error at the line of its key) a matrix word without an
    effect, then a `run` step with a review defect, then (with a scheduled lock update) a
    ``[ci]`` path in the place of the lock update's list of paths; each only if the ones
    before it find none."""
    loaded.refuse(_matrix_effects(loaded))
    loaded.refuse(_run_step_findings(loaded.catalog))
    ci = loaded.catalog.ci
    if ci.schedule and ci.lock_update:  # the list of what a lock update may change: its own
        from cannery.render.workflow.lock_update import lock_update_list_clashes

        loaded.refuse(list(lock_update_list_clashes(loaded.catalog)))


def _matrix_effects(loaded: LoadedCatalog) -> Found:
    """No axis word without an effect: two images of one matrix that would be built alike
    (their plans equal but for name and tags) mean the word that tells them apart changes
    nothing the image holds; an error at that word."""
    found: Found = []
    expanded = loaded.expanded
    if not expanded:
        return found
    from dataclasses import replace

    from cannery.lock import Lock
    from cannery.plan import plan_image

    cat, lock = loaded.catalog, Lock()
    seen: dict[tuple[str, str], str] = {}
    told: set[tuple[str, str, str]] = set()
    for iname, exp in expanded.items():
        spec = plan_image(cat, iname, lock)
        key = (exp.entry, repr(replace(spec, name="", tag="", aliases=(), tag_fields=())))
        other_name = seen.setdefault(key, iname)
        if other_name == iname:
            continue
        other = expanded[other_name]
        theirs = dict(other.axes)
        for axis, word in exp.axes:
            if theirs.get(axis) == word or (exp.entry, axis, word) in told:
                continue
            told.add((exp.entry, axis, word))
            found.append((exp.word_at[axis],
                          f"{axis}={word} has no effect: images.{exp.entry}[{exp.label}] and "
                          f"[{other.label}] would be built alike (they differ only in name and "
                          f"tags); drop the word, or give it the fields it changes "
                          f"({{ value = \"{word}\", ... }})"))
            break
    return found


def _run_step_findings(cat: Catalog) -> Found:
    """Each `run` step, linted in the Dockerfile it renders into (so the rules see the base's
    shell and the toolkit's ENV): a review defect is an error at the step's line. The lint
    stack is imported only for a catalog that has such a step (~0.1 s of every start-up)."""
    found: Found = []
    engine: Engine | None = None
    for iname, img in cat.images.items():
        runs: list[tuple[tuple[str | int, ...], str]] = [
            (("steps", i), s.run) for i, s in enumerate(img.steps) if s.run is not None
        ]
        runs += [(("stages", j, "steps", i), s.run) for j, st in enumerate(img.stages)
                 for i, s in enumerate(st.steps) if s.run is not None]
        if not runs:
            continue
        from cannery.lint.config import LintConfig
        from cannery.lint.engine import Engine
        from cannery.lint.model import Severity
        from cannery.lock import Lock
        from cannery.plan import plan_image
        from cannery.render.dockerfile import render_dockerfile, run_step_text

        engine = engine or Engine(LintConfig())
        text = render_dockerfile(plan_image(cat, iname, Lock()))
        lines = text.split("\n")
        findings = engine.lint_text(f"{iname}.Dockerfile", text, "dockerfile")
        for at, run in runs:
            rendered = run_step_text(run).render().split("\n")
            start = lines.index(rendered[0]) + 1
            end = start + len(rendered) - 1
            for f in findings:
                if start <= f.span.line <= end and (
                    f.severity >= Severity.ERROR or f.rule in REVIEW_RULES
                ):
                    found.append((("images", iname, *at, "run"), f"{f.rule}: {f.message}"))
    return found
