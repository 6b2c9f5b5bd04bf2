/**
 * What a container of whole MIG instances is handed (pure): the instances its signed grant names,
 * each checked against this node's own (it exists here, is of the profile asked, its parent card
 * is healthy, the driver lists its access nodes), as CDI device parts. Any doubt is a refusal.
 */
import type { ContainerGrant } from '../../contract/index.js';
import type { CdiMigDevice } from '../limits/cdi-spec.js';
import type { AllocationErrorCode } from './allocation-error.js';
import type { MigDirectory } from './ports.js';

export type MigHandover =
  | { ok: true; devices: CdiMigDevice[] }
  | { ok: false; code: AllocationErrorCode; detail: string };

export function migHandover(input: {
  grant: ContainerGrant;
  profile: string;
  count: number;
  mig: MigDirectory | undefined;
  nodeName: string;
}): MigHandover {
  const { grant, profile, count } = input;
  if (grant.cards.length !== count) {
    return {
      ok: false,
      code: 'grant-mismatch',
      detail: `container ${grant.name} asks ${count} MIG ${profile} instances but its signed grant names ${grant.cards.length}`,
    };
  }
  const devices: CdiMigDevice[] = [];
  for (const g of grant.cards) {
    const device = input.mig?.byUuid(g.uuid);
    if (!device || g.mig?.profile !== profile || device.profile !== profile) {
      const what = device ? `a MIG ${device.profile} instance` : 'no MIG instance';
      return {
        ok: false,
        code: 'unknown-card',
        detail: `assignment names ${g.uuid} as MIG ${profile}; it is ${what} on node ${input.nodeName}`,
      };
    }
    if (!device.parent.healthy) {
      return {
        ok: false,
        code: 'unhealthy-card',
        detail: `MIG instance ${g.uuid} is on unhealthy card ${device.parent.uuid} (${device.parent.healthReason ?? 'unknown'})`,
      };
    }
    if (!device.capMinors) {
      return {
        ok: false,
        code: 'unknown-card',
        detail: `the driver lists no access nodes for MIG instance ${g.uuid} (gpu${device.parent.minorNumber}/gi${device.gpuInstanceId}/ci${device.computeInstanceId})`,
      };
    }
    devices.push({ uuid: device.uuid, parentMinor: device.parent.minorNumber, capMinors: device.capMinors });
  }
  return { ok: true, devices };
}
