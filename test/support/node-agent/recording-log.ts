import { messageOf } from '../../../contract/index.js';
import type { AgentLog, LogFields, LogFn } from '../../../node-agent/agent-log.js';

/**
 * An AgentLog that keeps each line as text: the message, then the logged error's message, so a
 * test can look for either. `lines` gets warnings and errors; `fields` what each of them carried.
 */
export function recordingLog(): { log: AgentLog; lines: string[]; fields: LogFields[] } {
  const lines: string[] = [];
  const fields: LogFields[] = [];
  const record = ((first: string | LogFields, message?: string) => {
    if (typeof first === 'string') {
      lines.push(first);
      fields.push({});
      return;
    }
    lines.push(first.err === undefined ? String(message) : `${message}: ${messageOf(first.err)}`);
    fields.push(first);
  }) as LogFn;
  return { log: { info: () => {}, warn: record, error: record }, lines, fields };
}
