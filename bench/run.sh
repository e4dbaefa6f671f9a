#!/usr/bin/env bash
# Side-by-side per-call and per-operation costs (C, cgo and cuvmm, Go with no cgo) and the
# growth of one device buffer (C: bench/c/grow.c; Go: bench/grow), measured in one run on
# one GPU machine. The machine needs gcc and the CUDA driver, not Go: build the Go binaries
# first where Go is (`task bench:gpu`), carry .gpu/, then run this from the repository root
# there.
#
# $OUT (default /tmp/cuvmm-bench) receives only the key files: table.txt (every table),
# growth.svg (the plot), growth.csv (the per-step series), growth_summary.csv (one row per
# run and strategy, and the capacity test) and bench.tgz (every raw output). The raw
# outputs are written to a scratch directory ($BENCH_WORK, default a new one under /tmp).
set -euo pipefail
out=${OUT:-/tmp/cuvmm-bench}
work=${BENCH_WORK:-$(mktemp -d /tmp/cuvmm-bench-raw.XXXXXX)}
mkdir -p "$out" "$work/bin"
gcc -O2 -I/usr/local/cuda/include bench/c/callcost.c -o "$work/bin/callcost" -lcuda
"$work/bin/callcost" 1000000 >"$work/c.txt"
.gpu/cgo.test -test.run '^$' -test.bench 'Cgo(DriverGetVersion|DeviceGetAttribute|MemGetAllocationGranularity)$' \
  -test.benchtime 1000000x -test.count 3 >"$work/cgo.txt"
.gpu/cu.test -test.run '^$' -test.bench 'GPU(DriverGetVersion|DeviceGetAttribute|MemGetAllocationGranularity)$' \
  -test.benchtime 1000000x -test.count 3 >"$work/go.txt"
# Per VMM operation: C, a cgo binding and cuvmm interleaved in one process (bench/cgo
# BenchmarkOpsAB), each operation timed one by one ("cycle") and in batches.
for spec in cycle/2MiB:1000x cycle/64MiB:500x cycle/1024MiB:100x batch/2MiB:40x batch/64MiB:100x batch/1024MiB:100x; do
  .gpu/cgo.test -test.run '^$' -test.bench "OpsAB/${spec%%:*}\$" -test.benchtime "${spec#*:}" >>"$work/ab.txt"
done
# Concurrency: C threads, a cgo binding and cuvmm goroutines at 1 to 16 workers, on own and
# on shared handles, interleaved in one process (bench/cgo BenchmarkConcurrency); once in a
# process that holds no context and once in one that holds the primary context.
CONC_REPS=${CONC_REPS:-7} .gpu/cgo.test -test.run '^$' -test.bench 'Concurrency' -test.benchtime 1x >"$work/conc.txt"
CONC_REPS=${CONC_REPS:-7} CONC_CONTEXT=primary .gpu/cgo.test -test.run '^$' -test.bench 'Concurrency' -test.benchtime 1x >"$work/conc_ctx.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >"$work/machine.txt"

# One table: the median of the Go and cgo runs, the C figure, and the ratios.
awk -v machine="$(cat "$work/machine.txt")" '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
  FILENAME ~ /c.txt$/ && $1 == "c" { c[$2] = $3 }
  FILENAME ~ /cgo.txt$/ && /^BenchmarkCgo/ { name = $1; sub(/^BenchmarkCgo/, "cu", name); sub(/-[0-9]+$/, "", name); cgo[name, ++ncgo[name]] = $3 }
  FILENAME ~ /go.txt$/ && /^BenchmarkGPU/ { name = $1; sub(/^BenchmarkGPU/, "cu", name); sub(/-[0-9]+$/, "", name); g[name, ++ng[name]] = $3; al[name] = $7 }
  FILENAME ~ /ab.txt$/ && $1 == "ab" { k = $2 " " $3; abmed[k, $4] = $8; abrm[k, $4] = $10; abmpr[k, $4] = $12; abn[k] = $14; abd[k, $4] = $16 }
  END {
    printf "machine: %s\n\n", machine
    printf "%-34s %10s %10s %10s %9s %9s %7s\n", "per call (ns)", "C", "cgo", "cuvmm", "cuvmm/C", "cuvmm/cgo", "allocs"
    split("cuDriverGetVersion cuDeviceGetAttribute cuMemGetAllocationGranularity", calls, " ")
    for (k = 1; k <= 3; k++) { n = calls[k]
      for (i = 1; i <= ncgo[n]; i++) a[i] = cgo[n, i]; cg = med(a, ncgo[n])
      for (i = 1; i <= ng[n]; i++) b[i] = g[n, i]; gg = med(b, ng[n])
      printf "%-34s %10.1f %10.1f %10.1f %9.2f %9.2f %7s\n", n, c[n], cg, gg, gg / c[n], gg / cg, al[n] }
    printf "\nper VMM operation, interleaved in one process (bench/cgo BenchmarkOpsAB): median ns, and the median of\n"
    printf "per-iteration ratios over C (mean ratio in brackets); driver = the call alone, timed in C, made from Go;\n"
    printf "over cgo = the median of per-iteration differences cuvmm - cgo (ns)\n"
    printf "%-22s %10s %10s %10s %10s %16s %16s %8s %9s\n", "operation", "C", "cgo", "cuvmm", "driver", "cuvmm/C", "cgo/C", "driver/C", "over cgo"
    split("cycle/2MiB cycle/64MiB cycle/1024MiB batch/2MiB batch/64MiB batch/1024MiB", cs, " ")
    split("create map setaccess unmap release", o, " ")
    for (j = 1; j <= 6; j++) for (q = 1; q <= 5; q++) { k = cs[j] " " o[q]; if (!(k in abn)) continue
      printf "%-22s %10.0f %10.0f %10.0f %10.0f %8.3f [%5.3f] %8.3f [%5.3f] %8.3f %+9.0f\n", cs[j] " " o[q], abmed[k, "c"], abmed[k, "cgo"], abmed[k, "cuvmm"], abmed[k, "cgo-ctimed"],
        abmpr[k, "cuvmm"], abrm[k, "cuvmm"], abmpr[k, "cgo"], abrm[k, "cgo"], abmpr[k, "cgo-ctimed"], abd[k, "cuvmm"] }
  }' "$work/c.txt" "$work/cgo.txt" "$work/go.txt" "$work/ab.txt" | tee "$out/table.txt"

# The concurrency tables: thousands of driver operations per second (median of the
# repetitions) and the median of per-repetition ratios over the C threads.
conc_table() {
  awk -v title="$1" '$1 == "conc" { k = $2 " " $3; seen[k] = 1; ops[k, $4] = $6; r[k, $4] = $8; n[k] = $10 }
  $1 == "conc-cost" { k = $2 " " $3; cpu[k, $4] = $8; al[k, $4] = $10 }
  END {
    printf "\nconcurrency (bench/cgo BenchmarkConcurrency), %s: thousand driver operations/s, median of %s repetitions,\n", title, n["own 1"]
    printf "and the median of per-repetition ratios over C threads; own: each worker its own chunks;\n"
    printf "shared: half the workers map, query and export shared handles while the others create and release theirs;\n"
    printf "CPU: the process'"'"'s CPU time per driver operation (us, all threads), allocs: heap allocations per operation\n"
    printf "%-8s %7s %10s %10s %10s %9s %9s %8s %8s %8s %8s %8s\n", "workload", "workers", "C", "cgo", "cuvmm", "cgo/C", "cuvmm/C", "C CPU", "cgo CPU", "cuvmm CPU", "cgo al", "cuvmm al"
    split("own shared", wl, " "); split("1 2 4 8 16", ws, " ")
    for (i = 1; i <= 2; i++) for (j = 1; j <= 5; j++) { k = wl[i] " " ws[j]; if (!(k in seen)) continue
      printf "%-8s %7s %10.1f %10.1f %10.1f %9.3f %9.3f %8.2f %8.2f %8.2f %8.3f %8.3f\n", wl[i], ws[j], ops[k, "c"] / 1000, ops[k, "cgo"] / 1000, ops[k, "cuvmm"] / 1000, r[k, "cgo"], r[k, "cuvmm"],
        cpu[k, "c"], cpu[k, "cgo"], cpu[k, "cuvmm"], al[k, "cgo"], al[k, "cuvmm"] }
  }' "$2" | tee -a "$out/table.txt"
}
conc_table "no context in the process" "$work/conc.txt"
conc_table "the primary context held" "$work/conc_ctx.txt"

# Growth of one buffer to 16 GiB in 64 MiB steps and to 4 GiB in 2 MiB steps: grow.c's four
# strategies in C, then bench/grow (the growable buffer and the Go ports of the same four,
# with the peak device memory of each), then the capacity test (grow until out of memory).
# A failure here still leaves the tables, the plot and the tarball; the exit status says so.
grow_rc=0
gcc -O2 -I/usr/local/cuda/include bench/c/grow.c -o "$work/bin/grow" -lcuda
"$work/bin/grow" 16 64 >"$work/grow_c.txt" || grow_rc=$?
"$work/bin/grow" 4 2 >>"$work/grow_c.txt" || grow_rc=$?
# Each run, and the capacity test, in a process of its own, as a program growing one buffer
# would be: a run that follows another in the same process measures the first one's leftovers
# too (the 2 MiB-step buffer ran about 4x slower after the 16 GiB run).
: >"$work/grow_go.txt"; : >"$work/grow_go.err"; csvs=(); sums=()
for run in 16GiB/64MiB 4GiB/2MiB capacity; do
  args=(-runs "$run"); [ "$run" = capacity ] && args=(-runs '' -capacity)
  part="$work/grow.${run//\//_}"
  .gpu/grow "${args[@]}" -csv "$part.csv" -summary "$part.summary.csv" >>"$work/grow_go.txt" 2>>"$work/grow_go.err" || grow_rc=$?
  [ -f "$part.csv" ] && csvs+=("$part.csv"); [ -f "$part.summary.csv" ] && sums+=("$part.summary.csv")
done
cat "$work/grow_go.err" >&2
# One file of each kind, the header once; empty where every run failed, so that the tables
# below still print.
merge() { local to=$1; shift; : >"$to"; [ $# -gt 0 ] && awk 'FNR == 1 && NR != 1 { next } 1' "$@" >"$to"; return 0; }
merge "$work/growth.csv" "${csvs[@]}"
merge "$work/growth_summary.csv" "${sums[@]}"
.gpu/plot -in "$work/growth.csv" -o "$out/growth.svg" -subtitle "$(cat "$work/machine.txt")" || grow_rc=$?

# One table: strategy x run, C and Go times, the Go run's peak device memory, and each time
# over the growable buffer's (geometric policy, Go); then the capacity test.
awk '
  function v(x, f) { return x == "" ? "-" : sprintf(f, x) }
  function r(x, y) { return (x == "" || y == "" || y == 0) ? "-" : sprintf("%.2f", x / y) }
  FILENAME ~ /grow_c.txt$/ && /^grow / { n = split($0, f, / +/); t = f[3]; s = f[4]; sub(/^total=/, "", t); sub(/^step=/, "", s)
    cms[f[2], t "/" s] = f[6] }
  FILENAME ~ /growth_summary.csv$/ && FNR > 1 { split($0, f, ",")
    st[f[2], f[1]] = f[3]
    if (f[3] == "ok" || f[3] == "out_of_memory") { gms[f[2], f[1]] = f[7] / 1e6; if (f[11] != "") peak[f[2], f[1]] = f[11] / 2^30 }
    if (f[1] == "capacity") { cap[f[2]] = f[3]; reached[f[2]] = f[15] / 2^30; dev[f[2]] = f[16] / 2^30; free[f[2]] = f[17] / 2^30 } }
  END {
    nr = split("16GiB/64MiB 4GiB/2MiB", runs, " ")
    ns = split("buffer_geometric buffer_exact vmm_reserved vmm_doubling memalloc_doubling memalloc_exact", strat, " ")
    printf "\ngrowth of one buffer: time (ms), peak device memory over the baseline (GiB, Go run),\n"
    printf "and time over the growable buffer'"'"'s (buffer_geometric, Go): C/buf, Go/buf\n"
    printf "%-18s", ""; for (j = 1; j <= nr; j++) printf " | %-44s", runs[j]; printf "\n"
    printf "%-18s", "strategy"; for (j = 1; j <= nr; j++) printf " | %9s %9s %8s %7s %7s", "C ms", "Go ms", "peak GiB", "C/buf", "Go/buf"; printf "\n"
    for (i = 1; i <= ns; i++) { k = strat[i]; printf "%-18s", k
      for (j = 1; j <= nr; j++) { ref = gms["buffer_geometric", runs[j]]
        printf " | %9s %9s %8s %7s %7s", v(cms[k, runs[j]], "%.1f"), v(gms[k, runs[j]], "%.1f"), v(peak[k, runs[j]], "%.2f"),
          r(cms[k, runs[j]], ref), r(gms[k, runs[j]], ref) }
      printf "\n" }
    for (i = 1; i <= ns; i++) for (j = 1; j <= nr; j++) if (st[strat[i], runs[j]] != "" && st[strat[i], runs[j]] != "ok")
      printf "  %s %s: %s (growth_summary.csv says why)\n", strat[i], runs[j], st[strat[i], runs[j]]
    printf "\ncapacity: grow in 1 GiB steps until the driver is out of memory\n"
    split("buffer_exact memalloc_doubling", cs, " ")
    for (i = 1; i <= 2; i++) { k = cs[i]
      if (cap[k] == "out_of_memory") printf "%-18s reached %.2f GiB of %.2f GiB device memory: %.1f%% (%.1f%% of the %.2f GiB free at the start)\n",
        k, reached[k], dev[k], 100 * reached[k] / dev[k], 100 * reached[k] / free[k], free[k]
      else printf "%-18s %s\n", k, (cap[k] == "" ? "no result" : cap[k] " (growth_summary.csv says why)") }
  }' "$work/grow_c.txt" "$work/growth_summary.csv" | tee -a "$out/table.txt"
{ printf '\ndetail (bench/grow):\n'; cat "$work/grow_go.txt"; } >>"$out/table.txt"

# The simulator on the same machine: one create, reserve, map, set access, unmap, release,
# free cycle of 2 MiB, its cost with 10 and 100,000 other mappings live, and cycles from 1
# and 8 goroutines at once (ns of wall time per cycle of all of them: "own" maps into a
# reservation per goroutine, "cycle" places and frees one each time). Beside them, what
# the driver does from 1 and 8 C threads when every cycle places and frees its reservation
# (bench/c/placement.c): the sim should scale with goroutines only where the driver does.
.gpu/sim.test -test.run '^$' -test.bench 'Cycle' -test.count 5 >"$work/sim.txt" || grow_rc=$?
gcc -O2 -I/usr/local/cuda/include bench/c/placement.c -o "$work/bin/placement" -lcuda -lpthread
"$work/bin/placement" 5 >"$work/placement.txt" || grow_rc=$?
awk 'function median(k,   m, i, j, x) { m = c[k]; for (i = 1; i <= m; i++) a[i] = t[k, i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return a[int((m + 1) / 2)] }
  /^BenchmarkCycle/ { n = $1; sub(/-[0-9]+$/, "", n); sub(/^Benchmark/, "", n); t[n, ++c[n]] = $3 }
  $1 == "placement" { k = "C " $2 "/" $3; t[k, ++c[k]] = $4 }
  END { printf "\nsim (median of 5, ns per cycle)\n"
    for (n in c) if (n !~ /^C /) { med[n] = median(n); printf "%-40s %10.0f\n", n, med[n] }
    k10 = "CycleWithLiveMappings/10"; k100 = "CycleWithLiveMappings/100000"
    if (med[k10] > 0) printf "%-40s %10.2f\n", "100000 live / 10 live", med[k100] / med[k10]
    split("cycle own", g, " ")
    for (i = 1; i <= 2; i++) { k1 = "CycleGoroutines/" g[i] "/1"; k8 = "CycleGoroutines/" g[i] "/8"
      if (med[k8] > 0) printf "%-40s %10.2f\n", "throughput 8 / 1 goroutines, " g[i], med[k1] / med[k8] }
    printf "\nthe driver from C threads (bench/c/placement.c, median of 5, operations/s)\n"
    split("reserve-free cycle", w, " ")
    for (i = 1; i <= 2; i++) { k1 = "C " w[i] "/1"; k8 = "C " w[i] "/8"; if (!(k1 in c) || !(k8 in c)) continue
      m1 = median(k1); m8 = median(k8)
      printf "%-40s %10.0f\n%-40s %10.0f\n%-40s %10.2f\n", w[i] " 1 thread", m1, w[i] " 8 threads", m8, "throughput 8 / 1 threads, " w[i], m8 / m1 } }' \
  "$work/sim.txt" "$work/placement.txt" | tee -a "$out/table.txt"

cp "$work/growth.csv" "$work/growth_summary.csv" "$out/"
cp "$out/table.txt" "$work/"
if [ -f "$out/growth.svg" ]; then cp "$out/growth.svg" "$work/"; fi
tar -czf "$out/bench.tgz" -C "$work" --exclude=./bin .
echo "raw outputs: $work (and $out/bench.tgz)"
exit "$grow_rc"
