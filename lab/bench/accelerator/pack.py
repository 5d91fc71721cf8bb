r"""Builds every ignored folder an accelerator call carries, and says which.

  python lab/bench/accelerator/pack.py      # here, where TensorFlow is installed

writes, under the repository (``/prepared/`` is ignored by git):

``prepared/tutorial_gpu``  ``prepare.py --config=configs/tutorial.py:gpu`` with
                           the tutorial's tokenizer: the shards, the vocabularies
                           and the validation and test references
``prepared/base_gpu``      ``prepare.py --config=configs/base.py:gpu
                           --tokenizer=build``: one joint vocabulary, for the
                           base model's three-way sharing
``prepared/wheels``        the wheels for CPython 3.12 on manylinux x86-64 of
                           Keras and what Keras and ``train.py`` need that the
                           accelerator's image lacks (KINDS.md lists what it has)

A folder already there is kept (``--fresh`` builds it again). Then it adds up
what a call sends (the files git tracks or would track, and these folders)
against the 64 MiB a call carries, and prints last one line, ``carry: PATH
PATH ...``: the paths to name in the call's ``carry``. It exits 1 when the
total is over.

``--rehearsal --root=DIR`` writes the same folders under ``DIR`` from a few
hundred pairs (the rehearsal's, ``device_call.sh --rehearsal``), and copies
the wheels from ``prepared/wheels`` if they are there, downloading none.
"""

import argparse
import os
from pathlib import Path
import shutil
import subprocess
import sys

REPO_DIR = Path(__file__).resolve().parents[3]
LIMIT = 64 * 2**20
# What the accelerator's image lacks (KINDS.md: numpy, h5py, absl-py, rich,
# ml-dtypes, packaging, PyYAML, typing-extensions, sacrebleu, tensorboard are there),
# pinned as setup.cfg and this environment pin them.
WHEELS = ("keras==3.15.1", "optree==0.20.0", "namex==0.1.0", "ml-collections==1.1.0")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
REHEARSAL_PAIRS = ("--train_examples=256", "--validation_examples=64", "--test_examples=24")


def prepare(output: Path, config: str, tokenizer: str, data: str, extra=()) -> None:
  command = [sys.executable, "prepare.py", f"--config={config}", f"--tokenizer={tokenizer}",
             f"--output={output}", *([f"--data={data}"] if data else []), *extra]
  print(f"== {' '.join(command[1:])}", flush=True)
  subprocess.run(command, cwd=REPO_DIR, check=True,
                 env={**os.environ, "PYTHONPATH": str(REPO_DIR)})


def download_wheels(folder: Path) -> None:
  command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
             *(flag for platform in PLATFORMS for flag in ("--platform", platform)),
             "-d", str(folder), *WHEELS]
  print(f"== pip download {' '.join(WHEELS)}", flush=True)
  subprocess.run(command, check=True)


def travelling_bytes() -> int:
  """The bytes of the files a call sends besides the carried folders: those git
  tracks and the untracked ones it does not ignore."""
  names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO_DIR, capture_output=True, check=True).stdout.split(b"\0")
  return sum((REPO_DIR / os.fsdecode(name)).stat().st_size for name in names
             if name and (REPO_DIR / os.fsdecode(name)).is_file())


def folder_bytes(folder: Path) -> int:
  return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data", default="", help="the TED HRLR files (default: prepare.py's)")
  parser.add_argument("--tokenizer", default=str(REPO_DIR.parent / "shared" / "data" /
                                                 "tutorial_tokenizer"),
                      help="the tutorial's tokenizer SavedModel")
  parser.add_argument("--root", default=str(REPO_DIR), help="where prepared/ is written")
  parser.add_argument("--rehearsal", action="store_true",
                      help="a few hundred pairs; the wheels copied, not downloaded")
  parser.add_argument("--fresh", action="store_true", help="build the folders again")
  args = parser.parse_args()
  root = Path(args.root).resolve()
  if not (Path(args.tokenizer) / "saved_model.pb").is_file():
    sys.exit(f"pack.py: error: --tokenizer={args.tokenizer}: no tokenizer SavedModel there")
  extra = REHEARSAL_PAIRS if args.rehearsal else ()
  folders = {"tutorial": root / "prepared" / "tutorial_gpu", "base": root / "prepared" / "base_gpu",
             "wheels": root / "prepared" / "wheels"}
  for folder in folders.values():
    if args.fresh and folder.exists():
      shutil.rmtree(folder)
  if not folders["tutorial"].exists():
    prepare(folders["tutorial"], "configs/tutorial.py:gpu", args.tokenizer, args.data, extra)
  if not folders["base"].exists():
    prepare(folders["base"], "configs/base.py:gpu", "build", args.data, extra)
  if not folders["wheels"].exists():
    if args.rehearsal:
      source = REPO_DIR / "prepared" / "wheels"
      if source.is_dir():
        shutil.copytree(source, folders["wheels"])
      else:
        folders["wheels"].mkdir(parents=True)  # the rehearsal installs what is missing only
    else:
      download_wheels(folders["wheels"])
  sizes = {name: folder_bytes(folder) for name, folder in folders.items()}
  code = travelling_bytes()
  total = code + sum(sizes.values())
  print(f"== tracked and untracked files {code / 2**20:.1f} MiB; "
        + "; ".join(f"{folders[name].relative_to(root)} {size / 2**20:.1f} MiB"
                    for name, size in sizes.items())
        + f"; {total / 2**20:.1f} MiB of the {LIMIT // 2**20} MiB a call carries", flush=True)
  if total > LIMIT:
    sys.exit(f"pack.py: error: {total / 2**20:.1f} MiB is over the {LIMIT // 2**20} MiB a call "
             "carries")
  print("carry: " + " ".join(str(folder.relative_to(root)) for folder in folders.values()))


if __name__ == "__main__":
  main()
