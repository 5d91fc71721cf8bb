#!/usr/bin/env bash
# One accelerator call, everything it runs (README.md beside this file).
#
#   OUT=<folder> bash lab/bench/accelerator/device_call.sh [call.py flags]
#       on the accelerator, from the repository root, with what pack.py
#       printed carried: installs the carried wheels whose package is not
#       there (one that is stays as it is), then runs call.py's phases, each
#       under its own deadline, writing $OUT/summary.json after each. Run
#       folders and the compilation cache go to $WORK (default
#       /tmp/device_call), never under $OUT.
#
#   bash lab/bench/accelerator/device_call.sh --rehearsal [call.py flags]
#       here, on the CPU: the same call with one-layer models and a few
#       steps each, in a scratch copy holding only what would travel
#       (git archive HEAD and pack.py --rehearsal's folders), TensorFlow
#       made unimportable and $OUT a scratch folder; then checks that $OUT
#       is within the device's return limits. $REHEARSAL_DIR names the
#       scratch folder (default: a new one under /tmp); $PYTHON the
#       interpreter of the call, $PACK_PYTHON that of pack.py (TensorFlow's).
#
# SIGINT and SIGTERM reach call.py (this script becomes it), which hands them
# to the run in progress: it saves its checkpoint, and the same command
# resumes with what $WORK holds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
PYTHON="${PYTHON:-python3}"

if [[ "${1:-}" == "--rehearsal" ]]; then
  shift
  start=$(date +%s)
  scratch="${REHEARSAL_DIR:-$(mktemp -d /tmp/device_call_rehearsal.XXXXXX)}"
  mkdir -p "$scratch"
  "${PACK_PYTHON:-$PYTHON}" "$here/pack.py" --rehearsal --root="$scratch/pack" >&2
  rm -rf "$scratch/repo" "$scratch/out" "$scratch/work" "$scratch/site"
  mkdir -p "$scratch/repo/prepared" "$scratch/no_tensorflow"
  git -C "$repo" archive --format=tar HEAD | tar -x -C "$scratch/repo"
  for folder in tutorial_gpu base_gpu wheels; do
    cp -r "$scratch/pack/prepared/$folder" "$scratch/repo/prepared/"
  done
  # Every Python of the call starts without TensorFlow, as on the device.
  (cd "$scratch/repo/tests" && "$PYTHON" -c \
    "from helpers.no_tensorflow import BLOCK_TENSORFLOW; print(BLOCK_TENSORFLOW)") \
    > "$scratch/no_tensorflow/sitecustomize.py"
  set +e
  (cd "$scratch/repo" && OUT="$scratch/out" WORK="$scratch/work" SITE="$scratch/site" \
    PYTHONPATH="$scratch/no_tensorflow" bash lab/bench/accelerator/device_call.sh \
    --tiny --seconds=1200 --min_run_seconds=5 --patience=1 --average=2 "$@")
  status=$?
  "$PYTHON" - "$scratch/out" <<'EOF'
import sys
from pathlib import Path
out = Path(sys.argv[1])
files = [p for p in out.rglob("*") if p.is_file()]
problems = [f"{len(files)} files, more than 8"] if len(files) > 8 else []
problems += [f"{p} is over 16 MiB" for p in files if p.stat().st_size > 16 * 2**20]
problems += [f"{p} is more than 2 folders down" for p in files
             if len(p.relative_to(out).parts) > 3]
print(f"rehearsal: $OUT holds {', '.join(sorted(p.name for p in files))}: "
      + ("; ".join(problems) if problems else "within the return limits"))
sys.exit(1 if problems else 0)
EOF
  limits=$?
  echo "rehearsal: exit $status in $(( $(date +%s) - start )) s ($scratch)"
  if [[ $status -ne 0 ]]; then exit "$status"; fi
  exit "$limits"
fi

: "${OUT:?set OUT to the folder whose files come back}"
WORK="${WORK:-/tmp/device_call}"
SITE="${SITE:-/tmp/device_call_site}"
mkdir -p "$OUT" "$WORK"
cd "$repo"

# The carried wheels whose distribution is not installed (the image's own stay).
missing=$("$PYTHON" - prepared/wheels <<'EOF'
import importlib.metadata, sys
from pathlib import Path
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
  try:
    importlib.metadata.version(wheel.name.split("-")[0])
  except importlib.metadata.PackageNotFoundError:
    print(wheel)
EOF
)
if [[ -n "$missing" ]]; then
  echo "== installing $(echo $missing | xargs -n1 basename | tr '\n' ' ')into $SITE"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" $missing
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

exec "$PYTHON" -u lab/bench/accelerator/call.py --out="$OUT" --work="$WORK" "$@"
