// The dashboard page: draws the overview the control plane computes (control-plane/dashboard/overview.ts)
// and redraws it on every Server-Sent Event. All text goes through textContent: pod names and refusal
// messages come from users.

const SVG = 'http://www.w3.org/2000/svg';

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const fmt = (n, digits = 0) => Number(n).toLocaleString('en-US', { maximumFractionDigits: digits });

function bar(kind, pct, label, testid) {
  const fill = el('span');
  fill.style.width = `${Math.min(100, Math.max(0, pct))}%`;
  return el(
    'div',
    { class: `bar ${kind}${pct >= 100 ? ' full' : ''}`, 'data-testid': testid, title: label },
    fill,
    el('em', {}, label),
  );
}

function durationText(ms) {
  const min = Math.round(ms / 60000);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  return h < 48 ? `${h} h ${min % 60} min` : `${Math.floor(h / 24)} d ${h % 24} h`;
}

function renderTotals(t, o) {
  const box = document.getElementById('totals');
  box.replaceChildren(
    el(
      'span',
      { class: o.nodesNotReporting > 0 ? 'alarm' : '' },
      'nodes ',
      el('b', { 'data-testid': 'total-nodes' }, fmt(o.nodes)),
      o.nodesNotReporting > 0
        ? el('b', { 'data-testid': 'nodes-not-reporting' }, ` (${fmt(o.nodesNotReporting)} not reporting)`)
        : null,
    ),
    el('span', {}, 'cards ', el('b', { 'data-testid': 'total-cards' }, fmt(t.cards)), ` (${fmt(t.freeCards)} free)`),
    el(
      'span',
      { title: 'what pods requested and were granted, not what they measure' },
      'core promised ',
      el('b', { 'data-testid': 'total-core' }, `${fmt(t.coreUsed)} / ${fmt(t.coreCapacity)}`),
    ),
    el(
      'span',
      { title: 'what pods requested and were granted, not what they measure' },
      'memory promised ',
      el('b', { 'data-testid': 'total-memory' }, `${fmt(t.memoryUsedMiB)} / ${fmt(t.memoryCapacityMiB)} MiB`),
    ),
  );
}

// A pod holding memory above its request (vcuda-memory-limit): it may slow down when evicted.
function burstBadge(burst) {
  if (!burst) return null;
  const host = burst.evictedMiB ? `, ${fmt(burst.evictedMiB)} MiB of it evicted to host memory` : '';
  return el(
    'span',
    {
      class: 'stage burst',
      'data-testid': 'burst',
      'data-burst-mib': burst.mib,
      title: `bursting: ${fmt(burst.mib)} MiB above its request in its latest usage sample${host}`,
    },
    `burst +${fmt(burst.mib)} MiB`,
  );
}

// Who holds an instance: its pod, or for a shared one its shares' pods and core.
function migHolderText(i) {
  if (i.isShared) return `shared · ${i.pods.length} ${i.pods.length === 1 ? 'pod' : 'pods'} · ${i.coreUsed} / 100 core`;
  return i.pods[0] ? `${i.pods[0].namespace}/${i.pods[0].pod}` : 'free';
}

// A card in MIG mode, drawn as its instances on the card's 8 memory slices: where each sits, its
// profile, and the pod holding it (or free; a shared instance: its shares).
function renderMigInstances(c) {
  return el(
    'div',
    { class: 'mig-slices', 'data-testid': 'mig-instances' },
    c.instances.map((i) => {
      const holder = i.pods[0];
      const block = el(
        'div',
        {
          class: holder ? `mig-instance held ${holder.state}` : 'mig-instance',
          'data-testid': 'mig-instance',
          'data-uuid': i.uuid,
          'data-profile': i.profile,
          'data-start': i.start,
          'data-size': i.size,
          'data-held': holder ? 'true' : 'false',
          'data-shared': i.isShared ? 'true' : 'false',
          title: `${i.profile} on memory slices ${i.start}-${i.start + i.size - 1}, ${fmt(i.memoryMiB)} MiB · ${i.uuid}`,
        },
        el('span', { class: 'mig-profile' }, i.isShared ? `${i.profile} · shared` : i.profile),
        el('span', { class: 'mig-holder' }, holder ? migHolderText(i) : 'free'),
      );
      block.style.gridColumn = `${i.start + 1} / span ${i.size}`;
      return block;
    }),
  );
}

function renderCard(cluster, node, c) {
  const cls = ['card', c.isOvercommitted ? 'over' : '', c.healthy === false ? 'unhealthy' : ''].join(' ').trim();
  return el(
    'article',
    {
      class: cls,
      'data-testid': 'card',
      'data-cluster': cluster,
      'data-node': node,
      'data-uuid': c.uuid,
      'data-core-used': c.coreUsed,
      'data-memory-used-mib': c.memoryUsedMiB,
    },
    el(
      'div',
      { class: 'card-title' },
      el('span', {}, `#${c.index} ${c.model}${c.instances ? ' · MIG' : ''}`),
      c.pods.some((p) => p.burst)
        ? el('span', { class: 'stage burst', 'data-testid': 'card-bursting' }, 'bursting')
        : null,
      c.healthy === false ? el('span', { class: 'stage stage-quota' }, 'unhealthy') : null,
      c.memoryBurst === false
        ? el(
            'span',
            {
              class: 'stage',
              'data-testid': 'card-no-burst',
              title: 'no concurrent managed access: vcuda-memory-limit is held to the request on this card',
            },
            'no burst',
          )
        : null,
    ),
    el('div', { class: 'uuid', title: c.uuid }, c.uuid),
    c.instances ? renderCardMig(c) : renderCardShares(c),
  );
}

function renderCardMig(c) {
  if (c.instances.length === 0) return el('p', { class: 'empty' }, 'in MIG mode, no instances: nothing to offer');
  const slices = (i) => (i.size === 1 ? `slice ${i.start}` : `slices ${i.start}-${i.start + i.size - 1}`);
  return [
    el('div', { class: 'bar-label' }, `MIG instances on the card's 8 memory slices (${c.instances.length})`),
    renderMigInstances(c),
    el(
      'ul',
      { class: 'pods' },
      c.instances.map((i) =>
        el(
          'li',
          { class: i.pods[0]?.state, title: i.uuid },
          el(
            'span',
            { class: 'pod-name' },
            i.isShared ? i.pods.map((p) => `${p.namespace}/${p.pod}`).join(', ') || 'free' : migHolderText(i),
          ),
          el(
            'span',
            {},
            i.isShared
              ? `${i.profile} shared · ${slices(i)} · ${i.coreUsed} / 100 core · ${fmt(i.memoryUsedMiB)} / ${fmt(i.memoryMiB)} MiB`
              : `${i.profile} · ${slices(i)} · ${fmt(i.memoryMiB)} MiB`,
          ),
        ),
      ),
    ),
  ];
}

function renderCardShares(c) {
  return [
    el('div', { class: 'bar-label' }, 'core promised (granted shares; measured use is in Reports)'),
    bar('core', c.corePct, `${c.coreUsed} / 100 core`, 'core-bar'),
    el('div', { class: 'bar-label' }, 'memory promised'),
    bar('mem', c.memoryPct, `${fmt(c.memoryUsedMiB)} / ${fmt(c.memoryMiB)} MiB`, 'memory-bar'),
    c.pods.length === 0
      ? el('p', { class: 'empty' }, 'no pods or claims')
      : el(
          'ul',
          { class: 'pods' },
          c.pods.map((p) =>
            el(
              'li',
              {
                class: p.state,
                'data-testid': 'pod',
                'data-holder': p.holder,
                title: holderTitle(p),
              },
              el(
                'span',
                { class: 'holder' },
                holderBadge(p.holder),
                el('span', { class: 'pod-name' }, `${p.namespace}/${p.pod}`),
              ),
              burstBadge(p.burst),
              el('span', {}, `${p.core}% · ${fmt(p.memoryMiB)} MiB`),
            ),
          ),
        ),
  ];
}

// A DRA ResourceClaim's shares (kube-scheduler allocated them, the ledger charged them) are no pod:
// say so, so nobody looks for a pod of that name.
function holderBadge(holder) {
  return holder === 'claim'
    ? el('span', { class: 'holder-claim', 'data-testid': 'claim-badge', title: 'DRA ResourceClaim' }, 'claim')
    : null;
}

function holderTitle(p) {
  if (p.holder === 'claim') return 'DRA ResourceClaim, allocated by kube-scheduler and charged in the ledger';
  return p.state === 'reserved' ? 'reserved, not yet bound' : 'bound';
}

// A node whose agent stopped reporting: nothing on it can be trusted or placed, so say it loudly.
function agentBadge(agent, generatedAt) {
  if (!agent || agent.reporting) return null;
  const age = agent.lastHeartbeat
    ? `last heartbeat ${Math.round((Date.parse(generatedAt) - Date.parse(agent.lastHeartbeat)) / 1000)} s ago`
    : 'never reported';
  return el(
    'span',
    { class: 'stage stage-quota', 'data-testid': 'agent-not-reporting' },
    `node agent not reporting: ${age} (limit ${agent.limitSeconds} s); no new pods are placed here`,
  );
}

function renderClusters(clusters, generatedAt) {
  const box = document.getElementById('clusters');
  if (clusters.length === 0) {
    box.replaceChildren(el('p', { class: 'empty' }, 'No nodes with vcuda cards yet: is the node agent running?'));
    return;
  }
  box.replaceChildren(
    ...clusters.map((cl) =>
      el(
        'div',
        { class: 'cluster', 'data-testid': 'cluster', 'data-cluster': cl.name },
        el(
          'h3',
          {},
          cl.name,
          el(
            'span',
            { class: 'sub' },
            `${cl.nodes.length} nodes · ${cl.totals.cards} cards · core ${fmt(cl.totals.coreUsed)} / ${fmt(cl.totals.coreCapacity)}`,
          ),
        ),
        cl.nodes.map((n) =>
          el(
            'div',
            {
              class: n.agent?.reporting === false ? 'node unhealthy' : 'node',
              'data-testid': 'node',
              'data-node': n.name,
              'data-agent': n.agent ? (n.agent.reporting ? 'reporting' : 'not-reporting') : 'unknown',
            },
            el(
              'div',
              { class: 'node-head' },
              el('strong', {}, n.name),
              agentBadge(n.agent, generatedAt),
              el(
                'span',
                { class: 'sub' },
                `free core ${n.freeCore} (largest ${n.largestFreeCore}) · fragmentation ${n.fragmentationPct}%${n.strandedCore ? ` · stranded ${n.strandedCore}` : ''}`,
              ),
            ),
            el(
              'div',
              { class: 'cards' },
              n.cards.map((c) => renderCard(cl.name, n.name, c)),
            ),
          ),
        ),
      ),
    ),
  );
}

function table(head, rows, empty) {
  if (rows.length === 0) return el('p', { class: 'empty' }, empty);
  return el(
    'div',
    { class: 'table-scroll' },
    el(
      'table',
      {},
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          head.map((h) => (typeof h === 'string' ? el('th', {}, h) : el('th', { title: h.title }, h.text))),
        ),
      ),
      el('tbody', {}, rows),
    ),
  );
}

function renderQuotas(quotas) {
  document.getElementById('quota-list').replaceChildren(
    table(
      ['scope', 'name', 'cluster', 'gpu model', 'core', 'memory'],
      quotas.map((q) =>
        el(
          'tr',
          { class: q.isAtLimit ? 'at-limit' : '', 'data-testid': 'quota', 'data-name': q.name },
          el('td', {}, q.scope),
          el('td', {}, q.name),
          el('td', {}, q.cluster ?? 'all'),
          el('td', {}, q.gpuModel ?? 'any'),
          el('td', {}, bar('core', q.corePct, `${fmt(q.coreUsed)} / ${fmt(q.coreLimit)}`, 'quota-core')),
          el(
            'td',
            {},
            bar('mem', q.memoryPct, `${fmt(q.memoryUsedMiB)} / ${fmt(q.memoryLimitMiB)} MiB`, 'quota-memory'),
          ),
        ),
      ),
      'No quotas defined.',
    ),
  );
}

// A horizontal bar chart in inline SVG: one row per item, an optional inner bar (e.g. used within
// allocated) drawn over it, and the item's text at the end of the bar.
function barChart(items, testid) {
  if (items.length === 0) return el('p', { class: 'empty' }, 'nothing in this window');
  const rowH = 20;
  const labelW = 170;
  const width = 480;
  const barSpace = width - labelW - 110;
  const max = Math.max(...items.map((i) => i.value), 1e-9);
  const chart = svg('svg', {
    viewBox: `0 0 ${width} ${items.length * rowH + 4}`,
    width: '100%',
    role: 'img',
    'data-testid': testid,
  });
  items.forEach((item, i) => {
    const y = i * rowH + 2;
    const w = Math.max(1, (barSpace * item.value) / max);
    const label = item.label.length > 26 ? `${item.label.slice(0, 25)}…` : item.label;
    chart.append(svg('text', { x: 0, y: y + 13 }, label));
    const bar = { x: labelW, y: y + 2, height: rowH - 6, rx: 2 };
    chart.append(svg('rect', { ...bar, width: w, fill: item.color, 'data-value': item.value }));
    if (item.inner !== undefined) {
      const innerW = Math.min(w, (barSpace * item.inner) / max);
      chart.append(svg('rect', { ...bar, width: innerW, fill: item.innerColor, 'data-inner': item.inner }));
    }
    chart.append(svg('text', { x: labelW + w + 4, y: y + 13, class: 'v' }, item.text));
  });
  return chart;
}

const hoursItem = (x, color, innerColor) => ({
  label: x.key,
  value: x.allocatedGpuHours,
  inner: x.usedGpuHours,
  color,
  innerColor,
  text: hoursText(x),
});

// Measured above promised is not an error: a soft limit (vcuda-core-limit above the request) lets a
// pod burst into compute nobody else is using, so say so where the number shows.
function hoursText(x) {
  const promised = `${fmt(x.allocatedGpuHours, 2)} h promised`;
  if (x.efficiencyPct === null) return `${promised}, nothing measured`;
  const measured = `${fmt(x.efficiencyPct, 1)} % measured`;
  return x.efficiencyPct > 100
    ? `${promised}, ${measured}: soft-limit burst above the request`
    : `${promised}, ${measured}`;
}

function renderReports(r) {
  document.getElementById('chart-ns').replaceChildren(
    barChart(
      r.gpuHoursByNamespace.map((x) => hoursItem(x, '#a9c1f2', '#2f5fbf')),
      'gpu-hours-ns',
    ),
  );
  document.getElementById('chart-team').replaceChildren(
    barChart(
      r.gpuHoursByTeam.map((x) => hoursItem(x, '#d4c2f2', '#6a3fb9')),
      'gpu-hours-team',
    ),
  );
  document.getElementById('chart-frag').replaceChildren(
    barChart(
      r.fragmentation
        .filter((x) => x.fragmentationPct > 0 || x.strandedCore > 0)
        .map((x) => ({
          label: `${x.cluster}/${x.node}`,
          value: x.fragmentationPct,
          color: '#d98a00',
          text: `${x.fragmentationPct} %${x.strandedCore ? `, ${x.strandedCore} core stranded` : ''}`,
        })),
      'fragmentation',
    ),
  );
  renderIdle(r);
}

// The idle table pages through every idle allocation (never silently cut); its columns say
// what each number measures.
const IDLE_PAGE_ROWS = 10;
let idlePage = 0;
let lastReports;

const IDLE_HEAD = [
  'pod',
  { text: 'node / card', title: 'where the allocation sits' },
  { text: 'share promised', title: 'the core share and memory the pod was granted on this card' },
  { text: 'held for', title: 'since the allocation was made' },
  {
    text: 'pod SM use, measured',
    title: "the pod's own mean share of the card's compute (SMs) while held, from the node agent's samples",
  },
];

function idleRow(a) {
  return el(
    'tr',
    { 'data-testid': 'idle-row' },
    el('td', {}, holderBadge(a.holder), `${a.cluster}/${a.namespace}/${a.pod}`),
    el('td', {}, `${a.node} `, el('span', { class: 'uuid' }, a.cardUuid)),
    el('td', { class: 'num' }, `${a.core}% · ${fmt(a.memoryMiB)} MiB`),
    el('td', { class: 'num' }, durationText(a.heldMs)),
    el('td', { class: 'num' }, a.utilizationPct === undefined ? 'never sampled' : `${fmt(a.utilizationPct, 1)} %`),
  );
}

function idlePager(shownFrom, shownTo, total, pages) {
  const go = (delta) => {
    idlePage += delta;
    renderIdle(lastReports);
  };
  const prev = el('button', { type: 'button', 'data-testid': 'idle-prev', disabled: idlePage === 0 }, '‹ previous');
  const next = el('button', { type: 'button', 'data-testid': 'idle-next', disabled: idlePage >= pages - 1 }, 'next ›');
  prev.addEventListener('click', () => go(-1));
  next.addEventListener('click', () => go(1));
  const more = total > lastReports.idle.length ? ` (the ${fmt(lastReports.idle.length)} held longest)` : '';
  return el(
    'div',
    { class: 'pager' },
    prev,
    el('span', { 'data-testid': 'idle-range' }, `${shownFrom}–${shownTo} of ${fmt(total)}${more}`),
    next,
  );
}

function renderIdle(r) {
  lastReports = r;
  const c = r.idleCriteria;
  document.getElementById('idle-criteria').textContent = c
    ? `Held at least ${c.forMinutes} min with the pod's mean measured SM use below ${c.belowPct} %: the same threshold vcuda report idle --url uses.`
    : '';
  const pages = Math.max(1, Math.ceil(r.idle.length / IDLE_PAGE_ROWS));
  idlePage = Math.min(Math.max(0, idlePage), pages - 1);
  const from = idlePage * IDLE_PAGE_ROWS;
  const shown = r.idle.slice(from, from + IDLE_PAGE_ROWS);
  document
    .getElementById('idle')
    .replaceChildren(
      table(IDLE_HEAD, shown.map(idleRow), 'No idle allocations.'),
      r.idle.length > IDLE_PAGE_ROWS
        ? idlePager(from + 1, from + shown.length, r.idleTotal ?? r.idle.length, pages)
        : '',
    );
}

function renderRefusals(refusals) {
  document.getElementById('refusal-list').replaceChildren(
    table(
      ['when', 'stage', 'pod', 'reason', 'message'],
      refusals.map((r) =>
        el(
          'tr',
          { 'data-testid': 'refusal', 'data-pod': `${r.namespace}/${r.pod}`, 'data-stage': r.stage },
          el('td', { class: 'num' }, new Date(r.at).toLocaleString()),
          el('td', {}, el('span', { class: `stage stage-${r.stage}` }, r.stage)),
          el('td', {}, `${r.cluster ? `${r.cluster}/` : ''}${r.namespace}/${r.pod}`),
          el('td', {}, r.reason),
          el('td', { class: 'msg' }, r.message),
        ),
      ),
      'No refusals recently.',
    ),
  );
}

function renderPreemptions(preemptions) {
  document.getElementById('preemption-list').replaceChildren(
    table(
      ['when', 'role', 'pod', 'reason', 'who and why'],
      (preemptions ?? []).map((p) =>
        el(
          'tr',
          { 'data-testid': 'preemption', 'data-pod': `${p.namespace}/${p.pod}`, 'data-role': p.role },
          el('td', { class: 'num' }, new Date(p.at).toLocaleString()),
          el('td', {}, p.role),
          el('td', {}, `${p.cluster ? `${p.cluster}/` : ''}${p.namespace}/${p.pod}`),
          el('td', {}, p.reason),
          el('td', { class: 'msg' }, p.message),
        ),
      ),
      'No preemptions recently.',
    ),
  );
}

const UNPLACED_WHY = {
  'no-assignment': 'placed by hand (spec.nodeName): no vcuda assignment',
  'assignment-not-verified': 'its assignment did not verify (or is being verified)',
  'refused-by-kubelet': 'the kubelet refused it at admission (the node agent refused its cards)',
};

function renderUnplaced(pods) {
  document.getElementById('unplaced-list').replaceChildren(
    table(
      ['node', 'pod', 'phase', 'why it holds no cards'],
      (pods ?? []).map((p) =>
        el(
          'tr',
          { 'data-testid': 'unplaced-pod', 'data-pod': `${p.namespace}/${p.pod}`, 'data-reason': p.reason },
          el('td', {}, `${p.cluster}/${p.node}`),
          el('td', {}, `${p.namespace}/${p.pod}`),
          el('td', {}, p.phase),
          el('td', { class: 'msg' }, UNPLACED_WHY[p.reason] ?? p.reason),
        ),
      ),
      'No GPU pods placed around vcuda.',
    ),
  );
}

// Keeps the picker's options in step with the clusters the ledger knows, without losing the choice.
function renderClusterPicker(names, chosen) {
  const picker = document.getElementById('cluster');
  const want = ['', ...names];
  const have = [...picker.options].map((o) => o.value);
  if (want.join('\n') !== have.join('\n')) {
    picker.replaceChildren(...want.map((n) => el('option', { value: n }, n === '' ? 'all clusters' : n)));
  }
  picker.value = chosen ?? '';
}

function render(o) {
  renderClusterPicker(o.clusterNames, o.cluster);
  renderTotals(o.totals, o);
  renderClusters(o.clusters, o.generatedAt);
  renderQuotas(o.quotas);
  renderReports(o.reports);
  renderRefusals(o.refusals);
  renderPreemptions(o.preemptions);
  renderUnplaced(o.unplacedPods);
  const updated = document.getElementById('updated');
  updated.textContent = new Date(o.generatedAt).toLocaleString();
  updated.setAttribute('datetime', o.generatedAt);
  document.body.dataset.rendered = o.generatedAt;
}

// The sticky header wraps onto more lines on a narrow screen: headings reached from the navigation
// must land below however tall it is now.
function trackHeaderHeight() {
  const header = document.querySelector('header');
  const update = () => document.documentElement.style.setProperty('--header-height', `${header.offsetHeight}px`);
  update();
  new ResizeObserver(update).observe(header);
}
trackHeaderHeight();

function setLive(state) {
  const live = document.getElementById('live');
  live.dataset.state = state;
  live.textContent = state;
}

let source;

function connect() {
  source?.close();
  const query = new URLSearchParams({ windowHours: document.getElementById('window').value });
  const cluster = document.getElementById('cluster').value;
  if (cluster) query.set('cluster', cluster);
  source = new EventSource(`/ui/stream?${query}`);
  source.addEventListener('overview', (e) => {
    setLive('live');
    render(JSON.parse(e.data));
  });
  source.addEventListener('failure', () => setLive('reconnecting'));
  // EventSource reconnects by itself; say so meanwhile.
  source.onerror = () => setLive('reconnecting');
}

document.getElementById('window').addEventListener('change', connect);
document.getElementById('cluster').addEventListener('change', connect);

// The page arrives with its first state; the stream brings every later one.
const initial = document.getElementById('initial-overview');
if (initial) render(JSON.parse(initial.textContent));
// Opened after the load event: a page that has painted is complete even while the stream stays open.
if (document.readyState === 'complete') connect();
else window.addEventListener('load', () => setTimeout(connect, 0), { once: true });
