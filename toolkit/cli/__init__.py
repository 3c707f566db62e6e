"""The `toolkit` command line and `toolkit demo`: the one place that composes the packages.

Dependencies point one way: `toolkit` (core) <- `export` <- `bench` <- `cli`. Building the parser
imports only the chosen command's argument module, so `toolkit --help`, `train`, `eval`,
`predict` and `presets` work where TensorFlow is not installed.
"""
