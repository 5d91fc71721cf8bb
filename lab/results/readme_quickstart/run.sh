#!/usr/bin/env bash
# The README's quick start pasted in order on a fresh clone of this repository,
# beside ../shared, with training shortened as the README's first try does.
#   bash lab/results/readme_quickstart/run.sh [CLONE_DIR]     (CLONE_DIR: ../fresh)
# Each command is taken from README.md's "## Quick start" code blocks as written;
# `tensorboard` runs for 20 s and is asked for its page; the test command is left
# to CI (.ci/run runs exactly it).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
clone="$(realpath -m "${1:-$repo/../fresh}")"
rm -rf "$clone" "$clone.venv"
git clone -q "$repo" "$clone" && cd "$clone" && git log --oneline -1
python -m venv --system-site-packages "$clone.venv" && source "$clone.venv/bin/activate"
mapfile -t commands < <(python - <<'PY'
import re
readme = open("README.md", encoding="utf-8").read()
section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
for block in re.findall(r"```sh\n(.*?)```", section, re.S):
  for line in block.strip().splitlines():
    print(line)
PY
)
for command in "${commands[@]}"; do
  case "$command" in
    *train.py*) command="$command --config.training.train_steps=200 --bleu_examples=200" ;;
    tensorboard*) command="timeout 20 $command --port 6123 & sleep 15; curl -sf -o /dev/null http://localhost:6123/ && echo 'tensorboard: serving its page'; status=\$?; wait; exit \$status" ;;
    *pytest*) echo "skipped (CI runs it): $command"; continue ;;
  esac
  echo "\$ $command"
  start=$SECONDS
  bash -c "$command" 2> >(grep -v "^[IWE][0-9]\{4\} \|^WARNING: All log messages" >&2) || { echo "failed: $command"; exit 1; }
  echo "(took $((SECONDS - start)) s)"
done
