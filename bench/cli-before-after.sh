#!/bin/bash
# CPU of one CLI process, another checkout ("before") against this one ("after"), both through
# `node bin/action-envelope.mjs ARGS` as `npm run cli` runs them; samples alternate; median user + sys
# CPU ms (children included) from /usr/bin/time. Embedded emulator, offline model; `start --no-prompt`
# leaves one waiting approval, and a fresh one for each approve sample (which must end OUTCOME VERIFIED).
#
#   git archive REV | tar -x -C BEFORE && ln -s "$PWD/node_modules" BEFORE/ && (cd BEFORE && node scripts/build.mjs)
#   node scripts/build.mjs && bash bench/cli-before-after.sh BEFORE [SAMPLES=3]
set -u
A=$(cd "$1" && pwd); B=$(cd "$(dirname "$0")/.." && pwd); N=${2:-3}
SCRATCH=$(mktemp -d); trap 'rm -rf "$SCRATCH"' EXIT
export NO_COLOR=1 MODEL=offline BITRIX24_RATE=0 BITRIX24_WEBHOOK_URL=
cpu() {
  local dir=$1; shift
  (cd "$dir" && /usr/bin/time -f "%U %S" -o "$SCRATCH/time" node bin/action-envelope.mjs "$@" >"$SCRATCH/out" 2>"$SCRATCH/err")
  local rc=$?
  awk -v rc=$rc '{printf "%.0f%s", ($1+$2)*1000, rc==0?"":"!rc"rc}' "$SCRATCH/time"
}
fresh() {
  export ACTION_ENVELOPE_DATA_DIR=$(mktemp -d "$SCRATCH/data.XXXX")
  export ACTION_ENVELOPE_JOURNAL_KEY_FILE=$ACTION_ENVELOPE_DATA_DIR.key
  (cd "$B" && node bin/action-envelope.mjs start --no-prompt >"$SCRATCH/start" 2>&1)
  set -- $(grep -o 'approve [^ ]* --hash [^ ]*' "$SCRATCH/start")
  T=${2:?start left no approval}; H=$4
}
med() { echo "$@" | tr ' ' '\n' | sed 's/!.*//' | grep . | sort -n | awk '{x[NR]=$1} END{print x[int((NR+1)/2)]}'; }
fresh
for c in help pending audit show approve; do
  a=""; b=""
  for i in $(seq "$N"); do
    for side in $([ $((i % 2)) = 1 ] && echo "A B" || echo "B A"); do
      dir=${!side}
      case $c in
        help) v=$(cpu "$dir" --help) ;;
        pending) v=$(cpu "$dir" pending --json) ;;
        audit) v=$(cpu "$dir" audit list) ;;
        show) v=$(cpu "$dir" show "$T") ;;
        approve) fresh; v=$(cpu "$dir" approve "$T" --hash "$H" --as demo-approver)
          grep -q "OUTCOME VERIFIED" "$SCRATCH/out" || v="$v!notverified" ;;
      esac
      if [ "$side" = A ]; then a="$a $v"; else b="$b $v"; fi
    done
  done
  ma=$(med $a); mb=$(med $b)
  echo "$c | before $ma [$a ] | after $mb [$b ] | $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.2f", b/a}')x"
done
