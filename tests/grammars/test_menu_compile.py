"""compile_menu with the tiny byte-level tokenizer: sequences, layout, and rejected menus."""

from __future__ import annotations

import pytest
from stackroute.grammars.menu import CompiledMenu, compile_menu, compile_menus
from stackroute.grammars.trie import ROOT
from tokenizers import Tokenizer


def ids(tokenizer: Tokenizer, *tokens: str) -> tuple[int, ...]:
    found = tuple(tokenizer.token_to_id(token) for token in tokens)
    assert None not in found, tokens
    return found  # type: ignore[return-value]


@pytest.fixture
def payments(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> CompiledMenu:
    options = ["pay", "payment", "payments_history", "pay_later", "DONE"]
    return compile_menu(options, tiny_tokenizer, end_token_id=tiny_end_id)


def test_sequences_are_canonical_tokens_then_end(
    payments: CompiledMenu, tiny_tokenizer: Tokenizer
) -> None:
    t = tiny_tokenizer
    end = "<|im_end|>"
    assert payments.sequence("pay") == ids(t, "pay", end)
    assert payments.sequence("payment") == ids(t, "payment", end)
    assert payments.sequence("payments_history") == ids(
        t, "payment", "s", "_", "hi", "st", "o", "r", "y", end
    )
    assert payments.sequence("pay_later") == ids(t, "pay", "_", "late", "r", end)
    assert payments.sequence("DONE") == ids(t, "DONE", end)
    assert payments.sequences == tuple(payments.sequence(o) for o in payments.options)


def test_flat_layout_of_shared_prefixes(payments: CompiledMenu, tiny_tokenizer: Tokenizer) -> None:
    t = tiny_tokenizer
    assert payments.flat_token_ids == ids(
        t, "pay", "_", "late", "r",  # pay's subtree: pay_later (pay itself ends here)
        "payment", "s", "_", "hi", "st", "o", "r", "y",  # payment's subtree
        "DONE",
    )
    assert payments.flat_parent == (ROOT, 0, 1, 2, ROOT, 4, 5, 6, 7, 8, 9, 10, ROOT)
    assert payments.flat_depth == (1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8, 1)
    # Root (pay | payment | DONE), after "pay" (end | "_"), after "payment" (end | "s").
    assert payments.branch_points == (ROOT, 0, 4)
    assert payments.num_nodes == 13
    assert payments.ancestor_matrix().shape == (13, 13)


def test_end_token_is_never_in_the_flat_list(payments: CompiledMenu) -> None:
    assert payments.end_token_id not in payments.flat_token_ids


def test_single_option_is_all_forced(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> None:
    menu = compile_menu(["DONE"], tiny_tokenizer, end_token_id=tiny_end_id)
    assert menu.branch_points == ()
    assert menu.flat_token_ids == ids(tiny_tokenizer, "DONE")

    def no_logits(node: int) -> object:
        raise AssertionError(f"asked for logits at node {node}")

    choice = menu.decide(no_logits)  # type: ignore[arg-type]
    assert choice.choice == "DONE"
    assert choice.option_logprobs == {"DONE": 0.0}
    assert (choice.num_branch_points_on_path, choice.num_forced_tokens) == (0, 2)
    assert choice.margin == float("inf")


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("café_lookup", ("c", "a", "f", "Ã", "©", "_", "l", "o", "o", "k", "u", "p")),
        ("数据查询", ("æ", "ķ", "°", "æ", "į", "®", "æ", "Ł", "¥", "è", "¯", "¢")),
        ("emoji_🚀", ("e", "m", "o", "j", "i", "_", "ð", "Ł", "ļ", "Ģ")),
    ],
)
def test_unicode_names_are_byte_level_tokens(
    tiny_tokenizer: Tokenizer, tiny_end_id: int, name: str, tokens: tuple[str, ...]
) -> None:
    menu = compile_menu([name, "DONE"], tiny_tokenizer, end_token_id=tiny_end_id)
    assert menu.sequence(name) == (*ids(tiny_tokenizer, *tokens), tiny_end_id)


def test_unicode_names_share_byte_prefixes(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> None:
    # 数 and 查 both start with byte 0xE6 ("æ"): one root child, a branch one level down.
    menu = compile_menu(["数据", "查询"], tiny_tokenizer, end_token_id=tiny_end_id)
    assert menu.flat_token_ids[0] == tiny_tokenizer.token_to_id("æ")
    assert menu.branch_points == (0,)


def test_compile_menus_matches_one_at_a_time(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> None:
    menus = [["pay", "payment", "DONE", "BACK"], ["pay_later", "DONE"], ["数据查询", "BACK"]]
    batched = compile_menus(menus, tiny_tokenizer, end_token_id=tiny_end_id)
    single = [compile_menu(m, tiny_tokenizer, end_token_id=tiny_end_id) for m in menus]
    assert batched == single


def test_compiled_menu_is_immutable(payments: CompiledMenu) -> None:
    with pytest.raises(AttributeError):
        payments.options = ("x",)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ([], ValueError, "at least one option"),
        (["pay", "DONE", "pay", "BACK", "BACK"], ValueError, r"duplicated: \['BACK', 'pay'\]"),
        (["pay", ""], ValueError, "non-empty strings; got ''"),
        (["pay", " lead"], ValueError, "' lead' starts with whitespace"),
        (["pay", "\nnl"], ValueError, "starts with whitespace"),
        (["pay", "x<|im_end|>"], ValueError, "'x<|im_end|>' tokenises to include the end token"),
        ("DONE", TypeError, "not the string 'DONE'"),
    ],
)
def test_rejects_bad_menus(
    tiny_tokenizer: Tokenizer,
    tiny_end_id: int,
    options: list[str],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        compile_menu(options, tiny_tokenizer, end_token_id=tiny_end_id)


def test_rejects_names_that_tokenise_identically(tiny_end_id: int) -> None:
    from tokenizers import models

    # A word-level vocab maps every unknown word to [UNK]: two names, one token sequence.
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "DONE": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match="'alpha' and 'beta' tokenise identically"):
        compile_menu(["alpha", "beta", "DONE"], tokenizer, end_token_id=tiny_end_id)
