"""One rule per module. The registry (cannery.lint.ruleset) lists them all."""
