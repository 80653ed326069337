"""SMP v2's public module layout (the import paths AWS scripts use) and its small helpers, in one process."""
from __future__ import annotations

import importlib
import os

import pytest
import torch
import torch.nn.functional as F

from smdist_launcher.compat.aliases import install
from smdist_launcher.smp.mesh import MeshLayout
from smdist_launcher.smp.state import Ranker

PATHS = ["torch.sagemaker", "torch.sagemaker.checkpoint.utils",
         "torch.sagemaker.distributed.checkpoint.state_dict_saver",
         "torch.sagemaker.distributed.checkpoint.state_dict_loader",
         "torch.sagemaker.distributed.checkpoint.filesystem",
         "torch.sagemaker.distributed.fsdp.checkpoint", "torch.sagemaker.delayed_param", "torch.sagemaker.grad_norm",
         "torch.sagemaker.logger", "torch.sagemaker.utils.utils", "torch.sagemaker.utils.process_group_utils",
         "torch.sagemaker.nn.attn", "torch.sagemaker.tensor_parallel.transformer", "torch.sagemaker.moe.moe_config",
         "torch.sagemaker.distributed.checkpoint.state_dict_utils",
         "torch.sagemaker.distributed.checkpoint.s3_filesystem",
         "torch.sagemaker.nn.huggingface.llama_flashattn"]


@pytest.mark.parametrize("path", PATHS)
def test_aws_import_paths(path: str) -> None:
    install()
    assert importlib.import_module(path).__name__.startswith("smdist_launcher.smp")


def test_ranker_coordinates() -> None:
    r = Ranker(MeshLayout(replicate=2, shard=2, tp=2))  # 8 ranks, TP innermost
    assert r.get_rep_groups() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [r.get_rep_rank(i) for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [r.get_shard_rank(i) for i in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert [r.get_tp_rank(i) for i in range(8)] == [0, 1] * 4
    assert [r.get_dp_rank(i) for i in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(r.get_rank(r.get_rep_rank(i), r.get_shard_rank(i), r.get_tp_rank(i)) == i for i in range(8))


def test_limit_num_subdirs(tmp_path) -> None:
    from smdist_launcher.smp.checkpoint import utils
    for name in ("gpt-10steps", "gpt-2steps", "gpt-30steps", "other"):
        (tmp_path / name).mkdir()
    removed = utils.limit_num_subdirs(tmp_path, 2, sort_fn=utils.SORT_BY_LAST_INT, regex=r"^.*\d+steps$", log=True)
    assert removed == ["gpt-2steps"]
    assert sorted(os.listdir(tmp_path)) == ["gpt-10steps", "gpt-30steps", "other"]
    assert utils.limit_num_subdirs(tmp_path, 1, regex=r"^.*\d+steps$", log=False) == []  # not the acting rank


def test_transformer_layer_matches_blocks_found_by_transform() -> None:
    from smdist_launcher.smp.reference_models import GPT, GPTConfig
    from smdist_launcher.smp.tensor_parallel.transformer import TransformerLayer, mark_transformer_layers
    from smdist_launcher.smp.tp_plan import find_blocks
    model = GPT(GPTConfig(dim=8, n_layers=2, n_heads=2, vocab_size=16))
    assert not isinstance(model.layers[0], TransformerLayer)
    mark_transformer_layers(model, find_blocks(model))
    assert all(isinstance(layer, TransformerLayer) for layer in model.layers)
    assert not isinstance(model.norm, TransformerLayer)


def test_moe_config_checks_its_choice() -> None:
    from smdist_launcher.smp.moe.moe_config import MoEConfig
    assert MoEConfig(moe_load_balancing="aux_loss").smp_moe
    with pytest.raises(ValueError, match="moe_load_balancing"):
        MoEConfig(moe_load_balancing="round_robin")


@pytest.mark.parametrize("layout", ["b h s d", "b s h d"])
def test_flash_self_attention_layouts(layout: str) -> None:
    from smdist_launcher.smp.nn.attn import FlashSelfAttention
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))  # b h s d
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if layout == "b s h d":
        q, k, v, ref = (t.transpose(1, 2) for t in (q, k, v, ref))
    torch.testing.assert_close(FlashSelfAttention()((q, k, v), causal=True, layout=layout), ref)


def test_clip_grad_norm_without_sharding_is_torchs() -> None:
    from smdist_launcher.smp.grad_norm import clip_grad_norm_
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    b = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    b.load_state_dict(a.state_dict())
    x = torch.randn(3, 4)
    a(x).sum().backward()
    b(x).sum().backward()
    torch.testing.assert_close(clip_grad_norm_(a, 0.1), torch.nn.utils.clip_grad_norm_(b.parameters(), 0.1))
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)


def test_delayed_init_validation_is_a_context_manager() -> None:
    from smdist_launcher.smp.delayed_param import DelayedParamIniter
    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    initer = DelayedParamIniter(model)
    with pytest.raises(RuntimeError, match="still on the meta device"):
        with initer.validate_params_and_buffers_inited():
            pass
    with initer.validate_params_and_buffers_inited():
        initer.get_param_init_fn()(model)  # what FSDP does with param_init_fn
    assert not model.weight.is_meta
