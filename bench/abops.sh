#!/usr/bin/env bash
# The interleaved per-operation comparison (bench/cgo BenchmarkOpsAB): C, a cgo binding and
# cuvmm in one process. Prints the "ab" lines; run from the repository root on a GPU
# machine after `task bench:gpu`. ROUNDS repeats the whole set.
set -euo pipefail
rounds=${ROUNDS:-1}
for r in $(seq "$rounds"); do
  for spec in cycle/2MiB:600x cycle/64MiB:300x cycle/1024MiB:60x batch/2MiB:30x batch/64MiB:60x batch/1024MiB:60x; do
    .gpu/cgo.test -test.run '^$' -test.bench "OpsAB/${spec%%:*}\$" -test.benchtime "${spec#*:}" | grep '^ab ' | sed "s/^/round$r /"
  done
done
