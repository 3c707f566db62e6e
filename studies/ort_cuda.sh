#!/usr/bin/env bash
# ONNX Runtime CUDA latency and CUDA-vs-CPU agreement of exported .onnx files, on a GPU box that
# has onnxruntime-gpu and numpy but not necessarily TensorFlow (the timing worker never imports it).
#
#   bash studies/ort_cuda.sh MODELS_DIR TEST_NPZ OUT_DIR
#
# MODELS_DIR holds NAME.onnx files; TEST_NPZ has x (N,H,W,3 uint8) and y (N,) labels (a run's test
# split); OUT_DIR gets gpu_info.txt, gpu_latency.jsonl (one toolkit.runtimes.worker row per line) and
# gpu_accuracy.txt. Results of the run on an H100: records/notes/gpu.md.
# The latency rows (CUDA graphs on and off, inside a device budget) are now
# `python -m studies.gpu_rows --rows ort-cuda`; this script stays for the agreement check, which
# needs the files' real weights and a test split.
set -u
models=$1 test_npz=$2 out=$3
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOOLKIT_IMPORT_KERAS=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu_info.txt"
lscpu | grep "Model name" | tee -a "$out/gpu_info.txt"
python3 -c "import onnxruntime as o, numpy, sys; print('onnxruntime', o.__version__, o.get_available_providers(), 'numpy', numpy.__version__, 'python', sys.version.split()[0])" | tee -a "$out/gpu_info.txt"
for model in "$models"/*.onnx; do
  for batch in 1 32 256; do
    python3 -m toolkit.runtimes.worker --artifact "$model" --runtime ort-cuda --batch $batch --warmup 20 --seconds 3 | tee -a "$out/gpu_latency.jsonl"
  done
  python3 -m toolkit.runtimes.worker --artifact "$model" --runtime ort-cpu --batch 1 --warmup 10 --seconds 3 | tee -a "$out/gpu_latency.jsonl"
done
python3 - "$models" "$test_npz" <<'PY' | tee "$out/gpu_accuracy.txt"
import sys
from pathlib import Path

import numpy as np

from toolkit.runtimes import open_artifact

data = np.load(sys.argv[2])
x, y = data["x"].astype("float32"), data["y"]
for model in sorted(Path(sys.argv[1]).glob("*.onnx")):
    cuda = open_artifact(model, "ort-cuda").run(x)
    cpu = open_artifact(model, "ort-cpu").run(x)
    print(
        f"{model.name}: top-1 cuda {np.mean(cuda.argmax(1) == y):.4f} cpu {np.mean(cpu.argmax(1) == y):.4f}"
        f" argmax agreement {np.mean(cuda.argmax(1) == cpu.argmax(1)):.4f}"
        f" max|logit diff| {np.abs(cuda - cpu).max():.2e} n={len(y)}"
    )
PY
