"""A handler package for the allowlist tests: `tools` is the operator's module; `scripts.wipe`
and `__main__` are modules an upload must never import (their top-level code acts)."""
