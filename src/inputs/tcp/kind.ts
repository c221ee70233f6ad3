import type { InputKind } from '../kind.js';
import { tcpInputSchema, type TcpInputConfig } from './schema.js';

/** `type: tcp`: network readers, as client or server (README.md beside this file; docs/inputs.md, "tcp"). */
export const tcpKind: InputKind<TcpInputConfig> = {
  type: 'tcp',
  schema: tcpInputSchema,
  haMovable: true,
  acknowledges: ['commit', 'verdict'],
  async create(config, { sink, logger, now }) {
    const { TcpInput } = await import('./tcp-input.js');
    return new TcpInput({ config, sink, logger, ...(now ? { now } : {}) });
  },
  resources: (config) =>
    config.mode === 'server'
      ? [{ kind: 'listen', key: 'port', address: `${config.host}:${config.port}` }]
      : [],
  fieldSources: () => ({ kind: 'none', why: 'a tcp input hands only the code' }),
  secrets: () => [],
  payload: {
    isJson: () => false,
    // The bytes as the scanner sends them, cut into reads by the input's own framing.
    items: async (config, payload, { receivedAt }) => {
      const { framedItems } = await import('../stream/try-frames.js');
      return framedItems(config, payload, receivedAt, { peer: 'scan-gateway try' });
    },
  },
  starter: {
    id: 'reader',
    text: (
      id,
    ) => `  # A network reader the gateway connects to (mode: client; docs/inputs.md, "tcp"). When the
  # scanner connects to us instead (its target is the gateway): mode: server, host: 0.0.0.0, port: 4001.
  - id: ${id}
    type: tcp
    mode: client
    host: 192.0.2.10             # CHANGE-ME: the reader's address
    port: 2001
    terminator: "\\r\\n"
    dcp: DCP-01
`,
  },
};
