"""The model's answers to request-free questions kept across processes
(routing/judgement_store.py): the abstention check's content-free question is asked once per
leaf and model, not once per process."""

from __future__ import annotations

from pathlib import Path

from doubles import LogitEngine
from recovery_kit import evidence_source, house_tree
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import EngineInfo
from stackroute.server.routing import judgement_store
from stackroute.server.routing.abstention import NO, YES, AbstentionOptions
from stackroute.server.routing.judgement_store import JudgementStore
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

INFO = EngineInfo(engine="transformers", model="m", max_context_tokens=100, dtype="bfloat16")
QUESTION = Prompt((Message("user", "Does this tool do what the request asks?"),))


def test_an_answer_kept_by_one_process_is_read_by_the_next(tmp_path: Path) -> None:
    JudgementStore(INFO, directory=tmp_path).put(QUESTION, -1.25)
    assert JudgementStore(INFO, directory=tmp_path).get(QUESTION) == -1.25
    # another model, dtype or question has its own answers
    other = EngineInfo(engine="transformers", model="m2", max_context_tokens=100,
                       dtype="bfloat16")
    assert JudgementStore(other, directory=tmp_path).get(QUESTION) is None
    cast = EngineInfo(engine="transformers", model="m", max_context_tokens=100,
                      dtype="float32")
    assert JudgementStore(cast, directory=tmp_path).get(QUESTION) is None
    asked = Prompt((Message("user", "Another question?"),))
    assert JudgementStore(INFO, directory=tmp_path).get(asked) is None


def test_a_torn_line_is_skipped_and_the_rest_still_read(tmp_path: Path) -> None:
    store = JudgementStore(INFO, directory=tmp_path)
    store.put(QUESTION, 2.0)
    with store.path.open("a") as f:
        f.write('{"key": "abc", "val')  # a crash mid-line
    assert JudgementStore(INFO, directory=tmp_path).get(QUESTION) == 2.0


def test_a_cache_that_cannot_be_written_costs_only_the_next_call(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store = JudgementStore(INFO, directory=blocked)
    store.put(QUESTION, 1.0)  # logged, not raised
    assert store.get(QUESTION) == 1.0  # this process still remembers it
    assert JudgementStore(INFO, directory=blocked).get(QUESTION) is None


def test_a_fresh_router_asks_the_content_free_question_only_once_per_leaf() -> None:
    def ask(task: str) -> LogitEngine:
        engine = LogitEngine({"weather": 6.0, YES: 3.0, NO: 0.0}, neutral={YES: 1.0, NO: 0.0})
        tree = house_tree()
        options = RouterOptions(recovery=RecoveryOptions(is_fallback_enabled=False),
                                speculation=DraftSource.OFF,
                                abstention=AbstentionOptions(judge_weight=1.0, threshold=0.0))
        machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
        run_query(machine, Query(id="q", query=task, gold=(), args=None, tags=()))
        return engine

    first = ask("weather in Oslo")  # a new process: a new router and engine
    second = ask("weather in Rome")
    assert [c.is_neutral for c in first.calls if c.options == (YES, NO)] == [False, True]
    assert [c.is_neutral for c in second.calls if c.options == (YES, NO)] == [False]
    kept = list(judgement_store.judgement_dir().glob("*.jsonl"))
    assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 1
