"""The layout of the C edgec generates: what clang-format 14 makes of it under the repository's
.clang-format (120 columns, 4-space indent, case labels indented, calls broken after a comma and
aligned after their parenthesis, braced lists with spaces inside), written directly so a firmware
team that formats its tree finds nothing to change, and the output does not depend on clang-format
being installed. tests/test_generated_format.py checks the generated directories with clang-format.
"""

from __future__ import annotations

import re

COLUMNS = 120
INDENT = 4
_ASSIGNMENT = re.compile(r" [|&+*/-]?= ")


def braced(items) -> str:
    """A braced list on one line, as clang-format writes one (Cpp11BracedListStyle: false)."""
    return "{ " + ", ".join(str(item) for item in items) + " }"


def initializer(items: list[str]) -> str:
    """A struct initializer, one item per line and a trailing comma (clang-format keeps it so)."""
    return "{\n" + "".join(f"{' ' * INDENT}{item},\n" for item in items) + "}"


def commented_rows(rows: list[tuple[str, str]], indent: int) -> str:
    """Table rows (code, comment) at `indent`, their comments aligned (AlignTrailingComments)."""
    return "\n".join(trailing_comments([(" " * indent + code, comment) for code, comment in rows]))


def trailing_comments(rows: list[tuple[str, str | None]]) -> list[str]:
    """Consecutive lines (code with its indent, its trailing comment's text or None), the comments
    aligned as clang-format 14 aligns them (AlignTrailingComments): a line without a comment ends a
    run; within a run each comment joins the sequence before it while one column suits them all
    (one space after the longest code, the longest comment still within COLUMNS), else it starts a
    new sequence; a sequence's comments start one space after its longest code."""
    lines, sequence = [], []  # sequence: the (code, comment) rows aligned together, in order
    low, high = 0, COLUMNS

    def flush():
        lines.extend(f"{code.ljust(low - 1)} {comment}" for code, comment in sequence)
        sequence.clear()

    for code, text in rows:
        if text is None:
            flush()
            lines.append(code)
            low, high = 0, COLUMNS
            continue
        comment = f"/* {text} */"
        start, last = len(code) + 1, COLUMNS - len(comment)
        if sequence and (start > high or last < low):
            flush()
        if not sequence:
            low, high = 0, COLUMNS
        sequence.append((code, comment))
        low, high = max(low, start), min(high, last)
    flush()
    return lines


def block(code: str, indent: int) -> str:
    """C statements (a unit's emitted code, any indentation, several statements on a line allowed)
    laid out at `indent` spaces: one statement per line, nested by braces (case labels one level
    into their switch, a label's statements one more), preprocessor lines at column 0, long calls
    broken (line())."""
    rows, frames = [], []  # frames: per open brace, (its line's indent, its contents' indent, a switch)
    for text in (part for row in code.splitlines() for part in _statements(row.strip())):
        if text.startswith("#"):
            rows.append(text)
            continue
        here = frames[-1][1] if frames else indent
        if text.startswith("}"):
            here = frames.pop()[0]
        elif frames and frames[-1][2] and _is_label(text):
            here = frames[-1][0] + INDENT
            frames[-1] = (frames[-1][0], here + INDENT, True)
        if _without_comment(text).endswith("{"):
            switch = text.startswith("switch ")
            frames.append((here, here + INDENT, switch))
        rows.append(line(" " * here + text))
    return "\n".join(rows)


def _without_comment(text: str) -> str:
    return text.split(" /*")[0].rstrip() if text.endswith("*/") else text


def _is_label(text: str) -> bool:
    return text.startswith(("case ", "default:"))


def _statements(line: str) -> list[str]:
    """A line's statements, split after each ';' outside parentheses (a label's line, which
    clang-format keeps on one line when short, stays whole)."""
    if _is_label(line) and not _without_comment(line).endswith("{"):
        return [line]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(line):
        if line.startswith("/*", i):  # the rest is a comment
            break
        depth += char in "([{"
        depth -= char in ")]}"
        if char == ";" and depth == 0 and line[i + 1 : i + 2] == " " and not line[i + 1 :].lstrip().startswith("/"):
            parts.append(line[start : i + 1])
            start = i + 2
    return parts + [line[start:]] if line[start:] else parts


def long_lines(source: str) -> str:
    """A rendered C file with each code line past COLUMNS broken by line() (comments, which
    clang-format leaves as they are here, and data between `clang-format off` and `on` aside)."""
    rows, formatting = [], True
    for row in source.split("\n"):
        text = row.strip()
        formatting = {"/* clang-format off */": False, "/* clang-format on */": True}.get(text, formatting)
        comment = text.startswith(("/*", "*", "//"))
        rows.append(line(row) if formatting and not comment else row)
    return "\n".join(rows)


def line(text: str, columns: int = COLUMNS) -> str:
    """One statement or declaration, broken where clang-format breaks it if it runs past `columns`:
    an #error's message onto the next line, before its __attribute__, else as call() breaks a call."""
    if len(text) <= columns:
        return text
    indent = " " * (len(text) - len(text.lstrip()) + INDENT)
    if text.startswith("#error "):
        return "#error \\\n" + indent + text[len("#error ") :]
    if text.startswith("#"):  # a macro is broken with backslashes, which this does not write
        return text
    attribute = text.find(" __attribute__")
    if attribute > 0 and attribute <= columns and len(indent) + len(text) - attribute <= columns:
        return text[:attribute] + "\n" + indent + text[attribute + 1 :]
    return call(text, columns)


def call(line: str, columns: int = COLUMNS) -> str:
    """A statement whose first call runs past `columns`, broken as clang-format breaks it, in the
    fewest lines of: a break after its assignment, then the call's arguments packed and aligned
    after its parenthesis; no break there, the arguments aligned so; a break at the parenthesis,
    the arguments packed at the indent plus 4 (the first of them on a tie)."""
    if len(line) <= columns:
        return line
    indent = len(line) - len(line.lstrip())
    opening = _first_call(line)
    if opening < 0:
        return line
    closing = _matching(line, opening)
    args, tail = _split_arguments(line[opening + 1 : closing]), line[closing:]
    head = line[: opening + 1]
    layouts = []  # clang-format's choice among the layouts that fit: the fewest lines, the first on a tie
    assignment = _ASSIGNMENT.search(line, indent, opening)
    if assignment:  # a break after the assignment, the call aligned as on a line of its own
        callee = " " * (indent + INDENT) + head[assignment.end() :]
        layouts.append([head[: assignment.end() - 1], *_packed(callee, len(callee), args, tail, columns)])
    layouts.append(_packed(head, len(head), args, tail, columns))
    layouts.append([head, *_packed(" " * (indent + INDENT), indent + INDENT, args, tail, columns)])
    fitting = [rows for rows in layouts if all(len(row) <= columns for row in rows)] or layouts[-1:]
    return "\n".join(min(fitting, key=len))


def _packed(first: str, column: int, args: list[str], tail: str, columns: int) -> list[str]:
    """`args` (then `tail`) packed after `first`, continuation lines at `column`; an argument too
    long for a line of its own is broken after its top-level `+`s, continued 4 columns further in."""
    rows, current = [], first
    for number, arg in enumerate(args):
        text = arg + ("," if number < len(args) - 1 else tail)
        if number and len(current) + 1 + len(text) > columns:
            rows.append(current)
            current = " " * column + text
            if len(current) > columns and len(sums := _sum_terms(text)) > 1:
                rows.append(" " * column + sums[0] + " +")
                rows += [" " * (column + INDENT) + term + " +" for term in sums[1:-1]]
                current = " " * (column + INDENT) + sums[-1]
        else:
            current += (" " if number else "") + text
    rows.append(current)
    return rows


def _sum_terms(text: str) -> list[str]:
    """`text` split at its top-level ' + ' (outside any parentheses)."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and text.startswith(" + ", i):
            terms.append(text[start:i])
            start = i + 3
    return terms + [text[start:]]


def _first_call(line: str) -> int:
    """The index of the first '(' that follows a name (a call), or -1."""
    for i, char in enumerate(line):
        if char == "(" and i and (line[i - 1].isalnum() or line[i - 1] == "_"):
            return i
    return -1


def _matching(line: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(line)):
        depth += line[i] in "([{"
        depth -= line[i] in ")]}"
        if depth == 0:
            return i
    return len(line) - 1


def _split_arguments(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]
