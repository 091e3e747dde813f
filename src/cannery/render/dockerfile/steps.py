"""The catalog's downloads and typed steps, each placed before the toolkit, before the
components or after the installs."""

from __future__ import annotations

from cannery.plan import ImageSpec, StepSpec
from cannery.render.dockerfile.fragments import _downloads_run, _finish, _q, _var
from cannery.render.instructions import Blank, Comment, Instruction, Run


def run_step_text(text: str) -> Run:
    """A catalog `run` step as the RUN it renders to (the render-time lint looks for it)."""
    return Run([text])


def _steps(spec: ImageSpec, at: str) -> list[Instruction]:
    """The image's downloads, then its steps, placed ``at`` one place, in catalog order:
    typed steps print their own command."""
    return _files(spec, at) + _step_list(tuple(s for s in spec.steps if s.at == at))


def _files(spec: ImageSpec, at: str) -> list[Instruction]:
    """Each download placed ``at`` one place: fetched, checked, then put at its path."""
    out: list[Instruction] = []
    for f in (f for f in spec.files if f.at == at):
        v = _var(f.name)
        if f.unpack:
            place = [f"mkdir -p {_q(f.path)};",
                     f"tar -xf /tmp/{v}.run -C {_q(f.path)} --no-same-owner;"]
            how = f"unpacked into {f.path}"
        else:
            mode = "0755" if f.executable else "0644"
            # -T: a path that is an existing directory fails, not gets the file inside it
            place = [f"install -D -T -m {mode} /tmp/{v}.run {_q(f.path)};"]
            how = f"placed at {f.path}" + (" (executable)" if f.executable else "")
        out += [
            Comment(f"Download {f.name}: fetched over verified TLS, checked against its sha256 "
                    f"from cannery.lock,\n{how}."
                    + (f"\nIts URL is the build secret {f.secret}, mounted for this step only."
                       if f.secret else "")),
            Run(_finish(["set -eu;", *_downloads_run(spec, f.downloads, f"download {f.name}"),
                         *place,
                         f"rm -f /tmp/{v}.run;"]),
                flags=[f"--mount=type=secret,id={f.secret},required=true"] if f.secret else []),
            Blank(),
        ]
    return out


def _step_list(steps: tuple[StepSpec, ...]) -> list[Instruction]:
    out: list[Instruction] = []
    for step in steps:
        a = step.args
        # a placed step says its place; the default keeps the words it always had
        when = {"before-toolkit": "before the toolkit",
                "before-components": "before the components"}.get(step.at, "after the installs")
        if step.kind == "uninstall":
            out += [Comment(f"Removed {when}: {', '.join(a)}."),
                    Run([f"python3 -m pip uninstall -y {' '.join(_q(n) for n in a)}"])]
        elif step.kind == "alternatives":
            out += [Comment(f"{a[0]} -> {a[2]} (update-alternatives, priority {a[3]})."),
                    Run([f"update-alternatives --install {_q(a[0])} {_q(a[1])} {_q(a[2])} {a[3]}"])]
        elif step.kind == "symlink":
            out += [Comment(f"{a[1]} -> {a[0]}."),
                    Run([f'mkdir -p "$(dirname {_q(a[1])})";', f"ln -sfn {_q(a[0])} {_q(a[1])}"])]
        elif step.kind == "ldconfig":
            out += [Comment(f"The dynamic linker cache, refreshed {when}."),
                    Run(["ldconfig"])]
        else:
            placed = "" if step.at == "after-components" else f", {when}"
            out += [Comment(f"A catalog `run` step{placed} (linted with cannery's Dockerfile "
                            "rules)."),
                    run_step_text(a[0])]
        out.append(Blank())
    return out
