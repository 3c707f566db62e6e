"""The `toolkit` command line and `toolkit demo`: the one place that composes the stages.

Dependencies point one way: the core <- `toolkit.export` <- `toolkit.verify`, the core <-
`toolkit.bench`, and `toolkit.cli` on top. Building the parser imports only the chosen
command's argument module, and Keras is set up only for a command that runs it, so
`toolkit --help` and `toolkit presets` import no backend, and `predict` and `bench` of exported
files work where TensorFlow is not installed.
"""
