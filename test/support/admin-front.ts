/**
 * Plain HTTP in front of a real API server (`cluster.sh` of the 1.32 and 1.36 tiers), as `kubectl
 * proxy` gives it: the simulated components and the tests speak to it without credentials.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

/**
 * Plain HTTP in front of the API server, authenticated with the admin client certificate
 * (admin-front.mjs), in a thread of its own, off the event loop the control plane runs on here.
 */
export async function startAdminFront(
  dir: string,
  apiserver: string,
): Promise<{ url: string; close: () => Promise<void> }> {
  const pki = join(dir, 'pki');
  const pem = (name: string) => readFileSync(join(pki, name), 'utf8');
  const worker = new Worker(new URL('./admin-front.mjs', import.meta.url), {
    workerData: { apiserver, ca: pem('ca.crt'), cert: pem('admin.crt'), key: pem('admin.key') },
  });
  const { port } = await new Promise<{ port: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      const exited = new Promise<void>((r) => worker.once('exit', () => r()));
      worker.postMessage('close');
      // A watch left open must not hold the close up: the thread ends after 5 s whatever.
      const timer = setTimeout(() => void worker.terminate(), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
