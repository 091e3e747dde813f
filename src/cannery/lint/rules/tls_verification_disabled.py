from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._config_files import insecure, settings

INSECURE_ENV = {
    "GIT_SSL_NO_VERIFY": "git skips certificate checks",
    "PIP_TRUSTED_HOST": "pip accepts any certificate from these hosts",
    "PYTHONHTTPSVERIFY": "Python skips certificate checks",
    "NODE_TLS_REJECT_UNAUTHORIZED": "Node accepts any certificate",
    "CURL_INSECURE": "curl skips certificate checks",
    "NPM_CONFIG_STRICT_SSL": "npm skips certificate checks",
}


def _env_is_insecure(key: str, value: str | None) -> bool:
    if key not in INSECURE_ENV:
        return False
    v = (value or "").strip().lower()
    if key in ("PYTHONHTTPSVERIFY", "NODE_TLS_REJECT_UNAUTHORIZED", "NPM_CONFIG_STRICT_SSL"):
        return v in ("0", "false")
    return v not in ("", "0", "false")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TlsVerificationDisabled(Rule):
    """## What it does
    Finds downloads and package tools told not to verify TLS certificates: `wget
    --no-check-certificate`, `curl -k`/`--insecure`, `git -c http.sslVerify=false` or
    `GIT_SSL_NO_VERIFY`, pip `--trusted-host`/`PIP_TRUSTED_HOST`/`pip config set
    …trusted-host`, npm `strict-ssl=false`, apt `[trusted=yes]`/`AllowUnauthenticated`,
    yum/dnf `--nogpgcheck`/`--setopt=sslverify=0` (and `dnf config-manager --setopt`);
    and the same settings written into the tool's config file (by `echo`, `printf`, `tee`,
    a heredoc, `sed -i` or `COPY <<EOF`): pip.conf `trusted-host`, gitconfig
    `sslVerify = false`, .npmrc `strict-ssl=false`, .condarc `ssl_verify: false`, apt
    sources `[trusted=yes]` and `apt.conf.d` `Acquire::AllowInsecureRepositories`,
    `AllowDowngradeToInsecureRepositories`, `AllowUnauthenticated` or
    `Acquire::https::Verify-Peer`/`Verify-Host "false"`, yum/dnf repo files and
    `yum.conf`/`dnf.conf` `sslverify=0`/`gpgcheck=0`. A bypass persisted by `ENV` or a
    config file is reported as critical: every later step and every user of the image
    inherits it.

    ## Why is this bad?
    Without certificate checks anyone on the network path can substitute what is downloaded.
    The CANN `.run` installers are executed as root, so a substituted file owns the image.

    ## Example
    ```dockerfile
    RUN wget --no-check-certificate https://example.com/Ascend-cann-toolkit_8.5.2_linux-x86_64.run
    ```

    ## Use instead
    ```dockerfile
    RUN apt-get update && apt-get install -y ca-certificates && \\
        curl -fsSLO https://example.com/Ascend-cann-toolkit_8.5.2_linux-x86_64.run && \\
        echo "<sha256>  Ascend-cann-toolkit_8.5.2_linux-x86_64.run" | sha256sum -c -
    ```
    """

    name = "tls-verification-disabled"
    code = "CD001"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        p = facts.path
        for inst in facts.instructions:
            if inst.keyword in ("ENV", "ARG"):
                for pair in inst.pairs:
                    if _env_is_insecure(pair.key, pair.value):
                        persisted = inst.keyword == "ENV"
                        yield self.finding(
                            p, pair.line, pair.column,
                            f"{inst.keyword} {pair.key}={pair.value}: {INSECURE_ENV[pair.key]}"
                            + (" in every later step and for every user of the image"
                               if persisted else " in every later RUN of this stage"),
                            end_column=pair.column + len(pair.key),
                            severity=Severity.CRITICAL if persisted else Severity.ERROR,
                            hint="remove it; install the CA the server needs instead",
                        )
            if inst.script is None:
                continue
            for a in inst.script.assignments:
                if a.exported and _env_is_insecure(a.name, a.value.value if a.value else None):
                    yield self.at(p, a.pos, f"export {a.name}: {INSECURE_ENV[a.name]}",
                                  hint="remove it; trust the server's CA instead")
            for cmd in inst.script.commands:
                for key, w in cmd.prefix_env.items():
                    if _env_is_insecure(key, w.value):
                        yield self.at(p, w.pos, f"{key}={w.value}: {INSECURE_ENV[key]}")
                yield from self._command(p, cmd)
        for st in settings(facts):
            if insecure(st):
                yield self.finding(p, st.line, st.column,
                                   f"{_short(st.text.strip())} written to {st.file} is saved in "
                                   f"the image: every later {st.tool} call (and every user) "
                                   "skips certificate or signature checks",
                                   severity=Severity.CRITICAL,
                                   hint="remove it; install the CA or signing key instead")

    def _command(self, p: str, cmd) -> Iterator[Finding]:  # type: ignore[no-untyped-def]
        hint = "remove the flag; install ca-certificates (or the server's CA) instead"
        argv = cmd.argv
        if cmd.name == "wget":
            for w in cmd.args:
                if w.value == "--no-check-certificate":
                    yield self.at(p, w.pos, "wget --no-check-certificate downloads without "
                                  "verifying the server's certificate", hint=hint)
        elif cmd.name == "curl":
            for w in cmd.args:
                v = w.value
                if v == "--insecure" or "k" in cmd.short_flags(v):
                    yield self.at(p, w.pos, f"curl {v} downloads without verifying the "
                                  "server's certificate", hint=hint)
        elif cmd.name == "git":
            for i, w in enumerate(cmd.args):
                low = w.value.lower().replace(" ", "")
                if "http.sslverify=false" in low or "http.sslverify=0" in low:
                    yield self.at(p, w.pos, "git http.sslVerify=false skips certificate checks",
                                  hint=hint)
                elif low == "http.sslverify" and i + 1 < len(cmd.args) and cmd.args[
                        i + 1].value.lower() in ("false", "0"):
                    glob = "--global" in argv or "--system" in argv
                    yield self.at(p, w.pos, "git config http.sslVerify false skips certificate "
                                  "checks" + (" for every later git call in the image" if glob
                                              else ""), hint=hint,
                                  severity=Severity.CRITICAL if glob else None)
        elif cmd.name == "pip":
            for w in cmd.args:
                if w.value == "--trusted-host" or w.value.startswith("--trusted-host="):
                    yield self.at(p, w.pos, "pip --trusted-host accepts any certificate (or "
                                  "plain HTTP) from that host", hint=hint)
            if cmd.subcommand() == "config" and any("trusted-host" in a for a in argv):
                w = next(x for x in cmd.args if "trusted-host" in x.value)
                yield self.at(p, w.pos, "pip config trusted-host is saved in the image: every "
                              "later pip call skips certificate checks for that host",
                              hint=hint, severity=Severity.CRITICAL)
        elif cmd.name in ("npm", "yarn", "pnpm"):
            for i, w in enumerate(cmd.args):
                low = w.value.lower()
                nxt = cmd.args[i + 1].value.lower() if i + 1 < len(cmd.args) else ""
                if low in ("--strict-ssl=false", "strict-ssl=false", "--no-strict-ssl") or (
                        low in ("strict-ssl", "--strict-ssl") and nxt == "false"):
                    saved = "config" in argv and "set" in argv
                    yield self.at(p, w.pos, "npm strict-ssl=false skips certificate checks"
                                  + (" for every later npm call in the image" if saved else ""),
                                  hint=hint, severity=Severity.CRITICAL if saved else None)
        elif cmd.name in ("yum", "dnf", "microdnf", "tdnf", "yum-config-manager"):
            for w in cmd.args:
                low = w.value.lower()
                if low == "--nogpgcheck" or re.search(
                        r"(sslverify|gpgcheck)=(0|false|no|off)\b", low):
                    saved = cmd.subcommand() == "config-manager" or (
                        cmd.name == "yum-config-manager") or "--save" in argv
                    yield self.at(p, w.pos, f"{cmd.name} {w.value} skips certificate or "
                                  "signature checks" + (" for every later install in the image"
                                                        if saved else ""),
                                  hint="remove it; import the repository's key (rpm --import)",
                                  severity=Severity.CRITICAL if saved else None)
        elif cmd.name in ("apt-get", "apt", "aptitude"):
            for w in cmd.args:
                low = w.value.lower()
                if low in ("--allow-unauthenticated", "--allow-insecure-repositories") or (
                        "allowunauthenticated" in low or "allowinsecurerepositories" in low):
                    yield self.at(p, w.pos, f"apt {w.value} installs packages whose signatures "
                                  "were not checked", hint="remove it; add the repository's key")
