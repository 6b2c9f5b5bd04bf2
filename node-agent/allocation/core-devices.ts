/**
 * A `vcuda-core` device is one hundredth of one card: `c<card>-<nn>`, or of one shared MIG instance:
 * `c<parent>g<gpuInstanceId>-<nn>`. The part between `c` and `-` is the device's core group (one per
 * card or shared instance). The allocator reads the group back from the IDs the kubelet hands it,
 * and the device plugin advertises the same IDs, so the naming lives here, below both.
 */

export const CORE_DEVICES_PER_CARD = 100;

/** `coreGroup`: a card's index (`3`), or a shared instance's `<parent>g<gpuInstanceId>` (`0g2`). */
export function coreDeviceId(coreGroup: number | string, slot: number): string {
  return `c${coreGroup}-${String(slot).padStart(2, '0')}`;
}

/** The core group a core device ID belongs to (`3`, `0g2`); undefined for IDs that are not ours. */
export function coreGroupOfDevice(id: string): string | undefined {
  const m = /^c(\d+(?:g\d+)?)-(\d{2})$/.exec(id);
  return m ? m[1] : undefined;
}
