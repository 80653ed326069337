"""The execution role's ARN: a role name is looked up with IAM GetRole, so a role under a path keeps it
(role/service-role/AmazonSageMaker-ExecutionRole-...), as the SageMaker SDK's expand_role does."""
from __future__ import annotations

from typing import Any

from ...errors import ValidationError
from ...jobspec.error_items import item
from .locations import role_arn


def resolve_role(iam: Any, role: str, account: str, partition: str = "aws") -> str:
    """The ARN of `role` (an ARN is returned as is). A name IAM does not know is an error naming `role`; when IAM
    cannot be asked (no iam:GetRole permission) the ARN is built from the name, like before the lookup existed."""
    if role.startswith("arn:"):
        return role
    from botocore.exceptions import ClientError

    try:
        return iam.get_role(RoleName=role)["Role"]["Arn"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchEntity":
            raise ValidationError([item("role", f"no IAM role named {role!r} in account {account}; give an existing "
                                                "role name or its ARN (arn:aws:iam::<account>:role/<path>/<name>)",
                                        role)]) from None
        if code in ("AccessDenied", "AccessDeniedException"):
            return role_arn(role, account, partition)
        raise
