#!/usr/bin/env bash
# The building blocks' GPU benchmarks next to their C baselines, in one run on one GPU
# machine: vmm/kv's page-index commit against bench/c/kvcommit.c (alternating, five times
# each), the vAttention replay with and without the committer (and its plot), and
# checkpoint's lock/checkpoint/restore/unlock against bench/c/checkpoint.c (alternating on
# one child, in the test binary). Build the Go binaries where Go is (`task gpu:build`),
# carry .gpu/, run this from the repository root there. $OUT (default /tmp/cuvmm-blocks)
# receives blocks.txt (the summary), kv.csv and kv.svg, and the raw outputs.
set -euo pipefail
out=${OUT:-/tmp/cuvmm-blocks}
mkdir -p "$out/bin"
root=$PWD
gcc -O2 -I/usr/local/cuda/include bench/c/kvcommit.c -o "$out/bin/kvcommit" -lcuda
gcc -O2 -I/usr/local/cuda/include bench/c/checkpoint.c -o "$out/bin/checkpoint" -lcuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >"$out/machine.txt"
n=${KV_PAGE_INDICES:-256}
for i in 1 2 3 4 5; do
  "$out/bin/kvcommit" "$n" >>"$out/kvcommit.txt"
  (cd vmm/kv && "$root/.gpu/kv.test" -test.run '^$' -test.bench 'GPUCommitPageIndex$' -test.benchtime "${n}x") >>"$out/kvcommit.txt"
done
rm -f "$out/kv.csv"
(cd vmm/kv && CUVMM_KV_CSV="$out/kv.csv" "$root/.gpu/kv.test" -test.run '^$' -test.bench 'GPUReplay$' -test.benchtime 1x) >"$out/replay.txt"
.gpu/plot -bars µs -log on -in "$out/kv.csv" -o "$out/kv.svg" -title "vmm/kv: step-path wait, vAttention Fig. 11 replay (300 requests)" \
  -subtitle "$(cat "$out/machine.txt"), 64 planes x 2 MiB pages, 10 ms steps; logarithmic"
(cd checkpoint && CUVMM_CHECKPOINT_C="$out/bin/checkpoint" "$root/.gpu/checkpoint.test" -test.run '^$' -test.bench 'GPUCheckpoint$' -test.benchtime 1x -test.v) >"$out/checkpoint.txt"

{
  echo "machine: $(cat "$out/machine.txt")"
  awk '$1 == "c" && $2 == "kv-commit-page-index" { c[++nc] = $3 }
    /^BenchmarkGPUCommitPageIndex/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ms/page-index") g[++ng] = $i }
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
    END { printf "kv page-index commit (64 planes, 2 MiB), ms: C"; for (i = 1; i <= nc; i++) printf " %.3f", c[i]
      printf "; Go"; for (i = 1; i <= ng; i++) printf " %.3f", g[i]
      cm = med(c, nc); gm = med(g, ng); printf "; medians C %.3f, Go %.3f, Go/C %.3f\n", cm, gm, gm / cm }' "$out/kvcommit.txt"
  grep '^BenchmarkGPUReplay' "$out/replay.txt"
  grep '^BenchmarkGPUCheckpoint' "$out/checkpoint.txt"
} | tee "$out/blocks.txt"
