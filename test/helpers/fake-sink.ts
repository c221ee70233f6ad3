import type { FileSink } from '../../src/inputs/files/file-sink.js';
import type { MessageSink } from '../../src/inputs/mqtt/message-sink.js';
import type { IntakeItem } from '../../src/inputs/types.js';

/**
 * Stand-in for the intake pipeline in adapter tests: each submit is one commit; `failing` refuses
 * like a full disk, `delayMs` holds every submit that long. It records no receipts: a file's or a
 * message's items are committed as a plain submit's, and no file's progress is known.
 */
export class FakeSink implements FileSink, MessageSink {
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

  submitFile(items: IntakeItem[]): Promise<void> {
    return this.submit(items);
  }

  submitChunk(items: IntakeItem[]): Promise<void> {
    return this.submit(items);
  }

  submitMessage(items: IntakeItem[]): Promise<void> {
    return this.submit(items);
  }

  fileProgress(): undefined {
    return undefined;
  }

  forgetMessages(): void {}

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
