"""A container-command job: SageMaker's `AlgorithmSpecification.ContainerEntrypoint` (+ `ContainerArguments`), run
once per host as the image's entry point, with no launcher of ours deciding what runs (what SDK v3's `ModelTrainer`
sends: `/bin/bash -c ".../sm_drivers/sm_train.sh"`, whose drivers start torchrun or mpirun themselves).

Everything the job needs is in the request: the command, the cluster shape, the channels, hyperparameters as sent
(raw strings; SageMaker writes them to hyperparameters.json untouched). The plan (plan/container_command.py) shows
the command per host; the runtime (container/container_command.py) runs it in the host's own /opt/ml."""
from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field, ValidationError as PydanticValidationError, field_validator

from ..errors import ErrorItem, ValidationError
from .container_paths import checkpoint_local_path_problem, normal_container_path
from .error_items import from_pydantic, join_path
from .rules.arguments import job_name_problem, s3_uri_problem
from .strict_model import SpecModel

# The instance type of every simulated host: the request's types only name the cluster shape here.
LOCAL_TYPE = "local"


class ContainerGroup(SpecModel):
    """One of the request's InstanceGroups: its name and host count (every host of every group runs the command)."""

    name: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    instance_count: int = Field(ge=1)


class ContainerCommandJob(SpecModel):
    job_name: str = Field(min_length=1, max_length=63)
    # an argv: the entry point's words, then the arguments; never joined into a shell string of ours
    entrypoint: list[str] = Field(min_length=1)
    arguments: list[str] = Field(default_factory=list)
    image: str = ""
    instance_type: str = LOCAL_TYPE
    instance_count: int = Field(default=1, ge=1)
    instance_groups: list[ContainerGroup] = Field(default_factory=list)
    hyperparameters: dict[str, str] = Field(default_factory=dict)   # hyperparameters.json, exactly as sent
    environment: dict[str, str] = Field(default_factory=dict)
    max_run: int | None = Field(default=None, ge=1)
    output_path: str | None = None
    disable_output_compression: bool | None = None   # OutputDataConfig.CompressionType NONE: outputs as folders
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None

    @field_validator("checkpoint_local_path")
    @classmethod
    def _normal_checkpoint_path(cls, value: str | None) -> str | None:
        return normal_container_path(value)

    @classmethod
    def checked(cls, **fields: object) -> ContainerCommandJob:
        """Validated, every problem as our ValidationError (key paths): the types, then the job-spec rules a v2
        request meets too (the name becomes the job's folder, the checkpoint path a folder of each host)."""
        try:
            job = cls(**fields)  # type: ignore[arg-type]
        except PydanticValidationError as exc:
            raise ValidationError(from_pydantic(exc, cls)) from None
        problems = list(job.problems())
        if problems:
            raise ValidationError(problems)
        return job

    def problems(self) -> Iterator[ErrorItem]:
        """The job-spec rules: names, URIs and paths, and no NUL where a process's argv or environment takes it."""
        problem = job_name_problem(self.job_name)
        if problem:
            yield ErrorItem("job_name", problem, self.job_name)
        for key, uri in (("output_path", self.output_path), ("checkpoint_s3_uri", self.checkpoint_s3_uri)):
            problem = s3_uri_problem(uri) if uri is not None else None
            if problem:
                yield ErrorItem(key, problem, uri)
        local = self.checkpoint_local_path
        problem = checkpoint_local_path_problem(local) if local is not None else None
        if problem:
            yield ErrorItem("checkpoint_local_path", problem, local)
        for key, words in (("entrypoint", self.entrypoint), ("arguments", self.arguments)):
            for i, word in enumerate(words):
                if "\x00" in word:
                    yield ErrorItem(join_path(key, i), "must not contain NUL characters (a process's arguments "
                                                       "cannot carry them)", word)
        for name, value in self.environment.items():
            if "\x00" in name or "\x00" in value:
                yield ErrorItem(join_path("environment", name), "must not contain NUL characters (a process's "
                                                                "environment cannot carry them)", value)

    @property
    def argv(self) -> list[str]:
        return [*self.entrypoint, *self.arguments]

    @property
    def host_count(self) -> int:
        return sum(g.instance_count for g in self.instance_groups) if self.instance_groups else self.instance_count


def refuse(key: str, message: str, *value: object) -> ValidationError:
    """One problem with a container-command request (the caller's ValidationException); `value` the offending one."""
    return ValidationError([ErrorItem(key, message, *value)])
