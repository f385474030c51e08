"""Our engine beside peer constrained-decoding stacks on the same calls."""
