"""Check what was pushed: the registry's view (index, config, labels) and a running container's
(env after the toolkit's own env script, smoke imports)."""
