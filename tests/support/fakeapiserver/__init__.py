"""A fake kube-apiserver for the tests and the benchmarks: list, watch and get, as the real one
speaks them. A test fake: never part of the installed package or the image
(tests/deploy/test_dockerfile.py); the demo runs without it.

- ``server``: :class:`~.server.FakeApiServer`, the HTTP side (aiohttp), and ``python -m`` for
  measurements;
- ``store``: what it holds (objects by kind, resourceVersions, the events a watch replays);
- ``auth``: who a request comes as (bearer tokens, client certificates, TLS);
- ``objects``: Node, Pod, ResourceSlice, DeviceTaintRule and ``Status`` objects by hand;
- ``cluster``: a simulated node and its pods put into the store;
- ``slices``: the ResourceSlices a simulator profile's DRA drivers publish.
"""
