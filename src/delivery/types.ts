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

export interface DeliveryApi {
  uploadScans(body: string): Promise<{ requestId: string }>;
  requestPresignedUpload(): Promise<{ url: string; requestId: string }>;
  putPresigned(url: string, body: string): Promise<void>;
  getScanStatus(requestId: string): Promise<ScanStatusLike>;
}
