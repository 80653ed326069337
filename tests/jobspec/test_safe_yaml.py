"""Hostile or broken YAML becomes ValidationErrors with key paths, fast and in little memory."""
from __future__ import annotations

import pytest

from smdist_launcher.jobspec import safe_yaml
from smdist_launcher.jobspec.safe_yaml import YamlLimitError


def alias_bomb(levels: int, width: int = 10) -> str:
    """Each level is a list of `width` aliases of the previous one: width**levels values from a few hundred bytes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "hyperparameters:\n" + "".join(f"  {line}\n" for line in lines)


def messages(text: str) -> list[tuple[str, str]]:
    with pytest.raises(YamlLimitError) as err:
        safe_yaml.load(text)
    return [(i.path, i.message) for i in err.value.items]


def test_alias_bomb_is_refused_before_anything_is_built():
    text = alias_bomb(6)  # 10**6 values; the bomb (10**9) is refused the same way
    assert len(text) < 1024
    [(path, message)] = messages(text)
    assert path == "<root>" and "expands to more than 100,000 values" in message
    assert len(alias_bomb(9)) < 1024 and messages(alias_bomb(9)) == [(path, message)]


def test_a_few_aliases_are_fine():
    data = safe_yaml.load("base: &b {lr: 0.1, epochs: 2}\nother: *b\nlist: [*b, *b]\n")
    assert data["other"] == data["list"][1] == {"lr": 0.1, "epochs": 2}
    # merge keys: the mapping's own keys override the merged ones (not duplicates)
    merged = safe_yaml.load("base: &b {lr: 0.1, epochs: 2}\nrun:\n  <<: *b\n  epochs: 5\n")
    assert merged["run"] == {"lr": 0.1, "epochs": 5}


def test_recursive_alias_is_refused():
    [(path, message)] = messages("a: &a [1, *a]\n")
    assert path == "a[1]" and "recursive" in message


def test_deep_nesting_is_refused_without_recursion_error():
    [(path, message)] = messages("hyperparameters:\n  x: " + "[" * 5000 + "]" * 5000 + "\n")
    assert path.startswith("hyperparameters.x[0][0]") and "nesting deeper than 50 levels (line 2" in message
    # ...also when the depth comes from aliases of aliases
    lines = ["a0: &a0 " + "[" * 40 + "1" + "]" * 40]
    lines += [f"a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40 for i in range(1, 30)]
    assert any("once aliases are expanded" in m for _, m in messages("\n".join(lines) + "\n"))


@pytest.mark.parametrize("text, path, needle", [
    ("instance_count: " + "9" * 5000 + "\n", "instance_count", "an integer of 5000 digits; at most 100 digits"),
    ("instance_count: !!int abc\n", "instance_count", "'abc' is not an integer (!!int)"),
    ("max_run: !!float xyz\n", "max_run", "'xyz' is not a number (!!float)"),
    ("hyperparameters:\n  steps: [1, !!int 2x]\n", "hyperparameters.steps[1]", "'2x' is not an integer"),
])
def test_bad_numbers_name_their_key_path(text, path, needle):
    [(got_path, message)] = messages(text)
    assert got_path == path and needle in message


def test_every_problem_is_reported_at_once():
    got = messages("a: !!int x\nb: !!float y\nc: " + "1" * 200 + "\n")
    assert [p for p, _ in got] == ["a", "b", "c"]


def test_huge_file_is_refused():
    [(_, message)] = messages("x: '" + "a" * (safe_yaml.MAX_FILE_BYTES + 1) + "'\n")
    assert "larger than 1024 KiB" in message


def test_duplicate_keys_are_still_invalid_yaml():
    import yaml

    with pytest.raises(yaml.YAMLError, match="duplicate key 'a'"):
        safe_yaml.load("a: 1\na: 2\n")


# Tags PyYAML cannot construct raise IndexError, KeyError, AttributeError, ... (not YAMLError): a traceback before
@pytest.mark.parametrize("text, path, needle", [
    ("instance_count: !!int\n", "instance_count", "an empty value is not an integer (!!int); write an integer "
                                                  "(e.g. !!int 2), remove the tag, or quote the value"),
    ("max_run: !!float\n", "max_run", "an empty value is not a number (!!float); write a number (e.g. !!float 0.5)"),
    ("max_run: !!float ''\n", "max_run", "an empty value is not a number (!!float)"),
    ("a:\n  b: &x !!int\n", "a.b", "an empty value is not an integer (!!int)"),
    ("debug: !!bool\n", "debug", "an empty value is not true or false (!!bool)"),
    ("debug: !!bool maybe\n", "debug", "'maybe' is not true or false (!!bool)"),
    ("when: !!timestamp soon\n", "when", "'soon' is not a date or date-time (!!timestamp)"),
    ("blob: !!binary x\n", "blob", "'x' is not base64 data (!!binary)"),
    ("steps: !!int [1, 2]\n", "steps", "tagged !!int, which needs an integer, but holds a list"),
    ("name: !!str {a: 1}\n", "name", "tagged !!str, which needs text, but holds a mapping"),
    ("steps: !!seq 3\n", "steps", "tagged !!seq, which needs a list, but holds a single value"),
    ("env: !!map x\n", "env", "tagged !!map, which needs a mapping, but holds a single value"),
    ("env: !!set x\n", "env", "tagged !!set, which needs a mapping"),
    ("env: !!omap x\n", "env", "tagged !!omap, which needs a list"),
    ("env: !foo x\n", "env", "unknown tag !foo; a job file holds plain YAML"),
    ("env: !!python/object:os.system x\n", "env", "unknown tag !!python/object:os.system"),
    ("hyperparameters: {=: 1}\n", "hyperparameters", "'=' reads as YAML's !!value key"),
    # no tag written: YAML resolved the plain value as a date, and it is not a valid one
    ("base_job_name: 2024-13-45\n", "base_job_name", "'2024-13-45' reads as a date or date-time (!!timestamp) but "
                                                      "is not a valid one; quote the value to keep it as text"),
])
def test_tags_that_cannot_be_read_name_their_key_path(text, path, needle):
    [(got_path, message)] = messages(text)
    assert got_path == path and needle in message


def test_tag_errors_carry_the_bad_value_and_come_all_at_once():
    with pytest.raises(YamlLimitError) as err:
        safe_yaml.load("a: !!int\nb: !!bool nope\nc: !!seq 1\nd: !!int 2\ne: !!str ok\n")
    assert [(i.path, i.value) for i in err.value.items] == [("a", ""), ("b", "nope"), ("c", "1")]


def test_valid_tags_still_read():
    assert safe_yaml.load("a: !!int 2\nb: !!float 1\nc: !!str 3\nd: !!bool yes\ne: !!null\nf: !!seq [1]\n"
                          "g: !!binary aGk=\nh: !!set {x}\n") == \
        {"a": 2, "b": 1.0, "c": "3", "d": True, "e": None, "f": [1], "g": b"hi", "h": {"x"}}
