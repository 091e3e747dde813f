from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.facts.shell import Script
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import downloaded_file, is_verification, mentions, use_kind


class UnverifiedDownload(Rule):
    """## What it does
    Follows each file that `wget`/`curl` downloads through the rest of its stage and reports
    the first place it is executed, sourced, extracted or installed with no checksum or
    signature check (`sha256sum -c`, `gpg --verify`, `cosign verify`, …) in between.

    ## Why is this bad?
    TLS proves who served the file, not that it is the file you reviewed: a moved release, a
    compromised mirror or a truncated download runs as root in the build.

    ## Example
    ```dockerfile
    RUN curl -fsSLO https://example.com/Ascend-cann-toolkit_8.5.2_linux-aarch64.run && \\
        bash Ascend-cann-toolkit_8.5.2_linux-aarch64.run --quiet --install
    ```

    ## Use instead
    ```dockerfile
    RUN curl -fsSLO https://example.com/Ascend-cann-toolkit_8.5.2_linux-aarch64.run && \\
        echo "<sha256>  Ascend-cann-toolkit_8.5.2_linux-aarch64.run" | sha256sum -c - && \\
        bash Ascend-cann-toolkit_8.5.2_linux-aarch64.run --quiet --install
    ```
    """

    name = "unverified-download"
    code = "CD002"
    severity = Severity.ERROR
    targets = ("dockerfile", "workflow")

    def check(self, facts: DockerfileFacts | WorkflowFacts, ctx: LintContext
              ) -> Iterator[Finding]:
        groups: list[list[Script]]
        if isinstance(facts, WorkflowFacts):
            # a tool fetched in one step of a job and run in a later step of the same job
            groups = [[s.run for s in job.steps if s.run is not None] for job in facts.jobs]
        else:
            groups = [[i.script for i in st.instructions if i.script is not None]
                      for st in facts.stages]
        for scripts in groups:
            pending: dict[str, object] = {}  # file → the download command
            for script in scripts:
                for cmd in script.commands:
                    if is_verification(cmd):
                        for path in list(pending):
                            if mentions(cmd, path) is not None or cmd.has_flag("-c", "--check"):
                                pending.pop(path)
                        continue
                    out = downloaded_file(cmd) if cmd.name in ("wget", "curl") else None
                    if out:
                        pending[out] = cmd
                        continue
                    for path in list(pending):
                        kind = use_kind(cmd, path)
                        if kind is None:
                            continue
                        pending.pop(path)
                        yield self.at(
                            facts.path, cmd.pos,
                            f"{path} is {kind} here without a checksum or signature check "
                            "since it was downloaded",
                            hint="check it first: echo \"<sha256>  FILE\" | sha256sum -c -",
                        )
