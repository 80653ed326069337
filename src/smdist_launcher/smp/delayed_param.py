"""Delayed parameter initialization: build on the meta device, shard, then materialize only the local shards.

Mirrors SMP v2's ``torch.sagemaker.delayed_param``: ``init_empty_weights()`` to build,
``DelayedParamIniter(model).get_param_init_fn()`` for FSDP1's ``param_init_fn``, and, for FSDP2,
``materialize(model, device)`` after ``fully_shard``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
from torch import nn

InitMethod = Callable[[nn.Module], None]


@contextlib.contextmanager
def init_empty_weights(include_buffers: bool = False) -> Iterator[None]:
    """Parameters created inside have no storage (meta device). Buffers stay real unless ``include_buffers``:
    models compute some in their constructors (rotary ``inv_freq`` tables) and nothing re-creates them later."""
    if include_buffers:
        with torch.device("meta"):
            yield
        return
    original = nn.Module.register_parameter

    def register_parameter(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        original(module, name, param)
        if param is not None and not param.is_meta:
            meta = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
            meta.__dict__.update(param.__dict__)
            module._parameters[name] = meta

    nn.Module.register_parameter = register_parameter  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = original  # type: ignore[method-assign]


def _reset(module: nn.Module, init_method: InitMethod | None) -> None:
    if init_method is not None:
        init_method(module)
    elif hasattr(module, "reset_parameters"):
        cast(Any, module).reset_parameters()  # Module.__getattr__ is typed as Tensor | Module


def _direct_tensors(module: nn.Module) -> list[torch.Tensor]:
    return list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))


def _has_meta(module: nn.Module) -> bool:
    return any(t.is_meta for t in _direct_tensors(module))


def _materialize_direct(module: nn.Module, device: torch.device | str) -> None:
    """Meta tensors become uninitialized storage on ``device``; real ones (buffers built eagerly) are moved."""
    module._apply(lambda t: torch.empty_like(t, device=device) if t.is_meta else t.to(device), recurse=False)


def _default_init(model: nn.Module) -> InitMethod | None:
    # Hugging Face models initialize any of their modules (norms without reset_parameters too) with _init_weights.
    init = getattr(model, "_init_weights", None)
    return init if callable(init) else None


@torch.no_grad()
def materialize(model: nn.Module, device: torch.device | str, init_method: InitMethod | None = None) -> nn.Module:
    """Allocate (local shards of) meta parameters on ``device`` and initialize them module by module."""
    init_method = init_method or _default_init(model)
    for module in model.modules():
        had_meta = _has_meta(module)
        _materialize_direct(module, device)
        if had_meta:
            _reset(module, init_method)
    return model


class DelayedParamIniter:
    """SMP v2's delayed-initialization helper over a model built under :func:`init_empty_weights`."""

    def __init__(self, model: nn.Module, init_method_using_config: InitMethod | None = None,
                 verbose: bool = False) -> None:
        self.model = model
        self.init_method = init_method_using_config or _default_init(model)
        self.verbose = verbose
        self._tied = self._find_tied(model)

    @staticmethod
    def _find_tied(model: nn.Module) -> list[list[str]]:
        seen: dict[int, list[str]] = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            seen.setdefault(id(p), []).append(name)
        return [names for names in seen.values() if len(names) > 1]

    def get_param_init_fn(self) -> Callable[[nn.Module], None]:
        """For FSDP1's ``param_init_fn``: materialize one module's own tensors on the current device."""
        def init_fn(module: nn.Module) -> None:
            device = (torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available()
                      else torch.device("cpu"))
            for sub in module.modules():
                if _has_meta(sub):
                    _materialize_direct(sub, device)
                    with torch.no_grad():
                        _reset(sub, self.init_method)
        return init_fn

    def get_post_param_init_fn(self) -> Callable[[nn.Module], None]:
        """Re-tie weights that to_empty untied (e.g. embedding and LM head)."""
        def post(module: nn.Module) -> None:
            if hasattr(module, "tie_weights"):
                cast(Any, module).tie_weights()
        return post

    @contextlib.contextmanager
    def validate_params_and_buffers_inited(self, enabled: bool = True) -> Iterator[None]:
        """Wrap the FSDP constructor in it (as SMP scripts do): on exit, no parameter or buffer may be left on
        the meta device."""
        yield
        if not enabled:
            return
        left = [n for n, t in list(self.model.named_parameters()) + list(self.model.named_buffers()) if t.is_meta]
        if left:
            raise RuntimeError(f"smp: {len(left)} parameters/buffers are still on the meta device, e.g. {left[:3]}; "
                               "their modules need reset_parameters() or an init_method_using_config")
