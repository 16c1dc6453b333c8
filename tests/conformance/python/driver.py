"""Conformance driver of the Python client (see ../README.md)."""

import asyncio
import json
import os
import sys
import threading
import time

import oncekey
from oncekey import OperationKey, StoredResult

STRINGS = {
    "currency": "EUR", "\u20ac": "euro", "\U0001F600": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
    "text": "line\nbreak \"q\" \\ \u0001 </> \u2028",
}
# Numbers are lossless or refused (docs/api.md#numbers): 2^53-1 is the largest a fingerprint keeps,
# and 2^64-1 travels as a string (as in the Go driver).
NUMBERS = {"amount": 1250, "rate": 0.1, "big": 9007199254740991, "tiny": 5e-324, "neg": -12.5, "small": 1e-7}
ARGS = [STRINGS, NUMBERS, [True, False], None, "order-481", "18446744073709551615"]
OTHER_ARGS = [STRINGS, NUMBERS, [True, False], None, "order-482", "18446744073709551615"]


def outcome_name(claimed):
    return f"CLAIM_OUTCOME_{claimed.outcome.value}"


def result_json(result):
    return {
        "code": result.code,
        "body": result.body.hex(),
        "content_type": result.content_type,
        "metadata": dict(result.metadata),
    }


def scenario(client, ns, key, body):
    out = {}
    op = OperationKey(ns, key)

    def first(lease):
        token = lease.token
        expires = lease.expires_at
        time.sleep(2.5)  # 2.5 lease lengths: only the keep-alive keeps the lease
        out["during"] = outcome_name(client.claim(op, ARGS))
        out["renewed"] = lease.expires_at > expires
        out["token"] = token
        return StoredResult(code=201, body=body, content_type="application/octet-stream", metadata={"lang": "python"})

    got = client.run(op, ARGS, first, lease_ttl=1.0)
    out["first_replayed"] = got.replayed

    called = []
    again = client.run(op, ARGS, lambda lease: called.append(1))
    out["replay_replayed"] = again.replayed
    out["replay"] = result_json(again.result)
    out["fn_called_on_replay"] = bool(called)

    try:
        client.claim(op, OTHER_ARGS)
        out["reuse"] = {"code": "OK", "reason": None}
    except oncekey.Error as e:
        out["reuse"] = {"code": e.code.name if e.code else None, "reason": e.reason}
    return out


def race(client, ns, key, n):
    print("ready", flush=True)
    sys.stdin.readline()
    outcomes = [None] * n
    errors = []

    def one(i):
        try:
            outcomes[i] = outcome_name(client.claim(OperationKey(ns, key), ARGS, owner=f"python-{i}"))
        except oncekey.Error as e:
            errors.append(f"{e.code.name if e.code else None} {e.reason}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"outcomes": [o for o in outcomes if o], "errors": errors}


def emit(event):
    print(json.dumps(event), flush=True)


class Stdin:
    """Lines from stdin, read by a daemon thread (so a pending read never keeps the driver alive)."""

    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.lines = asyncio.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in sys.stdin:
            self.loop.call_soon_threadsafe(self.lines.put_nowait, line.strip())
        self.loop.call_soon_threadsafe(self.lines.put_nowait, None)

    async def expect(self, word):
        line = await self.lines.get()
        if line != word:
            raise SystemExit(f"expected {word!r} on stdin, got {line!r}")


async def fault(target, tenant, ns, key, effect_file, lease_ms, cancel_after_ms):
    """The fault-conformance run (tests/conformance/README.md: the `fault` command)."""
    stdin = Stdin()
    client = oncekey.AsyncClient(target, tenant=tenant)

    @client.idempotent(ns, key=lambda args: key, arguments=lambda args: args, lease_ttl=lease_ms / 1000)
    async def effect(args) -> dict:
        emit({"event": "started", "token": oncekey.current_lease().token})
        await stdin.expect("go")
        fd = os.open(effect_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{key}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        emit({"event": "effect"})
        await stdin.expect("finish")
        return {"done": key}

    call = asyncio.ensure_future(effect.detailed(ARGS))
    if cancel_after_ms is not None:
        asyncio.get_running_loop().call_later(cancel_after_ms / 1000, call.cancel)
    try:
        done = await call
        report = {"event": "done", "replayed": done.replayed, "result": done.value, "error": None}
    except asyncio.CancelledError:
        report = {"event": "done", "replayed": False, "result": None, "error": {"type": "Cancelled", "code": None, "reason": None}}
    except oncekey.Error as e:
        error = {"type": type(e).__name__, "code": e.code.name if e.code else None, "reason": e.reason}
        report = {"event": "done", "replayed": False, "result": None, "error": error}
    await client.close()
    return report


def fault_main(argv):
    target, tenant, ns, key, effect_file = argv[:5]
    flags = dict(zip(argv[5::2], argv[6::2]))
    lease_ms = int(flags.get("--lease-ms", 2000))
    cancel = flags.get("--cancel-after-ms")
    report = asyncio.run(fault(target, tenant, ns, key, effect_file, lease_ms, int(cancel) if cancel else None))
    emit(report)


def call(client, ns, to, subject, effect_file):
    """send_email(to, subject) through the wrapper with its defaults: no key, no arguments given."""

    @client.idempotent(ns)
    def send_email(to, subject):
        with open(effect_file, "a", encoding="utf-8") as effects:
            effects.write("python\n")
        return {"sent_by": "python"}

    done = send_email.detailed(to, subject)
    return {"replayed": done.replayed, "value": done.value, "key": send_email.key_of(to, subject).key}


def main(argv):
    command = argv[0]
    if command == "fingerprint":
        return {"fingerprint": oncekey.fingerprint(ARGS).hex()}
    if command == "call":
        target, tenant, ns, to, subject, effect_file = argv[1:7]
        with oncekey.Client(target, tenant=tenant) as client:
            return call(client, ns, to, subject, effect_file)
    target, tenant, ns, key = argv[1], argv[2], argv[3], argv[4]
    with oncekey.Client(target, tenant=tenant) as client:
        if command == "scenario":
            return scenario(client, ns, key, bytes.fromhex(argv[5]))
        if command == "complete":
            body = bytes.fromhex(argv[5])
            got = client.run(OperationKey(ns, key), ARGS, lambda lease: StoredResult(code=200, body=body))
            return {"replayed": got.replayed, "result": result_json(got.result)}
        if command == "replay":
            claimed = client.claim(OperationKey(ns, key), ARGS)
            record = claimed.record
            result = record.result if record is not None and record.result is not None else StoredResult()
            return {"outcome": outcome_name(claimed), "result": result_json(result)}
        if command == "race":
            return race(client, ns, key, int(argv[5]))
    raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["fault"]:
        fault_main(sys.argv[2:])
    else:
        print(json.dumps(main(sys.argv[1:])), flush=True)
