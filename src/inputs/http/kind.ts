import { ingestTokenProblem } from '../../config/secrets.js';
import type { InputKind } from '../kind.js';
import { httpInputSchema, type HttpInputConfig } from './schema.js';

/** `type: http`: `POST /api/v1/reads` on the local server (README.md beside this file; docs/inputs.md, "http"). */
export const httpKind: InputKind<HttpInputConfig> = {
  type: 'http',
  schema: httpInputSchema,
  haMovable: true,
  acknowledges: ['commit'],
  localRoutes: true,
  async create(config, { sink, logger, env, now }) {
    const { HttpIngestInput } = await import('./http-input.js');
    return new HttpIngestInput({ config, sink, logger, env, ...(now ? { now } : {}) });
  },
  resources: (config) => [
    { kind: 'file', key: 'tokenFile', path: config.tokenFile },
    ...(config.tokenFile === undefined
      ? [
          {
            kind: 'env' as const,
            key: 'tokenEnv',
            name: config.tokenEnv,
            missing: `no ingest token: the environment variable ${config.tokenEnv} is not set here and there is no tokenFile; the input would not start`,
          },
        ]
      : []),
  ],
  fieldSources: (config) => ({
    kind: 'json',
    keys: Object.keys(config.fields.attributeFields ?? {}),
    objectPath: config.fields.attributes,
  }),
  secrets: (config) => [
    {
      what: `ingest token of input ${config.id}`,
      envName: config.tokenEnv,
      file: config.tokenFile,
    },
  ],
  // A short ingest token is a mistake in the set-up, found before anything starts (and by `config check`).
  loadProblems(config, env) {
    const p = ingestTokenProblem(config, env);
    return p ? [p] : [];
  },
  restartNeeded(before, after) {
    // Its routes cannot be added to the listening local server, and its route's body limit was
    // fixed when that server started (http-input.ts); its token and mapping follow the reload.
    if (!before) return [`inputs.${after.id} (a new http input)`];
    return before.maxBodyBytes !== after.maxBodyBytes ? [`inputs.${after.id}.maxBodyBytes`] : [];
  },
  payload: {
    isJson: () => true,
    async items(config, payload, { receivedAt }) {
      const { bodyItems } = await import('./try-body.js');
      return bodyItems(config, payload, receivedAt);
    },
  },
  starter: {
    id: 'ingest',
    text: (
      id,
    ) => `  # POST /api/v1/reads on http.listen (docs/inputs.md, "http"). Clients send a bearer token of
  # 16 characters or more; make it before the check passes:
  #   openssl rand -hex 32 | install -o root -g scan-gateway -m 0640 /dev/stdin /etc/scan-gateway/ingest-token
  - id: ${id}
    type: http
    tokenFile: /etc/scan-gateway/ingest-token   # or the environment variable SCAN_GATEWAY_INGEST_TOKEN
    dcp: DCP-01
`,
  },
};
