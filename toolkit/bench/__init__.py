"""Benchmarks (not tests): throughput of the toolkit's models beside a keras.io-style port."""
