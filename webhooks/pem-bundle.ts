/**
 * PEM bundles as text: no certificate library, so a reader that only splits or joins bundles
 * (`vcuda doctor`) does not load one.
 */

/**
 * Joins certificates into one bundle, each on its own lines: OpenSSL stops reading a bundle
 * where an END line runs into the next BEGIN, so the CAs after it would be silently ignored.
 */
export function joinPemBundle(pems: readonly string[]): string {
  return pems.map((p) => `${p.trim()}\n`).join('');
}

/** Splits a PEM bundle into its certificates. */
export function splitPemBundle(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((c) => `${c}\n`) ?? [];
}
