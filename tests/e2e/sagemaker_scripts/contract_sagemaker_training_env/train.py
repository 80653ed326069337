"""Reads the job through the training toolkit's own package, as framework scripts and entry points do:
sagemaker_training.environment.Environment() must describe THIS host of THIS job (not /opt/ml of the machine)."""
import json
import os
import shutil

from sagemaker_training import environment

env = environment.Environment()
rank = int(os.environ["RANK"])  # torchrun's; no process group needed to read the job

assert env.hosts == ["algo-1", "algo-2"], env.hosts
assert env.current_host == os.environ["SM_CURRENT_HOST"], (env.current_host, os.environ["SM_CURRENT_HOST"])
assert env.master_hostname == "algo-1" and env.is_master == (env.current_host == "algo-1")
assert env.hyperparameters == {"epochs": 2, "learning-rate": 0.05, "optimizer": "sgd"}, env.hyperparameters
assert sorted(env.channel_input_dirs) == ["training"], env.channel_input_dirs
assert os.listdir(env.channel_input_dirs["training"]) == ["train.csv"]
assert env.model_dir == os.environ["SM_MODEL_DIR"], (env.model_dir, os.environ["SM_MODEL_DIR"])
assert env.output_data_dir == os.environ["SM_OUTPUT_DATA_DIR"]
if shutil.which("nvidia-smi") is None:  # the toolkit counts GPUs with nvidia-smi, whatever the instance type
    assert env.num_gpus == int(os.environ["SM_NUM_GPUS"]) == 0, env.num_gpus
# The toolkit's own rendering of the environment agrees with what the script was started with.
mine = env.to_env_vars()
for key in ("SM_HOSTS", "SM_CURRENT_HOST", "SM_HPS", "SM_CHANNELS", "SM_CHANNEL_TRAINING", "SM_MODEL_DIR",
            "SM_OUTPUT_DATA_DIR", "SM_INPUT_DIR", "SM_INPUT_CONFIG_DIR", "SM_OUTPUT_DIR", "SM_HP_EPOCHS",
            "SM_HP_LEARNING-RATE", "SM_USER_ENTRY_POINT", "SM_RESOURCE_CONFIG", "SM_INPUT_DATA_CONFIG",
            "SM_CURRENT_INSTANCE_GROUP", "SM_NETWORK_INTERFACE_NAME"):
    assert mine[key] == os.environ[key], (key, mine[key], os.environ[key])

with open(os.path.join(env.model_dir, f"env-{env.current_host}-rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "current_host": env.current_host, "hosts": env.hosts, "model_dir": env.model_dir,
               "channel_input_dirs": env.channel_input_dirs, "hyperparameters": env.hyperparameters,
               "num_gpus": env.num_gpus, "is_master": env.is_master}, f)
print(f"rank {rank}: sagemaker_training sees host {env.current_host} of {env.hosts}", flush=True)
