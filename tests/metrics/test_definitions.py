from __future__ import annotations

from smdist_launcher.jobspec.estimator_args import MetricDefinition
from smdist_launcher.metrics.definitions import MAX_TIMEOUTS, MetricParser


def test_the_first_group_of_each_matching_regex_is_the_value() -> None:
    parser = MetricParser([{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"},
                           {"Name": "train:acc", "Regex": r"acc=(\S+)"},
                           {"Name": "val:loss", "Regex": "val_loss: ([0-9.]+)"}])
    assert parser.parse("epoch 1 loss: 0.25 acc=0.9") == [("train:loss", 0.25), ("train:acc", 0.9)]
    assert parser.parse("nothing to see") == []


def test_captures_that_are_not_floats_are_skipped() -> None:
    parser = MetricParser([{"Name": "acc", "Regex": r"acc=(\S+)"}, {"Name": "n", "Regex": r"n=(\S+)"}])
    assert parser.parse("acc=nan? n=3e-2") == [("n", 0.03)]
    assert parser.parse("acc=inf n=x") == []


def test_pydantic_definitions_are_taken_as_they_are() -> None:
    parser = MetricParser([MetricDefinition(Name="loss", Regex="loss=([0-9.]+)")])
    assert parser.names == ["loss"]
    assert parser.parse("step 3 loss=1.5") == [("loss", 1.5)]


def test_regexes_that_cannot_be_combined_still_parse() -> None:
    # a backreference and a group name used twice: the one-pass prefilter cannot hold them
    parser = MetricParser([{"Name": "same", "Regex": r"(?P<v>[0-9]+) and (?P=v) ([0-9]+)"},
                           {"Name": "named", "Regex": r"x=(?P<v>[0-9.]+)"}])
    assert parser.parse("7 and 7 8, x=2.5") == [("same", 7.0), ("named", 2.5)]
    assert parser.parse("7 and 6 8") == []


def test_a_regex_without_a_group_takes_the_whole_match() -> None:
    assert MetricParser([{"Name": "n", "Regex": r"[0-9]+\.[0-9]+"}]).parse("took 1.25 s") == [("n", 1.25)]


def test_no_definitions_parse_nothing() -> None:
    parser = MetricParser([])
    assert not parser
    assert parser.parse("loss: 1") == []


# Catastrophic backtracking for any backtracking engine: with Python's `re` this search holds the GIL for hours.
CATASTROPHIC = {"Name": "redos", "Regex": r"(a|aa)+$"}
CATASTROPHIC_LINE = "a" * 60 + "!"


def test_a_catastrophic_regex_is_disabled_and_the_others_go_on() -> None:
    notes: list[tuple[str, str]] = []
    parser = MetricParser([{"Name": "loss", "Regex": r"loss=([0-9.]+)"}, CATASTROPHIC],
                          on_disabled=lambda name, why: notes.append((name, why)), timeout_s=0.05)
    for _ in range(MAX_TIMEOUTS - 1):  # a timeout may be a stall of a loaded machine: not disabled yet
        assert parser.parse(CATASTROPHIC_LINE) == [] and not parser.disabled
    assert parser.parse(CATASTROPHIC_LINE) == []
    assert list(parser.disabled) == ["redos"] and [n for n, _ in notes] == ["redos"], notes
    assert "ran longer than" in notes[0][1]
    assert parser.parse(CATASTROPHIC_LINE) == []  # not searched again: no second note
    assert parser.parse("loss=0.5 aa") == [("loss", 0.5)] and len(notes) == 1


def test_only_the_start_of_a_huge_line_is_searched() -> None:
    from smdist_launcher.metrics.definitions import MAX_LINE_CHARS

    parser = MetricParser([{"Name": "loss", "Regex": r"loss=([0-9.]+)"}])
    assert parser.parse("loss=1 " + "x" * MAX_LINE_CHARS) == [("loss", 1.0)]
    assert parser.parse("x" * MAX_LINE_CHARS + " loss=2") == []
