/**
 * Headless Debian chromium for browser tests, launched the same way everywhere. CI installs it
 * (.ci/run); elsewhere the tests say how to get it rather than failing obscurely.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';

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

/** A new page of `browser` at `url` once the dashboard has rendered; an error thrown in the page fails the test. */
export async function openDashboard(
  browser: Browser,
  url: string,
  viewport = { width: 1400, height: 1000 },
): Promise<Page> {
  const page = await browser.newPage({ viewport });
  page.on('pageerror', (e) => {
    throw e;
  });
  await page.goto(url);
  await page.locator('body[data-rendered]').waitFor();
  return page;
}

/**
 * Saves a full-page screenshot in test-results/ for a person to look at and returns what the file
 * really holds: its PNG header's size and its byte count (a blank page compresses to a few KiB).
 */
export async function saveScreenshot(
  page: Page,
  name: string,
): Promise<{ width: number; height: number; bytes: number }> {
  mkdirSync('test-results', { recursive: true });
  const path = join('test-results', name);
  await page.screenshot({ path, fullPage: true });
  const png = readFileSync(path);
  if (png.subarray(1, 4).toString() !== 'PNG') throw new Error(`${path} is not a PNG`);
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20), bytes: png.length };
}
