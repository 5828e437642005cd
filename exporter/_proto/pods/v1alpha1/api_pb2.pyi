from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNSPECIFIED: _ClassVar[EventType]
    ADDED: _ClassVar[EventType]
    MODIFIED: _ClassVar[EventType]
    DELETED: _ClassVar[EventType]
    INITIAL_SYNC_COMPLETE: _ClassVar[EventType]
UNSPECIFIED: EventType
ADDED: EventType
MODIFIED: EventType
DELETED: EventType
INITIAL_SYNC_COMPLETE: EventType

class WatchPodsEvent(_message.Message):
    __slots__ = ("type", "pod")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    type: EventType
    pod: bytes
    def __init__(self, type: _Optional[_Union[EventType, str]] = ..., pod: _Optional[bytes] = ...) -> None: ...

class ListPodsResponse(_message.Message):
    __slots__ = ("pods",)
    PODS_FIELD_NUMBER: _ClassVar[int]
    pods: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, pods: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetPodResponse(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: bytes
    def __init__(self, pod: _Optional[bytes] = ...) -> None: ...

class WatchPodsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPodsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPodRequest(_message.Message):
    __slots__ = ("podUID",)
    PODUID_FIELD_NUMBER: _ClassVar[int]
    podUID: str
    def __init__(self, podUID: _Optional[str] = ...) -> None: ...
