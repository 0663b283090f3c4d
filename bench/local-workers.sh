#!/bin/bash
# One `hevo eval` of an examples/classify seed with the local backend configured as
# bench/local-model.md's "Workers" table says, with the response cache off (a fresh
# HEVO_HOME that links the pulled model). Prints the wall time and the pass rate.
#   bench/local-workers.sh CONFIG HARNESS SPLIT     e.g. t1p2 few-shot val
# CONFIG is tTpP: T threads per worker, P workers.
set -euo pipefail
cfg=$1 harness=$2 split=$3
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${cfg#t}; threads=${threads%p*}; parallel=${cfg#*p}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"
ln -s "${HEVO_HOME:-$HOME/.cache/hevo}/models" "$work/home/models"
cat > "$work/hevo.toml" <<TOML
suite = "$root/examples/classify/suite"
seeds = ["$root/examples/classify/$harness"]
[model]
default_model = "smollm2"
[[model.backends]]
name = "local"
kind = "local"
threads = $threads
parallel = $parallel
[[model.models]]
name = "smollm2"
backend = "local"
upstream_model = "smollm2-135m-instruct"
TOML
start=$(date +%s.%N)
HEVO_HOME="$work/home" "$root/target/release/hevo" eval "$root/examples/classify/$harness" \
  --suite "$root/examples/classify/suite" --split "$split" --model-config "$work/hevo.toml" \
  --run-dir "$work/run" --no-progress --json > "$work/out.json" 2> "$work/err.txt" \
  || { cat "$work/err.txt" >&2; exit 1; }
end=$(date +%s.%N)
python3 - "$work/out.json" "$cfg $harness $split" "$start" "$end" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"{float(sys.argv[4]) - float(sys.argv[3]):.1f} s",
      "pass_rate", d["pass_rate"], "input tokens", d["tokens"]["input"])
PY
