/**
 * The client's own types for what the ledger stores (records, results, errors, leases) and their
 * conversion from and to the generated oncekey.v1 messages, so that user code on the common path
 * never handles protobuf types: statuses are strings, times are `Date`s, durations milliseconds.
 */
import * as v1 from "./gen/oncekey/v1/ledger";
import type { Duration } from "./gen/google/protobuf/duration";

/** Where an operation stands. */
export type RecordStatus =
  | "PROCESSING"
  | "SUCCEEDED"
  | "FAILED"
  | "RETRY"
  | "UNKNOWN"
  | "AWAITING_APPROVAL"
  | "APPROVED"
  | "UNSPECIFIED";

/** `AT_LEAST_ONCE` (default): a vanished holder's operation is taken over and run again. `AT_MOST_ONCE`: it needs reconciliation instead. */
export type Semantics = "AT_LEAST_ONCE" | "AT_MOST_ONCE";

/** What a Claim answered. */
export type ClaimOutcome =
  | "ACQUIRED"
  | "COMPLETED"
  | "FAILED"
  | "IN_PROGRESS"
  | "NEEDS_RECONCILIATION"
  | "AWAITING_APPROVAL"
  | "DUPLICATE_INTENT";

/**
 * What the intent guard does with a Claim of a new key whose arguments another live key of the
 * namespace was claimed with within the intent window (docs/api.md#intent-guard): `off` no check,
 * `warn` go on and name the other keys (`intentMatches`), `refuse` answer `DUPLICATE_INTENT` and
 * write nothing. A Claim's mode can make the namespace's setting stricter, never looser.
 */
export type IntentGuard = "off" | "warn" | "refuse";

/** Another key claimed with the same arguments in the same namespace within the intent window. */
export interface IntentMatch {
  /** The other key (in the same namespace). */
  key: string;
  /** Its record's status now (`PROCESSING` while its first Claim is under way). */
  status: RecordStatus;
  /** When it was claimed with these arguments. */
  claimedAt?: Date;
  /** The guard refused that Claim (`DUPLICATE_INTENT`), so it has no record. */
  refused: boolean;
}

/** At most how many child operations a parent operation (an agent run, a saga) may create. */
export interface RunBudget {
  /** The most children in all (0 or undefined: no total cap). */
  maxChildren?: number;
  /** The most children per child namespace, e.g. `{"email.send": 3}` (at most 64 entries, each cap at least 1). */
  maxPerNamespace?: { [namespace: string]: number };
}

/** A parent operation's run budget and what its children used of it (`OperationRecord.budget`). */
export interface BudgetUsage {
  /** The budget the parent's first Claim set. */
  budget: Required<RunBudget>;
  /** How many child operations were created under it. */
  children: number;
  /** Of those, how many per child namespace. */
  childrenPerNamespace: { [namespace: string]: number };
  /** How many Claims of new children it refused (`BudgetExhaustedError`). */
  refused: number;
}

/** A (namespace, key) pair naming an operation. */
export interface OperationRef {
  namespace: string;
  key: string;
}

/** The result of a SUCCEEDED operation as stored: an application code, a body and its media type. */
export interface StoredResult {
  code: number;
  body: Buffer;
  contentType: string;
  metadata: { [key: string]: string };
}

/** The error of a FAILED operation (or of the last attempt of a RETRY one) as stored. */
export interface StoredError {
  code: number;
  message: string;
  details: Buffer;
}

/** A lease: who holds the operation, with which fencing token, until when. */
export interface LeaseGrant {
  /** The fencing token: +1 on every acquisition of the operation. */
  token: bigint;
  /** When the lease runs out unless renewed. */
  expiresAt: Date;
  /** Which acquisition this is (1 for the first). */
  attempt: number;
}

/** The decision on an operation that awaited approval. */
export interface Approval {
  /** `APPROVED`: the operation may be acquired. `REJECTED`: it failed for good (code 403, message = the note). */
  decision: "APPROVED" | "REJECTED" | "UNSPECIFIED";
  /** Who decided: the approver's token label ("dev" on a dev-mode server). */
  decidedBy: string;
  note: string;
  decidedAt?: Date;
}

/** One operation's record in the ledger. */
export interface OperationRecord {
  namespace: string;
  key: string;
  status: RecordStatus;
  /** SHA-256 of the canonical JSON of the arguments of the first Claim. */
  fingerprint: Buffer;
  semantics: Semantics;
  fencingToken: bigint;
  attempt: number;
  dedupHits: number;
  leaseOwner: string;
  leaseExpiresAt?: Date;
  result?: StoredResult;
  error?: StoredError;
  parent?: OperationRef;
  createdAt?: Date;
  updatedAt?: Date;
  expiresAt?: Date;
  /** Whether the operation waits for an approval before anyone acquires it. */
  requireApproval: boolean;
  /** The most acquisitions allowed, reconciliations not counted (0: no cap). */
  maxAttempts: number;
  /** The approval decision, once made. */
  approval?: Approval;
  /** The run budget of the operation's children and their use, when its first Claim set one. */
  budget?: BudgetUsage;
}

/** A Claim's answer. */
export interface Claimed {
  outcome: ClaimOutcome;
  /** The record (absent only on a first ACQUIRED of some servers). */
  record?: OperationRecord;
  /** On ACQUIRED: the lease now held. */
  lease?: LeaseGrant;
  /** On IN_PROGRESS: when to claim again, in milliseconds. */
  retryAfter: number;
  /**
   * True for the answer to a dry run: `outcome` is what a Claim would get now, `record` the record
   * as stored (absent when the key has none); nothing was written and there is no `lease`.
   */
  dryRun: boolean;
  /**
   * The other keys of the namespace claimed with the same arguments within the intent window,
   * most recent first (at most 8): on `DUPLICATE_INTENT`, and on a Claim of a new key the guard
   * let through (`warn`, or `repeatIntent`); empty otherwise.
   */
  intentMatches: IntentMatch[];
}

const STATUS: { [k in v1.RecordStatus]?: RecordStatus } = {
  [v1.RecordStatus.RECORD_STATUS_PROCESSING]: "PROCESSING",
  [v1.RecordStatus.RECORD_STATUS_SUCCEEDED]: "SUCCEEDED",
  [v1.RecordStatus.RECORD_STATUS_FAILED]: "FAILED",
  [v1.RecordStatus.RECORD_STATUS_RETRY]: "RETRY",
  [v1.RecordStatus.RECORD_STATUS_UNKNOWN]: "UNKNOWN",
  [v1.RecordStatus.RECORD_STATUS_AWAITING_APPROVAL]: "AWAITING_APPROVAL",
  [v1.RecordStatus.RECORD_STATUS_APPROVED]: "APPROVED",
};

const OUTCOME: { [k in v1.ClaimOutcome]?: ClaimOutcome } = {
  [v1.ClaimOutcome.CLAIM_OUTCOME_ACQUIRED]: "ACQUIRED",
  [v1.ClaimOutcome.CLAIM_OUTCOME_COMPLETED]: "COMPLETED",
  [v1.ClaimOutcome.CLAIM_OUTCOME_FAILED]: "FAILED",
  [v1.ClaimOutcome.CLAIM_OUTCOME_IN_PROGRESS]: "IN_PROGRESS",
  [v1.ClaimOutcome.CLAIM_OUTCOME_NEEDS_RECONCILIATION]: "NEEDS_RECONCILIATION",
  [v1.ClaimOutcome.CLAIM_OUTCOME_AWAITING_APPROVAL]: "AWAITING_APPROVAL",
  [v1.ClaimOutcome.CLAIM_OUTCOME_DUPLICATE_INTENT]: "DUPLICATE_INTENT",
};

const INTENT_GUARD: { [g in IntentGuard]: v1.IntentGuard } = {
  off: v1.IntentGuard.INTENT_GUARD_OFF,
  warn: v1.IntentGuard.INTENT_GUARD_WARN,
  refuse: v1.IntentGuard.INTENT_GUARD_REFUSE,
};

/** The wire enum of an intent guard mode (undefined: the namespace's setting). */
export function intentGuardToWire(g: IntentGuard | undefined): v1.IntentGuard {
  if (g === undefined) return v1.IntentGuard.INTENT_GUARD_UNSPECIFIED;
  const wire = Object.prototype.hasOwnProperty.call(INTENT_GUARD, g) ? INTENT_GUARD[g] : undefined;
  if (wire === undefined) throw new TypeError(`intentGuard must be "off", "warn" or "refuse", not ${JSON.stringify(g)}`);
  return wire;
}

/** The shortest and the longest intent window a Claim may ask for, in milliseconds. */
export const MIN_INTENT_WINDOW = 1_000;
export const MAX_INTENT_WINDOW = 86_400_000;

/** An intent window checked as the server reads it: 1 s ..= 24 h (undefined: the namespace's). */
export function intentWindowToWire(ms: number | undefined): Duration | undefined {
  if (ms === undefined) return undefined;
  if (typeof ms !== "number" || !(ms >= MIN_INTENT_WINDOW && ms <= MAX_INTENT_WINDOW)) {
    throw new RangeError(`intentWindow must be between ${MIN_INTENT_WINDOW} and ${MAX_INTENT_WINDOW} ms, not ${String(ms)}`);
  }
  return duration(ms);
}

/** A run budget checked as the wire carries it: whole numbers 0 ..= 2^32 - 1 (the server checks the rest). */
export function budgetToWire(b: RunBudget | undefined): v1.RunBudget | undefined {
  if (b === undefined) return undefined;
  if (typeof b !== "object" || b === null) throw new TypeError(`budget must be an object, not ${b === null ? "null" : typeof b}`);
  const count = (what: string, n: unknown): number => {
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > MAX_ATTEMPTS_LIMIT) {
      throw new RangeError(`${what} must be an integer between 0 and ${MAX_ATTEMPTS_LIMIT}, not ${String(n)}`);
    }
    return n;
  };
  const maxPerNamespace: { [namespace: string]: number } = {};
  for (const [namespace, cap] of Object.entries(b.maxPerNamespace ?? {})) {
    maxPerNamespace[namespace] = count(`budget.maxPerNamespace[${JSON.stringify(namespace)}]`, cap);
  }
  return { maxChildren: count("budget.maxChildren", b.maxChildren ?? 0), maxPerNamespace };
}

export function intentMatchFromWire(m: v1.IntentMatch): IntentMatch {
  const match: IntentMatch = { key: m.key, status: STATUS[m.status] ?? "UNSPECIFIED", refused: m.refused };
  if (m.claimedAt) match.claimedAt = m.claimedAt;
  return match;
}

/** The wire enum of a semantics. */
export function semanticsToWire(s: Semantics | undefined): v1.Semantics {
  if (s === undefined) return v1.Semantics.SEMANTICS_UNSPECIFIED;
  if (s === "AT_MOST_ONCE") return v1.Semantics.SEMANTICS_AT_MOST_ONCE;
  if (s === "AT_LEAST_ONCE") return v1.Semantics.SEMANTICS_AT_LEAST_ONCE;
  throw new TypeError(`semantics must be "AT_LEAST_ONCE" or "AT_MOST_ONCE", not ${JSON.stringify(s)}`);
}

export function recordFromWire(r: v1.Record): OperationRecord {
  const record: OperationRecord = {
    namespace: r.namespace,
    key: r.key,
    status: STATUS[r.status] ?? "UNSPECIFIED",
    fingerprint: Buffer.from(r.fingerprint),
    semantics: r.semantics === v1.Semantics.SEMANTICS_AT_MOST_ONCE ? "AT_MOST_ONCE" : "AT_LEAST_ONCE",
    fencingToken: r.fencingToken,
    attempt: r.attempt,
    dedupHits: Number(r.dedupHits),
    leaseOwner: r.leaseOwner,
    requireApproval: r.requireApproval,
    maxAttempts: r.maxAttempts,
  };
  if (r.leaseExpiresAt) record.leaseExpiresAt = r.leaseExpiresAt;
  if (r.result) record.result = resultFromWire(r.result);
  if (r.error) record.error = { code: r.error.code, message: r.error.message, details: Buffer.from(r.error.details) };
  if (r.parent) record.parent = { namespace: r.parent.namespace, key: r.parent.key };
  if (r.createdAt) record.createdAt = r.createdAt;
  if (r.updatedAt) record.updatedAt = r.updatedAt;
  if (r.expiresAt) record.expiresAt = r.expiresAt;
  if (r.approval) {
    const decision =
      r.approval.decision === v1.ApprovalDecision.APPROVAL_DECISION_APPROVED
        ? "APPROVED"
        : r.approval.decision === v1.ApprovalDecision.APPROVAL_DECISION_REJECTED
          ? "REJECTED"
          : "UNSPECIFIED";
    record.approval = { decision, decidedBy: r.approval.decidedBy, note: r.approval.note };
    if (r.approval.decidedAt) record.approval.decidedAt = r.approval.decidedAt;
  }
  if (r.budget) {
    record.budget = {
      budget: { maxChildren: r.budget.budget?.maxChildren ?? 0, maxPerNamespace: { ...r.budget.budget?.maxPerNamespace } },
      children: r.budget.children,
      childrenPerNamespace: { ...r.budget.childrenPerNamespace },
      refused: Number(r.budget.refused),
    };
  }
  return record;
}

export function resultFromWire(r: v1.OperationResult): StoredResult {
  return { code: r.code, body: Buffer.from(r.body), contentType: r.contentType, metadata: { ...r.metadata } };
}

export function leaseFromWire(l: v1.Lease): LeaseGrant {
  return { token: l.token, expiresAt: l.expiresAt ?? new Date(), attempt: l.attempt };
}

export function claimedFromWire(c: v1.ClaimResponse, dryRun = false): Claimed {
  const outcome = OUTCOME[c.outcome];
  if (outcome === undefined) throw new Error(`the server answered an unknown claim outcome ${c.outcome}`);
  const claimed: Claimed = { outcome, retryAfter: millis(c.retryAfter), dryRun, intentMatches: c.intentMatches.map(intentMatchFromWire) };
  if (c.record) claimed.record = recordFromWire(c.record);
  if (c.lease) claimed.lease = leaseFromWire(c.lease);
  return claimed;
}

/** The largest attempt cap the wire carries (a uint32). */
export const MAX_ATTEMPTS_LIMIT = 4_294_967_295;

/** An attempt cap checked as the server reads it: an integer 0 ..= 2^32 - 1 (0 or undefined: no cap). */
export function maxAttemptsToWire(n: number | undefined): number {
  if (n === undefined) return 0;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > MAX_ATTEMPTS_LIMIT) {
    throw new RangeError(`maxAttempts must be an integer between 1 and ${MAX_ATTEMPTS_LIMIT} (0 or undefined: no cap), not ${String(n)}`);
  }
  return n;
}

/** The longest note of an Approve or Reject the server accepts, in UTF-8 bytes. */
export const MAX_NOTE_BYTES = 1024;

/** A note of an Approve or Reject, checked as the server checks it. */
export function checkNote(note: string): string {
  if (typeof note !== "string") throw new TypeError(`note must be a string, not ${typeof note}`);
  if (Buffer.byteLength(note, "utf8") > MAX_NOTE_BYTES) throw new RangeError(`note: at most ${MAX_NOTE_BYTES} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(note)) {
    throw new RangeError("note: must not contain control characters other than newline and tab");
  }
  return note;
}

/** A google.protobuf.Duration of `ms` milliseconds (undefined stays undefined: server default). */
export function duration(ms: number | undefined): Duration | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a duration must be a non-negative number of milliseconds, not ${ms}`);
  const whole = Math.floor(ms);
  return { seconds: BigInt(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1e6 };
}

/** Milliseconds of a google.protobuf.Duration (0 when absent). */
export function millis(d: Duration | undefined): number {
  return d ? Number(d.seconds) * 1000 + Math.floor(d.nanos / 1e6) : 0;
}
