"""Command lines of the well-known image tools (crane, skopeo, docker/buildx, regctl, oras,
gh), read the way the tools read them: options and their values are skipped wherever they
stand, so `crane delete --creds "${{ secrets.X }}" REF` names REF, not the credentials.

Each tool is a tree of subcommands. A leaf says what its operands are (``REF``: image
references). The lists are the tools' own commands (crane v0.20, skopeo 1.x, docker 27 and
buildx 0.x, regctl 0.8, oras 1.2, gh 2.x); top-level plugins (docker) and extensions or
aliases (gh) cannot be known, so an unknown top-level word of those two is not reported.
"""

from __future__ import annotations

from cannery.lint.facts.shell import Command, Word
from cannery.lint.model import Frozen

REF = "ref"  # a leaf whose operands are image references
ANY = "any"  # a leaf whose operands are something else (paths, names, files)
Tree = dict[str, "Tree | str"]


class Tool(Frozen):
    __slots__ = ("aliases", "open_top", "tree", "value_options")
    value_options: frozenset[str]  # options that take the next word as their value
    tree: Tree
    open_top: bool  # plugins/extensions may add top-level commands
    aliases: tuple[tuple[str, str], ...]  # (alias, command) at any level

    def __init__(self, value_options: frozenset[str], tree: Tree, open_top: bool = False,
                 aliases: tuple[tuple[str, str], ...] = ()) -> None:
        object.__setattr__(self, "value_options", value_options)
        object.__setattr__(self, "tree", tree)
        object.__setattr__(self, "open_top", open_top)
        object.__setattr__(self, "aliases", aliases)


def _leaves(kind: str, *names: str) -> Tree:
    return dict.fromkeys(names, kind)


_CRANE_VALUES = {
    "--platform", "-t", "--tag", "-a", "--annotation", "-l", "--label", "--entrypoint",
    "--cmd", "-e", "--env", "--workdir", "--user", "-o", "--output", "--set-platform",
    "--exposed-ports", "-b", "--base", "-f", "--new_layer", "--new_tag", "-u", "--username",
    "-p", "--password", "-j", "--jobs", "-m", "--manifest", "--old_base", "--new_base",
    "--format", "-c", "--cache_path", "--tarball", "--remote", "--config", "--address",
    "--disk", "--flatten"}
CRANE = Tool(frozenset(_CRANE_VALUES), {
    **_leaves(REF, "append", "config", "copy", "cp", "delete", "digest", "export", "flatten",
              "ls", "manifest", "mutate", "pull", "rebase", "tag", "validate", "catalog"),
    **_leaves(ANY, "push", "version", "help", "completion"),
    "auth": _leaves(ANY, "get", "login", "logout", "token", "help"),
    "blob": REF,
    "index": _leaves(REF, "append", "filter", "help"),
    "registry": _leaves(ANY, "serve", "help"),
    "edit": _leaves(REF, "config", "manifest", "fs", "help"),
})

_SKOPEO_VALUES = {
    "--command-timeout", "--override-arch", "--override-os", "--override-variant",
    "--policy", "--registries.d", "--registries-conf", "--tmpdir", "--authfile", "--creds",
    "--username", "--password", "--src-creds", "--dest-creds", "--src-authfile",
    "--dest-authfile", "--cert-dir", "--src-cert-dir", "--dest-cert-dir", "--registry-token",
    "--src-registry-token", "--dest-registry-token", "-f", "--format", "--retry-times",
    "--retry-delay", "--multi-arch", "--sign-by", "--sign-passphrase-file",
    "--encryption-key", "--decryption-key", "--additional-tag", "--dest-compress-format",
    "--dest-compress-level", "--src-shared-blob-dir", "--dest-shared-blob-dir",
    "--digestfile", "--sign-by-sigstore", "--sign-by-sigstore-private-key",
    "--sign-identity", "--image-parallel-copies", "--shared-blob-dir", "-s", "--src",
    "-d", "--dest", "--scoped", "--daemon-host", "--src-daemon-host", "--dest-daemon-host"}
SKOPEO = Tool(frozenset(_SKOPEO_VALUES), {
    **_leaves(REF, "copy", "delete", "inspect", "list-tags", "sync"),
    **_leaves(ANY, "generate-sigstore-key", "help", "login", "logout", "manifest-digest",
              "standalone-sign", "standalone-verify", "untrusted-signature-dump-without-"
              "verification", "--version", "completion"),
})

_DOCKER_VALUES = {
    "--config", "-c", "--context", "-H", "--host", "-l", "--log-level", "--tlscacert",
    "--tlscert", "--tlskey", "-t", "--tag", "-f", "--file", "--build-arg", "--platform",
    "--target", "--cache-from", "--cache-to", "-o", "--output", "--secret", "--ssh",
    "--label", "--network", "--progress", "--builder", "--iidfile", "--metadata-file",
    "--annotation", "--attest", "-u", "--username", "-p", "--password", "--name", "-e",
    "--env", "--env-file", "-v", "--volume", "-w", "--workdir", "--entrypoint", "--format",
    "--filter", "--add-host", "--shm-size", "-m", "--memory", "--cpus", "--ulimit",
    "--mount", "--user", "--driver", "--driver-opt", "--buildkitd-flags", "--bootstrap",
    "--prefer-index", "--source", "--append", "--os", "--arch", "--variant",
    "--allow", "--set", "--call", "--cgroup-parent", "--shm", "--ipc", "--pull",
    "--restart", "--runtime", "--gpus", "--device", "--cidfile", "-a", "--attach",
    "--tag-template", "--os-version", "--os-features", "--until"}
_BUILDX = {
    **_leaves(ANY, "bake", "build", "b", "create", "debug", "dial-stdio", "du", "history",
              "inspect", "install", "ls", "prune", "rm", "stop", "uninstall", "use",
              "version", "help", "policy"),
    "imagetools": _leaves(REF, "create", "inspect", "help"),
}
DOCKER = Tool(frozenset(_DOCKER_VALUES), {
    **_leaves(REF, "pull", "push", "tag", "rmi", "save", "history"),
    **_leaves(ANY, "attach", "build", "commit", "cp", "create", "diff", "events", "exec",
              "export", "images", "import", "info", "inspect", "kill", "load", "login",
              "logout", "logs", "pause", "port", "ps", "rename", "restart", "rm", "run",
              "search", "start", "stats", "stop", "top", "unpause", "update", "version",
              "wait", "help", "compose", "scout", "init", "trust", "swarm", "stack",
              "service", "node", "secret", "config", "plugin", "checkpoint"),
    "buildx": _BUILDX,
    "builder": {**_leaves(ANY, "build", "prune", "help"), **_BUILDX},
    "image": {**_leaves(REF, "pull", "push", "tag", "rm", "history", "save", "inspect"),
              **_leaves(ANY, "build", "import", "load", "ls", "list", "prune", "help")},
    "manifest": _leaves(REF, "annotate", "create", "inspect", "push", "rm", "help"),
    "container": _leaves(ANY, "attach", "commit", "cp", "create", "diff", "exec", "export",
                         "inspect", "kill", "logs", "ls", "list", "ps", "pause", "port",
                         "prune", "rename", "restart", "rm", "run", "start", "stats",
                         "stop", "top", "unpause", "update", "wait", "help"),
    "context": _leaves(ANY, "create", "export", "import", "inspect", "ls", "list", "rm",
                       "show", "update", "use", "help"),
    "network": _leaves(ANY, "connect", "create", "disconnect", "inspect", "ls", "list",
                       "prune", "rm", "help"),
    "volume": _leaves(ANY, "create", "inspect", "ls", "list", "prune", "rm", "update",
                      "help"),
    "system": _leaves(ANY, "df", "events", "info", "prune", "help"),
}, open_top=True)

_REGCTL_VALUES = {
    "--host", "--logopt", "-v", "--verbosity", "--user-agent", "--platform", "--format",
    "-u", "--user", "--pass", "--tls", "--cacert", "--digest-tags", "--referrers",
    "--annotation", "--artifact-type", "--config-type", "--file", "--file-media-type",
    "--subject", "--output", "--limit", "--last", "--include", "--exclude",
    "--filter-artifact-type",
    "--label", "--env", "--time", "--time-max", "--to-oci", "--base", "--base-digest",
    "--create", "--content-type", "--by-desc", "--name", "--layer-rm", "--layer-add",
    "--config-media-type", "--media-type"}
REGCTL = Tool(frozenset(_REGCTL_VALUES), {
    "artifact": _leaves(REF, "get", "list", "ls", "put", "tree", "help"),
    "blob": _leaves(REF, "copy", "cp", "delete", "rm", "diff-config", "diff-layer", "get",
                    "get-file", "head", "put", "help"),
    "completion": ANY, "help": ANY, "version": ANY, "digest": ANY,
    "config": _leaves(ANY, "get", "set", "help"),
    "image": _leaves(REF, "check-base", "copy", "cp", "create", "delete", "rm", "digest",
                     "export", "get-file", "import", "inspect", "manifest", "mod",
                     "ratelimit", "config", "help"),
    "index": _leaves(REF, "add", "create", "delete", "rm", "help"),
    "manifest": _leaves(REF, "delete", "rm", "diff", "get", "head", "put", "help"),
    "ref": ANY,
    "registry": _leaves(ANY, "config", "login", "logout", "set", "whoami", "help"),
    "repo": _leaves(REF, "copy", "ls", "list", "help"),
    "tag": _leaves(REF, "delete", "rm", "ls", "list", "help"),
})

_ORAS_VALUES = {
    "-u", "--username", "-p", "--password", "--artifact-type", "-a", "--annotation",
    "--annotation-file", "--config", "--platform", "--format", "-o", "--output",
    "--registry-config", "--ca-file", "--cert-file", "--key-file", "--resolve",
    "--from-username", "--from-password", "--to-username", "--to-password",
    "--from-registry-config", "--to-registry-config", "--distribution-spec", "-r",
    "--concurrency", "--media-type", "--descriptor", "--last", "--depth",
    "--export-manifest", "--template", "--header", "-H", "--identity-token"}
ORAS = Tool(frozenset(_ORAS_VALUES), {
    **_leaves(REF, "attach", "copy", "cp", "discover", "pull", "push", "resolve", "tag",
              "backup", "restore"),
    **_leaves(ANY, "completion", "help", "login", "logout", "version"),
    "blob": _leaves(REF, "delete", "fetch", "push", "help"),
    "manifest": {**_leaves(REF, "delete", "fetch", "fetch-config", "push", "help"),
                 "index": _leaves(REF, "create", "update", "help")},
    "repo": _leaves(REF, "ls", "list", "tags", "show-tags", "help"),
})

_GH_VALUES = {"-R", "--repo", "-t", "--title", "-b", "--body", "-F", "--field", "-f",
              "--raw-field", "-H", "--header", "-X", "--method", "-q", "--jq", "--template",
              "-L", "--limit", "--json", "-B", "--base", "--head", "-n", "--notes",
              "--notes-file", "--target", "-a", "--assignee", "-l", "--label", "-m",
              "--milestone", "--hostname", "-w", "--workflow", "-u", "--user", "-s",
              "--status", "-e", "--env", "--org", "-o", "--output", "--branch", "--key",
              "--ref", "--owner"}
GH = Tool(frozenset(_GH_VALUES), {
    **_leaves(ANY, "api", "browse", "completion", "help", "status", "co", "version"),
    "alias": _leaves(ANY, "delete", "import", "list", "set", "help"),
    "attestation": _leaves(ANY, "download", "inspect", "trusted-root", "verify", "help"),
    "auth": _leaves(ANY, "login", "logout", "refresh", "setup-git", "status", "switch",
                    "token", "help"),
    "cache": _leaves(ANY, "delete", "list", "help"),
    "codespace": ANY, "extension": ANY, "gist": ANY, "gpg-key": ANY, "ssh-key": ANY,
    "org": ANY, "project": ANY, "ruleset": ANY, "search": ANY, "config": ANY,
    "issue": _leaves(ANY, "close", "comment", "create", "delete", "develop", "edit", "list",
                     "lock", "pin", "reopen", "status", "transfer", "unlock", "unpin", "view",
                     "help"),
    "label": _leaves(ANY, "clone", "create", "delete", "edit", "list", "help"),
    "pr": _leaves(ANY, "checkout", "checks", "close", "comment", "create", "diff", "edit",
                  "list", "lock", "merge", "ready", "reopen", "revert", "review", "status",
                  "unlock", "update-branch", "view", "help"),
    "release": _leaves(ANY, "create", "delete", "delete-asset", "download", "edit", "list",
                       "upload", "view", "verify", "verify-asset", "help"),
    "repo": _leaves(ANY, "archive", "autolink", "clone", "create", "delete", "deploy-key",
                    "edit", "fork", "gitignore", "license", "list", "rename", "set-default",
                    "sync", "unarchive", "view", "help"),
    "run": _leaves(ANY, "cancel", "delete", "download", "list", "rerun", "view", "watch",
                   "help"),
    "secret": _leaves(ANY, "delete", "list", "set", "help"),
    "variable": _leaves(ANY, "delete", "get", "list", "set", "help"),
    "workflow": _leaves(ANY, "disable", "enable", "list", "run", "view", "help"),
}, open_top=True)

TOOLS: dict[str, Tool] = {"crane": CRANE, "skopeo": SKOPEO, "docker": DOCKER,
                          "regctl": REGCTL, "oras": ORAS, "gh": GH}
# Words that are a subcommand of some tool: one of them where an image reference is
# expected (`crane tag delete REF`) is a subcommand the leaf does not have.
VERBS = {"delete", "rm", "remove", "del", "ls", "list", "create", "add", "get", "set",
         "show", "update", "prune", "untag", "inspect", "copy", "cp", "push", "pull"}


class ToolCall:
    __slots__ = ("kind", "operands", "parent", "path", "tool", "unknown")

    def __init__(self, tool: str, path: list[Word], operands: list[Word], kind: str,
                 unknown: Word | None = None, parent: str = "") -> None:
        self.tool = tool
        self.path = path  # the subcommand words, in order
        self.operands = operands  # the leaf's operands (option values skipped)
        self.kind = kind  # REF, ANY, or "" when the path stops at a command group
        self.unknown = unknown  # the word that is not a subcommand where one is expected
        self.parent = parent  # the command the unknown word was given to

    @property
    def sub(self) -> str:
        return " ".join(w.value for w in self.path)

    def refs(self) -> list[Word]:
        """The image references this call names (nothing unless the leaf takes them)."""
        return self.operands if self.kind == REF else []


def tool_call(cmd: Command) -> ToolCall | None:
    """``cmd`` read as a call of a well-known image tool, or None for any other command."""
    tool = TOOLS.get(cmd.name)
    if tool is None:
        return None
    node: Tree | str = tool.tree
    call = ToolCall(cmd.name, [], [], "")
    skip = False
    for w in cmd.args:
        v = w.value
        if skip:
            skip = False
            continue
        if v == "--":
            continue
        if v.startswith("-") and len(v) > 1:
            skip = "=" not in v and v in tool.value_options
            continue
        if isinstance(node, dict):
            nxt = node.get(v)
            if nxt is None:
                if "$" in v or "${{" in w.text:
                    return None  # a subcommand from a variable: unknown to lint
                if not (tool.open_top and not call.path):
                    call.unknown = w
                    call.parent = " ".join([cmd.name, *(p.value for p in call.path)])
                return call
            call.path.append(w)
            node = nxt
            if isinstance(node, str):
                call.kind = node
            continue
        call.operands.append(w)
    return call


def leaf_verb(call: ToolCall) -> Word | None:
    """A subcommand-like word given as the first operand of a leaf that takes image
    references (`crane tag delete REF`: `tag` has no subcommands)."""
    if call.kind == REF and call.operands and call.operands[0].value in VERBS and len(
            call.operands) >= 2:
        return call.operands[0]
    return None


DOCKER_BUILDS = {"build", "buildx build", "buildx b", "builder build", "image build"}


def is_docker_build(cmd: Command) -> bool:
    """`docker build`, `docker buildx build` (and their aliases), read as docker reads them:
    `docker login --username build` is not a build."""
    call = tool_call(cmd)
    return call is not None and call.tool == "docker" and call.sub in DOCKER_BUILDS
