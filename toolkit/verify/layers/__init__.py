"""The layer level of `toolkit verify --layers`: every artifact's tensors at every block
boundary of the model, against the Keras model's."""

LAYER_SAMPLES = 64  # default test images: enough for stable SQNR, seconds per artifact
