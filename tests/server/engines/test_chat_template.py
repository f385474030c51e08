"""Prompts through the model's own chat template, checked prefix-stable at load; the built-in
rendering where a template is not; SmolLM2's prompts byte-identical to the built-in ChatML.

Tokenizers are the embedded model's `tokenizer.json` (local) with the fixture folder's
`tokenizer_config.json` (`chat_templates/`, see its README); nothing comes from a hub."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt

FIXTURES = Path(__file__).parent / "chat_templates"

CALL_1 = Prompt((Message("system", "Route the request. Answer with one option name."),
                 Message("user", "Request: check my balance\n\nOptions:\n- accounts\n- DONE")))
CALL_2 = CALL_1.extend(Message("assistant", "accounts"),
                       Message("user", "Options under accounts:\n- balance\n- DONE"))


@pytest.fixture(scope="module")
def tokenizer_json(embedded_model_dir: Path) -> Path:
    return embedded_model_dir / "tokenizer.json"


def fixture_tokenizer(name: str, tokenizer_json: Path, tmp_path: Path, *,
                      with_added_tokens: bool = True) -> Any:
    from transformers import AutoTokenizer

    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(tokenizer_json, folder / "tokenizer.json")
    shutil.copy(FIXTURES / name / "tokenizer_config.json", folder / "tokenizer_config.json")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    added = FIXTURES / name / "added_tokens.json"
    if with_added_tokens and added.exists():
        tokenizer.add_tokens(json.loads(added.read_text()))
    return tokenizer


def template_ids(tokenizer: Any, prompt: Prompt) -> list[int]:
    """What the model's own `apply_chat_template` gives for the whole prompt."""
    text = tokenizer.apply_chat_template([m.to_dict() for m in prompt.messages],
                                         tokenize=False, add_generation_prompt=True)
    return list(tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.model
@pytest.mark.parametrize("name", ["llama3", "gemma"])
def test_a_non_chatml_template_renders_through_its_own_template(
        name: str, tokenizer_json: Path, tmp_path: Path) -> None:
    from stackroute.server.engines.chat_template import check_template
    from stackroute.server.engines.rendering import ChatRenderer

    tokenizer = fixture_tokenizer(name, tokenizer_json, tmp_path)
    assert check_template(tokenizer, tokenizer.chat_template).is_prefix_stable
    renderer = ChatRenderer(tokenizer)
    assert renderer.rendering == "template" and renderer.template_problem is None
    first, second = renderer.prompt_ids(CALL_1), renderer.prompt_ids(CALL_2)
    assert first == template_ids(tokenizer, CALL_1)  # exactly the template's tokens
    assert second == template_ids(tokenizer, CALL_2)
    assert second[:len(first)] == first  # call N is a token prefix of call N+1
    marker = {"llama3": "<|start_header_id|>", "gemma": "<start_of_turn>"}[name]
    text = renderer.decode(second)
    assert marker in text and "<|im_start|>" not in text
    end = {"llama3": "<|eot_id|>", "gemma": "<end_of_turn>"}[name]
    assert renderer.end_of_turn_id == tokenizer.convert_tokens_to_ids(end)
    if name == "gemma":  # no system role: the system text opens the first user turn
        assert text.startswith("<bos><start_of_turn>user\nRoute the request.")
        assert "<start_of_turn>model\naccounts<end_of_turn>" in text


@pytest.mark.model
def test_a_template_that_rewrites_earlier_turns_falls_back_with_a_warning(
        tokenizer_json: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from stackroute.server.engines.rendering import CHATML, ChatRenderer

    tokenizer = fixture_tokenizer("rewriting", tokenizer_json, tmp_path)
    with caplog.at_level(logging.WARNING, logger="stackroute.server.engines.rendering"):
        renderer = ChatRenderer(tokenizer)
    assert renderer.rendering == "chatml" and renderer.segments is None
    assert renderer.template_problem is not None and "prefix" in renderer.template_problem
    (record,) = [r for r in caplog.records if "not prefix-stable" in r.message]
    assert "the model's chat template" in record.message and "chatml" in record.message
    assert renderer.decode(renderer.prompt_ids(CALL_1)) == "".join(
        CHATML.render(m) for m in CALL_1.messages) + CHATML.generation_prompt()


@pytest.mark.model
def test_a_template_whose_boundary_tokens_merge_is_not_prefix_stable(
        tokenizer_json: Path, tmp_path: Path) -> None:
    """Llama 3's template on SmolLM2's BPE without `\\n\\n` as one token: the generation
    prompt ends in one `\\n\\n` token, the answered turn splits it in two."""
    from stackroute.server.engines.chat_template import check_template
    from stackroute.server.engines.rendering import ChatRenderer

    tokenizer = fixture_tokenizer("llama3", tokenizer_json, tmp_path, with_added_tokens=False)
    check = check_template(tokenizer, tokenizer.chat_template)
    assert not check.is_prefix_stable and "not a prefix" in str(check.problem)
    renderer = ChatRenderer(tokenizer)
    assert renderer.rendering == "chatml"  # the built-in markers the vocabulary has


@pytest.mark.model
def test_the_embedded_model_renders_byte_identical_chatml(tokenizer_json: Path,
                                                          tmp_path: Path) -> None:
    """SmolLM2's template renders routing prompts as ChatML: the built-in rendering is kept,
    so its prompts (and routing decisions) are what they were before templates were read."""
    from stackroute.server.engines.rendering import CHATML, ChatRenderer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_json.parent, local_files_only=True)
    assert tokenizer.chat_template  # the model ships one
    renderer = ChatRenderer(tokenizer)
    before = ChatRenderer(tokenizer, chat_format=CHATML)  # the rendering before templates
    assert renderer.rendering == "chatml" and renderer.template_problem is None
    for prompt in (CALL_1, CALL_2, Prompt((Message("user", "hello"),))):
        assert renderer.prompt_ids(prompt) == before.prompt_ids(prompt)
    expected = ("<|im_start|>system\nRoute the request. Answer with one option name.<|im_end|>\n"
                "<|im_start|>user\nRequest: check my balance\n\nOptions:\n- accounts\n- DONE"
                "<|im_end|>\n<|im_start|>assistant\n")
    assert renderer.decode(renderer.prompt_ids(CALL_1)) == expected
    assert renderer.prompt_ids(CALL_1) == template_ids(tokenizer, CALL_1)
    assert renderer.end_of_turn_id == tokenizer.convert_tokens_to_ids("<|im_end|>")


@pytest.mark.model
def test_a_chat_template_file_overrides_the_model_template(tokenizer_json: Path,
                                                           tmp_path: Path) -> None:
    from stackroute.server.engines.chat_template import read_chat_template
    from stackroute.server.engines.rendering import ChatRenderer

    tokenizer = fixture_tokenizer("llama3", tokenizer_json, tmp_path)
    jinja = tmp_path / "gemma.jinja"
    jinja.write_text(json.loads((FIXTURES / "gemma" / "tokenizer_config.json").read_text())[
        "chat_template"])
    for source in (jinja, FIXTURES / "gemma" / "tokenizer_config.json"):
        template = read_chat_template(source)
        renderer = ChatRenderer(tokenizer, chat_template=template)
        assert renderer.rendering == "template"
        text = renderer.decode(renderer.prompt_ids(CALL_2))
        assert "<start_of_turn>model\naccounts<end_of_turn>" in text  # plain text here
        assert "<|start_header_id|>" not in text


@pytest.mark.model
def test_a_template_that_drifts_after_the_check_is_encoded_whole(
        tokenizer_json: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Segments stay honest beyond the check's conversation: a prompt whose earlier turns the
    template rewrites is encoded whole, as the template renders it."""
    from stackroute.server.engines.chat_template import TemplateSegments

    tokenizer = fixture_tokenizer("rewriting", tokenizer_json, tmp_path)
    segments = TemplateSegments(tokenizer, tokenizer.chat_template,
                                generation_suffix="<|im_start|>assistant\n")
    with caplog.at_level(logging.WARNING):
        ids = segments.prompt_ids(CALL_2.messages)
    assert ids == template_ids(tokenizer, CALL_2)
    assert any("rewrote earlier turns" in r.message for r in caplog.records)


@pytest.mark.parametrize(("content", "problem"), [
    ("", "is empty"), ('{"model_max_length": 5}', "no chat_template"), ("{not json", "valid")])
def test_an_unreadable_template_file_is_a_clear_error(tmp_path: Path, content: str,
                                                      problem: str) -> None:
    from stackroute.server.engines.chat_template import ChatTemplateError, read_chat_template

    path = tmp_path / ("t.jinja" if not content else "tokenizer_config.json")
    path.write_text(content)
    with pytest.raises(ChatTemplateError, match=problem):
        read_chat_template(path)
