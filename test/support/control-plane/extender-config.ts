/** A control plane without a cluster whose extender serves the certificate files in `dir`. Test-only. */
import { join } from 'node:path';
import { type ControlPlaneConfig, loadControlPlaneConfig } from '../../../control-plane/config.js';

/** `dir` holds `tls.crt` and `tls.key` (the extender's serving certificate) and `ca.crt` (the client CA). */
export function extenderFilesConfig(dir: string, extenderPort = 0): ControlPlaneConfig {
  return loadControlPlaneConfig({
    flags: {
      logLevel: 'silent',
      host: '127.0.0.1',
      port: 0,
      httpsPort: 0,
      kube: { mode: 'none' },
      signingKeys: { source: 'ephemeral' },
      extender: {
        port: extenderPort,
        certificates: {
          mode: 'files',
          certFile: join(dir, 'tls.crt'),
          keyFile: join(dir, 'tls.key'),
          clientCaFile: join(dir, 'ca.crt'),
        },
      },
    },
  });
}
