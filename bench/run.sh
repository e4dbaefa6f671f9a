#!/usr/bin/env bash
# Side-by-side per-call and per-operation costs: C, cgo and cuvmm (Go, no cgo), measured in
# one run on one GPU machine. The machine needs gcc and the CUDA driver, not Go: build the
# Go binaries first where Go is (`task bench:gpu`), carry .gpu/, then run this from the
# repository root there. Raw outputs go to $OUT (default /tmp/cuvmm-bench).
set -euo pipefail
out=${OUT:-/tmp/cuvmm-bench}
mkdir -p "$out"
gcc -O2 -I/usr/local/cuda/include bench/c/callcost.c -o "$out/callcost" -lcuda
"$out/callcost" 1000000 >"$out/c.txt"
.gpu/cgo.test -test.run '^$' -test.bench . -test.benchtime 1000000x -test.count 3 >"$out/cgo.txt"
.gpu/cu.test -test.run '^$' -test.bench GPU -test.benchtime 1000000x -test.count 3 >"$out/go.txt"
for spec in 2MiB:2000x 64MiB:200x 1024MiB:20x; do
  .gpu/vmm.test -test.run '^$' -test.bench "GPUOps/${spec%%:*}\$" -test.benchtime "${spec#*:}" >>"$out/goops.txt"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >"$out/machine.txt"

# One table: the median of the Go and cgo runs, the C figure, and the ratios.
awk -v machine="$(cat "$out/machine.txt")" '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
  FILENAME ~ /c.txt$/ && $1 == "c" { c[$2] = $3 }
  FILENAME ~ /cgo.txt$/ && /^BenchmarkCgo/ { name = $1; sub(/^BenchmarkCgo/, "cu", name); sub(/-[0-9]+$/, "", name); cgo[name, ++ncgo[name]] = $3 }
  FILENAME ~ /go.txt$/ && /^BenchmarkGPU/ { name = $1; sub(/^BenchmarkGPU/, "cu", name); sub(/-[0-9]+$/, "", name); g[name, ++ng[name]] = $3; al[name] = $7 }
  FILENAME ~ /goops.txt$/ && /^BenchmarkGPUOps/ { split($1, p, "/"); sz = p[2]; sub(/-[0-9]+$/, "", sz); if (sz == "1024MiB") sz = "1024MiB";
    for (i = 5; i < NF; i += 2) { m = $(i + 1); sub(/^ns\//, "", m); ops[m "/" sz] = $i } }
  END {
    printf "machine: %s\n\n", machine
    printf "%-34s %10s %10s %10s %9s %9s %7s\n", "per call (ns)", "C", "cgo", "cuvmm", "cuvmm/C", "cuvmm/cgo", "allocs"
    split("cuDriverGetVersion cuDeviceGetAttribute cuMemGetAllocationGranularity", calls, " ")
    for (k = 1; k <= 3; k++) { n = calls[k]
      for (i = 1; i <= ncgo[n]; i++) a[i] = cgo[n, i]; cg = med(a, ncgo[n])
      for (i = 1; i <= ng[n]; i++) b[i] = g[n, i]; gg = med(b, ng[n])
      printf "%-34s %10.1f %10.1f %10.1f %9.2f %9.2f %7s\n", n, c[n], cg, gg, gg / c[n], gg / cg, al[n] }
    printf "\n%-34s %12s %12s %9s\n", "per VMM operation (ns)", "C", "cuvmm", "cuvmm/C"
    split("create map setaccess unmap release", o, " ")
    split("2MiB 64MiB 1024MiB", s, " ")
    for (j = 1; j <= 3; j++) for (k = 1; k <= 5; k++) { key = o[k] "/" s[j]
      printf "%-34s %12.0f %12.0f %9.3f\n", key, c[key], ops[key], ops[key] / c[key] }
  }' "$out/c.txt" "$out/cgo.txt" "$out/go.txt" "$out/goops.txt" | tee "$out/table.txt"
