"""stackroute: server/engines."""
