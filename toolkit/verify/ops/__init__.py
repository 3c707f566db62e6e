"""The op level of `toolkit verify`: each op (OP_CASES) exported alone, run in every runtime and
compared with its NumPy reference."""
