"""``torch.sagemaker.distributed.checkpoint.s3_filesystem``: SMP's S3 checkpoint writer/reader. Not provided."""
raise ImportError("torch.sagemaker.distributed.checkpoint.s3_filesystem is not implemented by smdist-launcher; write "
                  "checkpoints to a local or shared path (SageMaker uploads /opt/ml/checkpoints to S3 itself)")
