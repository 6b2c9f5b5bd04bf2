/**
 * The CEL device selectors the simulated scheduler understands: only what vcuda's DeviceClasses
 * and MIG claims use, conditions joined by `&&`, each one of
 *   device.driver == "<driver>"
 *   device.attributes["<domain>"].<name> == "<string>" | <int> | true | false
 *   "<name>" in device.attributes["<domain>"]        (and its negation, !(…))
 * with either quote. An attribute of the device's own driver is found under its plain name, any
 * other under `<domain>/<name>`. Comparing an attribute the device lacks is a CEL runtime error on
 * kube-scheduler; vcuda's classes test `in` first so it never happens, and here it does not match.
 * Anything else is refused with a message that says so, rather than guessed at: kube-scheduler
 * evaluates full CEL, and a selector read differently here would make the simulator allocate what
 * it would not.
 */
import type { DeviceAttribute, DeviceSelector } from './dra-objects.js';

/** What a selector sees of a device. */
export type SelectableDevice = { driver: string; attributes?: Record<string, DeviceAttribute> };
export type DevicePredicate = (device: SelectableDevice) => boolean;
export type CompiledSelectors = { ok: true; matches: DevicePredicate } | { ok: false; reason: string };

const STRING = String.raw`(?:"([^"\\]*)"|'([^'\\]*)')`;
const DOMAIN = String.raw`device\.attributes\[${STRING}\]`;
const DRIVER_EQUALS = new RegExp(String.raw`^device\.driver\s*==\s*${STRING}$`);
const ATTRIBUTE_EQUALS = new RegExp(
  String.raw`^${DOMAIN}\.([A-Za-z][A-Za-z0-9_]*)\s*==\s*(?:${STRING}|(-?\d+)|(true|false))$`,
);
const HAS_ATTRIBUTE = new RegExp(String.raw`^(!\s*\(\s*)?${STRING}\s+in\s+${DOMAIN}(\s*\))?$`);

/** The device's attribute `name` of `domain`, as CEL's `device.attributes[domain][name]` finds it. */
function attributeOf(device: SelectableDevice, domain: string, name: string): DeviceAttribute | undefined {
  const attrs = device.attributes ?? {};
  return attrs[`${domain}/${name}`] ?? (domain === device.driver ? attrs[name] : undefined);
}

function attributeValue(a: DeviceAttribute | undefined): string | number | boolean | undefined {
  return a?.string ?? a?.int ?? a?.bool ?? a?.version;
}

/** One condition, or undefined when the text is none of the forms above. */
function parseCondition(text: string): DevicePredicate | undefined {
  const t = text.trim();
  let m = DRIVER_EQUALS.exec(t);
  if (m) {
    const driver = m[1] ?? m[2];
    return (d) => d.driver === driver;
  }
  m = ATTRIBUTE_EQUALS.exec(t);
  if (m) {
    const domain = (m[1] ?? m[2]) as string;
    const name = m[3] as string;
    const want: string | number | boolean = m[4] ?? m[5] ?? (m[6] !== undefined ? Number(m[6]) : m[7] === 'true');
    return (d) => attributeValue(attributeOf(d, domain, name)) === want;
  }
  m = HAS_ATTRIBUTE.exec(t);
  if (m && Boolean(m[1]) === Boolean(m[6])) {
    const negated = Boolean(m[1]);
    const name = (m[2] ?? m[3]) as string;
    const domain = (m[4] ?? m[5]) as string;
    return (d) => (attributeOf(d, domain, name) !== undefined) !== negated;
  }
  return undefined;
}

/** Compiles every selector (all must hold); `where` names them in a refusal (`DeviceClass gpu.vcuda.io`). */
export function compileSelectors(selectors: readonly DeviceSelector[] | undefined, where: string): CompiledSelectors {
  const conditions: DevicePredicate[] = [];
  for (const selector of selectors ?? []) {
    const expression = selector.cel?.expression;
    if (typeof expression !== 'string') return { ok: false, reason: `${where}: a selector without a CEL expression` };
    for (const part of expression.split('&&')) {
      const condition = parseCondition(part);
      if (!condition) {
        return {
          ok: false,
          reason: `${where}: CEL selector "${expression}" is not supported by the simulator (only device.driver == "<name>", device.attributes["<domain>"].<name> == <value> and "<name>" in device.attributes["<domain>"])`,
        };
      }
      conditions.push(condition);
    }
  }
  return { ok: true, matches: (device) => conditions.every((c) => c(device)) };
}
