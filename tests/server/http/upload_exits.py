"""An allowed handler module whose import raises SystemExit (issue 15.2's `__main__`)."""

raise SystemExit("upload_exits ran at import")


def send() -> None:
    pass
