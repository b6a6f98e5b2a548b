"""A region compiling in the background leaves PyTorch's random generator to the other threads.

TorchDynamo sets the global generator back to its state at the start of a compile when the
compile ends. The test makes the program thread draw while a compile on thunderlab's worker is
in the middle of it (the backend waits for the draw), and checks that the numbers drawn after
the compile continue the stream eager PyTorch draws, instead of repeating it.
"""
import threading

import torch

from thunderlab.executors.region import RegionRunner, start_pending


def test_draws_made_while_a_region_compiles_stand():
    started, drawn = threading.Event(), threading.Event()

    def waiting_backend(gm, example_inputs):
        started.set()
        assert drawn.wait(60), "the test's thread never drew"
        return gm.forward

    def compile_region(args):
        fn = torch.compile(lambda x: x * 2 + 1, backend=waiting_backend, fullgraph=True)
        fn(*args)
        return fn, ["# compiled by the test's backend"]

    runner = RegionRunner("r0", "inductor", lambda x: x * 2 + 1, compile_region, tiered=True)
    torch.manual_seed(0)
    want = [torch.rand(4) for _ in range(3)]

    torch.manual_seed(0)
    runner(torch.ones(3))  # the first call runs with torch and queues the compile
    start_pending()
    assert started.wait(60), "the compile did not start"
    got = [torch.rand(4), torch.rand(4)]  # drawn while the compile is under way
    drawn.set()
    assert runner.wait(60) and runner.error is None, runner.error
    got.append(torch.rand(4))  # after the compile ended
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), f"draw {i} differs from eager's stream (a compile set the generator back)"


def test_pytorchs_setters_are_back_once_no_compile_runs():
    from thunderlab.executors.generators import leaving_generators_alone

    own = torch.random.set_rng_state, torch.cuda.set_rng_state
    state = torch.random.get_rng_state()
    with leaving_generators_alone():
        assert torch.random.set_rng_state is not own[0]
        torch.random.set_rng_state(torch.zeros_like(state))  # on this thread: left alone
        assert torch.equal(torch.random.get_rng_state(), state)
        with leaving_generators_alone():  # nested: still in place after the inner block
            pass
        assert torch.random.set_rng_state is not own[0]
    assert (torch.random.set_rng_state, torch.cuda.set_rng_state) == own
