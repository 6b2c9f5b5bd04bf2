/**
 * The CEL device selectors the simulated scheduler understands: only what vcuda's DeviceClass
 * uses, `device.driver == "<driver>"` (conditions joined by `&&` each of that form). Anything else
 * is refused with a message that says so, rather than guessed at: kube-scheduler evaluates full
 * CEL, and a selector read differently here would make the simulator allocate what it would not.
 */
import type { DeviceSelector } from './dra-objects.js';

/** Whether a device of `driver` passes; or why the selector cannot be evaluated here. */
export type DevicePredicate = (driver: string) => boolean;
export type CompiledSelectors = { ok: true; matches: DevicePredicate } | { ok: false; reason: string };

const DRIVER_EQUALS = /^device\.driver\s*==\s*(?:"([^"\\]*)"|'([^'\\]*)')$/;

/** One `device.driver == "x"` condition, or undefined when the text is anything else. */
function parseCondition(text: string): string | undefined {
  const m = DRIVER_EQUALS.exec(text.trim());
  return m ? (m[1] ?? m[2]) : undefined;
}

/** Compiles every selector (all must hold); `where` names them in a refusal (`DeviceClass gpu.vcuda.io`). */
export function compileSelectors(selectors: readonly DeviceSelector[] | undefined, where: string): CompiledSelectors {
  const drivers: string[] = [];
  for (const selector of selectors ?? []) {
    const expression = selector.cel?.expression;
    if (typeof expression !== 'string') return { ok: false, reason: `${where}: a selector without a CEL expression` };
    for (const part of expression.split('&&')) {
      const driver = parseCondition(part);
      if (driver === undefined) {
        return {
          ok: false,
          reason: `${where}: CEL selector "${expression}" is not supported by the simulator (only device.driver == "<name>")`,
        };
      }
      drivers.push(driver);
    }
  }
  return { ok: true, matches: (driver) => drivers.every((d) => d === driver) };
}
