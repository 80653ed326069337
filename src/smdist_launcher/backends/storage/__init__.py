"""Where data comes from and goes to (s3://, file://, local paths), shared by the local and SageMaker backends."""
