"""Find the candidate's code in an LLM answer: the fenced block that defines `class ModelNew` (with the blocks it
needs, when the answer split its code), normalised so that honest text always parses.

Honest text that used to break: CRLF line ends (an answer through an HTTP library), a fence indented inside a list
item (its body carries the list's indentation), non-breaking and zero-width spaces pasted from a chat window, a
byte-order mark. NUL bytes are kept: the pipeline reports them as a syntax error with their position.
"""

from __future__ import annotations

import ast
import re

from agent.harness.static import jsonreply, replyshapes, xmlreply
from agent.harness.static.helpers import with_helpers
from agent.harness.static.replyshapes import defines_model_new

# An opening fence with an optional language tag, its body, and a closing fence (or the end of a cut-off answer).
_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*\2[ \t]*$|\Z)", re.S | re.M)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "pytorch", "triton", "torch"}
# Characters a chat window or a tokenizer puts in code that Python rejects: spaces of other widths, zero-width ones.
_ODD_SPACES = str.maketrans({c: " " for c in "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                             "\u200a\u202f\u205f\u3000"} | {c: None for c in "\u200b\u200c\u200d\u2060\ufeff"})


def normalize(text: str) -> str:
    """Line ends to \\n, odd spaces to spaces, zero-width characters and byte-order marks removed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_ODD_SPACES)


class _Block:
    def __init__(self, tag: str, body: str) -> None:
        self.tag, self.body = tag.lower(), body

    @property
    def python(self) -> bool:
        return self.tag in _PYTHON_TAGS


def _dedent(indent: str, body: str) -> str:
    """Remove the opening fence's indentation from every line of its body (CommonMark's rule for fenced code)."""
    if not indent:
        return body
    width = len(indent.expandtabs(4))
    out = []
    for line in body.split("\n"):
        lead = len(line) - len(line.lstrip(" \t"))
        cut = 0
        while cut < lead and len(line[:cut + 1].expandtabs(4)) <= width:
            cut += 1
        out.append(line[cut:])
    return "\n".join(out)


def _blocks(text: str) -> list[_Block]:
    out: list[_Block] = []
    at = 0
    while (m := _FENCE.search(text, at)) is not None:
        indent, fence, tag, body, end = m.group(1), m.group(2), m.group(3), m.group(4), m.end()
        if not _parses_as_code(_dedent(indent, body)):
            # A fence line inside the code (a docstring's usage example, indented with it) closed the block early.
            # CommonMark's closing fence is indented at most 3 columns past the opening's; where the text up to the
            # first fence line does not parse, the block runs to the first closing fence so indented.
            strict = _strict_close(text, m.start(4), indent, fence)
            if strict is not None and _parses_as_code(_dedent(indent, text[m.start(4):strict[0]])):
                body, end = text[m.start(4):strict[0]], strict[1]
        if tag.lower() in _PYTHON_TAGS and not _parses_as_code(_dedent(indent, body)):
            glued = replyshapes.glued_close(body, fence)  # the closing fence typed at the end of the last line
            if glued is not None and _parses_as_code(_dedent(indent, body[:glued[0]])):
                body, end = body[:glued[0]] + "\n", m.start(4) + glued[1]
        tag, body = _tag_on_its_own_line(tag, _dedent(indent, body))
        if tag.lower() in _PYTHON_TAGS and not _parses_as_code(body):
            body = _without_notebook_lines(body)
        out.append(_Block(tag, body))
        at = max(end, m.start() + 1)
    return out


def _tag_on_its_own_line(tag: str, body: str) -> tuple[str, str]:
    """An untagged fence whose first line is the language (```` ``` ```` then `python`): that line is the tag."""
    first, _, rest = body.partition("\n")
    if not tag and first.strip().lower() in _PYTHON_TAGS - {""}:
        return first.strip(), rest
    return tag, body


# A notebook cell's lines that are not Python: cell magics (%%writefile model.py), line magics (%timeit) and shell
# escapes (!pip install triton), at the start of a line
_NOTEBOOK_LINE = re.compile(r"^(%%?[A-Za-z]|!\S)")


def _without_notebook_lines(body: str) -> str:
    """A python block written as a notebook cell, its magics and shell escapes left as blank lines."""
    return "\n".join("" if _NOTEBOOK_LINE.match(line) else line for line in body.split("\n"))


_CLOSE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$", re.M)


def _strict_close(text: str, start: int, indent: str, fence: str) -> tuple[int, int] | None:
    """(where the body ends, where the closing line ends) of the first line from `start` that closes `fence` by
    CommonMark's rule (the same character, at least as long, indented at most 3 columns past `indent`)."""
    width = len(indent.expandtabs(4)) + 3
    for c in _CLOSE.finditer(text, start):
        lead = c.group(0)[:c.start(1) - c.start()]
        if c.group(1)[0] == fence[0] and len(c.group(1)) >= len(fence) and len(lead.expandtabs(4)) <= width:
            return c.start(), c.end()
    return None


def _parses_as_code(body: str) -> bool:
    try:
        ast.parse(body)
    except (SyntaxError, ValueError):
        return False
    return True


def python_blocks(text: str) -> list[str]:
    """Every fenced block tagged python (or untagged), in order, normalised."""
    return [b.body for b in _blocks(normalize(text)) if b.python]


def extract_code(text: str, nested: bool = False) -> str | None:
    """The code to evaluate, or None.

    In a markdown answer: the last python block that defines ModelNew (answers often show usage snippets or
    earlier drafts first), preceded by the earlier blocks that define names it uses and does not define (an answer
    that put its kernels and ModelNew in separate blocks). A block of another language defining ModelNew counts
    when no python block does. Text without any fence is a plain .py file: the code itself, if it looks like code.
    An answer written as a JSON object (bare or in a ```json block) is read through its strings of code; one with
    its code in XML-style tags (<code>...</code>) through those elements; agent.harness.static.replyshapes has the rest.
    """
    text = normalize(text)
    if not text.strip():
        return None
    code = _markdown_code(text if _parses(text) else xmlreply.as_markdown(text))
    for shape in (replyshapes.before_lone_close, replyshapes.unquoted, replyshapes.diff_new_side,
                  replyshapes.unwrapped):
        if code is None and not nested and (other := shape(text)) is not None:
            code = extract_code(other, nested=True)
    if code is None and not nested:
        # an answer written as a JSON object: the markdown its strings of code stand for
        markdown = jsonreply.as_markdown(text)
        return extract_code(markdown, nested=True) if markdown is not None else None
    return code


def _markdown_code(text: str) -> str | None:
    blocks = _blocks(text)
    if not blocks:
        if _parses(text):
            return text
        code = _unfenced_code(text)
        return code if code is not None else (text if defines_model_new(text) else None)
    defining = [i for i, b in enumerate(blocks) if b.python and defines_model_new(b.body)]
    if not defining:
        defining = [i for i, b in enumerate(blocks) if defines_model_new(b.body) and _parses(b.body)]
    if not defining:
        return None
    last = defining[-1]
    return with_helpers(blocks[last].body, [b.body for b in blocks[:last] if b.python])


# A line that can open a kernel module at column 0: where unfenced code starts after a line of prose.
_CODE_START = re.compile(r"^(import \w|from [\w.]+ import |@\w|def \w|class \w|#)")
_MAX_TRIMMED_LINES = 64


def _unfenced_code(text: str) -> str | None:
    """Code without a fence between lines of prose ("Here is the kernel:" ... "It reads x once."): from the first
    line that opens a module to the longest end that parses and defines ModelNew; None where no such span exists.
    Only unindented lines are cut from the end (prose): code that breaks inside a block stays a syntax error, and at
    most _MAX_TRIMMED_LINES ends are tried (each try parses once)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    for tried, end in enumerate(range(len(lines), start, -1)):
        last = lines[end - 1]
        if not last.strip():
            continue
        code = "\n".join(lines[start:end])
        if (start or end < len(lines)) and defines_model_new(code) and _parses(code):
            return code
        if last[0] in " \t" or tried > _MAX_TRIMMED_LINES:
            return None  # an indented line is code: cutting into it would change the program
    return None


def why_no_code(text: str) -> str:
    """One line for the no_code verdict."""
    text = normalize(text)
    blocks = [b.body for b in _blocks(text) if b.python] if _FENCE.search(text) else ([text] if _parses(text) else [])
    if not blocks:
        if re.search(r"^[ \t]*(`{3,}|~{3,})[ \t]*(diff|patch)\b", text, re.M | re.I):
            return "found a diff, not the module: answer with the whole code in one ```python block defining ModelNew"
        return "no ```python code block found: answer with one block that defines class ModelNew"
    n = len(blocks)
    return f"found {n} python block{'s' if n > 1 else ''} but none defines class ModelNew: the answer must define class ModelNew(nn.Module)"


def nul_position(code: str) -> tuple[int, int] | None:
    """(line, column) of the first NUL byte, 1-based, or None."""
    at = code.find("\x00")
    if at < 0:
        return None
    line = code.count("\n", 0, at) + 1
    return line, at - (code.rfind("\n", 0, at) + 1) + 1


_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")  # PEP 263's declaration, on line 1 or 2


def declared_encoding(code: str) -> tuple[int, str] | None:
    """(line, encoding) of a coding declaration that names anything but UTF-8, or None. Python decodes a file by its
    declaration, the static check reads the text: under `# coding: utf-7` a comment's `+AAo-` is a new line, and the
    code that runs is not the code that was checked."""
    for n, line in enumerate(code.splitlines()[:2], start=1):
        m = _CODING.match(line)
        if m:
            name = m.group(1).lower().replace("_", "-")
            return None if name in ("utf-8", "utf8", "utf-8-sig") else (n, m.group(1))
        if line.strip() and not line.lstrip().startswith("#"):
            return None  # PEP 263: the second line counts only after a comment or blank first line
    return None


def _parses(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    # prose can parse as a lone expression ("Hello") — require at least one def/class/import
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)) for n in tree.body)
