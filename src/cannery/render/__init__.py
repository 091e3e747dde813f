"""Renderers: resolved ImageSpecs → text. Only the primitives in instructions.py know syntax."""
