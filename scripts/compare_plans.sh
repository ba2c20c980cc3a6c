#!/usr/bin/env bash
# Plans study configs with this checkout's code and with the code of another revision, and compares the
# stages: the same stages, each running the same command line (compared as a set of flag-value pairs, so the
# order of the options may change). Nothing is run. A refactor of the studies or of an option must leave
# the commands a study runs as they were.
#
# usage: scripts/compare_plans.sh REV CONFIG...
#   e.g. scripts/compare_plans.sh a06c63c configs/studies/*.yaml src/lakeshift/studies/demo.yaml
# Exit status 0 when every config plans the same commands, 1 otherwise.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '7,9p' "$0" >&2; exit 2; }
rev=$1
shift
work=$(mktemp -d)
git worktree add --detach "$work/old" "$rev" >/dev/null 2>&1
trap 'git worktree remove --force "$work/old"; rm -rf "$work"' EXIT

# One line per stage: its kind, its name and its command line as sorted flag-value pairs.
dump='
import sys
try:
    from lakeshift.studies import load_study
except ImportError:  # the package before the studies were a subpackage
    from lakeshift.experiments import load_study
for s in load_study(sys.argv[1], sys.argv[2]).stages:
    argv, items, i = s.argv, [], 1
    while i < len(argv):
        takes = argv[i].startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        items.append(" ".join(argv[i : i + 2]) if takes else argv[i])
        i += 2 if takes else 1
    print(s.kind, s.name, argv[0], sorted(items))
'
status=0
for config in "$@"; do
  # A config that cannot be planned compares by its error's last line.
  PYTHONPATH="$work/old/src" python -c "$dump" "$config" "$work/run" >"$work/old.txt" 2>"$work/err" ||
    tail -n 1 "$work/err" >"$work/old.txt"
  python -c "$dump" "$config" "$work/run" >"$work/new.txt" 2>"$work/err" || tail -n 1 "$work/err" >"$work/new.txt"
  if cmp -s "$work/old.txt" "$work/new.txt"; then
    echo "same: $config ($(wc -l <"$work/new.txt") stages)"
  else
    echo "differs: $config"
    diff "$work/old.txt" "$work/new.txt" | head -20 || true
    status=1
  fi
done
exit $status
