import json

import torch


def check(job):
    model_dir = job.host_dir("algo-1") / "model"
    result = json.loads((model_dir / "result.json").read_text())
    assert len(result["losses"]) == 3 and result["max_weight_diff"] < 1e-4, result
    hf = torch.load(model_dir / "pytorch_model.bin")
    assert hf["transformer.h.0.attn.c_attn.weight"].shape == (16, 48) and "lm_head.weight" in hf
