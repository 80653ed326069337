"""The Kubernetes backend: the plan as a Kubeflow TrainJob, a JobSet, a HyperPod PyTorchJob or an Indexed Job.

options.py (what a user may choose), render.py (the manifests: pure), validate.py (every object checked against
the targets' schemas before anything is sent), backend.py (the Backend behind backends/api.py)."""
