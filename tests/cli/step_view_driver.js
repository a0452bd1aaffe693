// Appended to the step view page by step_view_browser_test.cc after a line that defines
// EXPECT = {nodes: [names], scope: group id, scopeNode: name, searchFor: name}. Drives the
// page as a user would (expands a scope, types into the search box, opens a result) and
// writes what it saw into <pre id="test-out"> for the test to read from the DOM dump.
(function () {
  const out = {};
  try {
    const v = window.ampcView;
    out.renderMs = v.firstRenderMs;
    out.nodes = v.data.nodes.length;
    out.visibleAtLoad = v.visibleNodes().length;
    out.resources = performance.getEntriesByType('resource').map((e) => e.name);
    const names = v.data.nodes.map((n) => n.name);
    // Every node of the step is found by its name, the node itself first.
    out.missing = EXPECT.nodes.filter((n) => {
      const r = v.search(n);
      return !r.length || names[r[0]] !== n;
    });
    out.scopeNodeVisibleAtLoad = v.visibleNodes().includes(EXPECT.scopeNode);
    out.expanded = v.expand(EXPECT.scope);
    out.scopeNodeVisibleAfterExpand = v.visibleNodes().includes(EXPECT.scopeNode);
    out.expandMs = v.lastRenderMs();
    // Opening results: every 40th node shows up in the drawing.
    out.notRevealed = [];
    for (let i = 0; i < names.length; i += 40) if (!v.reveal(i)) out.notRevealed.push(names[i]);
    // Typed into the search box, Enter opens the first result.
    const box = document.getElementById('search');
    box.value = EXPECT.searchFor;
    box.dispatchEvent(new Event('input'));
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    out.results = document.querySelectorAll('#results div').length;
    // The overlays: casts coloured by the bytes they move, then back to precision.
    v.setOverlay('casts');
    out.castFills = new Set(Array.from(document.querySelectorAll('.node.cast > rect'))
      .map((r) => r.getAttribute('fill'))).size;
    v.setOverlay('grad');
    v.setOverlay('precision');
    // The whole step drawn at once (reported): every scope expanded, then back to the result.
    document.getElementById('expand-all').click();
    out.expandAllMs = v.lastRenderMs();
    out.visibleExpanded = v.visibleNodes().length;
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
  } catch (e) {
    out.error = String(e) + ' ' + e.stack;
  }
  document.getElementById('test-out').textContent = JSON.stringify(out);
})();
