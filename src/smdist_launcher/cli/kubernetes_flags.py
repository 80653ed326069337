"""The `--backend kubernetes` flags of `smdist run` and `smdist submit`: each one a field of the backend's options
(backends/kubernetes/options.py, which checks the values), so both commands spell and route them alike."""
from __future__ import annotations

import argparse
from typing import Any

# backends.kubernetes.options.FLAVOURS (not imported: building the parser stays light; a test keeps them equal)
FLAVOURS = ("trainjob", "jobset", "hyperpod", "job")
FLAGS = ("flavour", "namespace", "image", "service_account", "kubeconfig", "context")


def add_kubernetes_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("with --backend kubernetes")
    group.add_argument("--flavour", choices=FLAVOURS,
                       help="the objects created: trainjob (Kubeflow Trainer v2, default), jobset, hyperpod "
                            "(HyperPodPyTorchJob) or job (Indexed Job + headless Service)")
    group.add_argument("--namespace", help="the namespace (default: default)")
    group.add_argument("--image", help="the smdist image the pods run (smdist image build --push URI)")
    group.add_argument("--service-account", metavar="NAME", help="the pods' service account (S3 access: IRSA)")
    group.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config, else in-cluster")
    group.add_argument("--context", help="the kubeconfig context (default: its current-context)")


def kubernetes_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The kubernetes options the flags set (the backend's Options model validates them)."""
    return {k: getattr(args, k) for k in FLAGS if getattr(args, k, None) is not None}


def refuse_kubernetes_flags(args: argparse.Namespace) -> None:
    """ValueError naming the kubernetes flags given to another backend."""
    chosen = kubernetes_flags(args)
    if chosen:
        raise ValueError(", ".join("--" + k.replace("_", "-") for k in chosen) + ": only used with --backend "
                         "kubernetes")
