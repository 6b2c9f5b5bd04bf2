/**
 * Whether each card offers concurrent managed access (`CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`),
 * read once from the CUDA driver library, since NVML does not say. Without it libvcuda serves no
 * memory burst on the card (its managed pages could not be evicted under a neighbour), so the node
 * publishes it per card for operators and admission to read.
 */
import koffi from 'koffi';

const CUDA_SUCCESS = 0;
const CONCURRENT_MANAGED_ACCESS = 89;

/** One form for NVML's `00000000:3B:00.0` and CUDA's `0000:3b:00.0`. */
export function pciKey(busId: string): string {
  const m = /^([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)$/i.exec(busId.trim());
  if (!m) return busId.trim().toLowerCase();
  return m
    .slice(1)
    .map((part) => Number.parseInt(part, 16).toString(16))
    .join(':');
}

/**
 * The attribute per card, keyed by `pciKey` of its bus id; empty when the driver library cannot be
 * loaded or initialised (the cards then say nothing: unknown, never a guess).
 */
export function readConcurrentManagedAccess(libraryPath: string): Map<string, boolean> {
  const found = new Map<string, boolean>();
  let lib: ReturnType<typeof koffi.load>;
  try {
    lib = koffi.load(libraryPath);
  } catch {
    return found;
  }
  // The library stays loaded: a real driver is not meant to be unloaded after cuInit.
  const cuInit = lib.func('int cuInit(unsigned int flags)');
  const cuDeviceGetCount = lib.func('int cuDeviceGetCount(_Out_ int *count)');
  const cuDeviceGet = lib.func('int cuDeviceGet(_Out_ int *device, int ordinal)');
  const cuDeviceGetPCIBusId = lib.func('int cuDeviceGetPCIBusId(_Out_ uint8 *id, int len, int device)');
  const cuDeviceGetAttribute = lib.func('int cuDeviceGetAttribute(_Out_ int *value, int attrib, int device)');
  const count = [0];
  if (cuInit(0) !== CUDA_SUCCESS || cuDeviceGetCount(count) !== CUDA_SUCCESS) return found;
  for (let i = 0; i < (count[0] ?? 0); i++) {
    const dev = [0];
    const id = new Uint8Array(32);
    const value = [0];
    if (cuDeviceGet(dev, i) !== CUDA_SUCCESS) continue;
    if (cuDeviceGetPCIBusId(id, id.length, dev[0]) !== CUDA_SUCCESS) continue;
    if (cuDeviceGetAttribute(value, CONCURRENT_MANAGED_ACCESS, dev[0]) !== CUDA_SUCCESS) continue;
    const end = id.indexOf(0);
    found.set(pciKey(Buffer.from(id.subarray(0, end === -1 ? id.length : end)).toString('latin1')), value[0] === 1);
  }
  return found;
}
