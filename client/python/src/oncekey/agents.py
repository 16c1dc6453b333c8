"""Words for agents: what an ``oncekey.Error`` means and what to do next, as one short text a model
can act on (an MCP tool result, an agent framework's tool message), instead of a stack trace.

Every text says whether anything was done by this call and whether to call again, with the same
arguments or not at all. Nothing here sends a request.
"""

from __future__ import annotations

from oncekey.errors import (
    AwaitingApproval,
    BudgetExhausted,
    DuplicateIntent,
    Error,
    InProgress,
    KeyReused,
    LeaseLost,
    MissingScope,
    NeedsReconciliation,
    OperationFailed,
    SagaNeedsReconciliation,
    SagaRolledBack,
    Unavailable,
)

__all__ = ["explain"]


def explain(error: Error) -> str:
    """What ``error`` means for the caller of an idempotent tool, and what to do next."""
    if isinstance(error, KeyReused):
        return (
            "Nothing was done: this action was already taken by an earlier call with other arguments "
            "(KEY_REUSED). Do not retry it with changed arguments: ask the user how to proceed. Calling "
            "again with exactly the earlier call's arguments returns its result."
        )
    if isinstance(error, DuplicateIntent):
        others = ", ".join(
            f"{m.key} ({'refused too' if m.refused else m.status.value})" for m in error.matches
        ) or "another key"
        return (
            "Nothing was done: the same action with exactly these arguments was already requested under "
            f"another key ({others}) a short while ago (DUPLICATE_INTENT). Do not retry it under a new "
            "key: that earlier request is this intent, so use its key to get its result. Only if the "
            "user explicitly wants the action done again, call again saying so (repeat_intent)."
        )
    if isinstance(error, BudgetExhausted):
        cap = "child actions in all" if error.limit in ("", BudgetExhausted.MAX_CHILDREN) else f"{error.limit} actions"
        used = f" ({error.spent} of {error.max} used)" if error.max else ""
        parent = f" of {error.parent_namespace}/{error.parent_key}" if error.parent_namespace else ""
        return (
            f"Nothing was done: this run's budget{parent} of {cap} is spent{used} (BUDGET_EXHAUSTED). "
            "Do not retry: it is refused again for as long as the run lasts. Stop, tell the user what was "
            "done so far, and ask whether to go on with a larger budget."
        )
    if isinstance(error, InProgress):
        return (
            "Nothing was done by this call: the same operation is being performed by another call right "
            f"now (IN_PROGRESS). Call again with the same arguments in about {max(error.retry_after, 1.0):.0f} s "
            "to get its result; do not change the arguments."
        )
    if isinstance(error, LeaseLost):
        ran = "" if error.operation_error is None else " It may have taken effect."
        return (
            "This call lost its hold on the operation (LEASE_LOST): another worker has taken it over, "
            f"so this call's outcome was not recorded.{ran} Call again with the same arguments to get the "
            "recorded outcome; it will not be performed twice by this ledger."
        )
    if isinstance(error, SagaRolledBack):
        where = f"step {error.step}" if error.step is not None else "the saga"
        return (
            f"The saga failed for good and was rolled back: {where} failed ({error.cause}), and what "
            "its earlier steps had done was undone. Calling again with the same key gives the same "
            "answer; do not retry it: tell the user, or start a new saga for a new intent."
        )
    if isinstance(error, SagaNeedsReconciliation):
        what = f"undoing step {error.step} failed ({error.cause})" if error.compensation else f"step {error.step}: {error.cause}"
        return (
            f"The saga stopped and needs a person: {what}. It is left for someone to check (its "
            "outcome is UNKNOWN). Running it again with the same key is safe (nothing done is done "
            "twice) but stops here again until that is settled: stop and report."
        )
    if isinstance(error, NeedsReconciliation):
        return (
            "Nothing was done now: an earlier attempt of this operation was interrupted and its outcome "
            "is unknown (NEEDS_RECONCILIATION). Do not retry: it must not happen twice, so a person or "
            "a reconciliation job has to check whether it happened. Tell the user it is pending "
            "verification."
        )
    if isinstance(error, AwaitingApproval):
        return (
            "Nothing was done yet: this operation waits for a person's approval (AWAITING_APPROVAL). "
            "Do not retry it in a loop. Tell the user it awaits approval, and call again with the same "
            "arguments once it has been approved."
        )
    if isinstance(error, OperationFailed):
        return (
            f"This operation had already failed for good: {error.error.code} {error.error.message}. "
            "Calling again with the same arguments gives the same answer; do not retry it."
        )
    if isinstance(error, MissingScope):
        return f"Nothing was done: the ledger refused the call for lack of permission ({error.message}). Do not retry."
    if isinstance(error, Unavailable):
        return (
            "Nothing was done: the idempotency ledger could not be reached. Retry later with the same "
            "arguments; it is safe (the operation will not be performed twice)."
        )
    return f"The call failed: {error}. Do not retry it as it is."
