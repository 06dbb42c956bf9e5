#!/usr/bin/env bash
# The prepared check for a machine with an NVIDIA GPU (issue 33): what the harness's GPU path
# records on real hardware, in a few minutes, with or without a Docker engine there.
#
#   scripts/gpu-check.sh [OUT_DIR]        # default: gpu-check-<UTC time>/
#   HARNESS=/path/to/harness scripts/gpu-check.sh ...   # the binary to use (built here and
#                                                       # carried where Rust is not installed)
#
# Steps, each written under OUT_DIR: machine.txt (uname, nvidia-smi, versions); doctor.json;
# `harness gpu probe` around an idle second, a matrix multiply (torch, else cupy), and the GPU
# example's kernel (tasks/_gpu/cuda-reduce, base and human, built with nvcc); summary.txt and
# summary.json (each probe's power, the integrated energy against the driver's energy counter,
# and the example's kernel times); and, where a Docker engine with the NVIDIA runtime answers,
# the GPU example end to end with `opt-at-k` (opt-at-k.log). Without an NVIDIA driver it says so
# and exits 3; a step that fails is recorded and the others go on (exit 1 at the end).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${1:-gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
failed=0
say() { echo "gpu-check: $*" | tee -a "$out/steps.log"; }
step_failed() { say "FAILED: $*"; failed=1; }

# The binary: $HARNESS, else `harness` on PATH, else this checkout's release or debug build,
# else a release build where cargo is.
bin=${HARNESS:-}
if [ -z "$bin" ]; then
    if command -v harness >/dev/null; then bin=$(command -v harness)
    elif [ -x target/release/harness ]; then bin=$repo/target/release/harness
    elif [ -x target/debug/harness ]; then bin=$repo/target/debug/harness
    elif command -v cargo >/dev/null; then
        say "no harness binary: building one (cargo build --release, a few minutes)"
        cargo build --release --quiet || exit 1
        bin=$repo/target/release/harness
    else
        say "no harness binary and no cargo: build it elsewhere and set HARNESS=/path/to/harness"
        exit 1
    fi
fi
say "binary $bin ($("$bin" --version 2>&1))"

# Is there a GPU? The probe loads NVML as every GPU run does.
if ! "$bin" gpu probe --interval-ms 50 --out "$out/probe-true.json" -- true \
        >"$out/probe-true.txt" 2>&1; then
    cat "$out/probe-true.txt"
    say "no NVIDIA GPU to check here: NVML (libnvidia-ml.so.1, from the NVIDIA driver) did not load or lists no GPU (above). Run this on a machine with an NVIDIA driver."
    exit 3
fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "uname: $(uname -a)"
    echo "harness: $("$bin" --version 2>&1)"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -2 | tr '\n' ' ')"
    echo "python3: $(python3 --version 2>&1)"
    echo "docker: $(docker version --format '{{.Server.Version}}' 2>&1 | head -1)"
    echo
    nvidia-smi 2>&1
    nvidia-smi -q 2>&1 | sed -n '1,200p'
} >"$out/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null | head -1)"

"$bin" doctor --json >"$out/doctor.json" 2>"$out/doctor.stderr"
say "doctor exited $? (doctor.json)"

# probe NAME [--interval-ms N] -- COMMAND...: one probe, its text and JSON under OUT_DIR.
probe() {
    local name=$1
    shift
    say "probe $name: $*"
    if ! "$bin" gpu probe --out "$out/probe-$name.json" "$@" >"$out/probe-$name.txt" 2>&1; then
        step_failed "probe $name (probe-$name.txt)"
        tail -5 "$out/probe-$name.txt"
        return 1
    fi
    sed -n '/^GPU /,$p' "$out/probe-$name.txt" | head -14
}

probe idle -- sleep 1

# A matrix multiply for about 8 s, in whatever is installed.
cat >"$out/matmul.py" <<'EOF'
import sys, time
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
try:
    import torch
    assert torch.cuda.is_available(), "torch sees no GPU"
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    sync, mm, lib = torch.cuda.synchronize, (lambda: a @ b), "torch " + torch.__version__
except ImportError:
    import cupy
    n = 8192
    a = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    sync, mm, lib = cupy.cuda.Device().synchronize, (lambda: a @ b), "cupy " + cupy.__version__
for _ in range(3):
    mm()
sync()
t0, k = time.perf_counter(), 0
while time.perf_counter() - t0 < seconds:
    for _ in range(10):
        mm()
    sync()
    k += 10
dt = time.perf_counter() - t0
print(f"matmul ({lib}): {k} products {n}^3 in {dt:.2f} s: {2 * n**3 * k / dt / 1e12:.0f} TFLOP/s")
EOF
if python3 -c 'import torch' 2>/dev/null || python3 -c 'import cupy' 2>/dev/null; then
    probe matmul -- python3 "$out/matmul.py" 8
    # The same work sampled ten times as often: does the interval change the integral?
    probe matmul-10ms --interval-ms 10 -- python3 "$out/matmul.py" 8
    # Idle, 4 s of work, idle: how NVML's power reading follows a step, against the counter.
    probe step --interval-ms 20 -- sh -c "sleep 1; python3 '$out/matmul.py' 4; sleep 2"
else
    say "no torch or cupy: matrix multiply skipped"
fi

# The GPU example's kernel, base and human, outside any container.
if command -v nvcc >/dev/null; then
    for variant in base human; do
        dir=$(mktemp -d)
        cp -r tasks/_gpu/cuda-reduce/repo/. "$dir/"
        [ "$variant" = human ] && (cd "$dir" && patch -p1 -s <"$repo/tasks/_gpu/cuda-reduce/human.patch")
        # The task's own flags (its image has CUDA 12); CUDA 13 no longer builds sm_70.
        arch=sm_70
        if ! (cd "$dir" && nvcc -O2 -arch=$arch -o reduce main.cu kernel.cu) >"$out/nvcc-$variant.log" 2>&1; then
            arch=native
            (cd "$dir" && nvcc -O2 -arch=$arch -o reduce main.cu kernel.cu) >>"$out/nvcc-$variant.log" 2>&1 \
                || { step_failed "nvcc $variant (nvcc-$variant.log)"; continue; }
        fi
        say "cuda-reduce $variant built with -arch=$arch"
        (cd "$dir" && ./reduce --check) >"$out/reduce-$variant-check.txt" 2>&1 \
            || step_failed "cuda-reduce $variant --check (reduce-$variant-check.txt)"
        probe "reduce-$variant" -- sh -c "cd '$dir' && for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do HARNESS_BENCH_SEED=\$i ./reduce --bench; done"
        grep -h 'kernel_ms' "$out/probe-reduce-$variant.txt" >"$out/reduce-$variant-kernel-ms.txt"
        rm -rf "$dir"
    done
else
    say "no nvcc: the GPU example's kernel skipped"
fi

python3 - "$out" <<'EOF' || step_failed "summary"
import glob, json, os, re, statistics, sys
out = sys.argv[1]
rows, lines = [], []
for path in sorted(glob.glob(os.path.join(out, "probe-*.json"))):
    name = os.path.basename(path)[len("probe-"):-len(".json")]
    report = json.load(open(path))
    for d in report["devices"]:
        power = d.get("power_w") or {}
        row = {
            "probe": name, "gpu": d["device_index"], "wall_s": report["wall_s"],
            "interval_ms": report["interval_ms"], "samples": d["samples"],
            "power_mean_w": power.get("mean"), "power_max_w": power.get("max"),
            "energy_j": d.get("energy_j"), "energy_counter_j": d.get("energy_counter_j"),
            "energy_difference_pct": d.get("energy_difference_pct"),
            "sm_clock_max_mhz": (d.get("sm_clock_mhz") or {}).get("max"),
            "temperature_max_c": (d.get("temperature_c") or {}).get("max"),
            "throttle_reasons": d.get("throttle_reasons"), "exit_code": report["exit_code"],
            "notes": d.get("notes"), "incomplete": d.get("incomplete"),
        }
        rows.append(row)
fmt = lambda v, f: "-" if v is None else format(v, f)
lines.append(f"{'probe':<14}{'gpu':>4}{'wall s':>8}{'ms':>5}{'samples':>8}{'W mean':>8}{'W max':>8}"
             f"{'J integ.':>10}{'J counter':>11}{'diff %':>8}  throttle")
for r in rows:
    lines.append(f"{r['probe']:<14}{r['gpu']:>4}{fmt(r['wall_s'], '.2f'):>8}{r['interval_ms']:>5}"
                 f"{r['samples']:>8}{fmt(r['power_mean_w'], '.1f'):>8}{fmt(r['power_max_w'], '.1f'):>8}"
                 f"{fmt(r['energy_j'], '.1f'):>10}{fmt(r['energy_counter_j'], '.1f'):>11}"
                 f"{fmt(r['energy_difference_pct'], '+.1f'):>8}  {','.join(r['throttle_reasons'] or []) or '-'}")
kernel = {}
for variant in ("base", "human"):
    path = os.path.join(out, f"reduce-{variant}-kernel-ms.txt")
    if os.path.exists(path):
        ms = [float(m) for m in re.findall(r"kernel_ms: ([0-9.]+)", open(path).read())]
        if ms:
            kernel[variant] = {"runs": len(ms), "median_ms": statistics.median(ms),
                               "min_ms": min(ms), "max_ms": max(ms)}
            lines.append(f"cuda-reduce {variant}: kernel_ms median {statistics.median(ms):.4f} "
                         f"(min {min(ms):.4f}, max {max(ms):.4f}, {len(ms)} runs)")
if "base" in kernel and "human" in kernel:
    ratio = kernel["base"]["median_ms"] / kernel["human"]["median_ms"]
    kernel["human_speedup"] = ratio
    lines.append(f"cuda-reduce human speedup (median base / median human): {ratio:.2f}x")
json.dump({"probes": rows, "cuda_reduce": kernel}, open(os.path.join(out, "summary.json"), "w"), indent=2)
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

# End to end, where a Docker engine with the NVIDIA runtime answers.
if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia; then
    say "Docker with the NVIDIA runtime: the GPU example end to end (opt-at-k, K=1)"
    timeout 300 "$bin" opt-at-k --dataset tasks/_gpu --model gpu-demo \
        --predictions tasks/_gpu/_predictions/gpu-demo.jsonl --k 1 \
        --results-dir "$out/results" >"$out/opt-at-k.log" 2>&1 \
        || step_failed "opt-at-k on tasks/_gpu (opt-at-k.log)"
    tail -20 "$out/opt-at-k.log"
else
    say "no Docker engine with the NVIDIA runtime here: the end-to-end run skipped"
fi

say "done: everything is under $out"
exit $failed
