"""Time to first chunk vs time to last chunk of a streamed answer, through `stackroute serve`.

    stackroute bench streaming [--max-tokens 200] [--rounds 3] [--smoke] [--out DIR]

A real `stackroute serve` (the embedded CPU model unless `--engine`/`--model` say otherwise)
on a loopback port; `POST /v1/chat/completions` with `stream: true`, timed on the client from
the request to the first content chunk, to the last content chunk, and to `[DONE]`, for a free
answer and a JSON-schema-constrained one (`response_format`). One warm-up request runs first,
outside the timed region. `first_to_last_ratio` is the point: streamed for real, the first
chunk comes after one prefill and one decode step, a small fraction of the whole answer; a
buffered stream would put it at 1.0. Results: `streaming.json` in `--out` (with hardware,
versions and commit) and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.environment import environment
from stackroute.bench.reliability.serve_process import ServerProcess

LONG_ANSWER = [{"role": "user", "content": "Write a long story about a cat who travels to the "
                                           "moon, with many details."}]
RECIPE = {"type": "object", "properties": {
    "title": {"type": "string"},
    "steps": {"type": "array", "items": {"type": "string"}, "minItems": 12}},
    "required": ["title", "steps"], "additionalProperties": False}
CASES: dict[str, dict[str, Any]] = {
    "free": {"messages": LONG_ANSWER},
    "json_schema": {"messages": [{"role": "user", "content": "A recipe for pancakes, as JSON "
                                                             "with a title and many steps."}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "recipe", "schema": RECIPE}}},
}


def timed_stream(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed request: seconds to the first and last content chunk and to [DONE]."""
    started = time.perf_counter()
    first_s = last_s = done_s = None
    num_chunks, usage, finish = 0, None, None
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                done_s = time.perf_counter() - started
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(f"the stream failed: {event['error']}")
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or ():
                finish = choice.get("finish_reason") or finish
                if choice["delta"].get("content"):
                    now = time.perf_counter() - started
                    first_s = now if first_s is None else first_s
                    last_s = now
                    num_chunks += 1
    if first_s is None or last_s is None or done_s is None:
        raise RuntimeError("the stream ended without content or without [DONE]")
    return {"first_chunk_s": first_s, "last_chunk_s": last_s, "done_s": done_s,
            "num_chunks": num_chunks, "finish_reason": finish,
            "completion_tokens": (usage or {}).get("completion_tokens"),
            "first_to_last_ratio": first_s / last_s}


def run(*, max_tokens: int, rounds: int, serve_args: list[str], out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(["--db", str(Path(tmp) / "bench.db"), *serve_args],
                               log_path=out / "serve.log", ready_timeout_s=600)
        start_s = server.start()
        try:
            with httpx.Client(base_url=server.base_url, timeout=1800) as client:
                model = client.get("/v1/models").json()["data"][0]["id"]
                timed_stream(client, {"messages": LONG_ANSWER, "max_tokens": 8,
                                      "stream": True})  # warm-up, not timed
                results: dict[str, Any] = {}
                for name, case in CASES.items():
                    body = {**case, "max_tokens": max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}}
                    runs = []
                    for _ in range(rounds):
                        runs.append(timed_stream(client, body))
                        partial = {"case": name, "runs": runs}  # a long run leaves a record
                        (out / f"partial-{name}.json").write_text(json.dumps(partial, indent=2))
                    results[name] = {"runs": runs, "median": {
                        key: statistics.median(r[key] for r in runs)
                        for key in ("first_chunk_s", "last_chunk_s", "done_s",
                                    "first_to_last_ratio", "num_chunks")}}
        finally:
            server.stop()
    summary = {"benchmark": "streaming", "model": model, "max_tokens": max_tokens,
               "rounds": rounds, "server_start_s": start_s, "serve_args": serve_args,
               "cases": results, **environment()}
    (out / "streaming.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def table(summary: dict[str, Any]) -> str:
    lines = [f"model {summary['model']}, max_tokens {summary['max_tokens']}, "
             f"{summary['rounds']} round(s); medians",
             f"{'case':<12} {'tokens':>6} {'chunks':>6} {'first s':>8} {'last s':>8} "
             f"{'first/last':>10}"]
    for name, case in summary["cases"].items():
        m = case["median"]
        tokens = [r["completion_tokens"] for r in case["runs"]]
        lines.append(f"{name:<12} {statistics.median(t or 0 for t in tokens):>6.0f} "
                     f"{m['num_chunks']:>6.0f} {m['first_chunk_s']:>8.2f} "
                     f"{m['last_chunk_s']:>8.2f} {m['first_to_last_ratio']:>10.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench streaming", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="16 tokens, one round")
    parser.add_argument("--engine", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--out", type=Path, default=Path("bench/results/streaming"))
    args = parser.parse_args(argv)
    serve_args = [*(["--engine", args.engine] if args.engine else []),
                  *(["--model", args.model] if args.model else [])]
    max_tokens, rounds = (16, 1) if args.smoke else (args.max_tokens, args.rounds)
    summary = run(max_tokens=max_tokens, rounds=rounds, serve_args=serve_args, out=args.out)
    print(table(summary))  # a benchmark's report, on stdout
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
