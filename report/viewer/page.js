// The step view page (`ampc inspect ... --html`): draws the step's JSON (report/
// step_view.h) as nested boxes, phase > name scope > node, and lays them out itself: each
// expanded scope is a small layered graph of its children (ranks by the longest path along
// execution order, each row placed at its predecessors' barycentre), so expanding or
// collapsing a scope only lays out again what is visible. No library, nothing fetched.
(function () {
  'use strict';
  const SVGNS = 'http://www.w3.org/2000/svg';
  const data = JSON.parse(document.getElementById('step-data').textContent);
  const nodes = data.nodes;
  const tensors = data.tensors;
  const $ = (id) => document.getElementById(id);
  const canvas = $('canvas');
  const viewport = $('viewport');

  const DTYPE_FILL = { fp32: '#9ecae1', fp64: '#9ecae1', fp16: '#fdae6b', bf16: '#a1d99b',
    bool: '#d9d9d9', '': '#ffffff' };
  const PHASE_FILL = { inputs: '#f7f7f7', forward: '#eef5fb', backward: '#fbf1e8',
    'loss scaling': '#f3ecf8', optimizer: '#edf7ec', 'skip-step': '#fde0dd',
    statistics: '#f5f5f5' };
  const dtypeFill = (d) => (d in DTYPE_FILL ? DTYPE_FILL[d] : '#bcbddc');

  // ---- The scope tree: phase groups, then one group per name-scope prefix. ----
  const groups = new Map();  // id -> {id, label, depth, parent, children, members, first}
  const root = { id: '', label: '', depth: -1, parent: null, children: [], members: [] };
  const nodeGroups = [];     // node index -> its groups, phase first
  function child(parent, id, label, depth, first) {
    let g = groups.get(id);
    if (!g) {
      g = { id, label, depth, parent, children: [], members: [], first };
      groups.set(id, g);
      parent.children.push({ key: 'g:' + id, group: g, first });
    }
    return g;
  }
  const producers = tensors.map(() => []);
  const readers = tensors.map(() => []);
  nodes.forEach((n, i) => {
    const chain = [];
    let g = child(root, 'p:' + n.phase, n.phase, 0, i);
    chain.push(g);
    let path = '';
    n.scope.forEach((s, d) => {
      path += '/' + s;
      g = child(g, 'p:' + n.phase + '|' + path, path, d + 1, i);
      chain.push(g);
    });
    g.children.push({ key: 'n:' + i, node: i, first: i });
    chain.forEach((c) => c.members.push(i));
    nodeGroups.push(chain);
    n.in.forEach((t) => readers[t].push(i));
    n.out.forEach((t) => producers[t].push(i));
    n.lname = n.name.toLowerCase();
  });
  root.children.sort((a, b) => data.phases.indexOf(a.group.label) -
    data.phases.indexOf(b.group.label));

  // Scopes deeper than collapse_depth open collapsed; phases always open.
  const expanded = new Set();
  function resetExpansion(depth) {
    expanded.clear();
    for (const g of groups.values())
      if (g.depth === 0 || depth === 0 || g.depth < depth) expanded.add(g.id);
  }
  resetExpansion(data.collapse_depth);

  // The visible box that stands for node i: its outermost collapsed group, or itself.
  function path(i) {
    const keys = [];
    for (const g of nodeGroups[i]) {
      keys.push('g:' + g.id);
      if (!expanded.has(g.id)) return keys;
    }
    keys.push('n:' + i);
    return keys;
  }

  // ---- Overlays: the fill of a node or of a collapsed group. ----
  let overlay = 'precision';
  let maxCastBytes = 1;
  nodes.forEach((n) => { if (n.cast && n.cast_bytes > maxCastBytes) maxCastBytes = n.cast_bytes; });
  function gradOf(n) {
    if (n.grad) return n.grad;
    for (const t of n.out) if (tensors[t].grad) return tensors[t].grad;
    return null;
  }
  // Gradient range against fp16: 0 none, 1 normal, 2 partly subnormal, 3 flushes, 4 overflows.
  function gradClass(n) {
    const g = gradOf(n);
    if (!g) return 0;
    const u = g.unscaled || {};
    if ((u.overflow || 0) > 0 || (g.nonfinite || 0) > 0) return 4;
    if ((u.flush || 0) > 0) return 3;
    if ((u.subnormal || 0) > 0) return 2;
    return 1;
  }
  const GRAD_FILL = ['#ffffff', '#74c476', '#fdd0a2', '#6baed6', '#d62728'];
  function castFill(bytes) {
    if (!bytes) return '#eeeeee';
    const f = Math.log(1 + bytes) / Math.log(1 + maxCastBytes);
    const c = Math.round(230 - 150 * f);
    return 'rgb(250,' + c + ',' + c + ')';
  }
  function fillOfNodes(members) {
    if (overlay === 'casts') {
      let bytes = 0;
      for (const i of members) if (nodes[i].cast) bytes += Math.max(0, nodes[i].cast_bytes);
      return castFill(bytes);
    }
    if (overlay === 'grad') {
      let worst = 0;
      for (const i of members) worst = Math.max(worst, gradClass(nodes[i]));
      return GRAD_FILL[worst];
    }
    const count = {};
    let best = '', most = -1;
    for (const i of members) {
      const d = nodes[i].dtype;
      count[d] = (count[d] || 0) + 1;
      if (count[d] > most) { most = count[d]; best = d; }
    }
    return dtypeFill(best);
  }
  function legend() {
    let rows;
    if (overlay === 'casts') {
      rows = [[castFill(maxCastBytes), 'most bytes moved by inserted casts'],
        [castFill(1), 'few bytes'], ['#eeeeee', 'no inserted cast']];
    } else if (overlay === 'grad') {
      rows = [[GRAD_FILL[1], 'gradient normal in fp16'], [GRAD_FILL[2], 'partly subnormal'],
        [GRAD_FILL[3], 'partly flushed to zero'], [GRAD_FILL[4], 'overflow or non-finite'],
        [GRAD_FILL[0], 'no statistics (--grad-stats)']];
    } else {
      rows = [['#9ecae1', 'fp32'], ['#fdae6b', 'fp16'], ['#a1d99b', 'bf16'],
        ['#bcbddc', 'integer'], ['#d9d9d9', 'bool']];
    }
    $('legend').innerHTML = '<h4>' + overlay + '</h4>' + rows.map((r) =>
      '<div><span class="swatch" style="background:' + r[0] + '"></span>' + r[1] + '</div>')
      .join('') + '<div><span class="swatch" style="border:3px solid #d62728"></span>' +
      'inserted cast</div><div><span class="swatch" style="background:#d62728;height:3px">' +
      '</span>found_inf edge (skip-step)</div>';
  }

  // ---- Layout. ----
  const PAD = 10, TITLE = 18, HGAP = 14, VGAP = 26;
  const shortName = (name) => name.slice(name.lastIndexOf('/') + 1) || name;
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '\u2026' : s);
  function textWidth(s) { return 6 * s.length + 12; }

  // Visible edges, each lifted to the group that holds both ends (its lowest common
  // ancestor): edgesIn[groupId] = [[childKeyFrom, childKeyTo, foundInf]].
  function liftEdges() {
    const edgesIn = new Map();
    const seen = new Set();
    const visible = [];  // [fromPath, toPath, foundInf] for drawing
    const paths = nodes.map((_, i) => path(i));
    tensors.forEach((t, ti) => {
      for (const p of producers[ti]) {
        for (const r of readers[ti]) {
          const a = paths[p], b = paths[r];
          const ka = a[a.length - 1], kb = b[b.length - 1];
          if (ka === kb) continue;
          const key = ka + '>' + kb + (t.found_inf ? '!' : '');
          if (seen.has(key)) continue;
          seen.add(key);
          visible.push([ka, kb, t.found_inf]);
          let l = 0;
          while (l < a.length && l < b.length && a[l] === b[l]) l++;
          if (l >= a.length || l >= b.length) continue;
          const container = l === 0 ? '' : a[l - 1].slice(2);
          if (!edgesIn.has(container)) edgesIn.set(container, []);
          edgesIn.get(container).push([a[l], b[l]]);
        }
      }
    });
    return { edgesIn, visible };
  }

  function leafBox(i) {
    const n = nodes[i];
    const w = Math.min(200, Math.max(70, textWidth(n.op), textWidth(clip(shortName(n.name), 30))));
    return { key: 'n:' + i, node: i, w, h: 34 };
  }
  function collapsedBox(g) {
    const label = clip(g.label, 40);
    const w = Math.min(260, Math.max(90, textWidth(label)));
    return { key: 'g:' + g.id, group: g, collapsed: true, w, h: 40, label };
  }
  function layoutGroup(g, edgesIn) {
    const items = g.children.map((c) => {
      if (c.node !== undefined) return leafBox(c.node);
      return expanded.has(c.group.id) ? layoutGroup(c.group, edgesIn) : collapsedBox(c.group);
    });
    const index = new Map(items.map((it, k) => [it.key, k]));
    const preds = items.map(() => []);
    for (const [a, b] of edgesIn.get(g.id) || []) {
      const ia = index.get(a), ib = index.get(b);
      if (ia === undefined || ib === undefined) continue;
      if (ia < ib) preds[ib].push(ia);  // execution order: back edges do not rank
    }
    const rank = items.map(() => 0);
    items.forEach((_, k) => { for (const p of preds[k]) rank[k] = Math.max(rank[k], rank[p] + 1); });
    // A source (a weight's cast, a constant) moves down to just above its first reader.
    const firstSucc = items.map(() => Infinity);
    items.forEach((_, k) => { for (const p of preds[k]) firstSucc[p] = Math.min(firstSucc[p], rank[k]); });
    items.forEach((_, k) => { if (!preds[k].length && isFinite(firstSucc[k])) rank[k] = firstSucc[k] - 1; });
    const rows = [];
    items.forEach((_, k) => { (rows[rank[k]] = rows[rank[k]] || []).push(k); });
    const cx = items.map(() => 0);
    let y = g.id === '' ? 0 : TITLE + PAD;
    let right = 0;
    let left = Infinity;
    for (const row of rows) {
      if (!row) continue;
      let fallback = 0;
      const bary = row.map((k) => {
        const ps = preds[k];
        if (!ps.length) return null;
        return ps.reduce((s, p) => s + cx[p], 0) / ps.length;
      });
      const order = row.map((k, j) => [k, bary[j]]);
      order.sort((u, v) => (u[1] === null ? 1e18 : u[1]) - (v[1] === null ? 1e18 : v[1]));
      let prevRight = -Infinity;
      let rowH = 0;
      for (const [k, b] of order) {
        const it = items[k];
        let x = b === null ? Math.max(prevRight + HGAP, fallback) : b - it.w / 2;
        if (x < prevRight + HGAP) x = prevRight + HGAP;
        if (!isFinite(x)) x = 0;
        it.x = x;
        it.y = y;
        cx[k] = x + it.w / 2;
        prevRight = x + it.w;
        fallback = prevRight + HGAP;
        rowH = Math.max(rowH, it.h);
        right = Math.max(right, prevRight);
        left = Math.min(left, x);
      }
      y += rowH + VGAP;
    }
    if (!isFinite(left)) left = 0;
    const inset = g.id === '' ? 0 : PAD;
    for (const it of items) it.x += inset - left;
    const w = Math.max(right - left + 2 * inset, textWidth(g.label || ''));
    const h = y - VGAP + (g.id === '' ? 0 : PAD);
    return { key: 'g:' + g.id, group: g, items, w, h: Math.max(h, TITLE + PAD) };
  }

  // ---- Drawing. ----
  const pos = new Map();  // visible key -> {x, y, w, h} in absolute coordinates
  const elementOf = new Map();  // visible key -> its <g>
  let selected = -1;
  let hits = new Set();
  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function drawBox(it, parent, ox, oy) {
    const x = ox + it.x, y = oy + it.y;
    pos.set(it.key, { x, y, w: it.w, h: it.h });
    if (it.items) {
      const g = el('g', { class: 'group', 'data-group': it.group.id }, parent);
      el('rect', { x, y, width: it.w, height: it.h, rx: 6,
        fill: it.group.depth === 0 ? PHASE_FILL[it.group.label] || '#f5f5f5' : 'rgba(0,0,0,0.03)' }, g);
      const title = el('text', { x: x + 6, y: y + 13 }, g);
      title.textContent = '\u25BE ' + (it.group.depth === 0 ? it.group.label : clip(it.group.label, 60)) +
        ' (' + it.group.members.length + ')';
      title.addEventListener('click', (ev) => { ev.stopPropagation(); toggle(it.group.id); });
      elementOf.set(it.key, g);
      for (const c of it.items) drawBox(c, g, x, y);
      return;
    }
    const members = it.group ? it.group.members : [it.node];
    const g = el('g', { class: 'node' }, parent);
    const rect = el('rect', { x, y, width: it.w, height: it.h, rx: 4, fill: fillOfNodes(members) }, g);
    const t1 = el('text', { x: x + 5, y: y + 14 }, g);
    const t2 = el('text', { x: x + 5, y: y + 27 }, g);
    if (it.group) {
      g.classList.add('scope');
      g.setAttribute('data-group', it.group.id);
      t1.textContent = '\u25B8 ' + it.label;
      let casts = 0;
      for (const i of members) casts += nodes[i].cast ? 1 : 0;
      t2.textContent = members.length + ' nodes' + (casts ? ', ' + casts + ' casts' : '');
      if (casts) g.classList.add('cast');
      g.addEventListener('click', (ev) => { ev.stopPropagation(); toggle(it.group.id); });
    } else {
      const n = nodes[it.node];
      g.setAttribute('data-node', n.name);
      if (n.cast) g.classList.add('cast');
      if (it.node === selected) g.classList.add('selected');
      if (hits.has(it.node)) g.classList.add('hit');
      t1.textContent = n.op + (n.dtype ? ' \u00B7 ' + n.dtype : '');
      t2.textContent = clip(shortName(n.name), 30);
      const tip = el('title', {}, g);
      tip.textContent = n.name + (n.rule ? '\n' + n.rule : '') + (n.kernel ? '\nkernel ' + n.kernel : '');
      g.addEventListener('click', (ev) => { ev.stopPropagation(); select(it.node); });
    }
    rect.setAttribute('data-fill', rect.getAttribute('fill'));
    elementOf.set(it.key, g);
  }
  function drawEdges(visible) {
    const layer = el('g', { class: 'edges' }, null);
    for (const [a, b, inf] of visible) {
      const p = pos.get(a), q = pos.get(b);
      if (!p || !q) continue;
      const x1 = p.x + p.w / 2, y1 = p.y + p.h, x2 = q.x + q.w / 2, y2 = q.y;
      const dy = Math.max(20, Math.abs(y2 - y1) / 2);
      el('path', { class: inf ? 'edge found-inf' : 'edge',
        d: 'M' + x1 + ',' + y1 + ' C' + x1 + ',' + (y1 + dy) + ' ' + x2 + ',' + (y2 - dy) + ' ' + x2 + ',' + y2 }, layer);
    }
    return layer;
  }

  let lastRenderMs = 0;
  let boxes = 0;
  function render() {
    const t = performance.now();
    pos.clear();
    elementOf.clear();
    const { edgesIn, visible } = liftEdges();
    const top = layoutGroup(root, edgesIn);
    viewport.textContent = '';
    const boxLayer = el('g', {}, null);
    for (const it of top.items) drawBox(it, boxLayer, 0, 0);
    viewport.appendChild(boxLayer);
    viewport.appendChild(drawEdges(visible));
    boxes = 0;
    for (const k of pos.keys()) if (!k.startsWith('g:') || !expanded.has(k.slice(2))) boxes++;
    viewport.getBBox();  // forces the browser's layout of what was drawn into the time
    lastRenderMs = performance.now() - t;
    status();
  }
  function status(extra) {
    $('status').textContent = nodes.length + ' nodes, ' + boxes + ' boxes shown, laid out and drawn in ' +
      lastRenderMs.toFixed(0) + ' ms' + (extra ? ' \u00B7 ' + extra : '');
  }

  // ---- Pan and zoom. ----
  const view = { x: 20, y: 20, k: 1 };
  function applyView() {
    viewport.setAttribute('transform', 'translate(' + view.x + ',' + view.y + ') scale(' + view.k + ')');
  }
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const mx = ev.clientX - r.left, my = ev.clientY - r.top;
    const f = Math.exp(-ev.deltaY * 0.0015);
    view.x = mx - (mx - view.x) * f;
    view.y = my - (my - view.y) * f;
    view.k *= f;
    applyView();
  }, { passive: false });
  let drag = null;
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX - view.x, y: ev.clientY - view.y }; });
  window.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    view.x = ev.clientX - drag.x;
    view.y = ev.clientY - drag.y;
    applyView();
  });
  window.addEventListener('mouseup', () => { drag = null; });
  function fit() {
    const b = viewport.getBBox();
    const W = canvas.clientWidth || 800, H = canvas.clientHeight || 600;
    if (!b.width || !b.height) return;
    view.k = Math.min(W / (b.width + 40), H / (b.height + 40), 1.5);
    view.x = (W - b.width * view.k) / 2 - b.x * view.k;
    view.y = 20 - b.y * view.k;
    applyView();
  }
  function centerOn(key) {
    const p = pos.get(key);
    if (!p) return;
    const W = canvas.clientWidth || 800, H = canvas.clientHeight || 600;
    view.k = Math.max(view.k, 0.8);
    view.x = W / 2 - (p.x + p.w / 2) * view.k;
    view.y = H / 2 - (p.y + p.h / 2) * view.k;
    applyView();
  }

  // ---- Interaction. ----
  function toggle(id) {
    if (expanded.has(id)) {
      if (groups.get(id).depth === 0) return;  // phases stay open
      expanded.delete(id);
    } else {
      expanded.add(id);
    }
    render();
  }
  function expand(id) {
    if (!groups.has(id)) return false;
    for (let g = groups.get(id); g && g.id !== ''; g = g.parent) expanded.add(g.id);
    render();
    return true;
  }
  function collapse(id) {
    if (!groups.has(id) || groups.get(id).depth === 0) return false;
    expanded.delete(id);
    render();
    return true;
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  function bytes(b) {
    if (b < 0) return '?';
    if (b < 1024) return b + ' B';
    if (b < 1 << 20) return (b / 1024).toFixed(1) + ' KiB';
    return (b / (1 << 20)).toFixed(2) + ' MiB';
  }
  function tensorRows(list, arrow) {
    return list.map((t) => {
      const x = tensors[t];
      const where = x.internal ? 'inside the fused kernel (no buffer)' :
        x.region ? x.region + ' @ ' + x.offset + (x.alias_of ? ' (shares ' + esc(x.alias_of) + ')' : '') : 'not planned';
      const other = arrow === 'in' ? producers[t] : readers[t];
      const link = other.length ? ' <a href="#" data-go="' + other[0] + '">' + (arrow === 'in' ? 'producer' : 'reader') + '</a>' : '';
      let g = '';
      if (x.grad) g = '<br>gradient |x| max ' + x.grad.max_abs + ', min non-zero ' + x.grad.min_nonzero_abs;
      return '<tr><td>' + esc(x.name) + link + '<br>' + esc(x.type) + ', ' + bytes(x.bytes) +
        '<br>' + where + (x.found_inf ? '<br><b>found_inf: skips the step</b>' : '') + g + '</td></tr>';
    }).join('');
  }
  function select(i) {
    selected = i;
    const n = nodes[i];
    for (const e of viewport.querySelectorAll('.node.selected, .node.mate'))
      e.classList.remove('selected', 'mate');
    const e = elementOf.get('n:' + i);
    if (e) e.classList.add('selected');
    // The other nodes of its fused kernel (the same plan step).
    let mates = 0;
    if (n.kernel) {
      nodes.forEach((m, j) => {
        if (j === i || m.step !== n.step) return;
        mates++;
        const me = elementOf.get('n:' + j);
        if (me) me.classList.add('mate');
      });
    }
    const row = (k, v) => (v === '' || v === undefined || v === null ? '' : '<tr><td>' + k + '</td><td>' + v + '</td></tr>');
    const g = gradOf(n);
    $('details').innerHTML = '<h3 id="detail-name">' + esc(n.name) + '</h3><table>' +
      row('op', esc(n.op)) + row('phase', esc(n.phase)) + row('scope', esc('/' + n.scope.join('/'))) +
      row('dtype', esc(n.dtype || 'no float math')) + row('rule', esc(n.rule)) +
      row('kernel', n.kernel ? esc(n.kernel) + ' (plan step ' + n.step + ', with ' + mates + ' other nodes, outlined)' :
        (n.step >= 0 ? 'plan step ' + n.step : '')) +
      row('inserted cast', n.cast ? bytes(n.cast_bytes) + ' moved per step' : '') +
      row('change', esc(n.change)) +
      row('gradient', g ? esc(g.tensor) + ': |x| max ' + g.max_abs + ', min non-zero ' + g.min_nonzero_abs +
        ', flush ' + ((g.unscaled || {}).flush || 0) + ', overflow ' + ((g.unscaled || {}).overflow || 0) : '') +
      '</table><h4>inputs</h4><table>' + tensorRows(n.in, 'in') + '</table><h4>outputs</h4><table>' +
      tensorRows(n.out, 'out') + '</table><div id="legend"></div>';
    legend();
    for (const a of $('details').querySelectorAll('a[data-go]'))
      a.addEventListener('click', (ev) => { ev.preventDefault(); reveal(+a.getAttribute('data-go')); });
  }
  function reveal(i) {
    for (const g of nodeGroups[i]) expanded.add(g.id);
    hits = new Set([i]);
    render();
    select(i);
    centerOn('n:' + i);
    return !!elementOf.get('n:' + i);
  }
  // Nodes whose name, or one of whose tensors' names, contains the query (case-insensitive);
  // exact name matches first.
  function search(query) {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const exact = [], other = [];
    nodes.forEach((n, i) => {
      if (n.lname === q) exact.push(i);
      else if (n.lname.includes(q) || n.in.some((t) => tensors[t].name.toLowerCase().includes(q)) ||
               n.out.some((t) => tensors[t].name.toLowerCase().includes(q))) other.push(i);
    });
    return exact.concat(other);
  }
  let found = [];
  function showResults() {
    found = search($('search').value);
    const box = $('results');
    box.innerHTML = found.slice(0, 200).map((i) => '<div data-i="' + i + '">' + esc(nodes[i].name) +
      ' <span class="hint">' + esc(nodes[i].op) + ', ' + esc(nodes[i].phase) + '</span></div>').join('');
    for (const d of box.children) d.addEventListener('click', () => reveal(+d.getAttribute('data-i')));
    status($('search').value ? found.length + ' found' : '');
  }
  $('search').addEventListener('input', showResults);
  $('search').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && found.length) reveal(found[0]);
    if (ev.key === 'Escape') { $('search').value = ''; showResults(); }
  });
  $('overlay').addEventListener('change', () => { overlay = $('overlay').value; render(); legend(); });
  $('expand-all').addEventListener('click', () => { resetExpansion(0); render(); });
  $('collapse-all').addEventListener('click', () => { resetExpansion(1); render(); fit(); });
  $('fit').addEventListener('click', fit);
  $('title').textContent = data.title + ' \u00B7 ' + data.precision + ' \u00B7 ' + data.origin;

  render();
  legend();
  fit();
  const firstRenderMs = performance.now();  // since navigation start: parse, layout, drawing
  document.body.setAttribute('data-render-ms', firstRenderMs.toFixed(1));
  window.ampcView = {
    data, search, reveal, expand, collapse, render, fit,
    groupIds: () => Array.from(groups.keys()),
    visibleNodes: () => Array.from(viewport.querySelectorAll('[data-node]')).map((e) => e.getAttribute('data-node')),
    firstRenderMs,
    lastRenderMs: () => lastRenderMs,
    setOverlay: (o) => { overlay = o; $('overlay').value = o; render(); legend(); },
  };
})();
