/**
 * The part of the upstream client delivery uses (contract §4.3–4.6), so tests and benchmarks can
 * run delivery against the real client or the sandbox without anything else.
 */
export interface ScanStatusLike {
  state: string;
  requestId: string;
  description?: string | undefined;
  processed?: number | undefined;
  failed?: number | undefined;
  failures?: { reference: string; reason: string }[] | undefined;
}

import type { StreamedBody } from '../upstream/client.js';

export type { StreamedBody };

export interface DeliveryApi {
  /** POST of a direct batch: `body` is the JSON array of the scans, as text or its UTF-8 bytes. */
  uploadScans(body: string | Buffer): Promise<{ requestId: string }>;
  requestPresignedUpload(): Promise<{ url: string; requestId: string }>;
  putPresigned(url: string, body: string | Buffer): Promise<void>;
  /**
   * The same PUT (§4.5) with a body streamed from the buffer. Optional: without it, delivery
   * builds the body whole (as bytes) and calls {@link putPresigned}.
   */
  putPresignedStream?(url: string, body: StreamedBody): Promise<void>;
  getScanStatus(requestId: string): Promise<ScanStatusLike>;
}
