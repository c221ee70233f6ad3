// The gateway's entry points load the input kinds (src/inputs/registry.ts) before they read a
// configuration; a test that reads one through src/config/ alone gets them from here.
import '../../src/inputs/registry.js';
