/**
 * A start/stop pair that runs `run` every `periodMs` on an unref'd interval (it never keeps the
 * process alive). A throw goes to `onError` and the next tick runs as usual. `start` while running
 * and `stop` while stopped do nothing.
 */
export function periodicTask(
  run: () => void,
  periodMs: number,
  onError?: (err: unknown) => void,
): { start(): void; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  return {
    start() {
      if (timer) return;
      timer = setInterval(() => {
        try {
          run();
        } catch (err) {
          onError?.(err);
        }
      }, periodMs);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
