"""`smdist run|submit --backend kubernetes` flags (cli/kubernetes_flags.py): each reaches the backend's options,
checked by its Options model before anything is staged or sent; given to another backend, refused by name."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.backends.kubernetes.options import FLAVOURS
from smdist_launcher.cli import kubernetes_flags
from smdist_launcher.cli.main import build_parser, main
from smdist_launcher.cli.run import backend_options


def test_the_flavours_are_the_options_ones() -> None:
    assert kubernetes_flags.FLAVOURS == FLAVOURS


def test_run_routes_the_flags_to_kubernetes() -> None:
    args = build_parser("run").parse_args(["run", "job.yaml", "--backend", "kubernetes", "--flavour", "hyperpod",
                                             "--namespace", "ml", "--image", "r/smdist:1", "--gpus-per-node", "1",
                                             "--service-account", "trainer", "--kubeconfig", "kc", "--context", "c"])
    assert backend_options(args) == {"flavour": "hyperpod", "namespace": "ml", "image": "r/smdist:1",
                                     "service_account": "trainer", "kubeconfig": "kc", "context": "c",
                                     "gpus_per_node": 1}


def test_kubernetes_flags_elsewhere_are_refused() -> None:
    args = build_parser("run").parse_args(["run", "job.yaml", "--flavour", "job", "--namespace", "ml"])
    with pytest.raises(ValueError, match="--flavour, --namespace: only used with --backend kubernetes"):
        backend_options(args)
    args = build_parser("run").parse_args(["run", "job.yaml", "--backend", "kubernetes", "--partition", "p"])
    with pytest.raises(ValueError, match="--partition: only used with --backend slurm"):
        backend_options(args)


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_bad_option_is_named_before_anything_is_sent(command: str, job_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # no cluster anywhere (the kubeconfig does not exist): the options are refused first, with their key path
    code = main([command, str(job_file), "--backend", "kubernetes", "--flavour", "jobset", "--namespace", "Bad_NS",
                 "--kubeconfig", str(tmp_path / "none"), "--jobs-dir", str(tmp_path / "jobs")])
    shown = capsys.readouterr()
    assert code == 2, shown
    assert "kubernetes.namespace" in shown.out + shown.err
    assert not (tmp_path / "jobs").exists()
