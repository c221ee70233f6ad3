import { reply } from './lib/child.js';
import { processMemory } from './lib/system.js';

/**
 * The footprint benchmark's floor: a bare process of the daemon's node options that
 * imports the packages named in argv[2] (a JSON array), starts nothing, and answers its memory one
 * JSON line: `{ rssMiB, anonMiB, fileMiB }` (/proc/self/status) after 2 s of quiet and a full
 * garbage collection (needs `--expose-gc`), so what it answers is what the code of those packages
 * keeps, not garbage of their loading.
 */
const packages = JSON.parse(process.argv[2] ?? '[]') as string[];
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('library-floor.js needs --expose-gc');
for (const name of packages) await import(name);
await new Promise((resolve) => setTimeout(resolve, 2000));
gc();
await new Promise((resolve) => setTimeout(resolve, 500));
const memory = processMemory(process.pid);
if (!memory) throw new Error('library-floor.js cannot read /proc/self/status');
reply({ rssMiB: memory.rssMiB, anonMiB: memory.anonMiB, fileMiB: memory.fileMiB });
