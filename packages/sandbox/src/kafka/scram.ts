import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The server side of SCRAM-SHA-512 (RFC 5802, with SHA-512 as RFC 7677 does for SHA-256), as
 * Kafka runs it inside SaslAuthenticate (KIP-84): client-first → server-first → client-final →
 * server-final. Channel binding is not supported (gs2 header `n,,` or `y,,`), as in Kafka.
 */

/** Iterations of the salted password: Kafka's minimum for SCRAM-SHA-512 (4096). */
export const SCRAM_ITERATIONS = 4096;

/** Stored credentials of one user (RFC 5802 §3: StoredKey, ServerKey); the password is not kept. */
export interface ScramCredential {
  salt: Buffer;
  iterations: number;
  storedKey: Buffer;
  serverKey: Buffer;
}

const hmac = (key: Buffer, text: string | Buffer) =>
  createHmac('sha512', key).update(text).digest();
const sha512 = (data: Buffer) => createHash('sha512').update(data).digest();

/** The credential of a password; `salt` default a new random one (a given one replays a captured exchange). */
export function scramCredential(
  password: string,
  iterations = SCRAM_ITERATIONS,
  salt: Buffer = randomBytes(32),
): ScramCredential {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 64, 'sha512');
  return {
    salt,
    iterations,
    storedKey: sha512(hmac(salted, 'Client Key')),
    serverKey: hmac(salted, 'Server Key'),
  };
}

/** The outcome of one SCRAM step: bytes to send back, and when done the authenticated user. */
export type ScramStep =
  | { reply: Buffer; done?: undefined }
  | { reply: Buffer; done: { user: string } }
  | { failed: string };

/** Reads `a=b,c=d` attributes (RFC 5802 §5.1). */
function attributes(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    if (eq === 1) out.set(part.slice(0, 1), part.slice(2));
  }
  return out;
}

/** `=2C` and `=3D` in a saslname (RFC 5802 §5.1). */
function unescapeName(name: string): string {
  return name.replace(/=2C/g, ',').replace(/=3D/g, '=');
}

/**
 * One exchange of one connection. `lookup` gives the credential of a user, undefined for an
 * unknown one (which fails at the final step, as a wrong password does, so a client cannot tell
 * which user names exist).
 */
export class ScramServer {
  private stage: 'first' | 'final' | 'over' = 'first';
  private user = '';
  private nonce = '';
  private clientFirstBare = '';
  private serverFirst = '';
  private credential: ScramCredential | undefined;

  /** `serverNonce` makes the server's part of the nonce (default 18 random bytes, base64); tests replay captures with it. */
  constructor(
    private readonly lookup: (user: string) => ScramCredential | undefined,
    private readonly serverNonce: () => string = () => randomBytes(18).toString('base64'),
  ) {}

  step(message: Buffer): ScramStep {
    const text = message.toString('utf8');
    if (this.stage === 'first') return this.first(text);
    if (this.stage === 'final') return this.final(text);
    return { failed: 'the SCRAM exchange is over' };
  }

  private first(text: string): ScramStep {
    this.stage = 'over';
    // gs2-header: "n,," or "y,," (no channel binding), optionally with an authzid "n,a=name,".
    const m = /^([ny]),(a=[^,]*)?,(.*)$/.exec(text);
    if (!m?.[3])
      return { failed: 'client-first-message is not SCRAM (expected "n,,n=user,r=nonce")' };
    const bare = m[3];
    const attrs = attributes(bare);
    const user = attrs.get('n');
    const clientNonce = attrs.get('r');
    if (user === undefined || !clientNonce)
      return { failed: 'client-first-message lacks n= or r=' };
    this.user = unescapeName(user);
    this.clientFirstBare = bare;
    // A made-up credential for an unknown user: the exchange goes on and fails like a wrong password.
    this.credential = this.lookup(this.user);
    const salt =
      this.credential?.salt ?? createHash('sha256').update(`unknown:${this.user}`).digest();
    this.nonce = clientNonce + this.serverNonce();
    this.serverFirst = `r=${this.nonce},s=${salt.toString('base64')},i=${this.credential?.iterations ?? SCRAM_ITERATIONS}`;
    this.stage = 'final';
    return { reply: Buffer.from(this.serverFirst, 'utf8') };
  }

  private final(text: string): ScramStep {
    this.stage = 'over';
    const proofAt = text.lastIndexOf(',p=');
    if (proofAt < 0) return { failed: 'client-final-message lacks p=' };
    const withoutProof = text.slice(0, proofAt);
    const attrs = attributes(withoutProof);
    // Kafka's ScramSaslServer checks that the nonce *ends with* the server-first one; librdkafka 2.0
    // sends its client nonce once more in front of it, and brokers accept that.
    if (!(attrs.get('r') ?? '').endsWith(this.nonce))
      return { failed: 'client-final-message has another nonce' };
    const cred = this.credential;
    const proof = Buffer.from(text.slice(proofAt + 3), 'base64');
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`;
    if (!cred || proof.length !== 64) return { failed: 'invalid credentials' };
    const clientSignature = hmac(cred.storedKey, authMessage);
    const clientKey = Buffer.alloc(64);
    for (let i = 0; i < 64; i++) clientKey[i] = (proof[i] ?? 0) ^ (clientSignature[i] ?? 0);
    if (!timingSafeEqual(sha512(clientKey), cred.storedKey))
      return { failed: 'invalid credentials' };
    const serverSignature = hmac(cred.serverKey, authMessage).toString('base64');
    return { reply: Buffer.from(`v=${serverSignature}`, 'utf8'), done: { user: this.user } };
  }
}
