import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  STATUS_EVENTS_START_DELAY_MS,
  StatusEventsPart,
  type StatusEventsSettings,
} from '../../src/app/status-events-part.js';
import type { StatusEventFeed } from '../../src/delivery/status-events.js';
import { memoryLogger } from '../helpers/log-lines.js';

/** A feed that only counts its starts and stops: the part decides when, the feed is tested apart. */
function countingFeed(): { feed: StatusEventFeed; starts: number; stops: number } {
  const counts = { starts: 0, stops: 0 };
  const feed = {
    start: () => void counts.starts++,
    stop: async () => void counts.stops++,
  } as unknown as StatusEventFeed;
  return Object.assign(counts, { feed });
}

function part(feed: StatusEventFeed) {
  const { logger, parsed } = memoryLogger();
  const settings = {
    settings: { bootstrapServers: ['127.0.0.1:9093'] },
    topic: 'sandbox-demo-client-status-event',
    credentials: () => ({ clientId: 'demo-client', clientSecret: 'not-logged' }),
    sandbox: undefined,
    logger,
  } as unknown as StatusEventsSettings;
  const logged = (msg: string) => parsed().some((l) => l.msg === msg);
  return { part: new StatusEventsPart(settings, () => feed), logged };
}

describe('status events start a second after ready', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('starts the feed (and loads the Kafka client) only once the delay has passed', async () => {
    vi.useFakeTimers();
    const counting = countingFeed();
    const { part: p, logged } = part(counting.feed);
    await p.start();
    p.ready();
    await vi.advanceTimersByTimeAsync(STATUS_EVENTS_START_DELAY_MS - 1);
    expect(counting.starts).toBe(0);
    expect(logged('status events: reading the topic')).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(counting.starts).toBe(1);
    expect(logged('status events: reading the topic')).toBe(true);
    await p.stop();
    expect(counting.stops).toBe(1);
  });

  it('never starts the feed when the gateway stops before the delay has passed', async () => {
    vi.useFakeTimers();
    const counting = countingFeed();
    const { part: p } = part(counting.feed);
    await p.start();
    p.ready();
    await vi.advanceTimersByTimeAsync(STATUS_EVENTS_START_DELAY_MS / 2);
    await p.stop();
    await vi.advanceTimersByTimeAsync(STATUS_EVENTS_START_DELAY_MS * 2);
    expect(counting.starts).toBe(0);
    expect(counting.stops).toBe(1);
  });
});
