#!/usr/bin/env bash
# hevo's per-trial overhead: `hevo eval` of a harness that answers instantly, on N tasks,
# against the same harness processes (same stdin, same --jobs) started by a plain runner:
# a plain bash loop (`&` + `wait -n`), `xargs -P` (each job through `sh -c` for the stdin
# redirect) and GNU parallel.
#
# usage: bench/overhead.sh [TASKS] [JOBS] [ROUNDS]   (defaults: 2000 tasks, 2 jobs, 3 rounds)
#
# What each runner does per task: start `sh harness.sh` with the task's input JSON on stdin
# and collect its stdout. hevo additionally makes a fresh working directory, writes
# params.json, captures stdout/stderr to the trace directory, scores the answer (`exact`)
# and writes one SQLite row. The ratio hevo / plain runner is the number to watch
# (target: within 1.2x of the plain runner).
#
# The harness calls no model, so hevo runs with --no-model (no gateway, no model load).
# hevo runs three ways: `hevo-bare` (HEVO_SANDBOX=off HEVO_CGROUP=off: the runner alone),
# `hevo-cgroup` (no sandbox, a cgroup per trial) and `hevo` (the defaults: bubblewrap and a
# cgroup per trial, where this machine allows them). The ratios between them are what
# containment costs per trial.
set -euo pipefail
cd "$(dirname "$0")/.."

TASKS=${1:-2000}
JOBS=${2:-2}
ROUNDS=${3:-3}
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/hevo-overhead.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT

cargo build --release -q -p hevo-cli
HEVO=$PWD/target/release/hevo

# A suite of TASKS tasks and a harness that answers instantly (POSIX sh, no interpreter
# start-up cost to hide hevo's overhead behind).
mkdir -p "$ROOT/suite" "$ROOT/harness" "$ROOT/inputs"
printf 'name = "overhead"\n[scorer]\nkind = "exact"\n' > "$ROOT/suite/suite.toml"
awk -v n="$TASKS" 'BEGIN { for (i = 0; i < n; i++)
  printf "{\"id\":\"t%d\",\"split\":\"val\",\"input\":{\"n\":%d},\"expected\":\"ok\"}\n", i, i }' \
  > "$ROOT/suite/tasks.jsonl"
# The same stdin every runner gives each harness process.
awk -v dir="$ROOT/inputs" -v n="$TASKS" 'BEGIN { for (i = 0; i < n; i++) {
  f = dir "/t" i ".json"; printf "{\"n\":%d}\n", i > f; close(f) } }'
printf 'entry = ["sh", "harness.sh"]\n' > "$ROOT/harness/harness.toml"
printf 'cat > /dev/null\necho "\\"ok\\""\n' > "$ROOT/harness/harness.sh"
H="$ROOT/harness/harness.sh"

now() { date +%s.%N; }
timeit() { # name, command...
  local t0 t1
  t0=$(now)
  "${@:2}" > /dev/null
  t1=$(now)
  echo "$1 $(echo "$t1 - $t0" | bc -l)"
}

# Warm the page cache and the binaries.
(set +o pipefail; cd "$ROOT/inputs" && ls | head -50 | xargs -P "$JOBS" -I{} sh -c "sh '$H' < {}" > /dev/null)

# A plain shell loop: one fork+exec of the harness per task, at most JOBS at a time.
loop_runner() {
  cd "$ROOT/inputs"
  local running=0 f
  for f in *; do
    sh "$H" < "$f" > /dev/null &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
  done
  wait
}

# Rounds are interleaved and the fastest of each runner is kept: on a shared machine the
# minimum is the least noisy estimate of what a runner costs.
declare -A secs all
record() { # name seconds
  all[$1]="${all[$1]:-}${all[$1]:+ }$(printf '%.2f' "$2")"
  if [ -z "${secs[$1]:-}" ] || [ "$(echo "$2 < ${secs[$1]}" | bc -l)" = 1 ]; then secs[$1]=$2; fi
}
for round in $(seq "$ROUNDS"); do
  for r in \
    "$(timeit loop loop_runner)" \
    "$(timeit xargs sh -c "cd '$ROOT/inputs' && ls | xargs -P $JOBS -I{} sh -c \"sh '$H' < {}\"")" \
    "$(timeit parallel sh -c "cd '$ROOT/inputs' && ls | parallel -j $JOBS \"sh '$H' < {}\"")" \
    "$(rm -rf "$ROOT/run"; timeit hevo-bare env HEVO_SANDBOX=off HEVO_CGROUP=off "$HEVO" eval \
        "$ROOT/harness" --suite "$ROOT/suite" --jobs "$JOBS" --run-dir "$ROOT/run" --no-progress --no-model --json)" \
    "$(rm -rf "$ROOT/run"; timeit hevo-cgroup env HEVO_SANDBOX=off "$HEVO" eval "$ROOT/harness" \
        --suite "$ROOT/suite" --jobs "$JOBS" --run-dir "$ROOT/run" --no-progress --no-model --json)" \
    "$(rm -rf "$ROOT/run"; timeit hevo "$HEVO" eval "$ROOT/harness" --suite "$ROOT/suite" \
        --jobs "$JOBS" --run-dir "$ROOT/run" --no-progress --no-model --json)"; do
    record "${r%% *}" "${r#* }"
  done
  echo "round $round: loop ${secs[loop]} xargs ${secs[xargs]} parallel ${secs[parallel]} hevo-bare ${secs[hevo-bare]} hevo-cgroup ${secs[hevo-cgroup]} hevo ${secs[hevo]} (best so far)" >&2
done
n_pass=$(sqlite3 "$ROOT/run/hevo.db" "select count(*) from trials where status='pass'" 2>/dev/null \
  || echo "?")

echo "tasks=$TASKS jobs=$JOBS cores=$(nproc) (hevo trials passed: $n_pass)"
best=loop
for k in loop xargs parallel hevo-bare hevo-cgroup hevo; do
  printf '%-9s %8.2f s  %6.2f ms/trial   (all rounds: %s)\n' "$k" "${secs[$k]}" \
    "$(echo "1000 * ${secs[$k]} / $TASKS" | bc -l)" "${all[$k]}"
done
for k in xargs parallel; do
  if [ "$(echo "${secs[$k]} < ${secs[$best]}" | bc -l)" = 1 ]; then best=$k; fi
done
for k in loop xargs parallel; do
  printf 'ratio hevo-bare/%-9s %.2f\n' "$k" "$(echo "${secs[hevo-bare]} / ${secs[$k]}" | bc -l)"
done
printf 'ratio hevo-bare/fastest plain runner (%s): %.2f (target <= 1.2)\n' "$best" \
  "$(echo "${secs[hevo-bare]} / ${secs[$best]}" | bc -l)"
printf 'ratio hevo-cgroup/hevo-bare %.2f (a cgroup per trial)\n' \
  "$(echo "${secs[hevo-cgroup]} / ${secs[hevo-bare]}" | bc -l)"
printf 'ratio hevo/hevo-bare %.2f (bubblewrap and a cgroup per trial: the defaults)\n' \
  "$(echo "${secs[hevo]} / ${secs[hevo-bare]}" | bc -l)"
