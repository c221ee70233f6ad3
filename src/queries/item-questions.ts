import type { BufferReports } from './reports.js';

/**
 * One question of the item routes (`/api/v1/items…`), as plain data so it can cross to a worker
 * thread: the trace of one item (any form of its reference), a prefix search, or the items
 * carrying an AI's value.
 */
export type ItemQuestion =
  | { kind: 'trace'; reference: string; depth?: number }
  | { kind: 'search'; prefix: string }
  | { kind: 'byValue'; value: string; ai?: string; limit?: number; cursor?: string };

/** A question's answer ready to send: HTTP status code and the body as JSON text (unscrubbed). */
export interface ItemAnswer {
  code: number;
  json: string;
}

/**
 * Answers `question` from `reports`: 200 with the trace (also of an item known only from its
 * refused reads, `refusals`), or 404 when the buffer knows nothing of it (the trace then says what
 * was looked for); 200 with `{ prefix, matches }` or `{ value, matches }`
 * for the searches. Every answer is bounded by the reports' own caps (items.ts: scans per item,
 * tree nodes, fan-out, matches per page). `dcpKinds` are the configured DCPs' kinds, by key.
 * The JSON is made here, where the work runs, so the thread that sends it only copies text.
 *
 * @throws the SQLite error when the buffer cannot be read.
 */
export function answerItemQuestion(
  reports: BufferReports,
  question: ItemQuestion,
  dcpKinds: ReadonlyMap<string, string>,
): ItemAnswer {
  switch (question.kind) {
    case 'trace': {
      const trace = reports.trace(question.reference, {
        ...(question.depth === undefined ? {} : { depth: question.depth }),
        dcpKinds,
      });
      // Known only from its refused reads is known: 200 with them.
      const known = trace.found || (trace.refusals?.length ?? 0) > 0;
      return { code: known ? 200 : 404, json: JSON.stringify(trace) };
    }
    case 'search':
      return {
        code: 200,
        json: JSON.stringify({
          prefix: question.prefix,
          matches: reports.searchItems(question.prefix),
        }),
      };
    case 'byValue': {
      const { value, ai, limit, cursor } = question;
      const matches = reports.searchByValue(value, {
        ...(ai !== undefined ? { ai } : {}),
        ...(limit !== undefined ? { limit } : {}),
        ...(cursor !== undefined ? { cursor } : {}),
      });
      return { code: 200, json: JSON.stringify({ value, matches }) };
    }
  }
}
