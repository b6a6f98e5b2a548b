"""Logging calls inside a jitted forward: TorchDynamo cannot trace a ``logging.Logger`` method and breaks the graph at
each; a once-only warning (transformers' ``Logger.warning_once``) is left out of the capture instead, so a model that
warns once per call still compiles to one graph whose calls run directly."""
import logging

import pytest
import torch

import thunderlab

transformers = pytest.importorskip("transformers")


def _gpt2():
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def test_gpt2_with_labels_is_one_graph_whose_calls_run_directly():
    # GPT2LMHeadModel's loss_function calls logger.warning_once on every call with labels
    model = _gpt2()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    j = thunderlab.jit(model)
    with torch.no_grad():
        for _ in range(3):
            out, ref = j(input_ids=ids, labels=ids), model(input_ids=ids, labels=ids)
            torch.testing.assert_close(out.loss, ref.loss)
            torch.testing.assert_close(out.logits, ref.logits)
    assert j.cache_info["graphs"] == 1 and j.cache_info["direct_calls"] == 2, j.cache_info
    assert logging.Logger.warning_once not in torch._dynamo.config.ignore_logging_functions  # restored


def test_other_logging_calls_still_break_the_graph_and_results_stay_eager():
    log = logging.getLogger("thunderlab.tests.forward")

    def f(x):
        y = x.sin()
        log.warning("a warning every call")
        return y * 2

    j = thunderlab.jit(f)
    x = torch.randn(5)
    for _ in range(2):
        torch.testing.assert_close(j(x), f(x))
    assert j.cache_info["graphs"] == 2, j.cache_info  # Dynamo's break: before and after the call


def test_a_user_setting_stays_as_it_was():
    once = logging.Logger.warning_once
    torch._dynamo.config.ignore_logging_functions.add(once)
    try:
        j = thunderlab.jit(lambda x: x.cos() + 1)
        j(torch.randn(3))
        assert once in torch._dynamo.config.ignore_logging_functions
    finally:
        torch._dynamo.config.ignore_logging_functions.discard(once)
