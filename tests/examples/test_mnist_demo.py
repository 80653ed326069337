"""The demo (scripts/demo.sh, examples/mnist/job_torch_distributed.yaml) shows what the product does: its job declares
metric_definitions for the loss and accuracy its script prints, and the demo ends by saying where the report is."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MNIST = ROOT / "examples" / "mnist"


def test_the_demo_job_defines_loss_and_accuracy_that_its_script_prints() -> None:
    job = yaml.safe_load((MNIST / "job_torch_distributed.yaml").read_text())
    regexes = {d["Name"]: re.compile(d["Regex"]) for d in job["metric_definitions"]}
    assert set(regexes) == {"train:loss", "test:accuracy"}
    source = (MNIST / "train.py").read_text()
    # the lines train.py prints (its f-strings, filled in as a run fills them)
    assert 'f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f}"' in source
    assert 'f"test accuracy {correct / len(test_set):.4f}"' in source
    assert float(regexes["train:loss"].search("epoch 1 step 10/32 loss 1.7467").group(1)) == 1.7467
    assert float(regexes["test:accuracy"].search("test accuracy 0.9404").group(1)) == 0.9404
    # the epoch summary line is no point of the curve
    assert regexes["train:loss"].search("epoch 1: loss 2.3321 -> 0.7055 (13.5 s)") is None


def test_the_demo_ends_by_showing_the_report() -> None:
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert "smdist report" in demo[demo.rindex("smdist run"):]
    assert not re.search(r"^exec .*smdist run", demo, re.M)  # the run is not the last thing the demo does
