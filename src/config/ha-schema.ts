import { z } from 'zod';
import { inputKindSpec } from './input-kind.js';

/**
 * The `ha` section: two gateways for one line, the leader elected through an etcd lease
 * (docs/high-availability.md). Absent: the gateway runs alone, as always.
 */
export const haSchema = z
  .object({
    nodeId: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/,
        'must be 1 to 63 letters, digits, ".", "_" or "-", starting with a letter or digit',
      )
      .describe(
        "This gateway's name among the two: stored as the leader key's value, shown as the leader on the other node's page.",
      ),
    etcd: z
      .object({
        endpoints: z
          .array(z.url({ protocol: /^https?$/ }))
          .min(1)
          .max(9)
          .describe(
            "etcd client URLs (v3 JSON gateway), tried in order on a connection failure: put this node's own member first.",
          ),
        caFile: z
          .string()
          .min(1)
          .optional()
          .describe(
            "PEM CA that signed the etcd members' certificates (https endpoints); verification is always on.",
          ),
        certFile: z
          .string()
          .min(1)
          .optional()
          .describe('PEM client certificate for etcd (client-cert auth); needs keyFile.'),
        keyFile: z.string().min(1).optional().describe('PEM private key of certFile.'),
        username: z
          .string()
          .min(1)
          .optional()
          .describe('etcd user (etcd auth); needs passwordFile.'),
        passwordFile: z
          .string()
          .min(1)
          .optional()
          .describe("File holding the etcd user's password (never in this file)."),
      })
      .strict()
      .refine((e) => (e.certFile === undefined) === (e.keyFile === undefined), {
        message: 'certFile and keyFile go together',
        path: ['keyFile'],
      })
      .refine((e) => (e.username === undefined) === (e.passwordFile === undefined), {
        message: 'username and passwordFile go together',
        path: ['passwordFile'],
      })
      .describe(
        "How to reach the site's etcd cluster (three members: the two gateways and a witness).",
      ),
    leaseTtlMs: z
      .number()
      .int()
      .min(2000)
      .max(60_000)
      .default(5000)
      .describe(
        "The leader lease's time to live, ms (rounded up to whole seconds for etcd). The leader renews every third of it and stops taking reads at 60% of it without a renewal; a standby takes over once it lapsed.",
      ),
    key: z
      .string()
      .regex(/^\/[\x21-\x7e]{1,200}$/, 'must start with "/" and hold printable characters only')
      .default('/scan-gateway/leader')
      .describe('The etcd key the leader holds; one key per line (pair of gateways).'),
  })
  .strict();

export type HaConfig = z.infer<typeof haSchema>;

/**
 * Why an input does not fail over under `ha`, for `config check` and the status: its kind says it
 * is bound to this machine (`haMovable: false`), with the way round it (`haAdvice`).
 */
export function unmovableWhy(input: { id: string; type: string }): string {
  const advice = inputKindSpec(input.type)?.haAdvice;
  return `${input.type} input ${input.id} is bound to this machine; it does not fail over${advice ? `: ${advice}` : ''}`;
}

/** The inputs of `config` that do not fail over under `ha` (their kind is bound to this machine). */
export function unmovableInputs<T extends { id: string; type: string }>(inputs: readonly T[]): T[] {
  return inputs.filter((input) => inputKindSpec(input.type)?.haMovable === false);
}

/**
 * What `config check` notes about a configuration under `ha`: inputs that cannot move to the
 * other node (a serial port is wired to one box). Empty without `ha`.
 */
export function haNotes(config: {
  ha?: HaConfig | undefined;
  inputs: readonly { id: string; type: string }[];
}): { severity: 'note'; where: string; message: string }[] {
  if (!config.ha) return [];
  return config.inputs.flatMap((input, i) =>
    inputKindSpec(input.type)?.haMovable === false
      ? [
          {
            severity: 'note' as const,
            where: `inputs.${i}`,
            message: `warning: ${unmovableWhy(input)}`,
          },
        ]
      : [],
  );
}
