"""The refresh loop: read the kubelet, account, render; never on the scrape path.

- ``loop``: :class:`Refresher`, which runs the refreshes and waits between them; the CPU-heavy
  core (``RefreshCore``) runs in the worker thread;
- ``settings``: :class:`Settings`, what the loop needs to know (the CLI fills it from flags);
- ``pipeline``: one refresh's computation, decode -> filter -> ledger -> render, synchronous
  (the loop, ``snapshot`` and the benchmarks run the same code);
- ``outcome``: up, back-off and the failure log after each attempt;
- ``watch``: :class:`StateFileWatcher`, waking the loop when the kubelet's state files change
  (``--watch-path``);
- ``worker``: the thread decoding, accounting and rendering run in;
- ``issuelog``: which data issues the log reports, once per kind.

What the kubelet is asked is :mod:`exporter.kubelet.reader`'s; which /metrics sections change
is :mod:`exporter.exposition.sections`'.
"""
