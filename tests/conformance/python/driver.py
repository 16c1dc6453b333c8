"""Conformance driver of the Python client (see ../README.md)."""

import json
import sys
import threading
import time

import grpc

import oncekey
from oncekey.v1 import ledger_pb2

STRINGS = {
    "currency": "EUR", "\u20ac": "euro", "\U0001F600": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
    "text": "line\nbreak \"q\" \\ \u0001 </> \u2028",
}
NUMBERS = {"amount": 1250, "rate": 0.1, "big": 1e21, "tiny": 5e-324, "neg": -12.5, "small": 1e-7}
ARGS = [STRINGS, NUMBERS, [True, False], None, "order-481", 18446744073709551615]
OTHER_ARGS = [STRINGS, NUMBERS, [True, False], None, "order-482", 18446744073709551615]


def outcome_name(response):
    return ledger_pb2.ClaimOutcome.Name(response.outcome)


def result_json(result):
    return {
        "code": result.code,
        "body": result.body.hex(),
        "content_type": result.content_type,
        "metadata": dict(result.metadata),
    }


def scenario(client, ns, key, body):
    out = {}

    def first(held):
        token = held.token
        expires = held.lease.expires_at.ToNanoseconds()
        time.sleep(2.5)  # 2.5 lease lengths: only the keep-alive keeps the lease
        out["during"] = outcome_name(client.claim(ns, key, ARGS))
        out["renewed"] = held.lease.expires_at.ToNanoseconds() > expires
        out["token"] = token
        return oncekey.OperationResult(
            code=201, body=body, content_type="application/octet-stream", metadata={"lang": "python"}
        )

    got = client.run(ns, key, ARGS, first, lease_ttl=1.0)
    out["first_replayed"] = got.replayed

    called = []
    again = client.run(ns, key, ARGS, lambda held: called.append(1))
    out["replay_replayed"] = again.replayed
    out["replay"] = result_json(again.result)
    out["fn_called_on_replay"] = bool(called)

    try:
        client.claim(ns, key, OTHER_ARGS)
        out["reuse"] = {"code": "OK", "reason": None}
    except grpc.RpcError as e:
        out["reuse"] = {"code": e.code().name, "reason": oncekey.reason(e)}
    return out


def race(client, ns, key, n):
    print("ready", flush=True)
    sys.stdin.readline()
    outcomes = [None] * n
    errors = []

    def one(i):
        try:
            outcomes[i] = outcome_name(client.claim(ns, key, ARGS, owner=f"python-{i}"))
        except grpc.RpcError as e:
            errors.append(f"{e.code().name} {oncekey.reason(e)}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"outcomes": [o for o in outcomes if o], "errors": errors}


def main(argv):
    command = argv[0]
    if command == "fingerprint":
        return {"fingerprint": oncekey.fingerprint(ARGS).hex()}
    target, tenant, ns, key = argv[1].removeprefix("http://"), argv[2], argv[3], argv[4]
    with oncekey.Client(target, tenant=tenant) as client:
        if command == "scenario":
            return scenario(client, ns, key, bytes.fromhex(argv[5]))
        if command == "complete":
            body = bytes.fromhex(argv[5])
            got = client.run(ns, key, ARGS, lambda held: oncekey.OperationResult(code=200, body=body))
            return {"replayed": got.replayed, "result": result_json(got.result)}
        if command == "replay":
            response = client.claim(ns, key, ARGS)
            return {"outcome": outcome_name(response), "result": result_json(response.record.result)}
        if command == "race":
            return race(client, ns, key, int(argv[5]))
    raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
