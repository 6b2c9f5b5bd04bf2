/**
 * `meta.k8s.io/v1 Table` renderings, which kubectl asks for (`Accept: ...;as=Table`) to print
 * `get` output: the columns kube-apiserver prints for pods, nodes and events, NAME/AGE otherwise.
 */
import type { KubeObject } from './selectors.js';

type Column = { name: string; type: string; format: string; description: string; priority: number };
type Cells = (obj: KubeObject, now: Date) => unknown[];

function column(name: string, type = 'string', priority = 0): Column {
  return { name, type, format: name === 'Name' ? 'name' : '', description: name, priority };
}

export function formatAge(since: string | undefined, now: Date): string {
  if (!since) return '<unknown>';
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 3600 * 2) return `${Math.floor(s / 60)}m`;
  if (s < 86400 * 2) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

type PodView = {
  spec?: { nodeName?: string; containers?: unknown[] };
  status?: {
    phase?: string;
    reason?: string;
    podIP?: string;
    containerStatuses?: {
      ready?: boolean;
      restartCount?: number;
      state?: { waiting?: { reason?: string }; terminated?: { reason?: string } };
    }[];
  };
};

function podStatus(obj: KubeObject): string {
  if (obj.metadata['deletionTimestamp']) return 'Terminating';
  const s = (obj as PodView).status;
  for (const c of s?.containerStatuses ?? []) {
    const r = c.state?.waiting?.reason ?? c.state?.terminated?.reason;
    if (r) return r;
  }
  return s?.reason ?? s?.phase ?? 'Pending';
}

const views: Record<string, { columns: Column[]; cells: Cells }> = {
  pods: {
    columns: [
      column('Name'),
      column('Ready'),
      column('Status'),
      column('Restarts', 'integer'),
      column('Age'),
      column('IP', 'string', 1),
      column('Node', 'string', 1),
    ],
    cells: (o, now) => {
      const p = o as PodView;
      const statuses = p.status?.containerStatuses ?? [];
      const total = p.spec?.containers?.length ?? 0;
      const ready = statuses.filter((c) => c.ready).length;
      const restarts = statuses.reduce((n, c) => n + (c.restartCount ?? 0), 0);
      return [
        o.metadata.name,
        `${ready}/${total}`,
        podStatus(o),
        restarts,
        formatAge(o.metadata['creationTimestamp'] as string, now),
        p.status?.podIP ?? '<none>',
        p.spec?.nodeName ?? '<none>',
      ];
    },
  },
  nodes: {
    columns: [column('Name'), column('Status'), column('Roles'), column('Age'), column('Version')],
    cells: (o, now) => {
      const st = o['status'] as
        | { conditions?: { type: string; status: string }[]; nodeInfo?: { kubeletVersion?: string } }
        | undefined;
      const ready = st?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? 'Ready' : 'NotReady';
      const spec = o['spec'] as { unschedulable?: boolean } | undefined;
      return [
        o.metadata.name,
        spec?.unschedulable ? `${ready},SchedulingDisabled` : ready,
        '<none>',
        formatAge(o.metadata['creationTimestamp'] as string, now),
        st?.nodeInfo?.kubeletVersion ?? '',
      ];
    },
  },
  events: {
    columns: [column('Last Seen'), column('Type'), column('Reason'), column('Object'), column('Message')],
    cells: (o, now) => {
      const e = o as KubeObject & {
        lastTimestamp?: string;
        type?: string;
        reason?: string;
        message?: string;
        involvedObject?: { kind?: string; name?: string };
      };
      return [
        formatAge(e.lastTimestamp ?? (o.metadata['creationTimestamp'] as string), now),
        e.type ?? '',
        e.reason ?? '',
        `${(e.involvedObject?.kind ?? '').toLowerCase()}/${e.involvedObject?.name ?? ''}`,
        e.message ?? '',
      ];
    },
  },
  // kube-apiserver's columns for `kubectl get priorityclasses`.
  priorityclasses: {
    columns: [column('Name'), column('Value', 'integer'), column('Global-Default', 'boolean'), column('Age')],
    cells: (o, now) => [
      o.metadata.name,
      o['value'] as number,
      o['globalDefault'] === true,
      formatAge(o.metadata['creationTimestamp'] as string, now),
    ],
  },
};

type Status = {
  replicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  updatedReplicas?: number;
  succeeded?: number;
  active?: number;
  failed?: number;
  startTime?: string;
  completionTime?: string;
  conditions?: { type: string; status: string }[];
};

function statusOf(o: KubeObject): Status {
  return (o['status'] ?? {}) as Status;
}

function specOf(o: KubeObject): { replicas?: number; completions?: number; suspend?: boolean } {
  return (o['spec'] ?? {}) as { replicas?: number; completions?: number; suspend?: boolean };
}

/** A Job's STATUS column as kubectl 1.32 prints it. */
function jobStatus(o: KubeObject): string {
  const has = (type: string) => statusOf(o).conditions?.some((c) => c.type === type && c.status === 'True');
  if (has('Failed')) return 'Failed';
  if (has('Complete')) return 'Complete';
  if (has('FailureTarget')) return 'FailureTarget';
  if (has('SuccessCriteriaMet')) return 'SuccessCriteriaMet';
  if (specOf(o).suspend) return 'Suspended';
  return 'Running';
}

function jobDuration(o: KubeObject, now: Date): string {
  const s = statusOf(o);
  if (!s.startTime) return '';
  const end = s.completionTime ? new Date(s.completionTime) : now;
  return formatAge(s.startTime, end);
}

const age = (o: KubeObject, now: Date) => formatAge(o.metadata['creationTimestamp'] as string, now);

const workloadViews: Record<string, { columns: Column[]; cells: Cells }> = {
  deployments: {
    columns: [
      column('Name'),
      column('Ready'),
      column('Up-to-date', 'integer'),
      column('Available', 'integer'),
      column('Age'),
    ],
    cells: (o, now) => {
      const s = statusOf(o);
      return [
        o.metadata.name,
        `${s.readyReplicas ?? 0}/${specOf(o).replicas ?? 0}`,
        s.updatedReplicas ?? 0,
        s.availableReplicas ?? 0,
        age(o, now),
      ];
    },
  },
  replicasets: {
    columns: [
      column('Name'),
      column('Desired', 'integer'),
      column('Current', 'integer'),
      column('Ready', 'integer'),
      column('Age'),
    ],
    cells: (o, now) => {
      const s = statusOf(o);
      return [o.metadata.name, specOf(o).replicas ?? 0, s.replicas ?? 0, s.readyReplicas ?? 0, age(o, now)];
    },
  },
  jobs: {
    columns: [column('Name'), column('Status'), column('Completions'), column('Duration'), column('Age')],
    cells: (o, now) => {
      const s = statusOf(o);
      const completions = specOf(o).completions;
      return [
        o.metadata.name,
        jobStatus(o),
        `${s.succeeded ?? 0}/${completions ?? 1}`,
        jobDuration(o, now),
        age(o, now),
      ];
    },
  },
};

export function wantsTable(accept: string | undefined): boolean {
  return (accept ?? '').includes('as=Table');
}

/** `?includeObject=`: what each row carries; kubectl asks for whole objects to `--sort-by` a field of them. */
export type IncludeObject = 'None' | 'Metadata' | 'Object';

export function includeObjectOf(query: URLSearchParams): IncludeObject {
  const v = query.get('includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

/** One object or a list as a Table; rows carry PartialObjectMetadata as kube-apiserver's default. */
export function toTable(
  resource: string,
  objs: KubeObject[],
  listRv: string,
  now: Date,
  include: IncludeObject = 'Metadata',
) {
  const view = views[resource] ??
    workloadViews[resource] ?? {
      columns: [column('Name'), column('Age')],
      cells: (o: KubeObject, n: Date) => [o.metadata.name, formatAge(o.metadata['creationTimestamp'] as string, n)],
    };
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion: listRv },
    columnDefinitions: view.columns,
    rows: objs.map((o) => ({
      cells: view.cells(o, now),
      ...(include === 'None'
        ? {}
        : {
            object:
              include === 'Object'
                ? o
                : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
          }),
    })),
  };
}
