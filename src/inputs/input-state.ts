import type { InputReaders, InputState, InputStatus } from './types.js';
import { type Clock, systemClock } from '../clock.js';

/**
 * The state an adapter reports through `status()` (connecting, up, down with the last error,
 * paused, stopped), kept in one place so every adapter reports it the same way.
 */
export class InputStateTracker {
  private current: InputState = 'starting';
  private lastError: string | undefined;
  private lastErrorAt: string | undefined;

  constructor(
    private readonly id: string,
    private readonly type: string,
    private readonly source: string,
    private readonly now: Clock = systemClock,
  ) {}

  get state(): InputState {
    return this.current;
  }

  set(state: InputState): void {
    this.current = state;
  }

  /** Marks the input down with `message`; answers true when it was not down before (worth a warning). */
  down(message: string): boolean {
    const news = this.current !== 'down';
    this.current = 'down';
    this.lastError = message;
    this.lastErrorAt = new Date(this.now()).toISOString();
    return news;
  }

  status(readers?: InputReaders): InputStatus {
    return {
      id: this.id,
      type: this.type,
      state: this.current,
      ...(this.current === 'down' && this.lastError !== undefined
        ? { lastError: this.lastError, lastErrorAt: this.lastErrorAt }
        : {}),
      source: this.source,
      ...(readers ? { readers } : {}),
    };
  }
}
