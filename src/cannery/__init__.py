"""cannery: one declarative catalog → locked, rendered, verified accelerator images."""

__version__ = "0.1.0"
