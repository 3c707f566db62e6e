"""`toolkit bench`: latency, throughput, memory, size and top-1 of every artifact per runtime.

`bench_run(folder, ...)` and `bench_interleaved(folder, ...)` are the Python API (benchmark.py);
benchmarker.py measures the rows, roofline.py the runtimes' peaks, bench_tables.py and plot.py
write bench.md and bench.png, and command.py maps `toolkit bench`'s arguments to the API.
"""

from toolkit.bench.benchmark import Benched, BenchOptions, bench_interleaved, bench_run

__all__ = ["BenchOptions", "Benched", "bench_interleaved", "bench_run"]
