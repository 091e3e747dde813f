from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

SECRET_NAME = lazy_re(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|"
                      r"CREDENTIAL|AUTH)", re.I)
NOT_SECRET = lazy_re(r"(_FILE|_PATH|_URL|_DIR|_ENDPOINT|_HOST|_NAME|_USER|_ID|_TYPE)$|"
                     r"TOKENIZER", re.I)  # TOKENIZERS_PARALLELISM is a setting
# The scheme is bounded so a long run of letters cannot make the search quadratic.
URL_CRED = lazy_re(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,15}://[^/\s:@]+:[^/\s@]+@", re.I)


class SecretInArgOrEnv(Rule):
    """## What it does
    Finds `ARG`/`ENV` whose name says it holds a secret (`*_TOKEN`, `*PASSWORD*`,
    `*_API_KEY`, …), and credentials written into URLs (`https://user:pass@host`).

    ## Why is this bad?
    `ENV` values are in the image config for anyone who pulls it; `ARG` values are recorded
    in the image history (`docker history`) and in provenance attestations; a URL with a
    password is in the layer's command line.

    ## Example
    ```dockerfile
    ARG HF_TOKEN
    RUN huggingface-cli login --token $HF_TOKEN
    ```

    ## Use instead
    ```dockerfile
    RUN --mount=type=secret,id=hf_token \\
        HF_TOKEN=$(cat /run/secrets/hf_token) huggingface-cli download …
    ```
    """

    name = "secret-in-arg-or-env"
    code = "CD021"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.keyword in ("ARG", "ENV"):
                for pr in inst.pairs:
                    if SECRET_NAME.search(pr.key) and not NOT_SECRET.search(pr.key):
                        where = ("the image config" if inst.keyword == "ENV"
                                 else "the image history")
                        yield self.finding(facts.path, pr.line, pr.column,
                                           f"{inst.keyword} {pr.key} looks like a secret; its "
                                           f"value ends up in {where}",
                                           end_column=pr.column + len(pr.key),
                                           hint="use RUN --mount=type=secret")
            for i, ln in enumerate(facts.lines[inst.line - 1 : inst.end_line]):
                for m in URL_CRED.finditer(ln):
                    yield self.finding(facts.path, inst.line + i, m.start() + 1,
                                       "credentials in a URL are stored in the image",
                                       end_column=m.end() + 1,
                                       hint="use a build secret or a netrc mount")
