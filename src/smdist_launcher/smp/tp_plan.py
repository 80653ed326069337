"""Infer a DTensor tensor-parallel plan from module names (Llama/torchtitan/NeoX/GPT-2 style) or Linear stacks.

The plan is a dict {fully-qualified module name: ParallelStyle} for ``parallelize_module``. Rules, per block:
q/k/v and MLP up/gate projections are column-parallel, attention output and MLP down projections row-parallel.
With sequence parallelism the block's norms shard the sequence dimension and the attention/MLP inputs are
all-gathered (torchtitan's Llama plan).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
)

# Names seen in HF Llama/Mistral/Qwen, torchtitan, GPT-NeoX and GPT-2-style (unfused) blocks.
COLWISE_NAMES = frozenset({"q_proj", "k_proj", "v_proj", "wq", "wk", "wv", "query", "key", "value",
                           "query_key_value", "gate_proj", "up_proj", "w1", "w3", "c_fc", "fc1", "fc_in",
                           "dense_h_to_4h"})
ROWWISE_NAMES = frozenset({"o_proj", "wo", "out_proj", "dense", "c_proj", "down_proj", "w2", "fc2", "fc_out",
                           "dense_4h_to_h"})
ATTENTION_NAMES = frozenset({"self_attn", "attention", "attn", "self_attention"})
MLP_NAMES = frozenset({"mlp", "feed_forward", "ffn", "ff"})
NORM_NAMES = frozenset({"input_layernorm", "post_attention_layernorm", "attention_norm", "ffn_norm", "ln_1", "ln_2",
                        "norm1", "norm2"})
EMBED_NAMES = frozenset({"tok_embeddings", "embed_tokens", "wte", "embed_in", "embedding", "embed"})
FINAL_NORM_NAMES = frozenset({"norm", "ln_f", "final_layer_norm", "final_layernorm", "final_norm"})
HEAD_NAMES = frozenset({"output", "lm_head", "embed_out"})
# Head counts that attention modules use in .view(); divided by the TP degree after sharding.
HEAD_COUNT_ATTRS = ("n_heads", "num_heads", "n_head", "n_kv_heads", "num_key_value_heads", "num_attention_heads",
                    "n_local_heads", "n_local_kv_heads")


@dataclass
class TPPlan:
    styles: dict[str, ParallelStyle] = field(default_factory=dict)
    attention_modules: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    sequence_parallel: bool = False

    def describe(self) -> dict[str, str]:
        return {name: type(style).__name__ for name, style in self.styles.items()}


def _children(module: nn.Module) -> dict[str, nn.Module]:
    return dict(module.named_children())


def find_blocks(model: nn.Module) -> list[str]:
    """Transformer blocks: modules with an attention child and an MLP child."""
    found = []
    for name, mod in model.named_modules():
        kids = _children(mod)
        if any(k in ATTENTION_NAMES for k in kids) and any(k in MLP_NAMES for k in kids):
            found.append(name)
    return found


def _linear_styles(prefix: str, mod: nn.Module, seq_parallel: bool) -> dict[str, ParallelStyle]:
    styles: dict[str, ParallelStyle] = {}
    for name, child in mod.named_children():
        if not isinstance(child, nn.Linear):
            continue
        if name in COLWISE_NAMES:
            styles[f"{prefix}.{name}"] = ColwiseParallel()
        elif name in ROWWISE_NAMES:
            styles[f"{prefix}.{name}"] = RowwiseParallel(output_layouts=Shard(1)) if seq_parallel else RowwiseParallel()
    return styles


def _has_pair(styles: dict[str, ParallelStyle]) -> bool:
    kinds = {type(s) for s in styles.values()}
    return ColwiseParallel in kinds and RowwiseParallel in kinds


def linear_stack_plan(model: nn.Module, prefix: str = "") -> dict[str, ParallelStyle]:
    """Plain nn.Linear stacks: pair consecutive Linears whose sizes chain (colwise then rowwise)."""
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    styles: dict[str, ParallelStyle] = {}
    i = 0
    while i + 1 < len(linears):
        (n1, a), (n2, b) = linears[i], linears[i + 1]
        if a.out_features == b.in_features:
            styles[f"{prefix}{n1}"] = ColwiseParallel()
            styles[f"{prefix}{n2}"] = RowwiseParallel()
            i += 2
        else:
            i += 1
    return styles


def infer_plan(model: nn.Module, sequence_parallel: bool = True) -> TPPlan:
    """A plan for transformer blocks if any are found, else for plain Linear stacks."""
    blocks = find_blocks(model)
    if not blocks:
        return TPPlan(styles=linear_stack_plan(model))
    top = _children(model)
    embed = next((n for n, m in model.named_modules() if n.split(".")[-1] in EMBED_NAMES
                  and isinstance(m, nn.Embedding)), None)
    head = next((n for n in top if n in HEAD_NAMES and isinstance(top[n], nn.Linear)), None)
    # The final norm outside every block, wherever it sits: Hugging Face keeps it under the base model
    # (model.norm, gpt_neox.final_layer_norm), the reference GPT at the top.
    final_norm = next((n for n, _ in model.named_modules() if n.split(".")[-1] in FINAL_NORM_NAMES
                       and not any(n == b or n.startswith(b + ".") for b in blocks)), None)
    # Sequence parallelism needs the whole residual stream under our control: embedding -> blocks -> norm -> head.
    sp = sequence_parallel and embed is not None and head is not None and final_norm is not None
    plan = TPPlan(blocks=blocks, sequence_parallel=sp)
    for block in blocks:
        bmod = model.get_submodule(block)
        for kid_name, kid in bmod.named_children():
            path = f"{block}.{kid_name}" if block else kid_name
            if kid_name in ATTENTION_NAMES or kid_name in MLP_NAMES:
                sub = _linear_styles(path, kid, sp)
                if not _has_pair(sub):
                    continue  # fused or unknown projections: leave replicated rather than shard wrongly
                plan.styles.update(sub)
                if kid_name in ATTENTION_NAMES:
                    plan.attention_modules.append(path)
                if sp:
                    plan.styles[path] = PrepareModuleInput(input_layouts=(Shard(1),),
                                                           desired_input_layouts=(Replicate(),))
            elif sp and kid_name in NORM_NAMES:
                plan.styles[path] = SequenceParallel()
    if sp and embed is not None and head is not None and final_norm is not None:  # (sp says so; for mypy)
        plan.styles[embed] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
        plan.styles[final_norm] = SequenceParallel()
        plan.styles[head] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    return plan


def check_head_split(model: nn.Module, plan: TPPlan, tp: int) -> None:
    """Refuse, before anything is sharded, a degree that would cut an attention head in two: every head count
    of an attention module, and the heads of each of its column-parallel projections (out_features / head_dim:
    grouped-query attention's k/v projections have fewer heads than q), must divide by the TP degree."""
    problems = []
    for path in plan.attention_modules:
        mod = model.get_submodule(path)
        problems += [f"{path}.{attr} = {value}" for attr, value in _head_counts(mod) if value % tp]
        head_dim = getattr(mod, "head_dim", None)
        if not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim <= 0:
            continue
        for name, child in mod.named_children():
            style = plan.styles.get(f"{path}.{name}")
            if isinstance(style, ColwiseParallel) and isinstance(child, nn.Linear) \
                    and child.out_features % head_dim == 0 and (child.out_features // head_dim) % tp:
                problems.append(f"{path}.{name} has {child.out_features // head_dim} heads of {head_dim}")
    if problems:
        raise ValueError(f"smp: tensor_parallel_degree {tp} would split attention heads: {'; '.join(problems)}. "
                         "Each rank must hold whole heads: use a degree that divides the model's number of heads "
                         "and of key/value heads (num_key_value_heads with grouped-query attention)")


def divide_head_counts(model: nn.Module, attention_modules: list[str], tp: int) -> None:
    """Attention code that reshapes with its head count must see the local (per-rank) count (check_head_split has
    refused a degree that does not divide them)."""
    for path in attention_modules:
        mod = model.get_submodule(path)
        for attr, value in _head_counts(mod):
            setattr(mod, attr, value // tp)


def _head_counts(mod: nn.Module) -> list[tuple[str, int]]:
    """The module's head-count attributes that hold a whole number."""
    return [(attr, value) for attr in HEAD_COUNT_ATTRS
            if isinstance(value := getattr(mod, attr, None), int) and not isinstance(value, bool)]
