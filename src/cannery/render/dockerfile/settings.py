"""The running container's settings: ENTRYPOINT and CMD, its user, its runtime ENV and its
working directory."""

from __future__ import annotations

from cannery.plan import ImageSpec
from cannery.render.dockerfile.fragments import _expand
from cannery.render.instructions import (
    Blank,
    Cmd,
    Comment,
    Entrypoint,
    Env,
    Instruction,
    Run,
    Workdir,
)


def _command(spec: ImageSpec) -> list[Instruction]:
    """ENTRYPOINT and CMD, at the top of the final stage: no build step uses them, and set
    there they stay cached when a later step changes (each instruction after a changed step
    is a commit of its own in `buildah build --layers`)."""
    out: list[Instruction] = [Entrypoint(spec.entrypoint)] if spec.entrypoint else []
    return [*out, Cmd(spec.cmd)]


def runtime_env(spec: ImageSpec) -> tuple[tuple[str, str], ...]:
    """The image's own runtime ENV pairs: a value, or a path list appended to, prepended to or
    replacing what is already set (the toolkit's ENV, or the base's)."""
    # Earlier ENV instructions (the toolkit's) expand by themselves; within this one, a
    # reference to a variable it sets would see the old value, so those are substituted.
    known: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for e in spec.runtime_env:
        joined = ":".join(_expand(v, known) for v in e.values)
        var = e.name
        if e.mode == "append":
            text = f"${{{var}:+${{{var}}}:}}{joined}"
        elif e.mode == "prepend":
            text = f"{joined}${{{var}:+:${{{var}}}}}"
            if e.appended:
                text += ":" + ":".join(_expand(v, known) for v in e.appended)
        else:  # set, replace
            text = joined
            known[var] = text
        pairs.append((var, text))
    return tuple(pairs)


def _settings_head(spec: ImageSpec) -> list[Instruction]:
    """The running container's settings: set after every build step, so changing one rebuilds
    nothing before it and no build step runs with them."""
    out: list[Instruction] = []
    if spec.user:
        # Created only if the base lacks it; the same useradd on Debian and openEuler.
        out += [Comment(f"The user the container runs as ({spec.user}), created if missing."),
                Run([f"id -u {spec.user} >/dev/null 2>&1 || useradd --create-home "
                     f"--user-group {spec.user}"])]
    pairs = runtime_env(spec)
    if pairs:
        out += [Comment("Runtime environment of the image (catalog env), for the running "
                        "container."), Env(pairs)]
    if spec.workdir:
        out.append(Workdir(spec.workdir))
    if out:
        out.append(Blank())
    return out
