"""Boxes: the slice of a full tensor that a trainer rank owns or an engine worker needs, as an
offset and an extent per dimension (the form the many-sender plan of src/planner/ownership_plan.h
checks). Built from the shardings trainers already have, without gathering anything:

- `chunk(shape, dim, chunks, index)`: torch.chunk's rounding (10 rows over 4 ranks are 3, 3, 3, 1;
  chunks past the end are empty), which DTensor's `Shard(dim)` uses;
- `from_dtensor(dt)`: the box of a DTensor's local tensor on this rank, for any mesh and any
  mix of `Shard(dim)` and `Replicate()` placements (the same dimension may be sharded by several
  mesh dimensions, in mesh order, as DTensor does); `replica` says whether other ranks hold the
  same box (a `Replicate()` mesh dimension of size > 1);
- `tp_slice(shape, dim, tp_size, tp_rank)`: a Megatron-style tensor-parallel slice, which needs the
  dimension to divide evenly (Megatron refuses otherwise, and so does this).

A `Box` indexes a full tensor: `full[box.slices()]` is the slice it names.

Publishing (a group of many senders, ABI 1.5): `Group.send` takes, per name, a whole tensor, a
DTensor (its local shard is sent with the box its placements give; `full_tensor()` is never
called) or a `Slice(local, full_shape, box, replica)` for shardings DTensor does not describe
(Megatron's TP slices: `Slice(w_local, w_shape, tp_slice(w_shape, 0, tp, rank))`).
"""
from collections import namedtuple

from .errors import InvalidArgumentError


class Box(namedtuple("Box", ["offset", "extent"])):
    """offset and extent: tuples of ints, one per dimension of the full tensor."""
    __slots__ = ()

    @property
    def shape(self):
        return tuple(self.extent)

    @property
    def numel(self):
        n = 1
        for e in self.extent:
            n *= e
        return n

    def slices(self):
        return tuple(slice(o, o + e) for o, e in zip(self.offset, self.extent))

    def __str__(self):
        return "[%s]" % ", ".join("%d:%d" % (o, o + e) for o, e in zip(self.offset, self.extent))


def full(shape):
    """The whole tensor of `shape` as a box."""
    shape = _shape(shape)
    return Box((0,) * len(shape), shape)


def _shape(shape):
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise InvalidArgumentError("a shape is a sequence of ints, not %r" % (shape,))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError("shape %s has a negative dimension" % (shape,))
    return shape


def _cut(offset, extent, dim, chunks, index):
    """torch.chunk of [offset, offset + extent) along one dimension: (offset, extent) of chunk index."""
    size = -(-extent // chunks)  # ceil
    begin = min(size * index, extent)
    return offset + begin, max(0, min(size, extent - begin))


def chunk(shape, dim, chunks, index):
    """Chunk `index` of torch.chunk(tensor of `shape`, `chunks`, dim)."""
    shape = _shape(shape)
    if not shape:
        raise InvalidArgumentError("a scalar cannot be chunked")
    if not -len(shape) <= dim < len(shape):
        raise InvalidArgumentError("chunk dimension %d is not one of the tensor's %d" % (dim, len(shape)))
    dim %= len(shape)
    if chunks < 1:
        raise InvalidArgumentError("a tensor cannot be cut into %d chunks" % chunks)
    if not 0 <= index < chunks:
        raise InvalidArgumentError("chunk %d of %d does not exist (chunks count from 0)" % (index, chunks))
    offset, extent = list((0,) * len(shape)), list(shape)
    offset[dim], extent[dim] = _cut(0, shape[dim], dim, chunks, index)
    return Box(tuple(offset), tuple(extent))


def tp_slice(shape, dim, tp_size, tp_rank):
    """Megatron's tensor-parallel slice: dimension `dim` split evenly over tp_size ranks."""
    shape = _shape(shape)
    if not -len(shape) <= dim < len(shape):
        raise InvalidArgumentError("TP dimension %d is not one of the tensor's %d" % (dim, len(shape)))
    dim %= len(shape)
    if tp_size < 1 or not 0 <= tp_rank < tp_size:
        raise InvalidArgumentError("TP rank %d of %d does not exist" % (tp_rank, tp_size))
    if shape[dim] % tp_size:
        raise InvalidArgumentError("dimension %d of shape %s (%d) does not divide over %d TP ranks"
                                   % (dim, shape, shape[dim], tp_size))
    return chunk(shape, dim, tp_size, tp_rank)


def from_placements(shape, mesh_shape, coordinate, placements):
    """The box that mesh `coordinate` holds of a tensor of `shape` distributed over a mesh of
    `mesh_shape` with `placements` (one per mesh dimension: ("shard", dim) or ("replicate",)).
    Returns (box, replica)."""
    shape = _shape(shape)
    if not (len(mesh_shape) == len(coordinate) == len(placements)):
        raise InvalidArgumentError("mesh %s, coordinate %s and placements %s differ in length"
                                   % (tuple(mesh_shape), tuple(coordinate), tuple(placements)))
    offset, extent, replica = [0] * len(shape), list(shape), False
    for size, coord, p in zip(mesh_shape, coordinate, placements):
        if p[0] == "replicate":
            replica = replica or size > 1
        elif p[0] == "shard":
            d = p[1] % len(shape) if shape else -1
            if not shape or not -len(shape) <= p[1] < len(shape):
                raise InvalidArgumentError("Shard(%d) of a tensor of %d dimensions" % (p[1], len(shape)))
            offset[d], extent[d] = _cut(offset[d], extent[d], d, size, coord)
        else:
            raise InvalidArgumentError("placement %r cannot be published: wsync takes Shard(dim) and "
                                       "Replicate() (a Partial tensor must be reduced first)" % (p,))
    return Box(tuple(offset), tuple(extent)), replica


class Slice(namedtuple("Slice", ["local", "full_shape", "box", "replica"])):
    """What a sender publishes of one tensor: `local` (a dense tensor, its elements those of `box`
    in row-major order) is `box` of a tensor of `full_shape`; `replica`: other senders hold the same
    box on purpose (data-parallel copies); it moves once, from the lowest sender rank."""
    __slots__ = ()

    def __new__(cls, local, full_shape, box, replica=False):
        full_shape = _shape(full_shape)
        if not isinstance(box, Box):
            raise InvalidArgumentError("Slice: box must be a wsync.boxes.Box, not %s" % type(box).__name__)
        if len(box.offset) != len(full_shape) or len(box.extent) != len(full_shape):
            raise InvalidArgumentError("Slice: box %s has %d dimensions, the full shape %s has %d"
                                       % (box, len(box.extent), full_shape, len(full_shape)))
        local_shape = tuple(getattr(local, "shape", box.extent))
        if tuple(int(d) for d in local_shape) != tuple(box.extent):
            raise InvalidArgumentError("Slice: the local tensor has shape %s but box %s has extent %s"
                                       % (tuple(local_shape), box, tuple(box.extent)))
        return super().__new__(cls, local, full_shape, box, bool(replica))


def is_dtensor(x):
    """A torch DTensor (without importing torch when x is something else)."""
    return type(x).__module__.startswith("torch.distributed") and hasattr(x, "placements") and hasattr(x, "to_local")


def dtensor_slice(dt):
    """The Slice a rank publishes of a DTensor: its local shard, never the full tensor."""
    shape, box, replica = from_dtensor(dt)
    return Slice(dt.to_local(), shape, box, replica)


def from_dtensor(dt):
    """(full shape, box, replica) of a torch DTensor's local tensor on this rank."""
    from torch.distributed.tensor import Replicate, Shard
    mesh = dt.device_mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        raise InvalidArgumentError("this rank is not in the DTensor's device mesh: it owns nothing of it")
    placements = []
    for p in dt.placements:
        if isinstance(p, Shard):
            placements.append(("shard", p.dim))
        elif isinstance(p, Replicate):
            placements.append(("replicate",))
        else:
            placements.append((type(p).__name__,))
    box, replica = from_placements(tuple(dt.shape), tuple(mesh.shape), tuple(coordinate), placements)
    local = tuple(dt.to_local().shape)
    if local != box.shape:
        raise InvalidArgumentError("the DTensor's local shard has shape %s, not the %s its placements give "
                                   "(an uneven sharding wsync does not know)" % (local, box.shape))
    return tuple(dt.shape), box, replica
