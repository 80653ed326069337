"""Schemas (pydantic) and validation of everything a user writes: estimator arguments, distribution, job files."""
