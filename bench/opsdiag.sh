#!/usr/bin/env bash
# Where does cuvmm's per-operation time over C go? Alternates, ROUNDS times: the C program
# (per-operation clock reads, and batched phases), the same C loop inside a Go process
# (bench/cgo), cu's raw and exported layers, and vmm's backend with two clocks. Prints the
# median of each variant for each operation. Run from the repository root on a GPU machine
# after `task bench:gpu`.
set -euo pipefail
out=${OUT:-/tmp/cuvmm-opsdiag}
rounds=${ROUNDS:-3}
mkdir -p "$out"
raw="$out/raw.txt"; : >"$raw"
gcc -O2 -I/usr/local/cuda/include bench/c/callcost.c -o /tmp/callcost -lcuda
cat /sys/devices/system/clocksource/clocksource0/current_clocksource /sys/devices/system/clocksource/clocksource0/available_clocksource 2>&1 | sed 's/^/clocksource: /'
grep -m1 'model name' /proc/cpuinfo || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
tag() { sed "s/^/$1 /" >>"$raw"; }
for r in $(seq "$rounds"); do
  /tmp/callcost 0 ops | tag C
  /tmp/callcost 0 batch | tag CB
  .gpu/cgo.test -test.run '^$' -test.bench 'CgoOps' -test.benchtime 1x | tag CGO
  for spec in 2MiB:2000x 64MiB:200x 1024MiB:20x; do
    CUVMM_OPS_CLOCK=now .gpu/vmm.test -test.run '^$' -test.bench "GPUOps/${spec%%:*}\$" -test.benchtime "${spec#*:}" | tag VNOW
    .gpu/vmm.test -test.run '^$' -test.bench "GPUOps/${spec%%:*}\$" -test.benchtime "${spec#*:}" | tag VMONO
    .gpu/cu.test -test.run '^$' -test.bench "GPUOpsLayers/.*/${spec%%:*}\$" -test.benchtime "${spec#*:}" 2>/dev/null | tag CU
  done
  .gpu/vmm.test -test.run '^$' -test.bench 'GPUOpsBatch' -test.benchtime 8x | tag VB
done
.gpu/cu.test -test.run '^$' -test.bench 'Clock' -test.count 3 | tag CLK
cp "$raw" "$out/" 2>/dev/null || true
awk '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
  function add(v, key, x) { vals[v, key, ++cnt[v, key]] = x; seenv[v] = 1 }
  ($1 == "C" && $2 == "c") || ($1 == "CB" && $2 == "cb") { if ($3 ~ /\//) add($1, $3, $4); else add($1, $3, $4) }
  $1 == "CLK" && /^CLK Benchmark/ { add("CLK", $2, $4) }
  /Benchmark(CgoOps|GPUOps|GPUOpsBatch|GPUOpsLayers)\// {
    n = split($2, p, "/"); sz = p[n]; sub(/-[0-9]+$/, "", sz); sub(/MiB/, "", sz); v = $1
    if ($2 ~ /GPUOpsLayers/) v = "CU-" p[2]
    for (i = 4; i < NF; i += 2) { m = $(i + 1); if (m == "ns/op" || m !~ /^ns\//) continue; sub(/^ns\//, "", m); add(v, m "/" sz "MiB", $i) } }
  END {
    nv = split("C CGO CU-raw CU-raw-dlsym CU-cu VMONO VNOW CB VB", vs, " ")
    printf "%-18s", "op (median ns)"; for (i = 1; i <= nv; i++) printf " %12s", vs[i]; printf "\n"
    ns = split("2 64 1024", szs, " "); no = split("create map setaccess unmap release", ops, " ")
    for (s = 1; s <= ns; s++) for (o = 1; o <= no; o++) { key = ops[o] "/" szs[s] "MiB"; printf "%-18s", key
      for (i = 1; i <= nv; i++) { v = vs[i]; n = cnt[v, key]; if (!n) { printf " %12s", "-"; continue }
        for (j = 1; j <= n; j++) a[j] = vals[v, key, j]; printf " %12.0f", med(a, n) }
      printf "\n" }
    for (k in cnt) { split(k, kk, SUBSEP); if (kk[1] == "CLK" || kk[2] == "clock_gettime") { n = cnt[k]; for (j = 1; j <= n; j++) a[j] = vals[kk[1], kk[2], j]; printf "clock %s %s: %.1f ns\n", kk[1], kk[2], med(a, n) } }
  }' "$raw" | tee "$out/table.txt"
