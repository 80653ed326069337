import pytest
from hypothesis import given, settings, strategies as st

from smdist_launcher.container.log_lines import FixedRankLines, MpiTagLines, TorchrunLines


def test_torchrun_prefixes_and_partial_lines():
    s = TorchrunLines()
    assert s.feed("[r3]:hello\n[r0]:par") == [(3, "hello")]
    assert s.feed("tial\nlauncher line\n") == [(0, "partial"), (None, "launcher line")]
    assert s.feed("[r12]:no newline") == []
    assert s.flush() == [(12, "no newline")]


def test_torchrun_a_half_written_line_and_the_next_rank_on_it():
    """torchrun's tee printed rank 1's unfinished line, then rank 0's whole line on the same line, then rank 1's
    newline under its tag again (seen in a chatty job's log)."""
    s = TorchrunLines()
    out = s.feed("[r1]:step 5870 loss: 0.000170 lr: 0.001[r0]:step 5735 chatter\n[r1]:\n[r0]:next\n")
    assert out == [(0, "step 5735 chatter"), (1, "step 5870 loss: 0.000170 lr: 0.001"), (0, "next")]


def test_fixed_rank():
    s = FixedRankLines(5)
    assert s.feed("a\nb") == [(5, "a")]
    assert s.flush() == [(5, "b")]


def test_mpi_tags_interleaved_mid_line():
    # Real mpirun output: rank 0 wrote "rank" and " 0 ...\n" in two chunks, rank 2's line came in between.
    s = MpiTagLines()
    out = s.feed("[1,0]<stdout>:rank[1,2]<stdout>:rank 2 6372\n[1,1]<stderr>:err 1\n[1,0]<stdout>: 0 6371\n")
    assert out == [(2, "rank 2 6372"), (1, "err 1"), (0, "rank 0 6371")]


def test_mpi_untagged_launcher_lines_and_tag_split_across_reads():
    s = MpiTagLines()
    assert s.feed("----\nmpirun detected\n[1,") == [(None, "----"), (None, "mpirun detected")]
    assert s.feed("3]<stdout>:x\n") == [(3, "x")]
    assert s.feed("[1,4]<stdout>:tail") == []
    assert s.flush() == [(4, "tail")]


def test_mpi_bracket_in_user_text():
    s = MpiTagLines()
    assert s.feed("[1,0]<stdout>:loss [0.5") == []
    assert s.feed("]\n") == [(0, "loss [0.5]")]


_line = st.text(alphabet="abc [],:<>0123456789 ", min_size=0, max_size=12)


@pytest.mark.parametrize(("splitter", "tag"), [(MpiTagLines, "[1,{}]<stdout>:"), (TorchrunLines, "[r{}]:")])
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.tuples(st.integers(0, 3), _line), min_size=1, max_size=8), cuts=st.lists(st.integers(0, 400)))
def test_lines_survive_any_read_boundaries(splitter, tag, lines, cuts):
    """Whole lines per rank, however the pipe splits the bytes (user text may contain brackets)."""
    stream = "".join(f"{tag.format(r)}{text}\n" for r, text in lines)
    s = splitter()
    out: list = []
    pos = 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts):
        out += s.feed(stream[pos:cut])
        pos = max(pos, cut)
    out += s.feed(stream[pos:]) + s.flush()
    assert out == lines
