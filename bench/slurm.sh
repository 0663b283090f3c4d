#!/usr/bin/env bash
# Overhead of the Slurm executor per trial against the local pool, same machine, same run:
#   bench/slurm.sh [TASKS]      (default 40 val tasks; needs a cluster: .ci/slurm-up.sh)
# Runs one `hevo run` (strategy full, no proposals accepted: 1 iteration of the params
# proposer) with `[executor] kind = "local"`, then `"slurm"` with every launch its own job
# (`array_max = 1`), then `"slurm"` with job arrays (the default), and prints wall seconds
# per trial for each and their ratios to local. JOBS (default 4) is `[search] jobs`. Both runs are in the same invocation, so the ratio holds on
# a loaded machine even when the absolute times do not.
set -euo pipefail
TASKS=${1:-40}
JOBS=${JOBS:-4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEVO=${HEVO:-$ROOT/target/release/hevo}
[ -x "$HEVO" ] || (cd "$ROOT" && cargo build --release -q -p hevo-cli)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mk() { # mk DIR KIND EXTRA-EXECUTOR-LINE
  mkdir -p "$1/seed"
  printf 'name = "seed"\nentry = ["bash", "h.sh"]\n' >"$1/seed/harness.toml"
  printf 'cat\n' >"$1/seed/h.sh"
  printf 'name = "echo"\n[scorer]\nkind = "exact"\n' >"$1/suite.toml"
  { echo '{"id":"tr","split":"train","input":"a","expected":"a"}'
    for i in $(seq "$TASKS"); do echo "{\"id\":\"v$i\",\"split\":\"val\",\"input\":\"x$i\",\"expected\":\"x$i\"}"; done
  } >"$1/tasks.jsonl"
  printf 'suite = "."\nseeds = ["seed"]\n[model]\n[search]\niterations = 1\ncandidates_per_iteration = 1\njobs = %s\n[evaluation]\nstrategy = "full"\n[executor]\nkind = "%s"\n%s\n' "$JOBS" "$2" "$3" >"$1/hevo.toml"
}
for run in local slurm-jobs slurm-arrays; do
  case $run in
    local) mk "$WORK/$run" local "" ;;
    slurm-jobs) mk "$WORK/$run" slurm "array_max = 1" ;;
    slurm-arrays) mk "$WORK/$run" slurm "" ;;
  esac
  kind=$run
  start=$(date +%s.%N)
  TMPDIR=$WORK "$HEVO" run --json --no-progress "$WORK/$kind" >"$WORK/$kind.json"
  end=$(date +%s.%N)
  trials=$(python3 -c "import json,sys; print(json.load(open('$WORK/$kind.json'))['evaluations'])")
  echo "$kind $trials $(python3 -c "print(f'{($end-$start):.2f}')")"
done | python3 -c '
import sys
rows = {k: (int(t), float(s)) for k, t, s in (l.split() for l in sys.stdin)}
for k, (t, s) in rows.items():
    print(f"{k:12s}: {t} trials in {s:.2f} s, {1000*s/t:.0f} ms per trial")
l = rows["local"]
for k in ("slurm-jobs", "slurm-arrays"):
    s = rows[k]
    print(f"{k} / local per trial: {(s[1]/s[0]) / (l[1]/l[0]):.1f}x")
j, a = rows["slurm-jobs"], rows["slurm-arrays"]
print(f"slurm-arrays / slurm-jobs per trial: {(a[1]/a[0]) / (j[1]/j[0]):.2f}x")
'
