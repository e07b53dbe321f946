"""The one serializer of run.json's records: dataclass fields are JSON keys, type hints say how.

Every record of the run document (harness.data.results: RunDocument, CellResult, CaseResult,
Attempt, HarnessCost; harness.data.records: energy and GPU state) subclasses JsonRecord and is
a dataclass; to_dict and from_dict walk its fields in order, so a new key costs one edit, the
field (pyperf's `Run._json_load` reads its runs the same way: the type knows its keys).

Writing: a field's metadata says when its key is written, ALWAYS (None and empty included) or
IF_SET (only where the value differs from the field's default, so a key older documents lack
stays absent rather than null); a field without either follows its class's WRITE_UNMARKED.
SKIP fields are no key of their own (a class that writes them itself overrides to_dict).
Reading: a missing key, or null where the field's type admits no None, reads as the field's
default, so older documents load; the hints turn values back into enums, nested records and
lists of records (any class with from_dict/to_dict, records of other modules included), and
a JSON list as a tuple where the field is a `tuple[X, ...]` (a frozen record's list).
Unknown keys are kept in the record's `extra_fields` and written back after the known ones
where the class has that field, and dropped where it has not (as each record did before).
Layout versions are not handled here: harness.data.upgrade brings older documents up first.
"""

from __future__ import annotations

import enum
import functools
import types
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from typing import Any, ClassVar, TypeAlias, TypeVar, Union, get_args, get_origin, get_type_hints

Record = TypeVar("Record", bound="JsonRecord")

# When a field's key is written: dataclasses.field(metadata=ALWAYS), or a class's
# WRITE_UNMARKED for the fields that say nothing.
WRITE_ALWAYS, WRITE_IF_SET, WRITE_SKIP = "always", "if set", "skip"
ALWAYS: Mapping[str, str] = types.MappingProxyType({"json": WRITE_ALWAYS})
IF_SET: Mapping[str, str] = types.MappingProxyType({"json": WRITE_IF_SET})
SKIP: Mapping[str, str] = types.MappingProxyType({"json": WRITE_SKIP})
EXTRA_FIELDS = "extra_fields"  # the field that keeps a document's unknown keys

# A JSON value as json.loads gives it, and one object of them: what to_dict returns, and the
# type of the unknown keys a record keeps without reading them.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]


def _policy(item: Field[Any], unmarked: str) -> str:
    return str(item.metadata.get("json", unmarked))


_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    """The resolved type of each field of a record class (annotations are strings here)."""
    if cls not in _HINTS:  # JsonValue names itself: resolvable from any record's module
        _HINTS[cls] = get_type_hints(cls, localns={"JsonValue": JsonValue})
    return _HINTS[cls]


@functools.cache  # hints are hashable and few; a run.json's thousands of records ask again
def _without_none(hint: Any) -> tuple[Any, bool]:
    """(the type inside `X | None`, whether None is allowed) of one field's type hint."""
    if get_origin(hint) in (Union, types.UnionType):
        others = [arg for arg in get_args(hint) if arg is not type(None)]
        allows_none = len(others) < len(get_args(hint))
        return (others[0] if len(others) == 1 else Any), allows_none
    return hint, hint is Any


def _is_record_type(kind: Any) -> bool:
    """A class that reads and writes itself (a JsonRecord, or another module's record)."""
    return isinstance(kind, type) and hasattr(kind, "from_dict") and hasattr(kind, "to_dict")


def decode(hint: Any, value: Any) -> Any:
    """A JSON value read back as the type HINT says (records, enums, lists of them, copies)."""
    kind, _ = _without_none(hint)
    if value is None:
        return None
    if kind is Any:  # a value of several JSON types (a batch size, a name): as stored
        return value
    if get_origin(kind) is None and isinstance(kind, type) and isinstance(value, kind):
        return list(value) if isinstance(value, list) else dict(value) if isinstance(
            value, dict) else value  # already typed (containers copied)
    if _is_record_type(kind):
        return kind.from_dict(value) if isinstance(value, dict) else None
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    origin = get_origin(kind)
    if origin is list and isinstance(value, list):
        (item_hint,) = get_args(kind) or (Any,)
        return [decode(item_hint, item) for item in value]
    if origin is tuple and isinstance(value, (list, tuple)):  # tuple[X, ...]: a frozen list
        item_hint = (get_args(kind) or (Any,))[0]
        return tuple(decode(item_hint, item) for item in value)
    if origin is dict and isinstance(value, dict):
        value_hint = (get_args(kind) or (Any, Any))[1]
        if _without_none(value_hint)[0] is Any:  # JSON values as stored (a copy)
            return dict(value)
        return {key: decode(value_hint, item) for key, item in value.items()}
    return value


def encode(value: Any) -> Any:
    """A field's value as JSON: records and enums by their own form, containers copied."""
    if _is_record_type(type(value)):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    return value


def default_of(item: Field[Any]) -> Any:
    """A field's default value (a fresh one for factories); MISSING when it has none."""
    if item.default_factory is not MISSING:
        return item.default_factory()
    return item.default


def _empty_of(hint: Any) -> Any:
    """What a missing or null container without a default reads as: an empty one."""
    kind, _ = _without_none(hint)
    origin = get_origin(kind) or kind
    return origin() if origin in (list, dict) else MISSING


class JsonRecord:
    """to_dict/from_dict for a dataclass whose fields are the keys of one JSON object.

    Subclasses are dataclasses (frozen or not); this mixin holds no fields itself.
    """

    WRITE_UNMARKED: ClassVar[str] = WRITE_ALWAYS

    @classmethod
    def _fields(cls) -> tuple[Field[Any], ...]:
        return fields(cls)  # type: ignore[arg-type]  # every subclass is a dataclass

    def _written(self, item: Field[Any], value: Any) -> bool:
        """Whether to_dict writes this field's key (its metadata, else the class's policy)."""
        policy = _policy(item, self.WRITE_UNMARKED)
        return policy == WRITE_ALWAYS or (policy == WRITE_IF_SET and value != default_of(item))

    def to_dict(self) -> JsonObject:
        """The record as the JSON object run.json holds: known keys in field order, then any
        unknown ones it was read with."""
        document: JsonObject = {}
        for item in self._fields():
            if item.name == EXTRA_FIELDS or _policy(item, "") == WRITE_SKIP:
                continue
            value = getattr(self, item.name)
            if self._written(item, value):
                document[item.name] = encode(value)
        return {**document, **getattr(self, EXTRA_FIELDS, {})}

    @classmethod
    def from_dict(cls: type[Record], document: Mapping[str, Any], **given: Any) -> Record:
        """The record of one stored JSON object; GIVEN: fields the caller already read (a
        class whose key needs more than its type, as CellResult's `cell`)."""
        values: dict[str, Any] = dict(given)
        names = {item.name for item in cls._fields()}
        for item in cls._fields():
            if item.name in given or item.name == EXTRA_FIELDS or _policy(item, "") == WRITE_SKIP:
                continue
            value = read_field(item, type_hints(cls)[item.name], document)
            if value is not MISSING:
                values[item.name] = value
        if EXTRA_FIELDS in names:
            values[EXTRA_FIELDS] = {key: value for key, value in document.items()
                                    if key not in names}
        return cls(**values)  # type: ignore[call-arg]  # the subclass's dataclass constructor


def read_field(item: Field[Any], hint: Any, document: Mapping[str, Any]) -> Any:
    """One field's value from DOCUMENT: its default where the key is missing, or null and
    the type admits no None; MISSING where there is no default (the constructor refuses)."""
    value = document.get(item.name, MISSING)
    if value is MISSING or (value is None and not _without_none(hint)[1]):
        value = default_of(item)
        return _empty_of(hint) if value is MISSING else value
    return decode(hint, value)
