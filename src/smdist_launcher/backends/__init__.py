"""Backends run a LaunchPlan: `local` on this machine with simulated hosts, `sagemaker` on Amazon SageMaker."""
