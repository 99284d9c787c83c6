"""The names and defaults of the model commands' choices, in a module that imports no
engine (PyTorch, ONNX), so that their help answers at once: the export formats and the
export's tolerance (:mod:`reid.models.export`), and the checkpoint formats a file is
recognised as (:mod:`reid.models.formats`, which checks that its table names the same)."""

from __future__ import annotations

# What ``reid export --format`` writes; the first is the default.
EXPORT_FORMATS = ("onnx", "torchscript")
# The largest max abs difference from PyTorch an export is accepted with.
DEFAULT_TOLERANCE = 1e-4
# What ``reid import --from`` accepts: the checkpoint formats a file is recognised as.
NAMED_FORMATS = ("reid", "fastreid", "torchreid", "torchvision")
