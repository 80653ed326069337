"""Hostile or broken YAML becomes ValidationErrors with key paths, fast and in little memory."""
from __future__ import annotations

import pytest

from smdist_launcher.spec import safe_yaml
from smdist_launcher.spec.safe_yaml import YamlLimitError


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
    ("instance_count: !!int abc\n", "instance_count", "'abc' is not an integer (tagged int)"),
    ("max_run: !!float xyz\n", "max_run", "'xyz' is not a number (tagged float)"),
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
