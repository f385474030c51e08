"""An allowed module whose import raises SystemExit: resolving it must not end the caller."""

raise SystemExit("handler_exits ran at import")


def f() -> None:
    pass
