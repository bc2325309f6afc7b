"""A replay worker: ``python -m fuzzer.history.replay_worker``, started with the interpreter of the torch to test.

NOTE [replay workers]
Replaying under another torch means another interpreter (``.venvs/torch-X.Y.Z/bin/python``). The
driver (:class:`fuzzer.history.replay.ChildInterpreter`) starts this module there with ``PYTHONPATH`` set to the driver's
own checkout, so both sides run the same affuzz. The protocol is JSON lines: the worker announces
``{"ready": true, "torch_version": ...}``, then answers each request ``{"case": <case JSON>, "oracle":
..., "timeout": ...}`` with ``{"verdict": ..., "detail": ..., "fingerprint": ..., "outcome": ...}`` (the
outcome's JSON form: what each side gave, for re-rendering a corpus repro, NOTE [corpus repros]). Replies are
prefixed with :data:`PREFIX` so nothing a case prints can be mistaken for one. A request only carries
case IR, which the worker validates and renders from the closed vocabulary: a corpus from an untrusted
source executes nothing else. A case that crashes or hangs the worker is the driver's to record
(``crash``/``hang``); it then starts a fresh worker and goes on.
"""

from __future__ import annotations

import json
import sys

PREFIX = "@@affuzz-replay "


def _reply(obj: dict) -> None:
    sys.stdout.write(PREFIX + json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    import torch

    from ..ir.case import CaseError
    from ..ir.serde import case_from_json
    from ..judge.judge import Judge, judgement_detail

    judge = Judge(timeout=None)
    _reply({"ready": True, "torch_version": torch.__version__, "python": sys.executable})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            case = case_from_json(request["case"])
            judge.timeout = request.get("timeout")
            j = judge(case, request.get("oracle", "functorch_vs_create_graph"))
            _reply(
                {
                    "verdict": j.verdict,
                    "detail": judgement_detail(j),
                    "fingerprint": j.fingerprint,
                    "outcome": j.outcome.to_json() if j.outcome is not None else None,
                }
            )
        except CaseError as e:
            _reply({"verdict": "invalid", "detail": str(e)})
        except Exception as e:  # noqa: BLE001 (reported to the driver, the worker goes on)
            _reply({"verdict": "error", "detail": f"{type(e).__name__}: {e}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
