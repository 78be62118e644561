#!/usr/bin/env bash
# One device call: install the checkout (no network there: --no-deps, no build isolation),
# run the GPU tests (PYTEST_WORKERS=N: N pytest-xdist workers), the benchmarks and the main job;
# logs land in $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
# the tree travels without .git: the caller passes the commit as the first argument "commit=HASH"
case "${1:-}" in commit=*) export PORTABLE_GIT_COMMIT="${1#commit=}"; shift ;; esac
OUT=${OUT:-/tmp/portable-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
# peer libraries, where the call carried their wheels (bench/peer_wheels.sh; run(carry=[".whl"]))
if compgen -G ".whl/*.whl" >/dev/null; then python3 -m pip install -q --no-deps .whl/*.whl >>"$OUT/install.log" 2>&1; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
for step in "$@"; do
  case "$step" in
    tests)  python3 -m pytest -q -m gpu ${PYTEST_WORKERS:+-n $PYTEST_WORKERS} tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -15 ;;
    tests:*) python3 -m pytest -q -m gpu "tests/test_${step#tests:}_gpu.py" 2>&1 | tee "$OUT/pytest_${step#tests:}.log" | tail -15 ;;
    pytest:*) files=${step#pytest:}; python3 -m pytest -q -m gpu ${files//,/ } 2>&1 | tee -a "$OUT/pytest_some.log" | tail -25 ;;   # pytest:FILE[,FILE...]
    examples) python3 -m pytest -q -m gpu tests/test_example_*.py 2>&1 | tee "$OUT/pytest_examples.log" | tail -25 ;;
    bench:*) name=${step#bench:}; name=${name//,/-}    # no commas in the names of files that come back
            portable bench --kernels "${step#bench:}" --out "$OUT/$name.json" 2>"$OUT/bench_progress.log" | tee "$OUT/bench_$name.log" ;;
    alltests) python3 -m pytest -q tests 2>&1 | tee "$OUT/pytest_all.log" | tail -15 ;;
    check)  portable check 2>&1 | tee "$OUT/check.log" | tail -12 ;;
    calibrate) portable calibrate 2>&1 | tee "$OUT/calibrate.log" ;;
    results) portable bench --out "$OUT/h100.json" 2>"$OUT/bench_progress.log" | tee "$OUT/bench.log" ;;
    *.py)   python3 "$step" 2>&1 | tee "$OUT/$(basename "$step" .py).log" | tail -40 ;;
    *)      python3 "bench/$step.py" --out "$OUT" 2>&1 | tee "$OUT/$step.log" | tail -40 ;;
  esac
done
