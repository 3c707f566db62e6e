"""Training: the warmup-cosine schedule, distribution strategies and the train loop."""
