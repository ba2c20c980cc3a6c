#!/usr/bin/env bash
# Rebuilds a committed report from its predictions twice, with this checkout's code and with the code of
# another revision, and compares what the two write, file by file: a refactor must leave the maps, the scored
# records, the tables and the figures as they were.
#
# usage: scripts/compare_reports.sh REV SUITE SEED PREDICTIONS [lakeshift report options...]
#   e.g. scripts/compare_reports.sh a06c63c docs/results/cpu-study/suite.json 0 \
#          docs/results/cpu-study/predictions --reference paper
# Exit status 0 when every file is identical (report.html and the SVGs are compared without the lines that
# hold the time they were made), 1 otherwise.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '6,8p' "$0" >&2; exit 2; }
rev=$1 suite=$2 seed=$3 preds=$4
shift 4
work=$(mktemp -d)
git worktree add --detach "$work/old" "$rev" >/dev/null 2>&1
trap 'git worktree remove --force "$work/old"; rm -rf "$work"' EXIT

generate=(generate --suite "$suite" --seed "$seed" --inputs grid --cots none --no-images --force)
old() { PYTHONPATH="$work/old/src" python -m lakeshift "$@"; }
old "${generate[@]}" --out "$work/old-data" >/dev/null
python -m lakeshift "${generate[@]}" --out "$work/data" >/dev/null
status=0
diff -rq "$work/old-data" "$work/data" || status=1
old report "$preds" --data "$work/data" --out "$work/old-report" "$@" >/dev/null
python -m lakeshift report "$preds" --data "$work/data" --out "$work/report" "$@" >/dev/null

# Made-at times: matplotlib's SVG <dc:date>, report.html's generated line.
strip() { grep -v -e '<dc:date>' -e 'generated' "$1" || true; }
files() { (cd "$1" && find . -type f | sort); }
diff <(files "$work/old-report") <(files "$work/report") || status=1
while read -r rel; do
  a="$work/old-report/$rel" b="$work/report/$rel"
  [ -f "$b" ] && ! cmp -s "$a" "$b" || continue
  case "$rel" in
    *.svg | *.html) cmp -s <(strip "$a") <(strip "$b") && continue ;;
  esac
  echo "differs: ${rel#./}"
  status=1
done < <(files "$work/old-report")
n=$(files "$work/report" | wc -l)
if [ $status -eq 0 ]; then echo "identical: the maps and $n report files"; else echo "reports differ"; fi
exit $status
