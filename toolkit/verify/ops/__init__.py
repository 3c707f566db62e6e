"""The op level of `toolkit verify`: each op (OP_CASES) exported alone, run in every runtime and
compared with its NumPy reference.

The names `--ops` and `--shapes` take are here, light, for the command's help; cases.py holds
each op's case (Keras builder, reference, shapes) under its name.
"""

OP_NAMES = ("shift", "shifted-patches", "spt", "lsa", "shiftvit-block", "vit-block")
SHAPE_SETS = ("full", "quick")  # full: the seed presets' shapes and odd ones; quick: odd ones
