/**
 * What an MCP tool answers when its idempotent call did not produce a value: the Oncekey errors a
 * model can act on, as tool results that say what happened and what to do next, instead of a bare
 * error. Copy it into your MCP server; `mcp-server.ts` shows it in use.
 *
 * Only the operation's state is mapped. Any other error (your function's own, e.g. the mail
 * server refusing) is re-thrown, and the MCP SDK reports it as an error result with its message.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  AwaitingApprovalError,
  BudgetExhaustedError,
  DuplicateIntentError,
  InProgressError,
  KeyReusedError,
  LeaseLostError,
  NeedsReconciliationError,
  OperationFailedError,
  UnavailableError,
} from "@oncekey/client";

const result = (text: string, isError: boolean): CallToolResult => ({ content: [{ type: "text", text }], isError });

/** The tool result of an Oncekey error, or undefined for an error that is not about the operation's state. */
export function toolResultOf(error: unknown): CallToolResult | undefined {
  if (error instanceof KeyReusedError) {
    return result(
      "Nothing was done: this request's key was already used with different arguments. " +
        "If you are retrying, repeat the original arguments exactly; if this is a new request, it needs a new key (change what the key is made of, e.g. the subject).",
      true,
    );
  }
  if (error instanceof InProgressError) {
    const seconds = Math.max(1, Math.ceil(error.retryAfter / 1000));
    return result(
      `Still running: an earlier call of this same request has not finished. Do not start it another way; ` +
        `call again with the same arguments in about ${seconds} s to get its result.`,
      true,
    );
  }
  if (error instanceof LeaseLostError) {
    return result(
      "Outcome not recorded: this call lost its hold on the request while it ran (another worker took it over), so it may or may not have taken effect. " +
        "Do not retry with different arguments; call again with the same arguments to get the recorded outcome.",
      true,
    );
  }
  if (error instanceof NeedsReconciliationError) {
    return result(
      "Outcome unknown: an earlier attempt stopped midway, and this request must never run twice, so it will not run again by itself. " +
        "Do not retry; tell the user it is being checked (an operator reconciles it).",
      true,
    );
  }
  if (error instanceof AwaitingApprovalError) {
    return result(
      "Waiting for approval: a person must approve this request before it runs; nothing has happened yet. " +
        "Tell the user it awaits approval, and call again later with the same arguments to get the result.",
      false,
    );
  }
  if (error instanceof OperationFailedError) {
    return result(
      `Failed earlier, for good: ${error.error.message || "no reason given"}${error.error.code ? ` (code ${error.error.code})` : ""}. ` +
        "Calling again with the same arguments gives the same answer; change the request if it should be tried differently.",
      true,
    );
  }
  if (error instanceof DuplicateIntentError) {
    const other = error.matches[0];
    return result(
      `Nothing was done: the same request was already made${other ? ` (as ${other.key}, ${other.status.toLowerCase()})` : ""}. ` +
        "Use that call's result instead of making it again; only if the user really asked for it twice, call again saying the repeat is deliberate.",
      true,
    );
  }
  if (error instanceof BudgetExhaustedError) {
    return result(
      `Not started: this run has used its budget of ${error.max} ${error.limit === "max_children" ? "actions" : `${error.limit} actions`}. ` +
        "Do not try again in this run; finish with what was done and tell the user what is left.",
      true,
    );
  }
  if (error instanceof UnavailableError) {
    return error.unsettled
      ? result("Done, but not recorded: the request took effect, yet its outcome could not be saved. Do not call it again; tell the user it went through.", true)
      : result("Not started: the idempotency service is unreachable, so nothing was done. Try again later with the same arguments.", true);
  }
  return undefined;
}

/** `handler`, answering the Oncekey errors of `toolResultOf` as tool results. */
export function withToolResults<A extends unknown[]>(
  handler: (...args: A) => Promise<CallToolResult>,
): (...args: A) => Promise<CallToolResult> {
  return async (...args: A) => {
    try {
      return await handler(...args);
    } catch (e) {
      const answer = toolResultOf(e);
      if (answer) return answer;
      throw e;
    }
  };
}
