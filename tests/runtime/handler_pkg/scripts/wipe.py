"""A script that acts when imported: an upload naming it must not import it."""

import os

MARKER = os.environ.get("STACKROUTE_TEST_WIPE_MARKER")
if MARKER:
    with open(MARKER, "a", encoding="utf-8") as out:
        out.write("imported\n")
raise RuntimeError("wipe ran at import")


def x() -> None:
    pass
