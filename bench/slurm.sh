#!/usr/bin/env bash
# Overhead of the Slurm executor per trial against the local pool, same machine, same run:
#   bench/slurm.sh [TASKS]      (default 40 val tasks; needs a cluster: .ci/slurm-up.sh)
# Runs one `hevo run` (strategy full, no proposals accepted: 1 iteration of the params
# proposer) with `[executor] kind = "local"` and then `"slurm"`, and prints wall seconds per
# trial for each and their ratio. Both runs are in the same invocation, so the ratio holds on
# a loaded machine even when the absolute times do not.
set -euo pipefail
TASKS=${1:-40}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEVO=${HEVO:-$ROOT/target/release/hevo}
[ -x "$HEVO" ] || (cd "$ROOT" && cargo build --release -q -p hevo-cli)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mk() { # mk DIR KIND
  mkdir -p "$1/seed"
  printf 'name = "seed"\nentry = ["bash", "h.sh"]\n' >"$1/seed/harness.toml"
  printf 'cat\n' >"$1/seed/h.sh"
  printf 'name = "echo"\n[scorer]\nkind = "exact"\n' >"$1/suite.toml"
  { echo '{"id":"tr","split":"train","input":"a","expected":"a"}'
    for i in $(seq "$TASKS"); do echo "{\"id\":\"v$i\",\"split\":\"val\",\"input\":\"x$i\",\"expected\":\"x$i\"}"; done
  } >"$1/tasks.jsonl"
  printf 'suite = "."\nseeds = ["seed"]\n[model]\n[search]\niterations = 1\ncandidates_per_iteration = 1\njobs = 2\n[evaluation]\nstrategy = "full"\n[executor]\nkind = "%s"\n' "$2" >"$1/hevo.toml"
}
for kind in local slurm; do
  mk "$WORK/$kind" "$kind"
  start=$(date +%s.%N)
  TMPDIR=$WORK "$HEVO" run --json --no-progress "$WORK/$kind" >"$WORK/$kind.json"
  end=$(date +%s.%N)
  trials=$(python3 -c "import json,sys; print(json.load(open('$WORK/$kind.json'))['evaluations'])")
  echo "$kind $trials $(python3 -c "print(f'{($end-$start):.2f}')")"
done | python3 -c '
import sys
rows = {k: (int(t), float(s)) for k, t, s in (l.split() for l in sys.stdin)}
for k, (t, s) in rows.items():
    print(f"{k:5s}: {t} trials in {s:.2f} s, {1000*s/t:.0f} ms per trial")
l, s = rows["local"], rows["slurm"]
print(f"slurm / local per trial: {(s[1]/s[0]) / (l[1]/l[0]):.1f}x")
'
