from .moto_s3 import moto_endpoint, s3  # noqa: F401 - fixtures
