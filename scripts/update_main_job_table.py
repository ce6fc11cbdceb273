"""Rerun the README's main job and write its table into docs/getting-started.md.

The table sits between ``<!-- main-job:start -->`` and ``<!-- main-job:end -->``; the
command is the one the README's first set-up line runs (after ``gradmc``), so the page
shows what a fresh run of that command prints (timings differ from machine to machine;
the draws, ESS, errors, divergences and warnings do not).

Usage::

    python scripts/update_main_job_table.py
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tempfile
from pathlib import Path

from gradmc.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
MARKERS = re.compile(r"(<!-- main-job:start -->\n```text\n).*?(```\n<!-- main-job:end -->)", re.S)


def main_job() -> list[str]:
    """The arguments of the README's main job, after ``gradmc``."""
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if "gradmc compare" in line)
    return shlex.split(line.split("gradmc ", 1)[1])


def run() -> str:
    """The table the main job prints (its title, header and rows; not the legend)."""
    out = io.StringIO()
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(out):
        code = main([*main_job(), "--no-progress", "--out", folder])
    if code != 0:
        raise SystemExit(f"the main job exited with {code}")
    return out.getvalue().split("\n\ncolumns:", 1)[0].strip() + "\n"


if __name__ == "__main__":
    text = PAGE.read_text()
    if not MARKERS.search(text):
        raise SystemExit(f"{PAGE} has no main-job markers")
    PAGE.write_text(MARKERS.sub(lambda m: m.group(1) + run() + m.group(2), text))
    print(f"updated {PAGE.relative_to(ROOT)}")
