"""What a training run returns, from either trainer (:mod:`transformer.training.tf_engine`
under ``tf.distribute``, :mod:`transformer.training.jax_engine` under JAX)."""

import dataclasses
from typing import Dict, List, Optional


@dataclasses.dataclass
class TrainResult:
  step: int                       # optimizer steps done in total (across resumes)
  start_step: int                 # the step this run started from (restored)
  epoch: int                      # completed epochs
  interrupted_by: Optional[int]   # signal number if stopped by a signal, else None
  history: List[Dict]             # the metrics records written this run
