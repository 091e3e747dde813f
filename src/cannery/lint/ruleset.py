"""Every rule cannery lint knows, in a fixed order, with its status.

Rules are never renumbered or silently dropped: a renamed rule keeps a redirect here, and a
removed one stays listed as removed so old suppressions and configs still make sense.
"""

from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules.arch_dispatch_no_fallback import ArchDispatchNoFallback
from cannery.lint.rules.cache_scope_collision import CacheScopeCollision
from cannery.lint.rules.cleanup_in_later_layer import CleanupInLaterLayer
from cannery.lint.rules.devlib_in_runtime_env import DevlibInRuntimeEnv
from cannery.lint.rules.digest_push_with_tag import DigestPushWithTag
from cannery.lint.rules.empty_continuation_line import EmptyContinuationLine
from cannery.lint.rules.empty_path_element import EmptyPathElement
from cannery.lint.rules.env_not_persisted import EnvNotPersisted
from cannery.lint.rules.full_clone_for_one_commit import FullCloneForOneCommit
from cannery.lint.rules.global_build_throttle import GlobalBuildThrottle
from cannery.lint.rules.ineffective_source import IneffectiveSource
from cannery.lint.rules.missing_dockerfile import MissingDockerfile
from cannery.lint.rules.multi_platform_single_runner import MultiPlatformSingleRunner
from cannery.lint.rules.noop_layer import NoopLayer
from cannery.lint.rules.path_outside_repository import PathOutsideRepository
from cannery.lint.rules.persisted_package_index import PersistedPackageIndex
from cannery.lint.rules.pipe_to_shell import PipeToShell
from cannery.lint.rules.rc_file_env import RcFileEnv
from cannery.lint.rules.secret_in_arg_or_env import SecretInArgOrEnv
from cannery.lint.rules.secret_in_argv import SecretInArgv
from cannery.lint.rules.secrets_without_fork_guard import SecretsWithoutForkGuard
from cannery.lint.rules.sed_line_patch import SedLinePatch
from cannery.lint.rules.shallow_clone_checkout import ShallowCloneCheckout
from cannery.lint.rules.single_arch_download import SingleArchDownload
from cannery.lint.rules.soc_chip_mismatch import SocChipMismatch
from cannery.lint.rules.source_in_posix_shell import SourceInPosixShell
from cannery.lint.rules.swallowed_command import SwallowedCommand
from cannery.lint.rules.tag_version_mismatch import TagVersionMismatch
from cannery.lint.rules.tls_verification_disabled import TlsVerificationDisabled
from cannery.lint.rules.toolkit_over_toolkit import ToolkitOverToolkit
from cannery.lint.rules.toolkit_path_version import ToolkitPathVersion
from cannery.lint.rules.torch_repinned_after_build import TorchRepinnedAfterBuild
from cannery.lint.rules.unknown_subcommand import UnknownSubcommand
from cannery.lint.rules.unpinned_git_ref import UnpinnedGitRef
from cannery.lint.rules.unpinned_pip_requirement import UnpinnedPipRequirement
from cannery.lint.rules.unsafe_tag_deletion import UnsafeTagDeletion
from cannery.lint.rules.unused_arg import UnusedArg
from cannery.lint.rules.unverified_download import UnverifiedDownload

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import ClassVar


class EngineRule(Rule):
    """A rule lint's engine reports itself (a file did not parse, a rule failed, a
    suppression suppressed nothing, a file was skipped), on every kind of file: its ``check``
    finds nothing."""

    targets = ("dockerfile", "workflow")

    def check(self, facts: object, ctx: LintContext) -> Iterator[Finding]:
        return iter(())


class ParseError(EngineRule):
    """## What it does
    Reports a file that cannot be parsed: a Dockerfile BuildKit's parser rejects (an
    unterminated heredoc, an unknown instruction, `ENV` with no value) or a workflow that is
    not valid YAML. It is reported at the line where parsing fails; no other rule runs on the
    file.

    ## Why is this bad?
    The build fails at this line, or the workflow does not load.

    ## Example
    ```dockerfile
    FROM ubuntu:22.04
    RUN <<EOF
    echo never closed
    ```

    ## Use instead
    ```dockerfile
    FROM ubuntu:22.04
    RUN <<EOF
    echo closed
    EOF
    ```
    """

    name = "parse-error"
    code = "CX001"
    severity = Severity.ERROR


class UnusedSuppression(EngineRule):
    """## What it does
    Reports a `# cannery: ignore=RULE` comment that suppressed nothing, or that names a rule
    cannery does not know.

    ## Why is this bad?
    Stale suppressions hide the next real finding on that line, and a misspelled rule name
    suppresses nothing at all.

    ## Example
    ```dockerfile
    # cannery: ignore=unused-arg
    ARG SOC_VERSION=ascend910b1
    ```
    (`SOC_VERSION` is consumed implicitly; `unused-arg` never fires on it)

    ## Use instead
    Remove the comment.
    """

    name = "unused-suppression"
    code = "CX002"
    severity = Severity.INFO


class InternalError(EngineRule):
    """## What it does
    Reports that a rule failed on this file, or that linting the file used up its time
    budget: 10 s of CPU time for parsing, every rule and the suppressions (real files take
    milliseconds; an 8,000-line Dockerfile about half a second). Past the budget the file's
    only finding is this one, naming what was running; its suppressions are not applied.
    Please report it with the file.

    ## Why is this bad?
    The rule's checks (or, past the budget, all of them) did not run on the file, so its
    defects may be missed.

    ## Example
    (none: this is cannery's own failure)

    ## Use instead
    Suppress the failing rule for this file until it is fixed (`--ignore RULE`, or
    `ignore` in the config, for a rule that used up the budget).
    """

    name = "internal-error"
    code = "CX003"
    severity = Severity.ERROR


class SkippedFile(EngineRule):
    """## What it does
    Reports a file lint did not read: not a regular file (a FIFO, a device such as
    `/dev/zero`, a socket), a symbolic link that leads outside the repository (or, outside
    a git repository, outside the directory named on the command line), or larger than
    1 MiB. Every file lint opens is opened without blocking and read only up to that size,
    whatever links to it; the rest of the run is linted as usual.

    ## Why is this bad?
    The file was not checked at all. A `Dockerfile` that links to `/dev/zero` or is a FIFO
    would otherwise exhaust lint's memory or hang it, and a link to a file outside the
    repository would show lint (and its report) something the repository does not hold.

    ## Example
    ```console
    $ ln -s /dev/zero Dockerfile
    ```

    ## Use instead
    Commit the Dockerfile itself, as a regular file of a sensible size; a file shared
    between images can live once in the repository and be linked from inside it.
    """

    name = "skipped-file"
    code = "CX004"
    severity = Severity.ERROR


RULES: list[type[Rule]] = [
    TlsVerificationDisabled,
    UnverifiedDownload,
    PipeToShell,
    UnpinnedGitRef,
    GlobalBuildThrottle,
    FullCloneForOneCommit,
    CleanupInLaterLayer,
    ToolkitOverToolkit,
    ToolkitPathVersion,
    EnvNotPersisted,
    IneffectiveSource,
    EmptyPathElement,
    DevlibInRuntimeEnv,
    RcFileEnv,
    SourceInPosixShell,
    EmptyContinuationLine,
    ArchDispatchNoFallback,
    UnusedArg,
    TorchRepinnedAfterBuild,
    PersistedPackageIndex,
    SocChipMismatch,
    SecretInArgOrEnv,
    SedLinePatch,
    NoopLayer,
    ShallowCloneCheckout,
    SwallowedCommand,
    UnpinnedPipRequirement,
    CacheScopeCollision,
    MultiPlatformSingleRunner,
    DigestPushWithTag,
    TagVersionMismatch,
    MissingDockerfile,
    UnsafeTagDeletion,
    SecretInArgv,
    SingleArchDownload,
    SecretsWithoutForkGuard,
    UnknownSubcommand,
    PathOutsideRepository,
    ParseError,
    UnusedSuppression,
    InternalError,
    SkippedFile,
]

# A renamed rule maps its old name here; suppressions and configs keep working.
REDIRECTS: dict[str, str] = {}
# A removed rule stays listed with the reason, so configs naming it get a clear message.
REMOVED: dict[str, str] = {}


class RuleSet:
    by_name: ClassVar[dict[str, type[Rule]]] = {r.name: r for r in RULES}
    by_code: ClassVar[dict[str, type[Rule]]] = {r.code: r for r in RULES}

    @classmethod
    def resolve(cls, name: str) -> type[Rule] | None:
        name = REDIRECTS.get(name, name)
        return cls.by_name.get(name) or cls.by_code.get(name.upper())

    @classmethod
    def names(cls) -> list[str]:
        return [r.name for r in RULES]
