"""Unit 4's drills (reading only a shard's bytes): chunks an expert-parallel save makes a device read,
re-sharding's host RAM, a column shard's byte runs, a safetensors tensor's offset.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=4``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question, drawn_dtype


def reshard_ram(rng) -> Question:
    billions = int(rng.choice([7, 8, 13, 16, 34, 70, 236, 405, 671]))
    dtype, size = drawn_dtype(rng)
    return Question(
        "reshard_ram",
        f"Re-sharding a checkpoint on CPU (as MaxText's reshard_checkpoint does) holds at least the whole model "
        f"in host RAM. What is that floor for {billions} billion {dtype} parameters, in GB (10^9 bytes)?",
        billions * size, "GB",
        f"{billions} x 10^9 parameters x {size} bytes = {billions * size:,} GB ({size}X GB for X billion "
        f"{dtype} parameters). The peak is higher: Lesson 4 measures a real restore and save well above the "
        "weights (about 2x for its 64 MiB of random bfloat16), and MaxText reported 63 GB for the 32 GB of "
        "DeepSeek-V2-16B.", rel_tol=0.01,
        facts=dict(billions=billions, dtype=dtype), unit_of_study=4,
        mistakes=((billions * size * 1e9 / 2**30, "That is in GiB (2^30 bytes); the question asks GB (10^9 bytes)."),
                  (billions, f"That counts parameters (billions), not bytes: x {size} bytes per {dtype} value.")))


def ep_chunks(rng) -> Question:
    experts, layers, emb, mlp = int(rng.choice([16, 64, 128])), int(rng.choice([2, 26, 60])), 2048, 1408
    ep = int(rng.choice([e for e in (4, 8, 16) if experts % e == 0]))
    fsdp = int(rng.choice([16, 32, 64]))
    shape = (experts, layers, emb, mlp)
    facts = dict(shape=shape, ep=ep, fsdp=fsdp)
    variant = rng.random()
    if variant < 1 / 3:
        return Question(
            "ep_chunks",
            f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices (each chunk holds "
            f"{experts // ep} experts, all of the other dimensions). A job shards dimension 2 over {fsdp} devices "
            "(FSDP). How many saved chunks does one of its devices' slices overlap?",
            ep, "chunks",
            f"a device needs rows {emb // fsdp} of dimension 2 for every expert, and every chunk holds some experts "
            f"with all of dimension 2: it overlaps all {ep} chunks.", facts=facts, unit_of_study=4,
            mistakes=((1, f"One chunk would hold every expert; each holds {experts // ep}, with all of dimension 2, "
                          "so a slice of dimension 2 cuts through every chunk."),))
    if variant < 2 / 3:
        return Question(
            "ep_chunks",
            f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices. A job shards dimension 2 "
            f"over {fsdp} devices (FSDP). One of its devices, reading alone (no sharing with other devices of its "
            "host), reads how many times the bytes it needs? (the ceiling: no read shared)",
            fsdp, "x",
            f"it reads every chunk, so the whole tensor, and needs 1/{fsdp} of it: {fsdp}x. Pre-sharded with chunks "
            f"split over dimension 2 it would read only the chunk it needs.", facts=facts, unit_of_study=4,
            mistakes=((ep, f"That counts the chunks it reads ({ep}); the question asks how many times the bytes "
                           f"it needs: every chunk, so the whole tensor, against its 1/{fsdp}."),
                      (1, "That is a read of exactly what it needs; every chunk holds all of dimension 2, so it "
                          "reads the whole tensor.")))
    per_host = int(rng.choice([d for d in (2, 4, 8) if d < fsdp]))
    return Question(
        "ep_chunks",
        f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices. A job shards dimension 2 "
        f"over {fsdp} devices (FSDP), {per_host} devices per host. If each host read every chunk it needs once "
        "(the floor: one read per chunk per host), how many times the bytes the host needs would it read?",
        fsdp // per_host, "x",
        f"the host's {per_host} devices together need {per_host}/{fsdp} of dimension 2, and each of their slices "
        f"overlaps all {ep} chunks: read once, that is the whole tensor, {fsdp}/{per_host} = {fsdp // per_host}x "
        f"what they need (the floor; each device alone would read {fsdp}x: a real restore lands between, Lesson 3).",
        facts={**facts, "per_host": per_host}, unit_of_study=4,
        mistakes=((fsdp, f"That is each device reading alone (the ceiling); the question asks the floor, the host's "
                         f"{per_host} devices reading each chunk once."),
                  (ep, f"That counts the chunks ({ep}); the question asks how many times the bytes the host needs.")))


def column_runs(rng) -> Question:
    rows, cols, k = int(rng.choice([64, 128, 1000])), int(rng.choice([256, 1024])), int(rng.choice([2, 4, 8]))
    dtype, size = drawn_dtype(rng)
    return Question(
        "column_runs",
        f"A C-order {dtype} tensor of shape ({rows}, {cols}) in a safetensors file is split by columns over {k} "
        "devices. How many separate contiguous byte runs make up one device's shard?",
        rows, "runs",
        f"in C order a row is contiguous; a column shard takes {cols // k} values ({cols // k * size} bytes) from "
        f"each of the {rows} rows, with a gap between rows: {rows} runs. A row shard would be 1 run.",
        facts=dict(shape=(rows, cols), devices=k, dtype=dtype), unit_of_study=4,
        mistakes=((1, "One run is a row shard's; a column shard takes a piece of every row, with a gap between rows."),
                  (k, f"That is the number of devices ({k}); one device's shard has a run in each row.")))


def safetensors_offset(rng) -> Question:
    header = int(rng.integers(40, 400)) * 8
    begin = int(rng.integers(0, 2**20)) * 4
    return Question(
        "safetensors_offset",
        f"A safetensors file's 8-byte length field says its JSON header is {header} bytes. A tensor's "
        f"data_offsets are [{begin}, {begin + 4096}]. At which byte of the file does the tensor start?",
        8 + header + begin, "byte offset",
        f"offsets count from the end of the header: 8 + {header} + {begin} = {8 + header + begin:,}.",
        facts=dict(header=header, begin=begin), unit_of_study=4,
        mistakes=((header + begin, "You left out the 8 length bytes: the file starts with the 8-byte length field, "
                                   "before the JSON header."),
                  (8 + begin, f"You left out the JSON header's {header} bytes: data_offsets count from the header's end."),
                  (begin, f"That is data_offsets' begin alone: it counts from the end of the header, after the 8 "
                          f"length bytes and the {header}-byte header."),
                  (8 + header, f"That is where the data section starts; the tensor starts {begin} bytes into it "
                               "(its data_offsets' begin).")))


DRILLS = (ep_chunks, reshard_ram, column_runs, safetensors_offset)
