"""A cached baseline timing's key: one typed record, kept in the database's columns and read back whole."""

from kernelevolve.evaluation.baselines import MemoryBaselineStore
from kernelevolve.records.baselines import BaselineKey

KEY = BaselineKey("3f9c2a1b", "M=4,N=256 bfloat16", "torch.compile", "NVIDIA H200", "2.11.0+cu130", "3.6.0")


def test_a_key_reads_back_from_its_columns():
    assert KEY.software == "torch.compile|2.11.0+cu130|3.6.0"
    assert BaselineKey.from_columns(KEY.fingerprint, KEY.shape, KEY.gpu, KEY.software) == KEY
    # A row an older version wrote without its versions is another key, never this one.
    older = BaselineKey.from_columns(KEY.fingerprint, KEY.shape, KEY.gpu, "torch.compile")
    assert older.kind == "torch.compile" and (older.torch, older.triton) == ("", "") and older != KEY


def test_the_outside_loop_wall_time_has_a_key_of_its_own_beside_the_latency():
    loop = KEY.outside_loop()
    assert loop.kind == "torch.compile:outside-v3" and loop != KEY
    assert (loop.fingerprint, loop.shape, loop.gpu, loop.torch, loop.triton) == (
        KEY.fingerprint,
        KEY.shape,
        KEY.gpu,
        KEY.torch,
        KEY.triton,
    )


def test_a_store_answers_one_spec_by_its_fingerprint():
    store = MemoryBaselineStore()
    other = BaselineKey("other", KEY.shape, KEY.kind, KEY.gpu, KEY.torch, KEY.triton)
    store.save(KEY, 0.25)
    store.save(KEY.outside_loop(), 40.0)
    store.save(other, 9.0)
    assert store.lookup(KEY.fingerprint) == {KEY: 0.25, KEY.outside_loop(): 40.0}
    store.save(KEY, 0.3)  # timed again: replaced
    assert store.lookup(KEY.fingerprint)[KEY] == 0.3 and store.lookup("other") == {other: 9.0}
