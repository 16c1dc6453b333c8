"""A saga run in its own process, for the kill -9 trials of tests/test_saga.py.

    python saga_driver.py TARGET TENANT NAMESPACE KEY EFFECTS [--fail STEP] [--kill POINT]
        [--lease SECONDS]

Three steps, reserve, charge and ship, each compensated; every effect appends one line to the
file EFFECTS (``do STEP``, ``undo STEP``, ``try STEP`` for the step that fails). ``--fail STEP``
makes that step fail for good; ``--kill POINT`` makes the process SIGKILL itself there:
``after:STEP`` (the saga's code, once the step is done), ``before:STEP`` (inside the step, before
its effect) or ``undo:STEP`` (inside the step's compensation, before its effect). Prints one JSON
line: the saga's result, or how it ended.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

import oncekey  # noqa: E402
from oncekey import OperationKey  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("target", "tenant", "namespace", "key", "effects"):
        parser.add_argument(name)
    parser.add_argument("--fail")
    parser.add_argument("--kill")
    parser.add_argument("--lease", type=float, default=2.0)
    args = parser.parse_args()
    effects = pathlib.Path(args.effects)

    def at(point: str) -> None:
        if args.kill == point:
            os.kill(os.getpid(), signal.SIGKILL)

    def effect(line: str) -> None:
        with effects.open("a") as f:
            f.write(line + "\n")

    def act(step: str, order: str) -> dict:
        at(f"before:{step}")
        if args.fail == step:
            effect(f"try {step}")
            raise ValueError(f"{step} refused for {order}")
        effect(f"do {step}")
        return {"step": step, "order": order}

    def undo(output: dict) -> None:
        at(f"undo:{output['step']}")
        effect(f"undo {output['step']}")

    def body(saga: oncekey.Saga) -> dict:
        done = []
        for step in ("reserve", "charge", "ship"):
            done.append(saga.step(step, act, step, args.key, compensate=undo)["step"])
            at(f"after:{step}")
        return {"done": done}

    with oncekey.Client(args.target, tenant=args.tenant) as client:
        saga = client.saga(OperationKey(args.namespace, args.key), lease_ttl=args.lease)
        try:
            result = saga.run(body)
        except oncekey.SagaRolledBack as e:
            print(json.dumps({"outcome": "rolled back", "step": e.step, "cause": e.cause}))
            return
        print(json.dumps({"outcome": "done", "replayed": saga.replayed, "result": result}))


if __name__ == "__main__":
    main()
