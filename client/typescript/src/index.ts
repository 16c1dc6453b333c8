/**
 * Node.js client of Oncekey, the shared idempotency ledger.
 *
 * `OncekeyClient.run` claims a key, runs the side effect only when the claim acquired it (keeping
 * the lease alive over the KeepAlive stream meanwhile), then completes or fails the key; later runs
 * with the same key get the stored outcome. `fingerprint` computes the RFC 8785 fingerprint of an
 * operation's arguments; `reason` reads the google.rpc.ErrorInfo reason of a gRPC error. `v1` is
 * the generated oncekey.v1 code (ts-proto).
 */
export { OncekeyClient, TENANT_HEADER } from "./client";
export type { ClaimOptions, ConnectOptions, Held, Outcome } from "./client";
export {
  ERROR_DOMAIN,
  errorInfo,
  reason,
  FinalError,
  InProgressError,
  NeedsReconciliationError,
  OperationFailedError,
} from "./errors";
export type { ErrorInfo } from "./errors";
export { canonicalize, canonicalizeJson, fingerprint, fingerprintJson, InvalidJsonError } from "./fingerprint";
export * as v1 from "./gen/oncekey/v1/ledger";
