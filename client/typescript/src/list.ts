/**
 * Listing records (`ListRecords`, docs/api.md#listing): one page at a time (`listRecordsPage`),
 * or every matching record, page after page, as an async iterator (`listRecords`); and the same
 * for the suspected duplicate intents the intent guard saw (`ListDuplicateIntents`,
 * docs/api.md#listduplicateintents: `listDuplicateIntentsPage`, `listDuplicateIntents`).
 *
 * The filters select the tenant's records by namespace, by status (as Lookup reports it: a lapsed
 * at-most-once operation is `UNKNOWN`) and by parent; a filter left out matches every record.
 * Listed records carry neither history, result body nor error details: look a record up for those.
 */
import * as v1 from "./gen/oncekey/v1/ledger";
import { OperationKey } from "./key";
import type { Transport } from "./transport";
import { intentMatchFromWire, recordFromWire } from "./types";
import type { IntentMatch, OperationRecord, OperationRef, RecordStatus } from "./types";

/** The most records one page holds. */
export const MAX_PAGE_SIZE = 1000;

/** A status to list by: any status a record can have. */
export type ListedStatus = Exclude<RecordStatus, "UNSPECIFIED">;

/** Which records to list, and from which page. */
export interface ListOptions {
  /** Only records of this namespace. */
  namespace?: string;
  /** Only records with one of these statuses (as Lookup reports them). */
  statuses?: readonly ListedStatus[];
  /** Only records whose first Claim named this parent operation. */
  parent?: OperationRef | OperationKey;
  /** Records per page: 1 ..= 1000 (server default 100); a page may hold fewer. */
  pageSize?: number;
  /** The `nextPageToken` of the previous page, sent with the same filters; absent for the first page. */
  pageToken?: string;
  /** Aborts the listing. */
  signal?: AbortSignal;
}

/** One page of records. */
export interface RecordPage {
  records: OperationRecord[];
  /** The token of the next page (`ListOptions.pageToken`); undefined after the last page. */
  nextPageToken?: string;
}

const WIRE_STATUS: { [s in ListedStatus]: v1.RecordStatus } = {
  PROCESSING: v1.RecordStatus.RECORD_STATUS_PROCESSING,
  SUCCEEDED: v1.RecordStatus.RECORD_STATUS_SUCCEEDED,
  FAILED: v1.RecordStatus.RECORD_STATUS_FAILED,
  RETRY: v1.RecordStatus.RECORD_STATUS_RETRY,
  UNKNOWN: v1.RecordStatus.RECORD_STATUS_UNKNOWN,
  AWAITING_APPROVAL: v1.RecordStatus.RECORD_STATUS_AWAITING_APPROVAL,
  APPROVED: v1.RecordStatus.RECORD_STATUS_APPROVED,
};

/** The wire request of `options`, checked as the server checks it. */
function toWire(options: ListOptions): v1.ListRecordsRequest {
  const statuses = (options.statuses ?? []).map((s) => {
    const wire = Object.prototype.hasOwnProperty.call(WIRE_STATUS, s) ? WIRE_STATUS[s] : undefined;
    if (wire === undefined) throw new TypeError(`statuses: ${JSON.stringify(s)} is not a status; one of ${Object.keys(WIRE_STATUS).join(", ")}`);
    return wire;
  });
  const pageSize = pageSizeOf(options.pageSize);
  if (options.namespace !== undefined) OperationKey.of(options.namespace, "x"); // validates it
  const parent = options.parent && OperationKey.raw(options.parent.namespace, options.parent.key);
  return {
    namespace: options.namespace ?? "",
    statuses,
    parent: parent ? { namespace: parent.namespace, key: parent.key } : undefined,
    pageSize,
    pageToken: options.pageToken ?? "",
  };
}

/** Which suspected duplicate intents to list, and from which page. */
export interface DuplicateIntentListOptions {
  /** Only those of this namespace. */
  namespace?: string;
  /** Duplicate intents per page: 1 ..= 1000 (server default 100); a page may hold fewer. */
  pageSize?: number;
  /** The `nextPageToken` of the previous page, sent with the same namespace; absent for the first page. */
  pageToken?: string;
  /** Aborts the listing. */
  signal?: AbortSignal;
}

/** Arguments claimed under more than one key of a namespace within its intent window. */
export interface DuplicateIntent {
  namespace: string;
  /** The arguments' fingerprint (32 bytes). */
  fingerprint: Buffer;
  /** Every key claimed with them within the window, oldest first (at most 16), refused ones too. */
  claims: IntentMatch[];
}

/** One page of suspected duplicate intents. */
export interface DuplicateIntentPage {
  intents: DuplicateIntent[];
  /** The token of the next page (`DuplicateIntentListOptions.pageToken`); undefined after the last page. */
  nextPageToken?: string;
}

function pageSizeOf(pageSize: number | undefined): number {
  const size = pageSize ?? 0;
  if (!Number.isInteger(size) || size < 0 || size > MAX_PAGE_SIZE) {
    throw new RangeError(`pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}, not ${String(pageSize)}`);
  }
  return size;
}

/** The wire request of `options`, checked as the server checks it. */
function duplicatesToWire(options: DuplicateIntentListOptions): v1.ListDuplicateIntentsRequest {
  const pageSize = pageSizeOf(options.pageSize);
  if (options.namespace !== undefined) OperationKey.of(options.namespace, "x"); // validates it
  return { namespace: options.namespace ?? "", pageSize, pageToken: options.pageToken ?? "" };
}

/** One page of the suspected duplicate intents `options` selects. */
export async function listDuplicatesPage(transport: Transport, options: DuplicateIntentListOptions): Promise<DuplicateIntentPage> {
  const request = duplicatesToWire(options);
  const res = await transport.unary<v1.ListDuplicateIntentsRequest, v1.ListDuplicateIntentsResponse>("listDuplicateIntents", request, {
    gated: true,
    signal: options.signal,
  });
  const page: DuplicateIntentPage = {
    intents: res.intents.map((d) => ({ namespace: d.namespace, fingerprint: Buffer.from(d.fingerprint), claims: d.claims.map(intentMatchFromWire) })),
  };
  if (res.nextPageToken) page.nextPageToken = res.nextPageToken;
  return page;
}

/** Every suspected duplicate intent `options` selects, page after page from `options.pageToken` on; an error ends the walk. */
export async function* listDuplicatesAll(transport: Transport, options: DuplicateIntentListOptions): AsyncGenerator<DuplicateIntent, void, undefined> {
  duplicatesToWire(options); // refuses bad options at the first `next()`, before anything is sent
  let pageToken = options.pageToken;
  do {
    const page = await listDuplicatesPage(transport, { ...options, pageToken });
    yield* page.intents;
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
}

/** One page of the records `options` selects. */
export async function listPage(transport: Transport, options: ListOptions): Promise<RecordPage> {
  const request = toWire(options);
  const res = await transport.unary<v1.ListRecordsRequest, v1.ListRecordsResponse>("listRecords", request, {
    gated: true,
    signal: options.signal,
  });
  const page: RecordPage = { records: res.records.map(recordFromWire) };
  if (res.nextPageToken) page.nextPageToken = res.nextPageToken;
  return page;
}

/** Every record `options` selects, page after page from `options.pageToken` on; an error ends the walk. */
export async function* listAll(transport: Transport, options: ListOptions): AsyncGenerator<OperationRecord, void, undefined> {
  toWire(options); // refuses bad options at the first `next()`, before anything is sent
  let pageToken = options.pageToken;
  do {
    const page = await listPage(transport, { ...options, pageToken });
    yield* page.records;
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
}
