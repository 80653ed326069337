"""A job's time series: training metrics parsed from the ranks' output (SageMaker's metric_definitions) and system
metrics sampled per host, kept in `<job folder>/metrics.jsonl`. Runtime layer, stdlib only at import (psutil and NVML
are imported by the sampler when it starts), so it runs in our image and on GPU nodes without the SDK's deps."""
