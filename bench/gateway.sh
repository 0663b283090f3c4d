#!/usr/bin/env bash
# Model-layer benchmarks (results: bench/gateway.md, bench/local-model.md).
#
#   bench/gateway.sh            gateway overhead per call (p50/p99, gateway vs upstream directly)
#   bench/gateway.sh local      local-model prompt/generation tokens/s vs a raw llama-cpp-2 loop
#   bench/gateway.sh all        both
#
# HEVO_BENCH_CALLS (default 2000) sets the calls per path; HEVO_BENCH_THREADS (default 2) the
# local model's threads. The local bench needs the default model: `hevo model pull`.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-gateway}"
if [[ "$what" == gateway || "$what" == all ]]; then
  echo "## gateway overhead ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
  cargo bench -q -p hevo-llm --bench gateway
fi
if [[ "$what" == local || "$what" == all ]]; then
  echo "## local model throughput ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
  cargo bench -q -p hevo-llm --bench local_model
fi
