"""Minimal parameter-server script: TF_CONFIG (set per host by the launcher) says which task this process is."""
import json
import os

config = json.loads(os.environ.get("TF_CONFIG", "{}"))
print(f"task {config.get('task')} in cluster {config.get('cluster')}")
