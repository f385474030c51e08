"""stackroute: bench."""
