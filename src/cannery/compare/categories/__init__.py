"""The Dockerfile categories `compare` checks, one module each (registry: compare.dockerfile)."""
