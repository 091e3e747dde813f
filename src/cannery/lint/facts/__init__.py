"""Parsed views of the files lint reads; rules only ever look at these."""
