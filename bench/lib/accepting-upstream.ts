/**
 * An upstream service that accepts every batch at once and answers every status with Success: the
 * rows that measure the local listener and intake need delivery to run, not to cost anything.
 */
export const acceptingUpstream = {
  uploadScans: async () => ({ requestId: 'r-1' }),
  requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
};
