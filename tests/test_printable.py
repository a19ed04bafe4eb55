"""agent.printable: nothing an answer writes reaches a terminal raw. The function itself, the one console every view
draws through, and the real CLI (`agent eval` of a hostile answer, `agent show`/`leaderboard`/`export`/`report` of
a stored one, `agent run`'s progress lines): no ESC, C1 control, backspace, carriage return or bidi override of the
answer's comes out, and each is shown as a visible escape instead."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agent.printable import printable
from agent.runconfig import RunConfig
from agent.schema import Answer, Candidate, EvalResult, Timing, Usage, Verdict
from agent.store import Store
from agent.view.terminal import EscapingConsole

REPO = Path(__file__).resolve().parent.parent
PAINT = "\r\x1b[2K\x1b[1;32mverdict correct\x1b[0m\x08\x08\x9b31m\u202eegassem\u2066\x07"
LINE = PAINT.removeprefix("\r")  # a message's first line: \r ends a line where lines are split
RAW = ("\x1b", "\x9b", "\x08", "\x07", "\r", "\u202e", "\u2066")


def raw_in(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_every_control_character_but_tab_and_newline_is_written_as_an_escape():
    assert printable(PAINT) == ("\\x0d\\x1b[2K\\x1b[1;32mverdict correct\\x1b[0m\\x08\\x08\\x9b31m\\u202eegassem"
                                "\\u2066\\x07")
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("line\r\nnext") == "line\nnext"  # a CRLF line end is a line end
    assert printable("\x00\x7f\u200f\u061c") == "\\x00\\x7f\\u200f\\u061c"
    assert printable("µs × 2 — naïve 𝛼") == "µs × 2 — naïve 𝛼"  # text is text
    assert printable(printable(PAINT)) == printable(PAINT)


def test_the_console_escapes_what_any_renderable_holds_and_keeps_its_own_styles():
    """rich strips \\r and backspace from a Text but passes ESC, C1 and bidi through, and a Syntax passes them all."""
    out = io.StringIO()
    c = EscapingConsole(file=out, width=100, force_terminal=True, color_system="standard")
    table = Table()
    table.add_column("answer")
    table.add_row("x" + PAINT)
    c.print(Panel(Text(PAINT), title="message"), table, Syntax(f"s = '{PAINT}'\n", "python", line_numbers=True))
    c.print(PAINT, markup=False)
    shown = out.getvalue()
    assert raw_in(shown.replace("\x1b[", "")) == []  # the console's own styles are ESC [ ... m: nothing else
    assert "\\x1b[1;32mverdict correct" in shown and "\\u202eegassem" in shown
    assert "\x1b[" in shown  # colours still drawn


def agent(*args: str) -> subprocess.CompletedProcess:
    """The real CLI; its output decoded as it was written (text mode would turn a raw \r into a newline)."""
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, cwd=REPO, env=env, timeout=300)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8"))


@pytest.mark.slow  # one CPU evaluation
def test_agent_eval_of_an_answer_whose_exception_paints_a_verdict_shows_it_escaped():
    r = agent("eval", "tests/candidates/ansi_exception_text.py", "--device", "cpu", "--no-timing")
    assert r.returncode == 3, r.stderr
    assert raw_in(r.stdout) == [] and raw_in(r.stderr) == []  # before: the message's ESC and CSI reached stdout
    assert "runtime_error" in r.stdout and "\\x1b[1;32mverdict correct\\x1b[0m" in r.stdout


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A run whose candidates' code, message and idea hold LINE raw (as a store written before the escape holds)."""
    root = tmp_path_factory.mktemp("store")
    code = f"import triton\n\nclass ModelNew:\n    NOTE = '{LINE}'\n"  # (the store reads \r as a line end)
    with Store(root) as s:
        run = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        ids = []
        for index, verdict in ((1, Verdict.CORRECT), (2, Verdict.CORRECT), (3, Verdict.RUNTIME_ERROR)):
            timing = Timing(candidate_ms=1.0 / index, candidate_spread_pct=1.0, eager_ms=1.0, repeats=10,
                            meaningful=True) if verdict == Verdict.CORRECT else None
            c = Candidate(id=s.candidate_id(run, 1, index), run_id=run, iteration=1, index=index, stage="memory-fusion",
                          code=code + f"# {index}\n", prompt="p", idea=f"idea {PAINT}",
                          answer=Answer(text=f"```python\n{code}```", model="m", usage=Usage()),
                          result=EvalResult(verdict=verdict, message=f"running forward: {LINE}", code=code,
                                            device="cuda", timing=timing))
            s.record_candidate(c)
            ids.append(c.id)
    return root, run, ids[2]


@pytest.mark.parametrize("command", ["show", "leaderboard", "export"])
def test_stored_candidate_text_reaches_the_terminal_escaped(store, command):
    root, run, failed = store
    argv = {"show": ["show", failed, "--full"], "leaderboard": ["leaderboard", "--all"],
            "export": ["export", failed]}[command]
    r = agent(*argv, "--root", str(root))
    assert r.returncode == 0, r.stderr
    if command == "export":  # to a pipe: the code as it was judged, byte for byte
        assert LINE in r.stdout
        return
    assert raw_in(r.stdout) == [], r.stdout  # before: the code's and the message's ESC reached stdout
    assert "\\x1b[1;32mverdic" in r.stdout  # (a table may wrap the rest)


def test_the_report_page_holds_no_raw_control_character(store, tmp_path):
    root, run, _ = store
    out = tmp_path / "run.html"
    r = agent("report", run, "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text(encoding="utf-8")
    ours = page.split("<script", 1)[0] + "".join(p.split("</script>", 1)[-1] for p in page.split("<script")[1:])
    assert raw_in(ours) == []  # outside plotly's own script
    assert "\\x1b[1;32mverdict correct" in ours


def test_run_progress_lines_escape_a_candidates_message(capsys):
    """`agent run` draws its lines through the same console (a stored message may predate the verdict's escape)."""
    from agent.view.progress import LiveProgress

    c = Candidate(id="r-i1-c1", run_id="r", iteration=1, index=1, stage="memory-fusion", code="x", prompt="p",
                  result=EvalResult(verdict=Verdict.RUNTIME_ERROR, message=f"running forward: {LINE}", device="cpu"))
    with LiveProgress("lines") as progress:
        progress.candidate_done(c)
    out = capsys.readouterr().out
    assert raw_in(out) == [] and "\\x1b[1;32mverdict correct" in out


def test_show_json_holds_the_code_as_judged_in_ascii(store):
    root, _, failed = store
    r = agent("show", failed, "--json", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert raw_in(r.stdout) == []  # before: the C1 CSI and the bidi overrides came out raw (JSON escapes only C0)
    assert LINE in (Candidate.model_validate_json(r.stdout).code or "")
