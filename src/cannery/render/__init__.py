"""Renderers: resolved ImageSpecs → text. Only the primitives in instructions.py know syntax."""


def dockerfile_name(image: str) -> str:
    """The file name an image's rendered Dockerfile is written under (render, the workflow's
    paths and the bake file agree on it)."""
    return f"{image}.Dockerfile"
