"""Warm on load runs in the background (server/routing/prefix_warming.py): a catalog upload
returns while the warming's model call is still held, the warming then runs to its end, and a
warming that fails leaves the catalog loaded."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_app, make_settings
from session_kit import BANK_CATALOG
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import MenuResult

WAIT_S = 30.0


class HeldEngine(PlanEngine):
    """A PlanEngine whose choices wait for `release`; `fail` makes them raise instead."""

    def __init__(self, *args: Any, fail: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.answered = threading.Event()
        self.fail = fail

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Any = None) -> MenuResult:
        self.entered.set()
        if not self.release.wait(WAIT_S):
            raise TimeoutError("never released")
        if self.fail:
            raise RuntimeError("engine down")
        result = super().choose(prompt, options, option_bias=option_bias)
        self.answered.set()
        return result


def test_a_catalog_upload_does_not_wait_for_its_warming(tmp_path: Path) -> None:
    engine = HeldEngine(("payments", "balance"))
    with serve(make_app(make_settings(tmp_path, warm_on_load="root"), engine)) as base_url:
        r = httpx.post(f"{base_url}/v1/catalogs", json=BANK_CATALOG, timeout=WAIT_S)
        assert r.status_code == 201, r.text
        assert engine.entered.wait(WAIT_S)  # the warming has started its model call...
        assert not engine.answered.is_set()  # ...and the upload returned while it is held
        engine.release.set()
        assert engine.answered.wait(WAIT_S)  # then it runs to its end


def test_a_failed_warming_leaves_the_catalog_loaded(tmp_path: Path) -> None:
    engine = HeldEngine(("payments", "balance"), fail=True)
    engine.release.set()
    with serve(make_app(make_settings(tmp_path, warm_on_load="root"), engine)) as base_url:
        r = httpx.post(f"{base_url}/v1/catalogs", json=BANK_CATALOG, timeout=WAIT_S)
        assert r.status_code == 201, r.text
        assert engine.entered.wait(WAIT_S)
        listed = httpx.get(f"{base_url}/v1/catalogs/{r.json()['id']}", timeout=WAIT_S)
        assert listed.status_code == 200, listed.text
