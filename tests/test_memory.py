"""Memory (agent.memory): an answer's idea in a few deterministic words, and the lines the prompt's [MEMORY] shows."""

from __future__ import annotations

from pathlib import Path

from agent.memory import IDEA_CHARS, MemoryEntry, idea_of, lines
from agent.schema import Answer, Verdict

ANSWERS = Path(__file__).resolve().parent / "answers"
RUN = "20261125-000000-abcd"
CODE = '''import triton
@triton.jit
def gap_rows(x_ptr, BLOCK: tl.constexpr):
    pass
@triton.autotune(configs=[])
@triton.jit
def combine(y_ptr):
    pass
def forward(x):
    gap_rows[(n,)](x, BLOCK=1024, num_warps=8, num_stages=2)
    combine[(1,)](x, num_warps=4)
'''


def answer(text: str, idea: str = "") -> Answer:
    return Answer(text=text, model="m", idea=idea)


def test_a_proposers_own_idea_wins():
    assert idea_of(answer("# Heading\nprose", idea="split: 4 programs/row"), CODE) == "split: 4 programs/row"


def test_the_first_markdown_heading_then_the_kernels_and_their_launch_constants():
    text = "Some words first.\n\n## Split each row over 4 programs\n\nMore.\n```python\n# not a heading\n```"
    assert idea_of(answer(text), CODE) == "Split each row over 4 programs · gap_rows, combine BLOCK=1024 num_warps=8 " \
                                          "num_stages=2 num_warps=4"  # the first four distinct constants


def test_else_the_first_sentence_cut_at_a_word():
    rowsum = (ANSWERS / "rowsum.md").read_text()
    idea = idea_of(answer(rowsum), None)
    assert idea.startswith("The starting kernel launches one program per (batch, channel block)")
    assert len(idea) <= IDEA_CHARS and idea.endswith("…") and "  " not in idea
    assert idea_of(answer(rowsum), None) == idea  # deterministic


def test_code_alone_names_its_kernels_and_nothing_at_all_says_so():
    assert idea_of(answer("```python\n" + CODE + "```"), CODE).startswith("gap_rows, combine BLOCK=1024")
    assert idea_of(answer("no code here, just prose"), None) == "no code here, just prose"
    assert idea_of(None, None) == "(no description, no code)"


def entry(i: int, idx: int, verdict: Verdict = Verdict.CORRECT, ms: float | None = 2.0, parent_ms: float | None = 4.0,
          **kw) -> MemoryEntry:
    return MemoryEntry(candidate=f"{RUN}-i{i}-c{idx}", iteration=i, parent=f"{RUN}-i0-c0", stage="memory-fusion",
                       idea=f"idea {i}.{idx}", verdict=verdict, ms=ms, parent_ms=parent_ms, **kw)


def test_a_line_says_where_it_started_what_it_tried_and_what_came_of_it():
    assert entry(1, 1, finding="small-grid").line(RUN) == (
        'i1-c1 from i0-c0 (memory-fusion), for small-grid: "idea 1.1" → correct, 2 ms, 2.00x faster than its parent')
    assert entry(1, 2, ms=8.0).line(RUN).endswith("8 ms, 2.00x slower than its parent")
    assert entry(1, 3, Verdict.INCORRECT, ms=None, message="incorrect in 6 of 6 trials").line(RUN) == (
        'i1-c3 from i0-c0 (memory-fusion): "idea 1.3" → incorrect: incorrect in 6 of 6 trials')


def test_the_block_shows_the_newest_entries_and_counts_the_rest():
    many = [entry(1, i) for i in range(1, 16)]
    shown = lines(many, RUN, limit=12)
    assert shown[0] == "(3 earlier attempts not shown)" and len(shown) == 13
    assert shown[1].startswith("i1-c4 ") and shown[-1].startswith("i1-c15 ")
    assert lines([], RUN) == []
