"""What a user may tell the Kubernetes backend: the one schema for `fit(backend="kubernetes", kubernetes={...})`,
`smdist ... --backend kubernetes --flavour F` and `smdist plan --dryrun --backend kubernetes`."""
from __future__ import annotations

import re
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

Flavour = Literal["trainjob", "jobset", "hyperpod", "job"]
FLAVOURS: tuple[str, ...] = ("trainjob", "jobset", "hyperpod", "job")
DEFAULT_IMAGE = "smdist:latest"   # `smdist image build` tags this; a cluster needs the pushed URI (--push)

# RFC 1123 labels/subdomains: what namespaces, service accounts and secret names must be (Kubernetes' own rule).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A resource quantity (apimachinery's resource.Quantity: a number, then a binary/decimal suffix or an exponent), a
# label key (an optional DNS-subdomain prefix and '/', then a name) and a label value: the API server's own rules.
_QUANTITY = re.compile(r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


class Toleration(BaseModel):
    """A pod toleration (core/v1 Toleration): copied as is into every pod."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

    def manifest(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_none=True)


class KubernetesOptions(BaseModel):
    """The backend's typed options. Resources per node default from the instance catalog (GPUs of the type)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flavour: Flavour = Field(default="trainjob", description="trainjob (Kubeflow Trainer v2), jobset, hyperpod "
                             "(SageMaker HyperPod PyTorchJob) or job (an Indexed batch/v1 Job)")
    namespace: str = Field(default="default", description="the namespace the objects are created in")
    image: str = Field(default=DEFAULT_IMAGE, description="the smdist image (smdist image build --push URI)")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    service_account: str | None = Field(default=None, description="the pods' serviceAccountName (S3 access: IRSA)")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    gpus_per_node: int | None = Field(default=None, ge=0, le=64,
                                      description="nvidia.com/gpu per node (default: the instance type's GPUs)")
    cpu: str | None = Field(default=None, description="cpu request per node (a Kubernetes quantity)")
    memory: str | None = Field(default=None, description="memory request per node (a Kubernetes quantity)")
    efa_per_node: int | None = Field(default=None, ge=0, le=64,
                                     description="vpc.amazonaws.com/efa per node (default: none)")
    runtime: str = Field(default="torch-distributed", description="trainjob: the ClusterTrainingRuntime")
    # where the cluster is (submit/status/stop/logs only; never rendered): default $KUBECONFIG, ~/.kube/config,
    # else the in-cluster service account
    kubeconfig: str | None = Field(default=None, description="the kubeconfig file (default: $KUBECONFIG, "
                                   "~/.kube/config, else in-cluster)")
    context: str | None = Field(default=None, description="the kubeconfig context (default: its current-context)")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ValueError("must be an RFC 1123 label: at most 63 lower-case letters, digits or '-', starting "
                             "and ending with a letter or digit")
        return value

    @field_validator("service_account", "runtime")
    @classmethod
    def _subdomain(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError("must be an RFC 1123 subdomain: lower-case letters, digits, '-' and '.'")
        return value

    @field_validator("image_pull_secrets")
    @classmethod
    def _secrets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
                raise ValueError(f"{name!r} must be an RFC 1123 subdomain: lower-case letters, digits, '-' and '.'")
        return value


    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi, 1.5e9)")
        return value

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            prefix, _, name = key.rpartition("/")
            if not _LABEL_NAME.match(name) or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
                raise ValueError(f"{key!r} is not a label key ([prefix/]name: name at most 63 letters, digits, '-', "
                                 "'_' or '.', starting and ending with a letter or digit)")
            if not _LABEL_VALUE.match(label):
                raise ValueError(f"{key}: {label!r} is not a label value (at most 63 letters, digits, '-', '_' or "
                                 "'.', starting and ending with a letter or digit)")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value or any(c.isspace() or not c.isprintable() for c in value):
            raise ValueError("must be an image reference (no spaces or control characters)")
        return value


def kubernetes_options(values: dict | None = None) -> KubernetesOptions:
    """Validated options; bad values raise smdist_launcher.ValidationError with the key path (kubernetes.<key>)."""
    from ..api import validated_options

    return cast(KubernetesOptions, validated_options(KubernetesOptions, values, "kubernetes"))
