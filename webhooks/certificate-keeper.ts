/**
 * The keeping every TLS listener of the control plane shares (the webhook's, the extender's): each
 * pass loads the listener's certificate material from wherever its mode keeps it, hands it to the
 * listener only when it changed (the listener swaps its TLS context, so a rotation needs no
 * restart), and passes repeat on a timer, a failed one logged and retried at the next tick. What
 * differs between listeners is only where the material comes from (`load`).
 */

export type CertificateKeeperDeps<T> = {
  /** The material as it stands now: read from files, or issued and kept in a Secret. Throws when it cannot. */
  load: (current: T | undefined) => Promise<T>;
  /** Whether two loads carry the same material, so the listener is not handed the same twice. */
  same: (a: T, b: T) => boolean;
  /** Swaps the listener's TLS context. */
  onChange: (material: T) => void;
};

export type CertificateKeeper<T> = {
  /** One pass: loads, and hands the material to the listener if it changed. */
  refresh(): Promise<T>;
};

export function createCertificateKeeper<T>(deps: CertificateKeeperDeps<T>): CertificateKeeper<T> {
  let current: T | undefined;
  return {
    async refresh() {
      const material = await deps.load(current);
      if (current === undefined || !deps.same(current, material)) {
        current = material;
        deps.onChange(material);
      }
      return material;
    },
  };
}

/**
 * Runs `pass` every `intervalMs` until the returned function is called. A failed pass is logged
 * with `warning` and retried at the next tick; the timer never keeps the process alive.
 */
export function refreshEvery(
  intervalMs: number,
  pass: () => Promise<unknown>,
  logger: { warn(obj: object, msg: string): void },
  warning: string,
): () => void {
  const timer = setInterval(() => {
    pass().catch((err: unknown) => logger.warn({ err }, warning));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
