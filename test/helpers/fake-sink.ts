import type { IntakeItem, IntakeSink } from '../../src/inputs/types.js';

/**
 * Stand-in for the intake pipeline in adapter tests: each submit is one commit; `failing` refuses
 * like a full disk, `delayMs` holds every submit that long.
 */
export class FakeSink implements IntakeSink {
  readonly commits: IntakeItem[][] = [];
  started = 0;
  refused = 0;
  failing = false;
  delayMs = 0;

  async submit(items: IntakeItem[]): Promise<void> {
    this.started += 1;
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (this.failing) {
      this.refused += 1;
      throw new Error('SQLITE_FULL: database or disk is full');
    }
    this.commits.push(items);
  }

  get items(): IntakeItem[] {
    return this.commits.flat();
  }

  /** Raw bytes (latin1) of the items of one commit. */
  raws(commit = 0): string[] {
    return (this.commits[commit] ?? []).map((i) =>
      (i.kind === 'read' ? i.read.raw : i.rejection.raw).toString('latin1'),
    );
  }

  /** Committed items as text: reads as their raw bytes, rejections as `<reason|raw>`. */
  texts(): string[] {
    return this.items.map((i) =>
      i.kind === 'read'
        ? i.read.raw.toString('latin1')
        : `<${i.rejection.reason}|${i.rejection.raw.toString('latin1')}>`,
    );
  }
}
