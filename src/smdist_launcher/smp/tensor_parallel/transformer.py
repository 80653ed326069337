"""``torch.sagemaker.tensor_parallel.transformer``: ``TransformerLayer``, the class of the blocks after
``tsm.transform``.

SMP replaces a model's blocks with its own ``TransformerLayer``; scripts then pass that class to
``transformer_auto_wrap_policy`` and to their activation-checkpointing ``check_fn``. This runtime keeps the
model's own block modules (it parallelizes them in place), so ``TransformerLayer`` is a class that
``isinstance`` answers True for every block ``tsm.transform`` found.
"""
from __future__ import annotations

from typing import Any

from torch import nn

_MARK = "_smp_transformer_layer"


class _BlockMeta(type(nn.Module)):  # type: ignore[misc]
    def __instancecheck__(cls, obj: Any) -> bool:
        return getattr(obj, _MARK, False) or super().__instancecheck__(obj)


class TransformerLayer(nn.Module, metaclass=_BlockMeta):
    """Matches (isinstance) the transformer blocks of a model passed through ``tsm.transform``."""


TETransformerLayer = TransformerLayer  # older SMP releases checkpointed this class


def mark_transformer_layers(model: nn.Module, names: list[str]) -> None:
    for name in names:
        setattr(model.get_submodule(name), _MARK, True)
