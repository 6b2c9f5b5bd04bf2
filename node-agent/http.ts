/** The agent's HTTP surface: `/healthz` and Prometheus `/metrics`. */
import { Hono } from 'hono';
import type { AgentMetrics } from './metrics.js';

export function createAgentHttp(agent: {
  healthProblems: () => string[];
  refreshMetrics: () => void;
  metrics: AgentMetrics;
}): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => {
    const problems = agent.healthProblems();
    return problems.length === 0 ? c.text('ok') : c.text(`${problems.join('\n')}\n`, 503);
  });
  app.get('/metrics', async (c) => {
    agent.refreshMetrics();
    return c.body(await agent.metrics.registry.metrics(), 200, { 'content-type': agent.metrics.registry.contentType });
  });
  return app;
}
