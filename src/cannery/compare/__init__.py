"""`cannery compare`: what a migration changes, category by category.

Two Dockerfiles (or two directories of them, or a catalog's rendered images against the
hand-written originals) are read through lint's parsed facts (lint/facts) and compared per
final image; two workflow files are compared per trigger. Each category is one module with a
``compare`` function (a registry lists them: dockerfile.CATEGORIES, workflow.CATEGORIES), so a
category is added, or dropped, in one place. Differences a project accepts are data
(accepted.py); everything else makes the command exit 1.
"""
