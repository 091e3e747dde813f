"""An image's steps run where each says (`at`): before the toolkit, before the components,
or after them (the default, where steps always ran)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from cannery.catalog.models import Stage
from cannery.plan import StepSpec
from cannery.render.dockerfile import render_dockerfile
from tests.unit.test_render_steps import _spec


def _order(text: str, *needles: str) -> list[int]:
    return [text.index(n) for n in needles]


def test_each_place_renders_between_its_neighbours() -> None:
    spec = _spec()
    assert spec.toolkit is not None and spec.components
    steps = (StepSpec("run", ("echo early",), "before-toolkit"),
             StepSpec("run", ("echo middle",), "before-components"),
             StepSpec("run", ("echo late",)))
    text = render_dockerfile(dataclasses.replace(spec, steps=steps))
    toolkit = text.index("set_env.sh")
    component = text.index(f"io.cannery.component.{spec.components[0].name}")
    first_comp_run = text.index(spec.components[0].name, toolkit)
    early, middle, late = _order(text, "RUN echo early", "RUN echo middle", "RUN echo late")
    assert early < toolkit < middle < first_comp_run < late < component
    assert "A catalog `run` step, before the toolkit" in text
    assert "A catalog `run` step, before the components" in text


def test_the_default_place_renders_as_before() -> None:
    spec = _spec()
    plain = dataclasses.replace(spec, steps=(StepSpec("ldconfig", ()),))
    assert "refreshed after the installs" in render_dockerfile(plain)
    early = dataclasses.replace(spec, steps=(StepSpec("ldconfig", (), "before-toolkit"),))
    assert "refreshed before the toolkit" in render_dockerfile(early)


def test_a_builder_stage_step_with_a_place_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"steps\[0\]\.at: a builder stage's steps"):
        Stage.model_validate({"name": "b", "steps": [{"run": "make", "at": "before-toolkit"}],
                              "outputs": ["/opt/x"]})
