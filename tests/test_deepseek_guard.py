"""The windowed no-repeat-n-gram guard, on hand-made token histories."""

import pytest

torch = pytest.importorskip("torch")

from ocrbatch.engines.deepseek_ocr2.ngram_guard import NgramGuard  # noqa: E402

V = 12  # vocabulary size of these toy histories
PAD = 0


def banned(guard: NgramGuard, rows: list[list[int]]) -> list[set[int]]:
    ids = torch.tensor(rows)
    mask = guard.banned(ids, V)
    return [set(torch.nonzero(r).flatten().tolist()) for r in mask]


def test_bans_the_token_that_would_repeat_an_ngram():
    g = NgramGuard(n=3, window=10, prompt_len=0)
    # 1 2 3 ... 1 2 → the next token may not be 3
    assert banned(g, [[1, 2, 3, 4, 1, 2]]) == [{3}]
    assert banned(g, [[1, 2, 3, 4, 5, 6]]) == [set()]


def test_only_the_window_counts():
    g = NgramGuard(n=3, window=5, prompt_len=0)
    assert banned(g, [[1, 2, 3, 7, 8, 9, 1, 2]]) == [set()]  # "1 2 3" began 8 tokens back
    assert banned(g, [[7, 8, 9, 1, 2, 3, 1, 2]]) == [{3}]


def test_exempt_tokens_may_repeat():
    g = NgramGuard(n=2, window=10, prompt_len=0, exempt=[5])
    assert banned(g, [[5, 6, 5]]) == [{6}]
    assert banned(g, [[6, 5, 6]]) == [set()]  # 6 was followed by 5, but 5 is exempt


def test_the_prompt_is_not_history():
    g = NgramGuard(n=2, window=10, prompt_len=3)
    assert banned(g, [[4, 7, 4, 4]]) == [set()]  # "4 7" is in the prompt only
    assert banned(g, [[1, 1, 1, 4, 7, 4]]) == [{7}]


def test_rows_of_a_left_padded_batch_get_the_bans_they_get_alone():
    gen_a, gen_b = [1, 2, 3, 1, 2], [4, 5, 6, 4, 5]
    alone_a = banned(NgramGuard(n=3, window=6, prompt_len=2), [[9, 9] + gen_a])
    alone_b = banned(NgramGuard(n=3, window=6, prompt_len=4), [[8, 8, 8, 8] + gen_b])
    batch = banned(NgramGuard(n=3, window=6, prompt_len=4), [[PAD, PAD, 9, 9] + gen_a, [8, 8, 8, 8] + gen_b])
    assert batch == alone_a + alone_b == [{3}, {6}]


def test_scores_of_banned_tokens_become_minus_infinity():
    g = NgramGuard(n=2, window=4, prompt_len=0)
    scores = torch.zeros(1, V)
    out = g(torch.tensor([[3, 4, 3]]), scores)
    assert out[0, 4] == float("-inf")
    assert torch.isfinite(out[0, [i for i in range(V) if i != 4]]).all()


def test_rejects_settings_that_cannot_work():
    with pytest.raises(ValueError):
        NgramGuard(n=1, window=10, prompt_len=0)
    with pytest.raises(ValueError):
        NgramGuard(n=5, window=3, prompt_len=0)
