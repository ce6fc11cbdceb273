"""Regenerate the sampler/target/experiment tables of README.md from the live registry.

Usage: ``python scripts/update_readme_tables.py`` (rewrites the block between the
``<!-- registry:start -->`` and ``<!-- registry:end -->`` markers).
"""

from pathlib import Path

import gradmc

START, END = "<!-- registry:start -->", "<!-- registry:end -->"


def table(header: str, entries, with_kind: bool = True) -> str:
    lines = [header, "|---|---|---|" if with_kind else "|---|---|"]
    for e in entries:
        lines.append(f"| `{e.name}` | {e.kind} | {e.description} |" if with_kind else f"| `{e.name}` | {e.description} |")
    return "\n".join(lines)


def main() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = readme.read_text()
    block = "\n\n".join([
        table("| sampler | space | what it is |", gradmc.list_samplers()),
        table("| target | space | what it is (each carries its exact truth where one exists) |", gradmc.list_targets()),
        table("| experiment (`gradmc reproduce NAME`) | what it reproduces |", gradmc.registry.experiments(), False),
    ])
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{block}\n{END}{tail}")


if __name__ == "__main__":
    main()
