"""Write a benchmark's figures into docs/benchmarks.md, in its own section and marked block.

Each block sits between `<!-- <prefix>:<key>:begin -->` and `... end -->` markers inside the
`## <Section>` heading, so re-running a benchmark replaces only its own figures.
"""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nFigures measured by the scripts in bench/, with the exact commands.\n"


def write_block(*, section: str, intro: str, prefix: str, key: str, block_body: str, doc: Path = DOC) -> None:
    text = doc.read_text() if doc.exists() else HEADER
    begin, end = f"<!-- {prefix}:{key}:begin -->", f"<!-- {prefix}:{key}:end -->"
    block = f"{begin}\n{block_body.strip()}\n{end}"
    if section not in text:
        text = text.rstrip() + f"\n\n{section}\n\n{intro}\n"
    start = text.index(section)
    following = re.search(r"^## ", text[start + len(section):], re.M)
    stop = start + len(section) + following.start() if following else len(text)
    part = text[start:stop]
    if begin in part:
        part = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, part, flags=re.S)
    else:
        part = part.rstrip() + "\n\n" + block + "\n"
    text = text[:start] + part.rstrip() + "\n" + ("\n" + text[stop:] if stop < len(text) else "")
    doc.write_text(text)
