/**
 * A `vcuda-core` device is one hundredth of one card: `c<card>-<nn>`. The allocator reads the card
 * back from the IDs the kubelet hands it, and the device plugin advertises the same IDs, so the
 * naming lives here, below both.
 */

export const CORE_DEVICES_PER_CARD = 100;

export function coreDeviceId(cardIndex: number, slot: number): string {
  return `c${cardIndex}-${String(slot).padStart(2, '0')}`;
}

/** The card a core device ID belongs to; undefined for IDs that are not ours. */
export function cardOfCoreDevice(id: string): number | undefined {
  const m = /^c(\d+)-(\d{2})$/.exec(id);
  return m ? Number(m[1]) : undefined;
}
