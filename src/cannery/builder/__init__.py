"""Build, push by digest, merge into one index, then tag: plan.py plans, execute.py runs."""
