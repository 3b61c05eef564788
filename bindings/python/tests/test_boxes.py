"""Boxes from the shardings trainers have: torch.chunk's rounding, Megatron TP slices, and DTensor
placements, checked against torch itself: torch.chunk's pieces, and the local shards of real
DTensors on a gloo world of 4 CPU processes (1-D and 2-D meshes, Shard and Replicate)."""
import itertools

import pytest

import wsync
from wsync import boxes

torch = pytest.importorskip("torch")


def test_chunk_matches_torch_chunk():
    for n, k in itertools.product(range(0, 13), range(1, 6)):
        full = torch.arange(max(n, 0) * 3).reshape(n, 3)
        pieces = torch.chunk(full, k, 0) if n else ()
        got = [boxes.chunk((n, 3), 0, k, i) for i in range(k)]
        for i, b in enumerate(got):
            want = pieces[i] if i < len(pieces) else full[n:n]  # torch.chunk returns fewer pieces: the rest are empty
            assert torch.equal(full[b.slices()], want), (n, k, i, str(b))
    assert [b.extent[0] for b in (boxes.chunk((10, 4), 0, 4, i) for i in range(4))] == [3, 3, 3, 1]
    assert str(boxes.chunk((3, 10), -1, 4, 2)) == "[0:3, 6:9]"


def test_bad_arguments_are_refused_naming_them():
    with pytest.raises(wsync.InvalidArgumentError, match="chunk 4 of 4"):
        boxes.chunk((10, 4), 0, 4, 4)
    with pytest.raises(wsync.InvalidArgumentError, match="dimension 2"):
        boxes.chunk((10, 4), 2, 4, 0)
    with pytest.raises(wsync.InvalidArgumentError, match="does not divide over 4 TP ranks"):
        boxes.tp_slice((10, 4), 0, 4, 0)
    with pytest.raises(wsync.InvalidArgumentError, match="Partial"):
        boxes.from_placements((4,), (2,), (0,), [("Partial",)])
    assert boxes.tp_slice((8, 6), 1, 2, 1) == boxes.Box((0, 3), (8, 3))


def test_nested_placements_match_torchs_own_computation():
    """Every coordinate of several meshes against torch's own helper (private: where it moved or
    changed, this test skips and the real DTensors below still check)."""
    from torch.distributed.tensor import Replicate, Shard
    try:
        from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset as torchs
    except ImportError as e:
        pytest.skip("torch's _compute_local_shape_and_global_offset: %s" % e)
    cases = [((10, 6), (4,), [Shard(0)]), ((10, 6), (2, 2), [Replicate(), Shard(1)]),
             ((11, 7), (2, 3), [Shard(0), Shard(0)]), ((5, 9), (3, 2), [Shard(1), Shard(0)]),
             ((2, 3), (4,), [Shard(0)])]
    for shape, mesh_shape, placements in cases:
        ours = [("shard", p.dim) if isinstance(p, Shard) else ("replicate",) for p in placements]
        for coord in itertools.product(*(range(s) for s in mesh_shape)):
            local, offset = torchs(shape, mesh_shape, list(coord), placements)
            box, replica = boxes.from_placements(shape, mesh_shape, coord, ours)
            assert box.extent == tuple(local), (shape, mesh_shape, coord, placements)
            if box.numel:  # an empty shard's offset is not data: torch and wsync place it differently
                assert box.offset == tuple(offset), (shape, mesh_shape, coord, placements)
            assert replica == any(isinstance(p, Replicate) and s > 1 for p, s in zip(placements, mesh_shape))


def _dtensor_rank(rank, world, init_file, out):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    try:
        full = torch.arange(11 * 7, dtype=torch.float32).reshape(11, 7)
        seen = []
        for mesh_shape, placements in [((4,), [Shard(0)]), ((4,), [Shard(1)]), ((2, 2), [Replicate(), Shard(1)]),
                                       ((2, 2), [Shard(0), Shard(0)]), ((4,), [Replicate()])]:
            mesh = init_device_mesh("cpu", mesh_shape)
            dt = distribute_tensor(full, mesh, placements)
            shape, box, replica = boxes.from_dtensor(dt)
            ok = shape == (11, 7) and torch.equal(full[box.slices()], dt.to_local())
            seen.append((str(box), replica, ok))
        out.put((rank, seen))
    finally:
        dist.destroy_process_group()


def test_real_dtensors_on_a_gloo_world_of_four(tmp_path):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_dtensor_rank, args=(r, 4, str(tmp_path / "pg"), q)) for r in range(4)]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    for rank, seen in results.items():
        assert all(ok for _, _, ok in seen), (rank, seen)
    # Shard(0) over 4: 11 rows are 3, 3, 3, 2; the 2 x 2 mesh replicates over its first dimension.
    assert [results[r][0][0] for r in range(4)] == ["[0:3, 0:7]", "[3:6, 0:7]", "[6:9, 0:7]", "[9:11, 0:7]"]
    assert [results[r][2][1] for r in range(4)] == [True] * 4
    assert [results[r][1][1] for r in range(4)] == [False] * 4
    assert results[3][3][0] == "[9:11, 0:7]"  # Shard(0) twice: chunk 1 of chunk 1


def test_a_slice_becomes_a_descriptor_with_its_box_and_full_shape():
    from wsync._tensors import Descriptors
    local = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = Descriptors({"w": wsync.Slice(local, (10, 4), boxes.chunk((10, 4), 0, 4, 1)),
                     "b": wsync.Slice(torch.zeros(4), (4,), boxes.full((4,)), replica=True),
                     "whole": torch.zeros(2, 2)})
    arr, n = d.tensors()
    assert n == 3
    w, b, whole = arr[0], arr[1], arr[2]
    assert w.flags == 1 and list(w.shape[:2]) == [3, 4] and list(w.full_shape[:2]) == [10, 4]
    assert list(w.box_offset[:2]) == [3, 0] and w.nbytes == 48
    assert b.flags == 1 | 2  # a slice that other senders hold too
    assert whole.flags == 0
    assert w.struct_size == 248  # the ABI 1.5 descriptor


def test_a_slice_that_does_not_fit_its_box_is_refused():
    with pytest.raises(wsync.InvalidArgumentError, match="extent"):
        wsync.Slice(torch.zeros(2, 4), (10, 4), boxes.chunk((10, 4), 0, 4, 1))
    with pytest.raises(wsync.InvalidArgumentError, match="dimensions"):
        wsync.Slice(torch.zeros(3), (10, 4), boxes.Box((0,), (3,)))
