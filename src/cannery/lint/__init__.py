"""cannery lint: accelerator-aware checks for hand-written Dockerfiles and image workflows.

parse → facts → rules → findings → output. Knows nothing of the catalog.
"""
