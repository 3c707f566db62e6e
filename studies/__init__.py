"""Measurement studies: scripts that produced the records in records/, not the product.

`toolkit bench` is the product (toolkit/bench/). These answer one question each and are run
by hand, so they may import TensorFlow, the exporters and each other freely:

    python -m studies.train_throughput   # training images/s: toolkit vs a keras.io port
    python -m studies.train_throughput --preset cpu60 --precisions float32,mixed_bfloat16
        # the cpu60 step: TF with and without XLA, JAX, bf16 (what timed runs default to)
    python -m studies.ort_mobile_cost RUN   # the .ort on ORT's CPU provider, and why
    python -m studies.compare A/bench.json B/bench.json   # repeatability, row by row
    python -m studies.op_profile RUN/export/model_int8.onnx   # time per op type
    python -m studies.jpeg_gap score RUN --originals SAMPLE.npz   # what JPEG q75 costs
    python -m studies.gpu_rows --minutes 9 --json OUT   # the GPU rows in one device budget
    bash studies/ort_cuda.sh MODELS_DIR TEST_NPZ OUT_DIR   # ORT CUDA vs CPU agreement
    python studies/spt_lsa_counts.py CODE   # the SPT/LSA paper's ViT counted from its code

keras_io_port.py is the baseline train_throughput compares against; nothing else imports it.
spt_lsa_counts.py runs in a scratch environment with torch (never a toolkit dependency).
"""
