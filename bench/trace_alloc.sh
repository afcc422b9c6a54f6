#!/usr/bin/env bash
# The cost of `gpudoctor trace-alloc` per CUDA call, against the same program
# without it, in the same run: bench/trace_alloc_bench (a million cudaMalloc /
# cudaFree pairs through the stub runtime) alternately plain and traced, for
# ROUNDS rounds. Prints each round and the median overhead per call (half a
# pair's difference: an allocation and a free are two calls).
#
#   bench/trace_alloc.sh BUILD_DIR [PAIRS] [ROUNDS] [THREADS]
set -euo pipefail
build=${1:?usage: bench/trace_alloc.sh BUILD_DIR [PAIRS] [ROUNDS] [THREADS]}
pairs=${2:-1000000}
rounds=${3:-5}
threads=${4:-1}
bench="$build/trace_test/trace_alloc_bench"
gd="$build/bin/gpudoctor"
figure() { sed -n 's/.*ns_per_pair=\([0-9.]*\).*/\1/p'; }
plain=() traced=()
for ((round = 1; round <= rounds; round++)); do
  p=$("$bench" "$pairs" "$threads" 2>&1 | figure)
  t=$("$gd" trace-alloc --interval 0 --report /dev/null -- "$bench" "$pairs" "$threads" 2>&1 | figure)
  plain+=("$p") traced+=("$t")
  python3 -c "print(f'round $round: plain {$p:.1f} ns/pair, traced {$t:.1f} ns/pair, ' \
                    f'overhead {($t - $p) / 2:.1f} ns/call, ratio {$t / $p:.2f}x')"
done
python3 - "${plain[*]}" "${traced[*]}" <<'PY'
import statistics, sys
plain = [float(x) for x in sys.argv[1].split()]
traced = [float(x) for x in sys.argv[2].split()]
over = [(t - p) / 2 for p, t in zip(plain, traced)]
ratio = [t / p for p, t in zip(plain, traced)]
print(f"median: plain {statistics.median(plain):.1f} ns/pair, traced {statistics.median(traced):.1f} ns/pair, "
      f"overhead {statistics.median(over):.1f} ns per call, ratio {statistics.median(ratio):.2f}x")
PY
