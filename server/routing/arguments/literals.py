"""Literal values in a request: URLs, IP addresses, file names and paths.

A literal is written to be copied, not read: where a request holds one, it is almost always
some property's value, whatever words stand around it. The words right before one are its
label ("the URL", "IP address", "the file"), not a value of their own."""

from __future__ import annotations

import re
from dataclasses import dataclass

_URL = re.compile(r"\b(?:https?|ftp)://[^\s\"'<>()]+|\bwww\.[^\s\"'<>()]+")
_IP = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?![\w.]*\w)")
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)+/?|[A-Za-z]:\\[\w.\\ -]+")
_FILE = re.compile(r"(?<![\w/.@-])[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{1,4}(?![\w@-])")
# extensions that make a dotted word a file name, not an abbreviation or a domain
_FILE_EXTENSIONS = frozenset("""txt csv tsv json xml yaml yml pdf doc docx xls xlsx ppt pptx
png jpg jpeg gif bmp tiff svg webp mp3 mp4 m4a wav flac ogg avi mov mkv zip tar gz tgz py js
ts java c cpp h go rs rb php html htm css md ipynb sql db log ini cfg conf sh exe dll so apk
bin dat pkl h5 onnx pt""".split())  # noqa: SIM905
_TRAILING = ".,;:!?"


@dataclass(frozen=True)
class Literal:
    text: str
    kind: str  # url | ip | path | file
    span: tuple[int, int]


def find_literals(request: str) -> list[Literal]:
    """The request's literals, in order, none overlapping another (a URL's path is not a
    path of its own)."""
    found: list[Literal] = []
    for kind, pattern in (("url", _URL), ("ip", _IP), ("path", _PATH), ("file", _FILE)):
        for match in pattern.finditer(request):
            text = match[0].rstrip(_TRAILING)
            span = (match.start(), match.start() + len(text))
            if kind == "file" and text.rsplit(".", 1)[-1].lower() not in _FILE_EXTENSIONS:
                continue
            if any(a < span[1] and span[0] < b for a, b in (f.span for f in found)):
                continue
            found.append(Literal(text, kind, span))
    return sorted(found, key=lambda lit: lit.span)


def labels_literal(request: str, end: int, literals: list[Literal]) -> bool:
    """Whether the text ending at `end` is followed by a literal, at most two of "address",
    "at", "is", "of", "=" (and a colon or quotes) between: "the URL https://…", "IP address
    10.0.0.1", "file: a.csv"."""
    for literal in literals:
        if literal.span[0] < end:
            continue
        between = request[end:literal.span[0]].strip(" \"'“”‘’:").lower().split()
        return all(w in ("address", "at", "is", "of", "=") for w in between) and len(between) <= 2
    return False
