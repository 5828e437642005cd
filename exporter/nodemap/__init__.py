"""The node map: one refresh drawn as a picture of the node, NUMA node by NUMA node (``/numa``,
``snapshot --format svg|html``).

- ``picture``: the map as plain data (CPUs and their cores, memory bars, device chips, what
  spans NUMA nodes, the shapes' answers);
- ``build``: that data from one refresh (snapshot, accounting, topology, DRA inventory, fit
  answers), never from the kubelet;
- ``svg``: the layout and the SVG, every kubelet string escaped;
- ``page``: the HTML page around it (reload, snapshot age, Content-Security-Policy);
- ``pagecache``: ``/numa`` as served: the page of the last refresh, drawn in the refresh
  loop's worker when asked, at most once per refresh and reload period.

``serve`` imports ``pagecache``; the drawing modules are imported only when a map is asked
for. Never imports refresh/, web/ or commands/ (tests/unit/test_layers.py).
"""
