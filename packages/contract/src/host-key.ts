import { createHash } from 'node:crypto';

/**
 * The SHA256 fingerprint of an SSH public key blob, as `ssh-keygen -lf` prints it:
 * `SHA256:` and the unpadded base64 of the SHA-256 of the key blob. The form of
 * `upstream.sftp.hostKey` (contract §4.7): the gateway's SFTP client compares a server's key with
 * it, and the sandbox's SFTP endpoint prints its own in it, so both must compute it the same way.
 */
export function hostKeyFingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}
