"""The run's sampled stacks as a pprof profile (profile.proto, gzipped): what `go tool pprof`,
speedscope, Pyroscope and Grafana read. One sample type per stack set of every cell (stacks.py):
the page faults and each system call (estimated events: samples x period), the bytes allocated
and live at the peak and at exit, the CPU time; a sample carries its value in its own type and 0
in the others, and its cell as a label. Functions keep their source file and line.

The message types are built at run time from the table below with the protobuf library (no
generated module, no hand-written encoding): the fields and numbers are profile.proto's
(github.com/google/pprof, proto/profile.proto).
"""
from __future__ import annotations

import gzip

from memsleuth.analysis import stacks
from memsleuth.errors import UsageError

PACKAGE = "perftools.profiles"
# message -> (field, number, type, repeated); every field of profile.proto that is written here.
SCHEMA = {
    "ValueType": (("type", 1, "int64", False), ("unit", 2, "int64", False)),
    "Label": (("key", 1, "int64", False), ("str", 2, "int64", False), ("num", 3, "int64", False)),
    "Sample": (("location_id", 1, "uint64", True), ("value", 2, "int64", True), ("label", 3, "Label", True)),
    "Line": (("function_id", 1, "uint64", False), ("line", 2, "int64", False)),
    "Location": (("id", 1, "uint64", False), ("mapping_id", 2, "uint64", False), ("address", 3, "uint64", False),
                 ("line", 4, "Line", True)),
    "Function": (("id", 1, "uint64", False), ("name", 2, "int64", False), ("system_name", 3, "int64", False),
                 ("filename", 4, "int64", False), ("start_line", 5, "int64", False)),
    "Mapping": (("id", 1, "uint64", False), ("filename", 5, "int64", False), ("has_functions", 7, "bool", False),
                ("has_filenames", 8, "bool", False), ("has_line_numbers", 9, "bool", False),
                ("has_inline_frames", 10, "bool", False)),
    "Profile": (("sample_type", 1, "ValueType", True), ("sample", 2, "Sample", True),
                ("mapping", 3, "Mapping", True), ("location", 4, "Location", True), ("function", 5, "Function", True),
                ("string_table", 6, "string", True), ("time_nanos", 9, "int64", False),
                ("duration_nanos", 10, "int64", False), ("comment", 13, "int64", True),
                ("default_sample_type", 14, "int64", False)),
}


def _classes() -> dict:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    scalar = {"int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
              "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
              "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
              "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL}
    f = descriptor_pb2.FileDescriptorProto(name="memsleuth_profile.proto", package=PACKAGE, syntax="proto3")
    for message, fields in SCHEMA.items():
        m = f.message_type.add(name=message)
        for name, number, type_, repeated in fields:
            fd = m.field.add(name=name, number=number)
            fd.label = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if repeated else
                        descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
            if type_ in scalar:
                fd.type = scalar[type_]
            else:
                fd.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                fd.type_name = f".{PACKAGE}.{type_}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:   # protobuf before 4.21
        factory = message_factory.MessageFactory(pool)
        get = factory.GetPrototype
    return {name: get(pool.FindMessageTypeByName(f"{PACKAGE}.{name}")) for name in SCHEMA}


def build(run) -> bytes:
    """The run's profile, serialised (not yet gzipped). UsageError when no stack was sampled."""
    sets = [(c, s) for c in run.cells for s in stacks.for_cell(c)]
    if not sets:
        raise UsageError(f"run {run.id} has no sampled stacks to write as a pprof profile (`check` samples them, "
                         "`compare --where` too)")
    cls = _classes()
    profile = cls["Profile"]()
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
            profile.string_table.append(text)
        return strings[text]

    s("")
    multi = len(run.cells) > 1
    types = []
    for c, st in sets:
        name = f"{c.label}: {st.type}" if multi else st.type
        if name not in types:
            types.append(name)
            profile.sample_type.add(type=s(name), unit=s(st.unit))
    # One mapping, the command, already symbolized: pprof names nothing itself.
    command = next((str(c.command[0]) for c in run.cells if c.command), run.name)
    profile.mapping.add(id=1, filename=s(command), has_functions=True, has_filenames=True, has_line_numbers=True,
                        has_inline_frames=True)
    functions: dict[tuple[str, str], int] = {}
    locations: dict[tuple[str, str, int], int] = {}

    def location(name: str, file: str, line: int) -> int:
        key = (name, file, line)
        if key not in locations:
            fkey = (name, file)
            if fkey not in functions:
                functions[fkey] = len(functions) + 1
                profile.function.add(id=functions[fkey], name=s(name), system_name=s(name), filename=s(file))
            locations[key] = len(locations) + 1
            loc = profile.location.add(id=locations[key], mapping_id=1)
            loc.line.add(function_id=functions[fkey], line=line)
        return locations[key]

    cell_key = s("cell")
    for c, st in sets:
        column = types.index(f"{c.label}: {st.type}" if multi else st.type)
        for frames, value in st.stacks:
            sample = profile.sample.add()
            sample.location_id.extend(location(n, f, ln) for n, f, ln, _kind in reversed(frames))   # leaf first
            values = [0] * len(types)
            values[column] = int(round(value))
            sample.value.extend(values)
            sample.label.add(key=cell_key, str=s(c.label))
    profile.comment.append(s(f"memsleuth run {run.id}: {run.name}"))
    return profile.SerializeToString()


def render(run) -> bytes:
    return gzip.compress(build(run), mtime=0)
