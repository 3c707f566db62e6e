"""Lab tests of the measurement studies and records (not part of `make test`)."""
