"""Naive twin of ktrace.exporters.perfetto_kernel.format_rows: each line's program run in Python with %-formatting."""

from __future__ import annotations

import numpy as np

from ktrace.exporters.chrome_lines import OP_INT, OP_LITERAL, OP_MICROS


def format_rows_reference(*args: np.ndarray) -> bytes:
    """format_rows' lines (same arguments but the output buffer), one row and one op at a time."""
    template, program, program_off, literals, literal_off, ints, valid, tokens, token_blob, token_off = args
    data, blob = literals.tobytes(), token_blob.tobytes()
    lines = []
    for i, t in enumerate(template.tolist()):
        for op, arg in program[program_off[t] : program_off[t + 1]].tolist():
            if op == OP_LITERAL:
                lines.append(data[literal_off[arg] : literal_off[arg + 1]])
            elif op == OP_INT:
                lines.append(b"%d" % int(ints[arg, i]) if valid[arg, i] else b"null")
            elif op == OP_MICROS:
                ns = int(ints[arg, i])
                lines.append(b"%d.%03d" % (ns // 1000, ns % 1000))
            else:
                c = int(tokens[arg, i])
                lines.append(blob[token_off[c] : token_off[c + 1]])
    return b"".join(lines)
