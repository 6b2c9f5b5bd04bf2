/**
 * Headless Debian chromium for browser tests, launched the same way everywhere. CI installs it
 * (.ci/run); elsewhere the tests say how to get it rather than failing obscurely.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const chromiumPath = '/usr/bin/chromium';

const launchArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function hasChromium(): boolean {
  return existsSync(chromiumPath);
}

export async function launchChromium(): Promise<Browser> {
  if (!hasChromium()) throw new Error(`${chromiumPath} is missing: apt-get install -y chromium (.ci/run does it)`);
  return chromium.launch({ executablePath: chromiumPath, args: launchArgs, headless: true });
}
