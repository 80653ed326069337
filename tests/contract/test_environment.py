import json

from smdist_launcher.contract import MLPaths, build_training_env, encode_env_value, training_environment

RC = {"current_group_name": "homogeneousCluster", "current_host": "algo-2", "current_instance_type": "ml.p4d.24xlarge",
      "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0",
      "instance_groups": [{"hosts": ["algo-1", "algo-2"], "instance_group_name": "homogeneousCluster",
                           "instance_type": "ml.p4d.24xlarge"}]}
HPS = {"epochs": "2", "learning-rate": "0.001", "mp_parameters": '{"partitions": 2}', "name": '"run $(rm -rf /)"',
       "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/job/source/sourcedir.tar.gz"',
       "sagemaker_region": '"us-west-2"', "sagemaker_job_name": '"job"', "sagemaker_container_log_level": "20",
       "sagemaker_mpi_enabled": "true", "sagemaker_instance_type": '"ml.p4d.24xlarge"'}
IDC = {"train": {"TrainingInputMode": "File"}, "test": {"TrainingInputMode": "File"}}


def _env(**kw):
    return build_training_env(MLPaths("/opt/ml"), RC, HPS, IDC, num_gpus=8, num_cpus=96, **kw)


def test_encoding_rules():
    assert encode_env_value("s") == "s"
    assert encode_env_value(None) == ""
    assert encode_env_value(True) == "true"
    assert encode_env_value({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_sm_variables_by_value():
    env = _env()
    assert env["SM_HOSTS"] == '["algo-1","algo-2"]'
    assert env["SM_CURRENT_HOST"] == "algo-2" and env["CURRENT_HOST"] == "algo-2"
    assert env["SM_CURRENT_INSTANCE_TYPE"] == "ml.p4d.24xlarge"
    assert env["SM_CURRENT_INSTANCE_GROUP"] == "homogeneousCluster"
    assert env["SM_CURRENT_INSTANCE_GROUP_HOSTS"] == '["algo-1","algo-2"]'
    assert env["SM_INSTANCE_GROUPS"] == '["homogeneousCluster"]'
    assert json.loads(env["SM_INSTANCE_GROUPS_DICT"])["homogeneousCluster"]["hosts"] == ["algo-1", "algo-2"]
    assert env["SM_DISTRIBUTION_INSTANCE_GROUPS"] == '["homogeneousCluster"]'
    assert env["SM_IS_HETERO"] == "false"
    assert env["SM_NETWORK_INTERFACE_NAME"] == "eth0"
    assert json.loads(env["SM_HPS"]) == {"epochs": 2, "learning-rate": 0.001, "mp_parameters": {"partitions": 2},
                                         "name": "run $(rm -rf /)"}
    assert env["SM_HP_EPOCHS"] == "2"
    assert env["SM_HP_LEARNING-RATE"] == "0.001"  # hyphen kept, like the toolkit
    assert env["SM_HP_MP_PARAMETERS"] == '{"partitions":2}'
    assert env["SM_HP_NAME"] == "run $(rm -rf /)"  # a value, never evaluated
    assert json.loads(env["SM_USER_ARGS"]) == ["--epochs", "2", "--learning-rate", "0.001", "--mp_parameters",
                                               "partitions=2", "--name", "run $(rm -rf /)"]
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {"sagemaker_instance_type": "ml.p4d.24xlarge",
                                                      "sagemaker_mpi_enabled": True}
    assert env["SM_USER_ENTRY_POINT"] == "train.py" and env["SM_MODULE_NAME"] == "train"
    assert env["SM_MODULE_DIR"] == "s3://b/job/source/sourcedir.tar.gz"
    assert env["SM_FRAMEWORK_MODULE"] == "" and env["SM_LOG_LEVEL"] == "20"
    assert env["SM_CHANNELS"] == '["test","train"]'
    assert env["SM_CHANNEL_TRAIN"] == "/opt/ml/input/data/train"
    assert env["SM_INPUT_DIR"] == "/opt/ml/input" and env["SM_INPUT_CONFIG_DIR"] == "/opt/ml/input/config"
    assert json.loads(env["SM_INPUT_DATA_CONFIG"]) == IDC and json.loads(env["SM_RESOURCE_CONFIG"]) == RC
    assert env["SM_MODEL_DIR"] == "/opt/ml/model" and env["SM_OUTPUT_DIR"] == "/opt/ml/output"
    assert env["SM_OUTPUT_DATA_DIR"] == "/opt/ml/output/data"
    assert env["SM_OUTPUT_INTERMEDIATE_DIR"] == "/opt/ml/output/intermediate"
    assert (env["SM_NUM_GPUS"], env["SM_NUM_CPUS"], env["SM_NUM_NEURONS"]) == ("8", "96", "0")
    assert env["SAGEMAKER_JOB_NAME"] == env["TRAINING_JOB_NAME"] == "job"
    assert env["SAGEMAKER_REGION"] == "us-west-2"
    assert "SM_TOPOLOGY" not in env


def test_training_env_properties():
    te = json.loads(_env()["SM_TRAINING_ENV"])
    assert te["is_master"] is False and te["master_hostname"] == "algo-1"
    assert te["distribution_hosts"] == ["algo-1", "algo-2"]
    assert te["job_name"] == "job" and te["is_modelparallel_enabled"] is True
    assert te["channel_input_dirs"] == {"test": "/opt/ml/input/data/test", "train": "/opt/ml/input/data/train"}
    for key in ("additional_framework_parameters", "is_smddprun_installed", "is_smddpmprun_installed",
                "output_data_dir", "hyperparameters", "module_dir", "num_gpus"):
        assert key in te


def test_master_is_first_distribution_host_not_algo_1():
    rc = {**RC, "instance_groups": [{**RC["instance_groups"][0], "hosts": ["algo-2", "algo-1"]}]}
    te = training_environment(MLPaths("/opt/ml"), rc, HPS, IDC, num_gpus=0, num_cpus=1)
    assert te["master_hostname"] == "algo-2" and te["is_master"] is True


def test_no_distribution_flag_means_no_distribution_hosts():
    hps = {k: v for k, v in HPS.items() if k != "sagemaker_mpi_enabled"}
    te = training_environment(MLPaths("/opt/ml"), RC, hps, IDC, num_gpus=0, num_cpus=1)
    assert te["distribution_hosts"] == [] and te["master_hostname"] == "algo-1"


def test_topology_passed_through():
    env = build_training_env(MLPaths("/r"), {**RC, "topology": [{"hostName": "algo-1"}]}, {}, {}, num_gpus=0,
                             num_cpus=1)
    assert env["SM_TOPOLOGY"] == '[{"hostName":"algo-1"}]'
    assert env["SM_MODEL_DIR"] == "/r/model"


def test_module_dir_is_the_s3_archive_or_the_code_dir():
    """The toolkit reports sagemaker_submit_directory: on SageMaker the S3 URI; under the SDK's local mode
    "/opt/ml/code" (the SDK rewrites a local source to the dir it mounts it on). A local source given as the plan
    carries it ("src", an absolute folder) was staged into the code dir too."""
    for submit in ("src", "/home/me/src", "file:///home/me/src", "/opt/ml/code", None):
        hps = {**HPS, "sagemaker_submit_directory": json.dumps(submit)}
        assert build_training_env(MLPaths("/opt/ml"), RC, hps, IDC, num_gpus=0, num_cpus=1)["SM_MODULE_DIR"] == \
            "/opt/ml/code", submit
        te = training_environment(MLPaths("/r"), RC, hps, IDC, num_gpus=0, num_cpus=1)
        assert te["module_dir"] == "/r/code", submit
    hps = {**HPS, "sagemaker_submit_directory": '"s3://b/job/source/sourcedir.tar.gz"'}
    assert training_environment(MLPaths("/r"), RC, hps, IDC, num_gpus=0, num_cpus=1)["module_dir"] == \
        "s3://b/job/source/sourcedir.tar.gz"
