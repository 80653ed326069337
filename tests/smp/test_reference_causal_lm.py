"""The reference causal LM (the GPU check's and the benchmark's model without transformers): its output is a
pytree node whose tensors FSDP2's hooks find, as transformers' ModelOutput is."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_the_output_s_tensors_are_pytree_leaves() -> None:
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from smdist_launcher.smp.reference_causal_lm import CausalLMOutput, GPTForCausalLM
    from smdist_launcher.smp.reference_models import GPTConfig

    model = GPTForCausalLM(GPTConfig(dim=16, n_layers=1, n_heads=2, vocab_size=32))
    ids = torch.randint(0, 32, (2, 5))
    out = model(input_ids=ids, labels=ids)
    # a leaf before: FSDP2's root registered no pre-backward hook on the loss (GPU: freed weights read)
    leaves, spec = tree_flatten(out)
    assert [leaf is out.loss or leaf is out.logits for leaf in leaves] == [True, True]
    again = tree_unflatten(leaves, spec)
    assert isinstance(again, CausalLMOutput) and list(again) == ["loss", "logits"] and again.loss is out.loss
