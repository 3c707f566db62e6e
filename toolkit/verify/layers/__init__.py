"""The layer level of `toolkit verify --layers`: every artifact's tensors at every block
boundary of the model, against the Keras model's."""
