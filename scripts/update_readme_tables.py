"""Regenerate the sampler/target/experiment tables of README.md and docs/ from the live registry.

Each table sits between an HTML-comment marker pair, ``<!-- registry:NAME:start -->`` and
``<!-- registry:NAME:end -->``; NAME is ``samplers``, ``targets`` or ``experiments``. The
README holds all three, the documentation pages one each.

Usage::

    python scripts/update_readme_tables.py           # rewrite the tables in place
    python scripts/update_readme_tables.py --check   # exit 1 if a table is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import gradmc

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def table(header: str, entries, with_kind: bool = True) -> str:
    lines = [header, "|---|---|---|" if with_kind else "|---|---|"]
    for e in entries:
        lines.append(
            f"| `{e.name}` | {e.kind} | {e.description} |" if with_kind else f"| `{e.name}` | {e.description} |"
        )
    return "\n".join(lines)


def tables() -> dict[str, str]:
    return {
        "samplers": table("| sampler | space | what it is |", gradmc.list_samplers()),
        "targets": table(
            "| target | space | what it is (each carries its exact truth where one exists) |", gradmc.list_targets()
        ),
        "experiments": table(
            "| experiment (`gradmc reproduce NAME`) | what it reproduces |", gradmc.registry.experiments(), False
        ),
    }


def render(text: str, blocks: dict[str, str]) -> str:
    for name, block in blocks.items():
        start, end = f"<!-- registry:{name}:start -->", f"<!-- registry:{name}:end -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
        replacement = f"{start}\n{block}\n{end}"
        text = pattern.sub(lambda _, r=replacement: r, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report out-of-date tables instead of rewriting them")
    args = parser.parse_args(argv)
    blocks = tables()
    stale = []
    for path in FILES:
        text = path.read_text()
        new = render(text, blocks)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print("registry tables out of date (run python scripts/update_readme_tables.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
