"""The base of every user-facing schema: unknown keys are errors, no silent type coercion."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    # strict: "4" is not 4 and true is not 1; SageMaker users get bitten by both late (hyperparameter quoting, #4247).
    # defer_build: schemas are built on first use, keeping `from smdist_launcher import PyTorch` fast
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, defer_build=True)

    def given(self) -> set[str]:
        """Field names the user actually wrote (defaults excluded)."""
        return set(self.model_fields_set)
