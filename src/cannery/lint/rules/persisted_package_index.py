from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._config_files import index, settings
from cannery.lint.rules._shell import host_of

INDEX_ENV = {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "UV_INDEX_URL",
             "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "NPM_CONFIG_REGISTRY",
             "CONDA_CHANNELS", "GOPROXY"}
URL = re.compile(r"(?<![a-z])[a-z]{1,15}://[^\s'\"]+")  # bounded scheme: linear on long words
HOSTISH = re.compile(r"://|\w\.\w")  # a sed expression that rewrites a host
CONFIG_FILES = re.compile(
    r"(pip\.conf|pip\.ini|\.npmrc|\.condarc|sources\.list|\.pypirc|\.repo|yum\.conf|dnf\.conf)$"
)


class PersistedPackageIndex(Rule):
    """## What it does
    Finds build-time package index or mirror configuration saved into the image: `ENV
    PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL`, `pip config set …index-url`, `npm config set
    registry`, index settings written into `pip.conf`, `.npmrc`, `.condarc` or a yum/dnf
    `.repo` file (`baseurl`, `mirrorlist`, `metalink`; by `echo`, `printf`, `tee`, a heredoc
    or `COPY <<EOF`), and `sed` edits that put a host into a package source file
    (`sources.list`, a `.repo` file, `yum.conf`, `dnf.conf`). Hosts in
    `trusted-registries` are allowed.

    ## Why is this bad?
    A mirror that was fast from the build farm is slow, unreachable or untrusted where the
    image runs; an extra index (for x86_64 CPU torch wheels) silently changes what every
    later `pip install` in the container resolves.

    ## Example
    ```dockerfile
    RUN pip config set global.extra-index-url https://download.pytorch.org/whl/cpu/
    ```

    ## Use instead
    ```dockerfile
    RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu/ torch==2.9.0
    ```
    """

    name = "persisted-package-index"
    code = "CD019"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        def trusted(text: str) -> bool:
            hosts = {host_of(u) for u in URL.findall(text)}
            return bool(hosts) and all(h in ctx.trusted_registries for h in hosts)

        for inst in facts.instructions:
            if inst.keyword == "ENV":
                for pr in inst.pairs:
                    if pr.key in INDEX_ENV and not trusted(pr.value or ""):
                        yield self.finding(facts.path, pr.line, pr.column,
                                           f"ENV {pr.key} keeps a build-time package index in "
                                           "the image for every later install and user",
                                           end_column=pr.column + len(pr.key),
                                           hint="pass it per command (--extra-index-url) or as "
                                           "a RUN-local variable")
            if inst.script is None:
                continue
            for cmd in inst.script.commands:
                argv = cmd.argv
                text = " ".join(argv)
                if cmd.name == "pip" and cmd.subcommand() == "config" and "set" in argv and (
                        "index" in text or "find-links" in text) and not trusted(text):
                    yield self.at(facts.path, cmd.pos, "pip config set saves a package index "
                                  "into the image's pip.conf", hint="pass --extra-index-url to "
                                  "the pip install that needs it")
                elif cmd.name in ("npm", "yarn") and "config" in argv and "registry" in text \
                        and not trusted(text):
                    yield self.at(facts.path, cmd.pos, "npm registry config is saved into the "
                                  "image", hint="use --registry on the command")
                elif cmd.name == "sed" and any(CONFIG_FILES.search(a) for a in argv) and any(
                        HOSTISH.search(a) for a in argv if not CONFIG_FILES.search(a)):
                    yield self.at(facts.path, cmd.pos, "mirror rewritten in a package source "
                                  "file that stays in the image",
                                  hint="use a build-only mount or restore it in the same RUN")
        for st in settings(facts):
            if index(st) and not trusted(st.text):
                yield self.finding(facts.path, st.line, st.column,
                                   f"package index written to {st.file}, which stays in "
                                   "the image", hint="use a build secret or mount for it")
