/**
 * The references of every scan the sandbox has received, in arrival order (duplicates included),
 * from its `GET /_sandbox/scans` log.
 */
export async function sandboxRefs(sandbox: { url: string }): Promise<string[]> {
  const body = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
    scans: { scan: { reference: string } }[];
  };
  return body.scans.map((s) => s.scan.reference);
}
