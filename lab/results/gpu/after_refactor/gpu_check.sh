#!/bin/bash
# One device call after the JAX trainer's refactor (DeviceSteps, jax_checkpointing):
# the offline install; step_speed.py; train.py under JAX for 2 epochs of the tutorial
# configuration with a persistent compilation cache, then the same command resumed to
# epoch 3 (a fresh process: checkpoints restored on the GPU, compiled steps from the cache).
set -o pipefail
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
start=$(date +%s)
stamp() { echo "== $1 at $(( $(date +%s) - start )) s" | tee -a $OUT/times.txt; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site
{ nvidia-smi -L; python3 -c "import sys, jax, keras, numpy; print(sys.version); print('jax', jax.__version__, 'keras', keras.__version__, 'numpy', numpy.__version__); print(jax.devices())"; nproc; lscpu | grep 'Model name'; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
stamp step_speed
timeout 130 python3 lab/bench/accelerator/step_speed.py --steps=100 --output=$OUT/step_speed.json 2>&1 | grep -v '^I1\|^W1' | tail -5
export JAX_COMPILATION_CACHE_DIR=/tmp/jaxcache
train() { python3 train.py --config=configs/tutorial.py --data=.dev/prepared/tutorial --model_dir=/tmp/run \
  --export=false --bleu_examples=0 "$@"; }
stamp "train 2 epochs"
timeout 230 bash -c "$(declare -f train); train --config.training.epochs=2" > $OUT/train.log 2>&1; echo "exit $?" | tee -a $OUT/times.txt
grep -v '^I1\|^W1' $OUT/train.log | tail -4
stamp "resume to epoch 3"
timeout 180 bash -c "$(declare -f train); train --config.training.epochs=3" > $OUT/resume.log 2>&1; echo "exit $?" | tee -a $OUT/times.txt
grep -v '^I1\|^W1' $OUT/resume.log | tail -4
stamp end
cp /tmp/run/metrics.jsonl $OUT/metrics.jsonl 2>/dev/null
du -sh /tmp/jaxcache | tee -a $OUT/times.txt
