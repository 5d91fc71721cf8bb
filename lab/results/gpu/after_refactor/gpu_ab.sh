#!/bin/bash
# The JAX step of step_speed.py's tutorial_2021 arm (64 x 40, float32), before (9487ab8, in .dev/old)
# and after (this checkout) the DeviceSteps refactor, alternating, on one machine; compilations cached.
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax JAX_COMPILATION_CACHE_DIR=/tmp/jaxcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site
nvidia-smi -L
for round in 1 2 3; do for tree in .dev/old .; do
  (cd $tree && timeout 80 python3 -c "
import json, sys; sys.path.insert(0, 'lab/bench/accelerator'); import step_speed
r = step_speed.measure('tutorial_2021', False, 5, 300)
print(json.dumps({'round': $round, 'tree': '$tree', **r}))" 2>&1 | grep '"round"') | tee -a $OUT/ab.jsonl
done; done
