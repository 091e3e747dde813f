"""One rule per module. The registry (cannery.lint.registry) lists them all."""
