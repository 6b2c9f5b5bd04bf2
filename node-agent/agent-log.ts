/**
 * How the node agent logs, as the control plane does: pino's calling convention, a message or
 * fields and then a message. An error goes in the `err` field, never into the message as text, so
 * pino's error serializer keeps its type, code, cause and stack. A pino logger is an `AgentLog`.
 */

export type LogFields = { err?: unknown } & Record<string, unknown>;

export interface LogFn {
  (message: string): void;
  (fields: LogFields, message: string): void;
}

export type AgentLog = { info: LogFn; warn: LogFn; error: LogFn };
