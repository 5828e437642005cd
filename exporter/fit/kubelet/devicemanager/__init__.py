"""The device manager (``pkg/kubelet/cm/devicemanager``, v1.37.2).

- ``topology_hints``: its hints (``generateDeviceTopologyHints``);
- ``manager``: its devices per resource and their allocation (``devicesToAllocate``).
"""
