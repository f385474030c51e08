"""stackroute: grammars."""
