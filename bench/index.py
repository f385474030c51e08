"""`stackroute bench index`: bench/results/INDEX.md, one row per results folder, written from
the folders themselves.

A folder with a `manifest.json` (bench/manifest.py) gives its date, question, command and
headline numbers; a folder without one is "historical" (written before the schema): its date
comes from the folder name, its question from the experiment its name starts with, its
command from the first line of its `command.txt`. Raw files are never rewritten.

    stackroute bench index                  # rewrite bench/results/INDEX.md
    stackroute bench index --check          # exit 1 if INDEX.md is out of date
    stackroute bench index --smoke --out /tmp/INDEX.md
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from stackroute.bench.commands import EXPERIMENTS
from stackroute.bench.environment import REPO_ROOT
from stackroute.bench.manifest import ManifestError, read_manifest

RESULTS = REPO_ROOT / "bench" / "results"
DATED = re.compile(r"(\d{4}-\d{2}-\d{2})-(.+)")
MAX_CELL = 160


@dataclass(frozen=True)
class Row:
    folder: str
    date: str
    question: str
    command: str
    headline: str
    source: str  # "manifest" | "historical" | "bad manifest: …"


def slug_question(slug: str) -> str:
    """The question of the experiment whose name the folder's slug (after the date and the
    device) starts with, longest name first; suites of `stackroute bench run` otherwise."""
    words = slug.split("-")
    rest = "-".join(words[1:]) if words[0] in ("cpu", "gpu", "vllm") else slug
    for e in sorted(EXPERIMENTS, key=lambda e: -len(e.name)):
        if rest == e.name or rest.startswith(e.name + "-"):
            return e.question
    return f"`stackroute bench run` suite or one-off run ({rest})"


def cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def folder_row(folder: Path) -> Row:
    match = DATED.fullmatch(folder.name)
    date, slug = (match.group(1), match.group(2)) if match else ("?", folder.name)
    try:
        manifest = read_manifest(folder)
    except ManifestError as e:
        return Row(folder.name, date, slug_question(slug), "", "", f"bad manifest: {e}")
    if manifest is not None:
        headline = ", ".join(f"{k}={v}" for k, v in manifest.summary.items())
        return Row(folder.name, manifest.started[:10], manifest.question, manifest.command,
                   headline, "manifest")
    return Row(folder.name, date, slug_question(slug), historical_command(folder),
               "see the folder", "historical")


def historical_command(folder: Path) -> str:
    """The first command line of command.txt (continuation lines joined), else the first
    invocation a suite run recorded in config.json, else ""."""
    command_file = folder / "command.txt"
    if command_file.is_file():
        lines = command_file.read_text(encoding="utf-8", errors="replace").splitlines()
        for i, line in enumerate(lines):
            if "python" in line or "stackroute" in line:
                parts = [line]
                while parts[-1].rstrip().endswith("\\") and i + len(parts) < len(lines):
                    parts[-1] = parts[-1].rstrip()[:-1]
                    parts.append(lines[i + len(parts)].strip())
                return " ".join(p.strip() for p in parts)
        return next((line for line in lines if line.strip()), "")
    config = folder / "config.json"
    if config.is_file():
        try:
            raw = json.loads(config.read_text(encoding="utf-8"))
            return str(raw["invocations"][0]["command"])
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            return ""
    return ""


def rows(results: Path) -> list[Row]:
    return [folder_row(p) for p in sorted(results.iterdir()) if p.is_dir()]


def render(found: list[Row]) -> str:
    lines = ["# bench/results", "",
             "Written by `stackroute bench index` from the folders (do not edit). "
             "\"historical\": a folder from before the manifest schema (bench/manifest.py); "
             "its raw files are as they were written.", "",
             "| folder | date | question | command | headline | source |",
             "|---|---|---|---|---|---|"]
    for r in found:
        lines.append(f"| [{r.folder}]({r.folder}/) | {r.date} | {cell(r.question)} | "
                     f"`{cell(r.command)}` | {cell(r.headline)} | {cell(r.source)} |"
                     if r.command else
                     f"| [{r.folder}]({r.folder}/) | {r.date} | {cell(r.question)} | | "
                     f"{cell(r.headline)} | {cell(r.source)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench index", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write (default: RESULTS/INDEX.md)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the index is out of date")
    parser.add_argument("--smoke", action="store_true",
                        help="the same run (it is fast); with --out, writes there")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"--results expects a folder, got {args.results}")
    text = render(rows(args.results))
    out = args.out or args.results / "INDEX.md"
    if args.check:
        current = out.read_text(encoding="utf-8") if out.is_file() else ""
        if current != text:
            print(f"{out} is out of date: run `stackroute bench index`")
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
