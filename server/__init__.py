"""stackroute: server."""
