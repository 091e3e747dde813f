"""What every stage starts with (FROM, the refusal of an unpinned base, the build ARGs, bash as
SHELL), and the catalog's builder stages, whose outputs alone reach the image."""

from __future__ import annotations

from cannery.plan import ImageSpec, StageSpec
from cannery.render.dockerfile.fragments import SHELL, _refuse
from cannery.render.dockerfile.packages import _bash, _install_lines
from cannery.render.dockerfile.steps import _step_list
from cannery.render.instructions import Arg, Blank, Comment, Copy, From, Instruction, Run, Shell


def _refuse_base(spec: ImageSpec) -> list[Run]:
    """A base image given by tag only could change under the build: stop before using it."""
    if spec.base_digest:
        return []
    why = f"base image {spec.base_image} has no digest"
    if spec.built_on is not None:
        why += f": build and push image {spec.built_on} first"
    return [Run([_refuse(why)[:-1]])]


def _stage_head(
    name: str, source: str, refuse: list[Run], manager: str,
    mirrors: tuple[tuple[str, str], ...] = (),
) -> list[Instruction]:
    return [
        From(source, name),
        *refuse,
        Arg("TARGETARCH"),
        Arg("SOURCE_DATE_EPOCH"),
        *_bash(manager, mirrors),
        Shell(SHELL),
    ]


def _builder_stage(spec: ImageSpec, st: StageSpec) -> list[Instruction]:
    if not st.own_base:
        refuse = _refuse_base(spec)
    elif not st.base_digest:
        refuse = [Run([_refuse(f"base image {st.base_image} of stage {st.name} has no digest")
                       [:-1]])]
    else:
        refuse = []
    body: list[Instruction] = [
        Comment(f"Builder stage {st.name}: its packages and steps stay in it; only its outputs\n"
                f"({', '.join(st.outputs)}) reach the image."),
        *_stage_head(st.name, st.base_reference if st.own_base else spec.base_reference, refuse,
                     st.package_manager, spec.package_mirrors),
    ]
    if st.packages:
        body.append(Run(
            _install_lines(st.package_manager, " ".join(st.packages), spec.package_mirrors)
        ))
    body += _step_list(st.steps)
    if body[-1] != Blank():
        body.append(Blank())
    return body


def _stage_outputs(spec: ImageSpec) -> list[Instruction]:
    out: list[Instruction] = []
    for st in spec.stages:
        out.append(Comment(f"Outputs of the builder stage {st.name}."))
        out += [Copy(path, path, st.name) for path in st.outputs]
    return [*out, Blank()] if out else []
