"""``torch.sagemaker.checkpoint``: checkpoint helpers (``utils``) and this runtime's DCP save/load of a model."""
from ..dcp_io import async_save, full_model_state, load, load_model, maybe_finalize_async_calls, save, save_model
from . import utils

__all__ = ["async_save", "full_model_state", "load", "load_model", "maybe_finalize_async_calls", "save",
           "save_model", "utils"]
