#!/usr/bin/env bash
# The long fuzz run: real libFuzzer (cargo-fuzz) on the stable toolchain, every target for
# SECONDS each (default 120), seeded from corpus/<target>/. Results: bench/fuzz.md.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      (or ./dev fuzz [SECONDS] [TARGET...])
#
# Stable rustc has no sanitizers, so the targets are built without one (`-s none`):
# libFuzzer's coverage instrumentation (sancov) still works, and RUSTC_BOOTSTRAP=1 lets
# cargo-fuzz pass its `-Z` flags to stable. A crash is a panic (or an abort) of a target;
# libFuzzer leaves its input in fuzz/artifacts/<target>/. New inputs go to fuzz/work/,
# never into the checked-in corpus: copy a regression input there by hand once fixed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
seconds=${1:-120}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(suite harness config gateway matrix)
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
eval "$(../dev env)"
export RUSTC_BOOTSTRAP=1
nice cargo fuzz build -s none
mkdir -p logs
for t in "${targets[@]}"; do
  mkdir -p "work/$t" "artifacts/$t"
  echo "== $t: ${seconds}s" >&2
  nice cargo fuzz run -s none "$t" "work/$t" "corpus/$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    >"logs/$t.log" 2>&1 && status=ok || status="FAILED (see fuzz/logs/$t.log)"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -n 1)
  echo "$t: $status, ${execs:-?} executions in ${seconds}s" >&2
done
