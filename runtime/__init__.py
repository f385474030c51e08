"""stackroute: runtime."""
