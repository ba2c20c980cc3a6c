#!/usr/bin/env bash
# Rebuilds a committed report from its predictions twice, with this checkout's code and with the code of
# another revision, and compares what the two write, file by file: a refactor must leave the maps, the scored
# records, the tables and the figures as they were. Committed predictions are stored compressed
# (*.jsonl.gz); a revision whose code reads only plain *.jsonl gets a decompressed copy of them.
#
# usage: scripts/compare_reports.sh REV SUITE SEED PREDICTIONS [lakeshift report options...]
#   e.g. scripts/compare_reports.sh a06c63c docs/results/cpu-study/suite.json 0 \
#          docs/results/cpu-study/predictions --reference paper
# GENERATE_OPTIONS adds options to the maps' `lakeshift generate` (e.g. "--id-source DIR").
# Exit status 0 when every file is identical (report.html and the SVGs are compared without the lines that
# hold the time they were made), 1 otherwise.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '6,9p' "$0" >&2; exit 2; }
rev=$1 suite=$2 seed=$3 preds=$4
shift 4
work=$(mktemp -d)
git worktree add --detach "$work/old" "$rev" >/dev/null 2>&1
trap 'git worktree remove --force "$work/old"; rm -rf "$work"' EXIT

# Each run's output goes to a log, shown only when the run fails.
quietly() { "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 2; }; }
old() { PYTHONPATH="$work/old/src" python -m lakeshift "$@"; }
new() { python -m lakeshift "$@"; }
where=$(PYTHONPATH="$work/old/src" python -c 'import lakeshift; print(lakeshift.__file__)')
[[ $where == "$work/old/"* ]] || { echo "$rev's code does not come first on PYTHONPATH ($where)" >&2; exit 2; }
# shellcheck disable=SC2206  # GENERATE_OPTIONS is a list of words
generate=(generate --suite "$suite" --seed "$seed" --inputs grid --cots none --no-images --force ${GENERATE_OPTIONS:-})
quietly old "${generate[@]}" --out "$work/old-data"
quietly new "${generate[@]}" --out "$work/data"
status=0
diff -rq "$work/old-data" "$work/data" || status=1
old_preds=$preds
if PYTHONPATH="$work/old/src" python -c 'import lakeshift.io as io; io.jsonl_files' 2>/dev/null; then :; else
  old_preds="$work/plain-predictions"
  cp -r "$preds" "$old_preds"
  find "$old_preds" -name '*.jsonl.gz' -exec gunzip {} +
fi
quietly old report "$old_preds" --data "$work/data" --out "$work/old-report" "$@"
quietly new report "$preds" --data "$work/data" --out "$work/report" "$@"

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
