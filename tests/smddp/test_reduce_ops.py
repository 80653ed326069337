"""AVG emulation and op naming used by the CPU (gloo) path."""
from __future__ import annotations

import torch
import torch.distributed as dist

from smdist_launcher.smddp.reduce_ops import divide_in_place, is_op, op_name, with_sum


def test_op_names() -> None:
    assert [op_name(getattr(dist.ReduceOp, n)) for n in ("SUM", "AVG", "MAX", "MIN", "PRODUCT")] == [
        "sum", "avg", "max", "min", "product",
    ]
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    assert is_op(opts, dist.ReduceOp.AVG) and op_name(opts) == "avg"


def test_divide_truncates_integers_like_nccl_and_divides_floats() -> None:
    ints = torch.tensor([7, -7, 8], dtype=torch.int32)
    floats = torch.tensor([1.0, 3.0], dtype=torch.bfloat16)
    divide_in_place([ints, floats], 2)
    assert ints.tolist() == [3, -3, 4]
    assert floats.tolist() == [0.5, 1.5]


def test_with_sum_keeps_the_root() -> None:
    opts = dist.ReduceOptions()
    opts.rootRank = 3
    opts.reduceOp = dist.ReduceOp.AVG
    new = with_sum(opts, dist.ReduceOptions)
    assert new.rootRank == 3 and is_op(new, dist.ReduceOp.SUM)
