#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md, in one go, from the repository's root, on a machine
# whose Python already has JAX with CUDA, NumPyro and Optax. gradmc runs from src/; the other
# packages it imports, when that Python lacks them, are installed from wheels in .whl/
# (made elsewhere with `pip download --no-deps`: blackjax, arviz, h5netcdf, xarray-einstats,
# platformdirs).
# Last, where a step's time goes on the device (hams_step_profile.py: the kernels of NCG's and
# the PDHAMS steps, from JAX's profiler).
#
#   bash benchmarks/gpu_run.sh            # the full set, logs under $OUT (default ./out/gpu)
#   QUICK=1 bash benchmarks/gpu_run.sh    # small sizes: checks the script end to end on a CPU
#   MIXED=1 bash benchmarks/gpu_run.sh    # benchmarks/mixed.py on four models, 128 chains
#     (MIXED_MODELS="hmm coal", MIXED_CHAINS, MIXED_WARMUP, MIXED_DRAWS, MIXED_LIMIT: other runs)
#
# Each benchmark runs under its own time limit, so one that overruns leaves the others'
# figures; each log is written as it goes.
set -u
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
if ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import blackjax, arviz" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi

run() {  # run LIMIT NAME COMMAND...: the command's output to the screen and $OUT/NAME.log
  local limit=$1 name=$2
  shift 2
  echo "=== $name (limit ${limit} s): $*"
  local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  echo "=== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
}

python3 -c "import jax, gradmc; print('jax', jax.__version__, jax.devices()); print('gradmc', gradmc.__file__)" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/gpu.txt"

if [ "${MIXED:-0}" = 1 ]; then  # the mixed discrete-continuous models against NumPyro, many chains
  # 500 + 1,000 steps left NumPyro's kernels unfinished at 110 s on an H200: a shorter run
  for model in ${MIXED_MODELS:-coal ssvs logistic hmm}; do
    run "${MIXED_LIMIT:-130}" "mixed_$model" python3 benchmarks/mixed.py --models "$model" \
      --chains "${MIXED_CHAINS:-128}" --warmup "${MIXED_WARMUP:-300}" --draws "${MIXED_DRAWS:-600}" \
      --reference-draws 1200
  done
elif [ "${QUICK:-0}" = 1 ]; then
  run 300 step_cost python3 benchmarks/hams_step_cost.py --quick --parts c
  run 300 discs_ising100 python3 benchmarks/discs.py --models ising100 --samplers ncg,v-pdhams,o-pdhams --steps 1000 --chains 4
  run 300 speedup_1000 python3 benchmarks/gpu_speedup.py --chains 8 --steps 20
  run 300 profile python3 benchmarks/hams_step_profile.py --steps 5 --out /tmp/gradmc-profile
else
  run 90 step_cost python3 benchmarks/hams_step_cost.py --parts c
  run 180 discs_ising100 python3 benchmarks/discs.py --models ising100 --samplers ncg,v-pdhams,o-pdhams
  run 80 speedup_1000 python3 benchmarks/gpu_speedup.py --chains 1000 --steps 500 --cpu-steps 100
  run 80 speedup_10000 python3 benchmarks/gpu_speedup.py --chains 10000 --steps 500 --cpu-steps 20
  run 70 profile python3 benchmarks/hams_step_profile.py --steps 50 --out /tmp/gradmc-profile
fi
