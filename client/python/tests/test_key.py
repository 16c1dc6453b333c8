"""Operation keys: deterministic, injective, validated like the server validates them, with child
keys that record their parent (as the Rust client's OperationKey)."""

import pytest

from oncekey import InvalidKey, OperationKey


def test_keys_are_deterministic_and_injective():
    a = OperationKey.of("tasks.create", "ticket-481", "create-task", "v1")
    assert a == OperationKey.from_parts("tasks.create", ["ticket-481", "create-task", "v1"])
    assert a.key == "ticket-481:create-task:v1"
    assert OperationKey.of("n", "a:b", "c").key == "a%3Ab:c" != OperationKey.of("n", "a", "b:c").key
    assert OperationKey.of("n", "100%", "x/y").key == "100%25:x%2Fy"
    assert str(a) == "tasks.create/ticket-481:create-task:v1"


def test_children_record_their_parent():
    order = OperationKey.of("orders.place", "order-9", "v2")
    charge = order.child_in("payments.charge", "charge")
    assert (charge.namespace, charge.key) == ("payments.charge", "order-9:v2/charge")
    assert (charge.parent.namespace, charge.parent.key) == ("orders.place", "order-9:v2")
    refund = charge.child("refund/partial")
    assert refund.key == "order-9:v2/charge/refund%2Fpartial"
    assert refund.parent.key == charge.key and refund.parent.parent is None
    assert OperationKey.from_raw("a.b", "k").with_parent(refund).parent.parent is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: OperationKey("Bad", "x"),
        lambda: OperationKey("", "x"),
        lambda: OperationKey("n" * 129, "x"),
        lambda: OperationKey.of("n"),
        lambda: OperationKey.of("n", "a", ""),
        lambda: OperationKey("n", "a\nb"),
        lambda: OperationKey("n", "a\x85b"),
        lambda: OperationKey("n", "x" * 257),
        lambda: OperationKey("n", "é" * 129),
        lambda: OperationKey.of("n", "a").child(""),
    ],
)
def test_invalid_keys_are_refused(make):
    with pytest.raises(InvalidKey):
        make()


def test_random_keys_are_explicit_and_distinct():
    a, b = OperationKey.random("n"), OperationKey.random("n")
    assert a != b and a.key.startswith("random-")
