#!/usr/bin/env bash
# Commit subjects are one line of at most 72 characters (CONTRIBUTING.md, "Commits").
# Checked from the commit that made it a rule; older history is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
since=f4d5472  # the commit before the rule; its own subject is within 72 too
if ! git rev-parse -q --verify "$since^{commit}" >/dev/null 2>&1; then
  echo "check-commit-subjects: $since not in this clone's history (shallow?); checking HEAD only"
  range="HEAD^!"
else
  range="$since^..HEAD"
fi
# Characters, not bytes: subjects may hold "×" or "—".
long=$(git log --no-merges --format='%h %s' "$range" | python3 -c '
import sys
for line in sys.stdin:
    sha, _, subject = line.rstrip("\n").partition(" ")
    if len(subject) > 72:
        print(f"{len(subject)} chars: {sha} {subject}")')
if [ -n "$long" ]; then
  echo "Commit subjects longer than 72 characters (put the reasons in the body):" >&2
  echo "$long" >&2
  exit 1
fi
