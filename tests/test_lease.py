"""The lease lock (headwater.spark.lease): put-if-absent lease objects on a folder and on S3
(moto's server), refused while live, taken after expiry or release, lost when taken over."""

from __future__ import annotations

import os

import pytest

from headwater.conf import storage
from headwater.errors import HeadwaterError
from headwater.spark.checkpoint_lock import CheckpointLock
from headwater.spark.lease import LeaseLock, filesystem_type, needs_lease


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _locations(moto, tmp) -> list[str]:
    return [str(tmp / "ckpt"), f"{moto.bucket()}/ckpt"]


@pytest.fixture(autouse=True)
def _credentials(moto, monkeypatch):
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    storage.set_defaults(moto.options())
    yield
    storage.set_defaults({})


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_second_writer_refused_while_live_allowed_after_expiry(moto, tmp, where):
    location = _locations(moto, tmp)[where == "s3"]
    clock = Clock()
    first = LeaseLock(location, "writer one", ttl=30, clock=clock).acquire(renew=False)
    second = LeaseLock(location, "writer two", ttl=30, clock=clock)
    with pytest.raises(HeadwaterError) as refused:
        second.acquire(renew=False)
    assert refused.value.code == "HW_LEASE_HELD" and "writer one" in str(refused.value)

    clock.now += 20
    assert first.renew()  # renewed: live for 30 s from now
    clock.now += 20
    with pytest.raises(HeadwaterError):
        second.acquire(renew=False)

    clock.now += 11  # expired: the first writer stopped renewing (crashed)
    second.acquire(renew=False)
    assert second.held
    assert not first.renew() and first.lost  # the old holder learns it lost the lease
    second.release()
    LeaseLock(location, "writer three", ttl=30, clock=clock).acquire(renew=False)  # no wait


def test_racing_acquirers_one_wins_through_put_if_absent(moto):
    location = f"{moto.bucket()}/race"
    clock = Clock()
    a = LeaseLock(location, "a", ttl=30, clock=clock)
    b = LeaseLock(location, "b", ttl=30, clock=clock)
    assert a._write(0, clock() + 30)  # a wins the create of lease 0 ...
    assert not b._write(0, clock() + 30)  # ... b's identical create is refused by S3
    with pytest.raises(HeadwaterError, match="leased by a"):
        b.acquire(renew=False)
    keys = moto.keys(f"{location}/_lease/")
    assert keys == [f"race/_lease/{0:020d}.json"]


def test_old_lease_objects_are_removed(moto, tmp):
    clock = Clock()
    lease = LeaseLock(str(tmp / "c"), "w", ttl=30, clock=clock).acquire(renew=False)
    for _ in range(6):
        assert lease.renew()
    assert len(os.listdir(tmp / "c" / "_lease")) == 3


def test_background_renewal_keeps_the_lease(moto, tmp):
    import time

    lease = LeaseLock(str(tmp / "bg"), "w", ttl=0.6).acquire()
    time.sleep(1.5)  # several ttl/3 rounds
    assert lease.held and lease.seq >= 2
    with pytest.raises(HeadwaterError):
        LeaseLock(str(tmp / "bg"), "other", ttl=0.6).acquire(renew=False)
    lease.release()


def test_a_holder_taken_over_is_told_on_its_renewal_thread(tmp):
    import threading

    lost = threading.Event()
    clock = Clock()
    location = str(tmp / "taken")
    holder = LeaseLock(location, "slow", ttl=0.6, clock=clock, on_lost=lost.set).acquire()
    clock.now += 1  # the holder looks expired to the next writer (a paused process, say)
    LeaseLock(location, "new", ttl=0.6, clock=clock).acquire(renew=False)
    assert lost.wait(5) and holder.lost and not holder.held
    holder.release()  # writes nothing: the lease is the new writer's
    with pytest.raises(HeadwaterError, match="leased by new"):
        LeaseLock(location, "third", ttl=0.6, clock=clock).acquire(renew=False)


MOUNTS = """\
/dev/sda1 / ext4 rw 0 0
server:/export /mnt/shared nfs4 rw 0 0
tmpfs /mnt/shared/tmp tmpfs rw 0 0
"""


def test_network_mounts_and_uris_need_a_lease_local_disks_do_not():
    assert filesystem_type("/mnt/shared/ckpt", MOUNTS) == "nfs4"
    assert needs_lease("/mnt/shared/ckpt", MOUNTS)
    assert not needs_lease("/mnt/shared/tmp/ckpt", MOUNTS)
    assert not needs_lease("/home/me/ckpt", MOUNTS)
    assert needs_lease("s3a://bucket/ckpt", MOUNTS)
    assert not needs_lease("hdfs://nn/ckpt", MOUNTS)  # no lease store: a local flock


def test_hdfs_checkpoint_lock_is_a_local_flock_keyed_by_the_uri(tmp):
    first = CheckpointLock("hdfs://nn:8020/ckpt/a", "one").acquire()
    try:
        assert "hdfs:" not in str(first.path) and first.path.is_file()
        with pytest.raises(HeadwaterError, match="hdfs://nn:8020/ckpt/a"):
            CheckpointLock("hdfs://nn:8020/ckpt/a", "two").acquire()
        CheckpointLock("hdfs://nn:8020/ckpt/b", "three").acquire().release()
    finally:
        first.release()


def test_checkpoint_lock_on_s3a_uses_the_lease(moto):
    location = f"{moto.bucket()}/ckpt".replace("s3://", "s3a://")
    first = CheckpointLock(location, "query one").acquire()
    try:
        with pytest.raises(HeadwaterError) as refused:
            CheckpointLock(location, "query two").acquire()
        assert refused.value.code == "HW_CHECKPOINT_IN_USE"
        assert "query one" in str(refused.value)
    finally:
        first.release()
    CheckpointLock(location, "query two").acquire().release()


def test_a_store_error_during_renewal_ends_the_lease_before_it_can_expire(tmp):
    """Not only OSError: S3's 503s arrive as botocore errors. Renewal keeps trying, and once
    the lease may have expired the holder counts it lost and on_lost stops its query."""
    import threading

    lost = threading.Event()
    lease = LeaseLock(str(tmp / "ckpt"), "writer", ttl=0.6, on_lost=lost.set).acquire()

    def failing(name, data):
        raise RuntimeError("SlowDown (503)")

    lease.store.create = failing  # type: ignore[method-assign]
    assert lost.wait(5), "the holder never noticed it could not renew"
    assert lease.lost and not lease.held


def test_a_stale_listing_never_starts_the_lease_over_beside_a_live_holder(tmp):
    """Objects a holder cleaned up between another writer's LIST and its GET: that writer
    lists again instead of concluding there is no lease (and writing sequence 0)."""
    clock = Clock()
    holder = LeaseLock(str(tmp / "ckpt"), "holder", ttl=30, clock=clock).acquire(renew=False)
    for _ in range(5):
        assert holder.renew()
    contender = LeaseLock(str(tmp / "ckpt"), "contender", ttl=30, clock=clock)
    real_names = contender.store.names
    listings = iter([["00000000000000000000.json", "00000000000000000001.json"]])
    contender.store.names = lambda: next(listings, None) or real_names()  # type: ignore
    with pytest.raises(HeadwaterError) as refused:
        contender.acquire(renew=False)
    assert refused.value.code == "HW_LEASE_HELD" and "holder" in str(refused.value)
    assert holder.renew()


def test_a_half_written_lease_is_a_live_holder_not_a_json_error(tmp):
    folder = tmp / "ckpt" / "_lease"
    folder.mkdir(parents=True)
    (folder / "00000000000000000000.json").write_bytes(b"")  # O_EXCL created, bytes not yet
    with pytest.raises(HeadwaterError) as refused:
        LeaseLock(str(tmp / "ckpt"), "writer").acquire(renew=False)
    assert refused.value.code == "HW_LEASE_HELD"
