/**
 * A process that does nothing but answer lag probes (lag-probe.ts): its event-loop delay during a
 * benchmark's round is what the machine's scheduler alone costs a Node.js process then, the
 * ceiling a component's own figure is read beside.
 */
import { answerLagProbes } from './lag-probe.js';

answerLagProbes();
process.send?.('ready');
// Kept alive until its parent disconnects or kills it.
process.on('disconnect', () => process.exit(0));
