"""Patterns of TensorFlow's own log lines, which a user's console must not show."""

import re

# absl's C++ log line: "I0000 00:00:1795341810.645245    5528 port.cc:153] ...".
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+\.cc:\d+\]", re.MULTILINE)
# Python INFO records of TensorFlow's SavedModel and checkpoint modules.
TF_PYTHON_LOG_LINE = re.compile(
    r"(load|fingerprinting_utils|functional_saver|builder_impl|signature_serialization)"
    r"\.py:\d+\]")
