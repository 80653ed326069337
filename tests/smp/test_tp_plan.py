"""TP plan inference from module names (pure: models on the meta device)."""
from __future__ import annotations

import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel

from smdist_launcher.smp.reference_models import GPT, GPTConfig
from smdist_launcher.smp.tp_plan import divide_head_counts, find_blocks, infer_plan, linear_stack_plan


def gpt() -> GPT:
    with torch.device("meta"):
        return GPT(GPTConfig(dim=32, n_layers=2, n_heads=4, vocab_size=64))


def test_gpt_plan_with_sequence_parallel() -> None:
    plan = infer_plan(gpt())
    styles = plan.describe()
    assert plan.sequence_parallel and plan.blocks == ["layers.0", "layers.1"]
    for name in ("wq", "wk", "wv"):
        assert isinstance(plan.styles[f"layers.0.attention.{name}"], ColwiseParallel)
    assert isinstance(plan.styles["layers.1.attention.wo"], RowwiseParallel)
    assert isinstance(plan.styles["layers.1.feed_forward.w1"], ColwiseParallel)
    assert isinstance(plan.styles["layers.1.feed_forward.w2"], RowwiseParallel)
    assert isinstance(plan.styles["layers.0.attention_norm"], SequenceParallel)
    assert isinstance(plan.styles["layers.0.attention"], PrepareModuleInput)
    assert styles["tok_embeddings"] == "RowwiseParallel" and styles["norm"] == "SequenceParallel"
    assert styles["output"] == "ColwiseParallel"


def test_plan_without_sequence_parallel() -> None:
    plan = infer_plan(gpt(), sequence_parallel=False)
    assert not plan.sequence_parallel
    assert "layers.0.attention_norm" not in plan.styles and "tok_embeddings" not in plan.styles


class LlamaLikeBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn = nn.Module()
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.self_attn, n, nn.Linear(8, 8))
        self.self_attn.num_heads = 4
        self.mlp = nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj, self.mlp.down_proj = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 8)


def test_hf_llama_names_without_embedding_skip_sequence_parallel() -> None:
    model = nn.Module()
    model.layers = nn.ModuleList([LlamaLikeBlock()])
    plan = infer_plan(model)
    assert not plan.sequence_parallel
    assert plan.describe() == {
        "layers.0.self_attn.q_proj": "ColwiseParallel", "layers.0.self_attn.k_proj": "ColwiseParallel",
        "layers.0.self_attn.v_proj": "ColwiseParallel", "layers.0.self_attn.o_proj": "RowwiseParallel",
        "layers.0.mlp.gate_proj": "ColwiseParallel", "layers.0.mlp.up_proj": "ColwiseParallel",
        "layers.0.mlp.down_proj": "RowwiseParallel"}
    divide_head_counts(model, plan.attention_modules, 2)
    assert model.layers[0].self_attn.num_heads == 2


def test_fused_unknown_projections_stay_replicated() -> None:
    block = nn.Module()
    block.attn = nn.Module()
    block.attn.c_attn = nn.Linear(8, 24)  # GPT-2's fused qkv: colwise would split q/k/v unevenly
    block.attn.c_proj = nn.Linear(8, 8)
    block.mlp = nn.Module()
    block.mlp.c_fc, block.mlp.c_proj = nn.Linear(8, 32), nn.Linear(32, 8)
    root = nn.Module()
    root.h = nn.ModuleList([block])
    plan = infer_plan(root)
    assert find_blocks(root) == ["h.0"]
    assert set(plan.styles) == {"h.0.mlp.c_fc", "h.0.mlp.c_proj"}


def test_linear_stack_pairs_chained_layers() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.Linear(8, 4), nn.Linear(5, 2))
    styles = {k: type(v).__name__ for k, v in linear_stack_plan(model).items()}
    assert styles == {"0": "ColwiseParallel", "2": "RowwiseParallel"}
    assert infer_plan(model).describe() == styles


def test_hf_causal_lm_gets_sequence_parallelism_with_its_nested_final_norm() -> None:
    """Hugging Face keeps the embedding, the blocks and the final norm under the base model (model.norm,
    gpt_neox.final_layer_norm) and the head at the top: sequence parallelism must find that norm."""
    base = nn.Module()
    base.embed_tokens = nn.Embedding(64, 8)
    base.layers = nn.ModuleList([LlamaLikeBlock(), LlamaLikeBlock()])
    for block in base.layers:
        block.input_layernorm, block.post_attention_layernorm = nn.LayerNorm(8), nn.LayerNorm(8)
    base.norm = nn.LayerNorm(8)
    model = nn.Module()
    model.model = base
    model.lm_head = nn.Linear(8, 64)
    plan = infer_plan(model)
    assert plan.sequence_parallel and plan.blocks == ["model.layers.0", "model.layers.1"]
    styles = plan.describe()
    assert styles["model.norm"] == "SequenceParallel" and styles["model.layers.1.input_layernorm"] == "SequenceParallel"
    assert styles["model.embed_tokens"] == "RowwiseParallel" and styles["lm_head"] == "ColwiseParallel"


def test_a_degree_that_would_cut_key_value_heads_is_refused_before_sharding() -> None:
    """Grouped-query attention: 4 query heads, 2 key/value heads of 2. TP 4 would give each rank half a k/v head
    (Hugging Face Llama then failed deep in its forward with a view error); TP 2 is fine."""
    import pytest

    from smdist_launcher.smp.tp_plan import check_head_split

    block = LlamaLikeBlock()
    attn = block.self_attn
    attn.head_dim = 2
    attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj = (nn.Linear(8, 8), nn.Linear(8, 4), nn.Linear(8, 4),
                                                          nn.Linear(8, 8))
    del attn.num_heads   # recent Hugging Face attention keeps only head_dim
    model = nn.Module()
    model.layers = nn.ModuleList([block])
    plan = infer_plan(model)
    check_head_split(model, plan, 2)
    with pytest.raises(ValueError, match=r"tensor_parallel_degree 4 would split attention heads: "
                                         r"layers.0.self_attn.k_proj has 2 heads of 2; layers.0.self_attn.v_proj"):
        check_head_split(model, plan, 4)
