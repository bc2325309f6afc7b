def test_generic_script_shows_a_broken_promise_by_the_promised_error():
    # the generic comparison prints error_functorch_only/error_reference_only, never promise_broken; it shows
    # the promise broken where one side raised the promised error and the other returned a value
    from fuzzer.judge.execute import Outcome, Side
    from fuzzer.publish.verify import reproduced

    message = "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."

    class F:
        signature = type("S", (), {"verdict": "promise_broken", "error": f"NotImplementedError: {message} @ -"})
        outcome = Outcome("promise_broken", Side(None, "NotImplementedError", message), Side("0", None, None), 0)

        @staticmethod
        def expect():
            return None

    shown = f"============= functorch\nNotImplementedError({message!r})\n============= compiled\n0\nverdict: error_functorch_only\n"
    assert reproduced(F, shown, compact=False)
    assert not reproduced(F, shown.replace("jvp function", "vmap rule"), compact=False)
    assert not reproduced(F, shown.replace("error_functorch_only", "consistent"), compact=False)
