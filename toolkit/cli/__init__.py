"""The `toolkit` command line and `toolkit demo`, on top of every stage.

Dependencies point one way: the core <- `toolkit.export` <- `toolkit.verify`, the core <-
`toolkit.bench`; `toolkit.ship` composes those three (it brings a run up to date and bundles
it), and `toolkit.cli` is on top. Building the parser imports only the chosen
command's argument module, and Keras is set up only for a command that runs it, so
`toolkit --help` and `toolkit presets` import no backend, and `predict` and `bench` of exported
files work where TensorFlow is not installed.
"""
