raise SystemExit("handler_pkg's __main__ ran")


def x() -> None:
    pass
