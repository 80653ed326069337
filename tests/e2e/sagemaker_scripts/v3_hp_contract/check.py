import json

REQUIRES = ["omegaconf"]


def check(job):
    # the script ran to its end (it asserts everything it reads), given v3's arguments
    assert "SM_HPS -> hyperparameters:" in job.console and "Done!" in job.console
    assert "--boolean true --float 3.14 --string Hello World --list [1, 2, 3] --dict {" in job.console
    # hyperparameters.json: strings raw, the rest JSON (v2: '"Hello World"')
    sent = json.loads((job.host_dir("algo-1") / "input" / "config" / "hyperparameters.json").read_text())
    assert sent["string"] == "Hello World" and sent["boolean"] == "true" and sent["list"] == "[1, 2, 3]", sent
