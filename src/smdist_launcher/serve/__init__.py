"""`smdist serve`: an HTTP endpoint speaking SageMaker's training-job API (and the CloudWatch Logs reads the SDK
uses), running each job on this machine (backends: process, netns, docker) and taking S3 from an S3-compatible server.

    smdist serve --port 8080 --s3-endpoint-url http://127.0.0.1:5000     # prints `export AWS_PROFILE=smdist-serve ...`
    boto3.client("sagemaker").create_training_job(...)                   # in a shell with that line applied

Every request must be signed (SigV4) with the key serve writes into the profile (auth.py).

Not imported by `import smdist_launcher` (it needs botocore's service models)."""
