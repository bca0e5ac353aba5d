"""Print the seams table (apps/core/seams.py), or write it into docs/architecture.md."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.core.seams import DOC_END, DOC_START, seams_markdown


class Command(BaseCommand):
    help = "Print the table of seams (where lower apps let higher ones plug in); --write updates the docs."

    def add_arguments(self, parser):
        parser.add_argument("--write", action="store_true", help="Replace the table in docs/architecture.md.")

    def handle(self, *args, write: bool = False, **options):
        table = seams_markdown()
        if not write:
            self.stdout.write(table)
            return
        doc = Path(settings.BASE_DIR) / "docs" / "architecture.md"
        text = doc.read_text()
        if DOC_START not in text or DOC_END not in text:
            raise CommandError(f"{doc} has no {DOC_START} ... {DOC_END} block to replace.")
        head, rest = text.split(DOC_START, 1)
        tail = rest.split(DOC_END, 1)[1]
        doc.write_text(f"{head}{DOC_START}\n{table}\n{DOC_END}{tail}")
        self.stdout.write(f"Wrote {len(table.splitlines()) - 2} seams into {doc}.")
