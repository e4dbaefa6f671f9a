#!/usr/bin/env bash
# The building blocks' GPU benchmarks next to their C baselines, in one run on one GPU
# machine: vmm/kv's page-index commit against C making the same calls in the same process
# (bench/cgo BenchmarkKVCommitAB, alternating page index by page index), the vAttention
# replay with and without the committer (and its plot), and checkpoint's
# lock/checkpoint/restore/unlock against bench/c/checkpoint.c (alternating on one child,
# in the test binary). Build the Go binaries where Go is (`task bench:gpu`), carry .gpu/,
# run this from the repository root there. $OUT (default /tmp/cuvmm-blocks)
# receives blocks.txt (the summary), kv.csv and kv.svg, and the raw outputs.
set -euo pipefail
out=${OUT:-/tmp/cuvmm-blocks}
mkdir -p "$out/bin"
root=$PWD
gcc -O2 -I/usr/local/cuda/include bench/c/checkpoint.c -o "$out/bin/checkpoint" -lcuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >"$out/machine.txt"
.gpu/cgo.test -test.run '^$' -test.bench 'KVCommitAB$' -test.benchtime "${KV_PAGE_INDICES:-512}x" >"$out/kvcommit.txt"
rm -f "$out/kv.csv"
(cd vmm/kv && CUVMM_KV_CSV="$out/kv.csv" "$root/.gpu/kv.test" -test.run '^$' -test.bench 'GPUReplay$' -test.benchtime 1x) >"$out/replay.txt"
.gpu/plot -bars µs -log on -in "$out/kv.csv" -o "$out/kv.svg" -title "vmm/kv: step-path wait, vAttention Fig. 11 replay (300 requests)" \
  -subtitle "$(cat "$out/machine.txt"), 64 planes x 2 MiB pages, 10 ms steps; logarithmic"
(cd checkpoint && CUVMM_CHECKPOINT_C="$out/bin/checkpoint" "$root/.gpu/checkpoint.test" -test.run '^$' -test.bench 'GPUCheckpoint$' -test.benchtime 1x -test.v) >"$out/checkpoint.txt"

{
  echo "machine: $(cat "$out/machine.txt")"
  grep -h '^kv-commit-ab' "$out/kvcommit.txt" | tail -1
  grep '^BenchmarkGPUReplay' "$out/replay.txt"
  grep '^BenchmarkGPUCheckpoint' "$out/checkpoint.txt"
} | tee "$out/blocks.txt"
