"""Find files, parse them, run the selected rules, apply suppressions and fixes."""

from __future__ import annotations

import fnmatch
import os
import time
from pathlib import Path

from cannery.errors import InputError
from cannery.lint import suppress
from cannery.lint.config import LintConfig
from cannery.lint.facts import ParseFailure
from cannery.lint.facts.dockerfile import parse_dockerfile
from cannery.lint.facts.workflow import parse_workflow
from cannery.lint.files import MAX_BYTES, Skipped, read_regular, read_text, repository
from cannery.lint.fixes import apply_fixes
from cannery.lint.model import Finding, Severity, Span
from cannery.lint.rule import LintContext, Rule
from cannery.lint.ruleset import RULES

# Seconds of CPU time one file may take (parse, rules, suppressions) before it is reported as
# an `internal-error` instead: real files take milliseconds (an 8,000-ARG Dockerfile about
# half a second).
BUDGET = 10.0
DOCKERFILE_NAMES = ("Dockerfile*", "*.Dockerfile", "*.dockerfile", "Containerfile*")
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache",
             ".ruff_cache", ".pytest_cache"}


def kind_of(path: Path) -> str | None:
    name = path.name
    if any(fnmatch.fnmatch(name, p) for p in DOCKERFILE_NAMES):
        return "dockerfile"
    parts = path.parts
    if (len(parts) >= 3 and parts[-3] == ".github" and parts[-2] == "workflows"
            and name.endswith((".yml", ".yaml"))):
        return "workflow"
    return None


def sniff(path: Path) -> str | None:
    """The kind of a file named on the command line whose name does not say: a workflow is
    YAML with `jobs:`; a Dockerfile starts (after comments) with FROM or ARG."""
    import re

    try:  # a FIFO or a device names no Dockerfile: never opened blocking, never read
        head = read_regular(os.path.realpath(path), MAX_BYTES)[:65536].decode(
            "utf-8", errors="replace")
    except (OSError, Skipped):
        return None
    if path.suffix in (".yml", ".yaml"):
        return "workflow" if re.search(r"^jobs\s*:", head, re.M) else None
    for line in head.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        return "dockerfile" if re.match(r"(FROM|ARG)\s", stripped, re.I) else None
    return None


def discover(paths: list[Path]) -> list[tuple[Path, str]]:
    """Files to lint: named files are taken when they are Dockerfiles or workflows (by name
    or content); directories are searched by name. A directory with nothing to lint, or a
    named file of another kind, is an input error."""
    out: list[tuple[Path, str]] = []
    for p in paths:
        if p.is_dir():
            before = len(out)
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS or d == ".github")
                for f in sorted(files):
                    fp = Path(root) / f
                    k = kind_of(fp)
                    if k:
                        out.append((fp, k))
            if len(out) == before:
                raise InputError(f"{p}: no Dockerfile or workflow found (looked for "
                                 f"{', '.join(DOCKERFILE_NAMES)}, .github/workflows/*.yml and "
                                 ".github/workflows/*.yaml)")
        elif p.exists():
            k = kind_of(p) or sniff(p)
            if k is None:
                raise InputError(f"{p}: not a Dockerfile or workflow")
            out.append((p, k))
        else:
            raise InputError(f"{p}: no such file or directory")
    return out


def repo_root(path: Path) -> Path:
    """For a workflow, the repository it belongs to (paths in it are relative to that)."""
    parts = path.resolve().parts
    if ".github" in parts:
        i = len(parts) - 1 - parts[::-1].index(".github")
        return Path(*parts[:i])
    for d in path.resolve().parents:
        if (d / ".git").exists():
            return d
    return Path.cwd()


class Engine:
    """The rules ``config`` selects, run over one file at a time."""

    def __init__(self, config: LintConfig, peers: tuple[str, ...] = (),
                 budget: float = BUDGET) -> None:
        self.config = config
        self.peers = peers  # every Dockerfile of the run, for rules that link files
        self.budget = budget  # seconds of CPU time per file
        chosen = [r for r in RULES if r.name not in ("parse-error", "unused-suppression",
                                                     "internal-error", "skipped-file")]
        if self.config.select is not None:
            chosen = [r for r in chosen if r.name in self.config.select]
        chosen = [r for r in chosen if r.name not in self.config.ignore]
        self.rules: list[Rule] = [r() for r in chosen]

    def context(self, path: Path, kind: str) -> LintContext:
        root = repo_root(path) if kind == "workflow" else path.parent
        return LintContext(
            implicit_args=self.config.implicit_args,
            trusted_registries=self.config.trusted_registries,
            base_env=self.config.base_image_env,
            target=self.config.target,
            no_compile_env=self.config.no_compile_env,
            peers=self.peers,
            root=str(root),
            # a workflow's paths are read from its repository; a Dockerfile's build-context
            # files from its directory up to the repository holding it
            boundary=str(root if kind == "workflow" else repository(root)),
        )

    def skipped(self, path: str, reason: str) -> list[Finding]:
        """The `skipped-file` finding for a file lint did not read (see lint/files.py)."""
        if "skipped-file" in self.config.ignore:
            return []
        return [self._severity(Finding(
            "skipped-file", "CX004", Severity.ERROR, f"skipped, {reason}: not linted",
            Span(path, 1, 1), hint="lint reads only regular files inside the repository, "
            f"at most {MAX_BYTES >> 20} MiB each"))]

    def lint_text(self, path: str, text: str, kind: str) -> list[Finding]:
        """The findings in ``text``; at most ``budget`` seconds of CPU time (see _Budget),
        after which the file's findings are one `internal-error`."""
        budget = _Budget(self.budget)
        found: list[Finding] | None = None
        with budget:
            try:
                found = self._lint(path, text, kind, budget)
                budget.active = False  # done: a signal from here on raises nothing
            except OverBudget:
                pass
        if found is not None:
            return found
        return [self._severity(Finding(
            "internal-error", "CX003", Severity.ERROR,
            f"gave up after {self.budget:g} s of CPU time ({budget.phase}): not linted",
            Span(path, 1, 1), hint="please report it with the file; split the file, or "
            "--ignore the rule named"))]

    def _lint(self, path: str, text: str, kind: str, budget: _Budget) -> list[Finding]:
        budget.phase = "parsing"
        ctx = self.context(Path(path), kind)
        try:
            if kind == "workflow":
                facts: object = parse_workflow(path, text)
                ranges: list[tuple[int, int]] = []
            else:
                df = parse_dockerfile(path, text, self.config.base_image_shells)
                facts = df
                ranges = [(i.line, i.end_line) for i in df.instructions]
        except ParseFailure as exc:
            if "parse-error" in self.config.ignore:
                return []
            line_text = text.split("\n")[exc.line - 1] if exc.line <= text.count("\n") + 1 else ""
            col = len(line_text) - len(line_text.lstrip()) + 1
            return [self._severity(Finding("parse-error", "CX001", Severity.ERROR, exc.message,
                                           Span(path, exc.line, col)))]
        findings: list[Finding] = []
        for rule in self.rules:
            if kind not in rule.targets:
                continue
            budget.check(f"rule {rule.name}")
            try:
                findings.extend(rule.check(facts, ctx))
            except Exception as exc:  # a rule bug must not hide the other rules' findings
                findings.append(Finding("internal-error", "CX003", Severity.ERROR,
                                        f"rule {rule.name} failed: {type(exc).__name__}: {exc}",
                                        Span(path, 1, 1)))
        budget.check("suppressions")
        lines = text.split("\n")
        found = suppress.directives(lines, ranges)
        if found:
            findings = suppress.apply(findings, found, path)
        if "unused-suppression" in self.config.ignore or (
                self.config.select is not None and "unused-suppression" not in self.config.select):
            findings = [f for f in findings if f.rule != "unused-suppression"]
        # after the suppressions: a suppression of a finding hidden here is not unused
        floor = self.config.min_confidence
        findings = [self._severity(f) for f in findings if f.confidence >= floor]
        return sorted(set(findings), key=lambda f: (f.sort_key, f.message))

    def _severity(self, f: Finding) -> Finding:
        level = self.config.severity.get(f.rule)
        if level is None or level == f.severity:
            return f
        return f.replace(severity=level)

    def fix_text(self, path: str, text: str, kind: str, unsafe: bool = False,
                 rounds: int = 10) -> tuple[str, list[Finding]]:
        """Apply fixes until nothing changes; return the new text and the findings fixed."""
        fixed: list[Finding] = []
        for _ in range(rounds):
            findings = self.lint_text(path, text, kind)
            todo = [f for f in findings if f.fix is not None and (f.fix.safe or unsafe)]
            if not todo:
                break
            new, applied = apply_fixes(text, [f.fix for f in todo if f.fix is not None])
            if new == text or not applied:
                break
            fixed.extend(f for f in todo if f.fix in applied)
            text = new
        return text, fixed


def read(path: Path, root: Path | None = None) -> str:
    """The text of a file to lint, read only if it is a regular file inside ``root`` (default:
    the repository holding it) of at most MAX_BYTES; Skipped, with the reason, otherwise.
    A file the system will not let us read is an input error."""
    try:
        return read_text(path, root if root is not None else repository(path.parent))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


class OverBudget(BaseException):
    """A file's time budget ran out. A BaseException, so that the `except Exception` of a rule
    (or of the engine around each rule) cannot swallow it."""


class _Budget:
    """A file's time budget: ``seconds`` of the process's CPU time from ``with``.

    In the main thread a SIGPROF timer (``setitimer(ITIMER_PROF)``, which counts user and
    system CPU time) raises OverBudget wherever Python code is running, inside a rule's loop
    included; a call into C (BuildKit's parser, tree-sitter) is interrupted when it returns
    to Python. CPU time, not wall time: a loaded machine does not use a file's budget up,
    and SIGALRM stays free for others (pytest-timeout). Where no timer can be set (a thread
    other than the main one, which Python never delivers signals to, or a SIGPROF timer
    already running, such as a profiler's), ``check`` between rules is the only bound: a
    single slow rule then runs to its end."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.phase = "starting"
        self.active = False
        self.armed = False
        self.start = 0.0
        self.previous: object = None

    def __enter__(self) -> _Budget:
        import signal

        self.start = time.process_time()
        self.active = True
        if hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_PROF)[0] == 0:
            try:
                self.previous = signal.signal(signal.SIGPROF, self._expired)
            except ValueError:  # not the main thread
                return self
            signal.setitimer(signal.ITIMER_PROF, self.seconds)
            self.armed = True
        return self

    def _expired(self, signum: int, frame: object) -> None:
        if self.active:
            self.active = False
            raise OverBudget

    def check(self, phase: str) -> None:
        """Name what runs next; raise OverBudget if the budget is already spent."""
        if self.active and time.process_time() - self.start > self.seconds:
            self.active = False
            raise OverBudget
        self.phase = phase

    def __exit__(self, *exc: object) -> None:
        self.active = False  # from here a late signal raises nothing
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_PROF, 0)
            previous = signal.SIG_DFL if self.previous is None else self.previous
            signal.signal(signal.SIGPROF, previous)  # type: ignore[arg-type]
            self.armed = False
