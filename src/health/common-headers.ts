/** Headers of every answer of the local HTTP server: nothing cached, nothing sniffed, no referrer leaves the page. */
export const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
} as const;
