#!/usr/bin/env bash
# Before/after: the per-call and per-operation costs of two commits, measured on one GPU
# machine in one session, the two builds' runs interleaved so that the driver's drift
# falls on both alike. The GPU machine needs the driver, not Go.
#
#   bench/ab.sh build [A [B]]   where Go is, from the repository root: builds the benchmark
#                               binaries of commits A (default: git merge-base HEAD main) and
#                               B (default: HEAD), B's whole GPU pass (task gpu:build's .gpu/)
#                               and packs them with this script and .ci/gpu-pass into
#                               .gpucarry/ab.tgz (about 35 MiB), to carry to the GPU machine.
#   bench/ab.sh run             on the GPU machine, from the repository root, after
#                               `tar xzf .gpucarry/ab.tgz -C .gpucarry`: ROUNDS (default 3)
#                               rounds of both builds, A first in odd rounds and B first in
#                               even ones, then the figures side by side. $OUT (default
#                               /tmp/cuvmm-ab) receives ab-table.txt and ab-raw.tgz.
#   bench/ab.sh pass            on the GPU machine: B's GPU pass (.ci/gpu-pass) on B's .gpu/;
#                               its logs go to $OUT/gpu-pass.tgz.
#
# Measured per build and round:
#   - cu.test BenchmarkGPU{DriverGetVersion,DeviceGetAttribute,MemGetAllocationGranularity}:
#     ns and allocations per call (1,000,000 calls each);
#   - cu.test BenchmarkGPUCallLayers: create, map and release of 2 MiB and 64 MiB through
#     the exported functions (variant "cu"), as the median of per-iteration ratios over a
#     bare syscall6 on the same entry point, interleaved in the process;
#   - cgo.test BenchmarkOpsAB: create, map, set access, unmap and release through
#     vmm.CUDA() ("cuvmm"), as the median of per-iteration ratios over the same cycle in C,
#     interleaved in the process, and a cgo binding's ratio over C as the noise floor.
# The ratios are what to compare: each is taken against C (or raw) moments apart in the
# same process, so the drift of the driver between processes cancels.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
  local a=${1:-$(git merge-base HEAD main)} b=${2:-HEAD}
  a=$(git rev-parse "$a") b=$(git rev-parse "$b")
  local dst=$PWD/.gpucarry/ab tmp
  rm -rf "$dst" && mkdir -p "$dst/a" "$dst/b"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  for side in a b; do
    local rev=${!side} src="$tmp/$side"
    mkdir -p "$src"
    git archive "$rev" | tar -x -C "$src"
    (
      cd "$src"
      export GOOS=linux GOARCH=amd64
      CGO_ENABLED=0 go test -c -tags gpu -ldflags=-s -o "$dst/$side/cu.test" ./cu
      cd bench/cgo && CGO_ENABLED=1 go test -c -ldflags=-s -o "$dst/$side/cgo.test" .
    )
    echo "$rev $(git log -1 --format=%s "$rev" | cut -c1-100)" >"$dst/$side/commit"
  done
  # B's GPU pass: task gpu:build's binaries, built from B's tree by B's Taskfile.
  (cd "$tmp/b" && task gpu:build)
  mv "$tmp/b/.gpu" "$dst/gpu"
  cp "$tmp/b/.ci/gpu-pass" "$dst/gpu-pass"
  cp "$here/ab.sh" "$dst/ab.sh"
  tar -czf .gpucarry/ab.tgz -C .gpucarry ab
  ls -l .gpucarry/ab.tgz
  cat "$dst/a/commit" "$dst/b/commit"
}

run() {
  local ab=.gpucarry/ab rounds=${ROUNDS:-3} out=${OUT:-/tmp/cuvmm-ab} work
  work=$(mktemp -d /tmp/cuvmm-ab-raw.XXXXXX)
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >"$work/machine.txt"
  for r in $(seq 1 "$rounds"); do
    local order="a b"
    [ $((r % 2)) -eq 0 ] && order="b a"
    for side in $order; do
      local d=$ab/$side tag="$side $r"
      echo "round $r, build $side: $(cut -c1-12 "$d/commit")" >&2
      # A benchmark that fails is reported and the rest goes on: the table shows "-".
      "$d/cu.test" -test.run '^$' -test.bench 'GPU(DriverGetVersion|DeviceGetAttribute|MemGetAllocationGranularity)$' \
        -test.benchtime 1000000x -test.count 1 | sed "s/^/$tag /" >>"$work/percall.txt" || echo "$tag: per-call benchmarks failed" >&2
      "$d/cu.test" -test.run '^$' -test.bench 'GPUCallLayers' -test.benchtime 300x | sed "s/^/$tag /" >>"$work/layers.txt" ||
        echo "$tag: BenchmarkGPUCallLayers failed" >&2
      for spec in cycle/2MiB:500x cycle/64MiB:200x cycle/1024MiB:50x batch/2MiB:10x batch/64MiB:20x batch/1024MiB:20x; do
        "$d/cgo.test" -test.run '^$' -test.bench "OpsAB/${spec%%:*}\$" -test.benchtime "${spec#*:}" | sed "s/^/$tag /" >>"$work/ab.txt" ||
          echo "$tag: OpsAB/$spec failed" >&2
      done
    done
  done
  {
    echo "machine: $(cat "$work/machine.txt"), $rounds rounds"
    echo "A: $(cat "$ab/a/commit")"
    echo "B: $(cat "$ab/b/commit")"
    table "$work"
  } | tee "$out/ab-table.txt"
  tar -czf "$out/ab-raw.tgz" -C "$work" .
}

# table prints the medians over rounds, A and B side by side.
table() {
  awk '
    function med(key, n,   i, j, t, a) { n = cnt[key]; for (i = 1; i <= n; i++) a[i] = v[key, i]
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n ? a[int((n + 1) / 2)] : "" }
    function add(key, x) { v[key, ++cnt[key]] = x; seen[key] = 1 }
    function ratio(x, y) { return (x == "" || y == "" || x == 0) ? "-" : sprintf("%.3f", y / x) }
    function num(x, f) { return x == "" ? "-" : sprintf(f, x) }
    FILENAME ~ /percall.txt$/ && $3 ~ /^BenchmarkGPU/ { n = $3; sub(/^BenchmarkGPU/, "cu", n); sub(/-[0-9]+$/, "", n)
      add("pc " n " " $1, $5); allocs[n, $1] = $9; calls[n] = 1 }
    FILENAME ~ /layers.txt$/ && $3 == "layers" && $6 == "cu" { k = $4 " " $5; add("ly " k " " $1, $10); lay[k] = 1 }
    FILENAME ~ /ab.txt$/ && $3 == "ab" { k = $4 " " $5; add("ab " k " " $6 " " $1, $14); add("abns " k " " $6 " " $1, $10); ops[k] = 1 }
    END {
      printf "\nper call (ns, median of the rounds)\n%-32s %10s %10s %8s %9s\n", "call", "A", "B", "B/A", "allocs A/B"
      split("cuDriverGetVersion cuDeviceGetAttribute cuMemGetAllocationGranularity", cs, " ")
      for (i = 1; i <= 3; i++) { n = cs[i]; a = med("pc " n " a"); b = med("pc " n " b")
        printf "%-32s %10s %10s %8s %4s/%s\n", n, num(a, "%.1f"), num(b, "%.1f"), ratio(a, b), allocs[n, "a"], allocs[n, "b"] }

      printf "\nexported cu functions over a bare syscall6 (BenchmarkGPUCallLayers: median per-iteration ratio, median of the rounds)\n"
      printf "%-22s %8s %8s %8s\n", "size op", "A", "B", "B-A"
      split("2MiB 64MiB", ss, " "); split("create map release", lo, " ")
      for (i = 1; i <= 2; i++) for (j = 1; j <= 3; j++) { k = ss[i] " " lo[j]; if (!(k in lay)) continue
        a = med("ly " k " a"); b = med("ly " k " b"); printf "%-22s %8.4f %8.4f %+8.4f\n", k, a, b, b - a }

      printf "\nper VMM operation through vmm.CUDA() over C in the same process (bench/cgo BenchmarkOpsAB: median\n"
      printf "per-iteration ratio, median of the rounds; ns: median of the per-round medians); cgo/C is the noise floor\n"
      printf "%-24s %10s %10s %9s %9s %8s %9s %9s\n", "operation", "A ns", "B ns", "A cuvmm/C", "B cuvmm/C", "B-A", "A cgo/C", "B cgo/C"
      split("cycle/2MiB cycle/64MiB cycle/1024MiB batch/2MiB batch/64MiB batch/1024MiB", ms, " ")
      split("create map setaccess unmap release", po, " ")
      for (i = 1; i <= 6; i++) for (j = 1; j <= 5; j++) { k = ms[i] " " po[j]; if (!(k in ops)) continue
        ra = med("ab " k " cuvmm a"); rb = med("ab " k " cuvmm b")
        printf "%-24s %10s %10s %9s %9s %8s %9s %9s\n", k, num(med("abns " k " cuvmm a"), "%.0f"), num(med("abns " k " cuvmm b"), "%.0f"),
          num(ra, "%.3f"), num(rb, "%.3f"), (ra == "" || rb == "") ? "-" : sprintf("%+.3f", rb - ra), num(med("ab " k " cgo a"), "%.3f"), num(med("ab " k " cgo b"), "%.3f") }
    }' "$1/percall.txt" "$1/layers.txt" "$1/ab.txt"
}

pass() {
  local out=${OUT:-/tmp/cuvmm-ab} logs=/tmp/cuvmm-gpu-pass rc=0
  mkdir -p "$out"
  rm -rf .gpu && cp -r .gpucarry/ab/gpu .gpu
  OUT=$logs bash .gpucarry/ab/gpu-pass || rc=$?
  tar -czf "$out/gpu-pass.tgz" -C "$logs" .
  return $rc
}

case ${1:-} in
build) shift; build "$@" ;;
run) run ;;
pass) pass ;;
table) table "$2" ;;
*) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
