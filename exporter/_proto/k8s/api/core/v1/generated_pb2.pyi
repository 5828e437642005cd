from exporter._proto.k8s.apimachinery.pkg.api.resource import generated_pb2 as _generated_pb2
from exporter._proto.k8s.apimachinery.pkg.apis.meta.v1 import generated_pb2 as _generated_pb2_1
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Container(_message.Message):
    __slots__ = ("name", "resources", "restartPolicy")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    RESTARTPOLICY_FIELD_NUMBER: _ClassVar[int]
    name: str
    resources: ResourceRequirements
    restartPolicy: str
    def __init__(self, name: _Optional[str] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ..., restartPolicy: _Optional[str] = ...) -> None: ...

class ContainerExtendedResourceRequest(_message.Message):
    __slots__ = ("containerName", "resourceName", "requestName")
    CONTAINERNAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCENAME_FIELD_NUMBER: _ClassVar[int]
    REQUESTNAME_FIELD_NUMBER: _ClassVar[int]
    containerName: str
    resourceName: str
    requestName: str
    def __init__(self, containerName: _Optional[str] = ..., resourceName: _Optional[str] = ..., requestName: _Optional[str] = ...) -> None: ...

class Pod(_message.Message):
    __slots__ = ("metadata", "spec", "status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _generated_pb2_1.ObjectMeta
    spec: PodSpec
    status: PodStatus
    def __init__(self, metadata: _Optional[_Union[_generated_pb2_1.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodSpec, _Mapping]] = ..., status: _Optional[_Union[PodStatus, _Mapping]] = ...) -> None: ...

class PodExtendedResourceClaimStatus(_message.Message):
    __slots__ = ("requestMappings", "resourceClaimName")
    REQUESTMAPPINGS_FIELD_NUMBER: _ClassVar[int]
    RESOURCECLAIMNAME_FIELD_NUMBER: _ClassVar[int]
    requestMappings: _containers.RepeatedCompositeFieldContainer[ContainerExtendedResourceRequest]
    resourceClaimName: str
    def __init__(self, requestMappings: _Optional[_Iterable[_Union[ContainerExtendedResourceRequest, _Mapping]]] = ..., resourceClaimName: _Optional[str] = ...) -> None: ...

class PodSpec(_message.Message):
    __slots__ = ("initContainers", "containers", "nodeName", "overhead", "resources")
    class OverheadEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _generated_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_generated_pb2.Quantity, _Mapping]] = ...) -> None: ...
    INITCONTAINERS_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    initContainers: _containers.RepeatedCompositeFieldContainer[Container]
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    nodeName: str
    overhead: _containers.MessageMap[str, _generated_pb2.Quantity]
    resources: ResourceRequirements
    def __init__(self, initContainers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., nodeName: _Optional[str] = ..., overhead: _Optional[_Mapping[str, _generated_pb2.Quantity]] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ...) -> None: ...

class PodStatus(_message.Message):
    __slots__ = ("phase", "message", "reason", "qosClass", "extendedResourceClaimStatus")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    QOSCLASS_FIELD_NUMBER: _ClassVar[int]
    EXTENDEDRESOURCECLAIMSTATUS_FIELD_NUMBER: _ClassVar[int]
    phase: str
    message: str
    reason: str
    qosClass: str
    extendedResourceClaimStatus: PodExtendedResourceClaimStatus
    def __init__(self, phase: _Optional[str] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., qosClass: _Optional[str] = ..., extendedResourceClaimStatus: _Optional[_Union[PodExtendedResourceClaimStatus, _Mapping]] = ...) -> None: ...

class ResourceRequirements(_message.Message):
    __slots__ = ("limits", "requests")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _generated_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_generated_pb2.Quantity, _Mapping]] = ...) -> None: ...
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _generated_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_generated_pb2.Quantity, _Mapping]] = ...) -> None: ...
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.MessageMap[str, _generated_pb2.Quantity]
    requests: _containers.MessageMap[str, _generated_pb2.Quantity]
    def __init__(self, limits: _Optional[_Mapping[str, _generated_pb2.Quantity]] = ..., requests: _Optional[_Mapping[str, _generated_pb2.Quantity]] = ...) -> None: ...
