"""``open_verified(..., lazy=True)``: the signature and manifest judged at open, then each read
decodes only the frames of one file and is held to its signed BLAKE3. Compared with the eager
``open_verified`` of the same bundle (the library's own bytes), never with pasted digests."""

import concurrent.futures
import random
import shutil
import struct

import pytest

import agent_bundle
from agent_bundle import BundleRejected, LazyVerifiedBundle, VerificationError
from test_agent_bundle import HOSTILE, TEST_KEY, TEST_PUB, TESTDATA, run_bundle

SEEKABLE_MAGIC = 0x8F92EAB1


def seek_table(data):
    """The (offset, compressed size) of each data frame, from the seek table that ends `data`
    (format reference §2.1.1: entries of two u32, the footer Number_Of_Frames, descriptor, magic)."""
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == SEEKABLE_MAGIC
    count = struct.unpack_from("<I", data, len(data) - 9)[0]
    width = 12 if data[-5] & 0x80 else 8
    start = len(data) - 9 - count * width
    frames, at = [], 0
    for i in range(count):
        compressed, _ = struct.unpack_from("<II", data, start + i * width)
        frames.append((at, compressed))
        at += compressed
    return frames


def pack_with_noise(work, name, noise):
    folder = work / name
    shutil.copytree(TESTDATA / "agents" / "mailer", folder)
    (folder / "data").mkdir()
    (folder / "data" / "noise.bin").write_bytes(noise)
    out = work / f"{name}.agent.bundle"
    run_bundle("pack", folder, "--key", TEST_KEY, "-o", out)
    return out


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """A seekable bundle with 9 MiB of random bytes (stored, cut into 4 MiB frames), and the
    same bundle packed with one byte of them flipped (in its second frame)."""
    work = tmp_path_factory.mktemp("lazy")
    noise = random.Random(39).randbytes(9 << 20)
    flipped = bytearray(noise)
    flipped[len(noise) * 2 // 3] ^= 0x55
    return pack_with_noise(work, "a", noise), pack_with_noise(work, "b", bytes(flipped))


def test_lazy_reads_each_file_as_the_eager_open_holds_it(noisy):
    path, _ = noisy
    with agent_bundle.open_verified(path, trusted_keys=TEST_PUB) as eager:
        expected = {p: eager.read(p) for p in eager.paths() if not p.startswith("manifest.toml")}
    with agent_bundle.open_verified(path, trusted_keys=TEST_PUB, lazy=True) as lazy:
        assert isinstance(lazy, LazyVerifiedBundle)
        assert lazy.seekable and lazy.agent == "mailer" and len(lazy.signer) == 16
        assert sorted(lazy.paths()) == sorted(expected) and len(lazy) == len(expected)
        assert repr(lazy).startswith("LazyVerifiedBundle(agent='mailer'"), repr(lazy)
        assert lazy.read("data/noise.bin") == expected["data/noise.bin"]
        for p, data in expected.items():
            assert lazy.read(p) == data, p
            assert lazy.size(p) == len(data) and p in lazy
        assert lazy.read_text("tools.json") == expected["tools.json"].decode()
        with pytest.raises(KeyError):
            lazy.read("prompts/absent.md")
        assert "prompts/absent.md" not in lazy
        # Reads from many threads at once: one at a time inside, the same bytes.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lazy.read, ["data/noise.bin", "tools.json"] * 8))
        assert got == [expected["data/noise.bin"], expected["tools.json"]] * 8
    assert lazy.closed
    with pytest.raises(ValueError):
        lazy.read("tools.json")


def test_a_bundle_rewritten_after_open_is_refused_with_digest_mismatch(noisy, tmp_path):
    """One frame of the other bundle (the same size, one byte of noise flipped, a valid frame)
    written over the open file: the frames decode, the signed digest refuses them."""
    a, b = noisy
    path = tmp_path / "swapped.agent.bundle"
    shutil.copy(a, path)
    original, other = path.read_bytes(), b.read_bytes()
    frames = list(zip(seek_table(original), seek_table(other)))
    (at, size), (other_at, _) = next(
        (fa, fb) for fa, fb in reversed(frames)
        if fa[1] == fb[1] and original[fa[0]:fa[0] + fa[1]] != other[fb[0]:fb[0] + fb[1]]
    )
    assert len(frames) >= 3 and at > 0, "a later frame, not the one of the manifest"
    swapped = bytearray(original)
    swapped[at:at + size] = other[other_at:other_at + size]
    with agent_bundle.open_verified(path, trusted_keys=TEST_PUB, lazy=True) as lazy:
        tools = lazy.read("tools.json")
        with open(path, "r+b") as f:
            f.write(swapped)
        assert len(swapped) == len(original)
        with pytest.raises(BundleRejected) as e:
            lazy.read("data/noise.bin")
        assert e.value.code == "digest_mismatch"
        assert e.value.verdict.reasons[0].path == "data/noise.bin"
        assert lazy.read("tools.json") == tools
        # The byte flipped without a valid checksum: the frame is refused as verify refuses it.
        damaged = bytearray(original)
        first = next(i for i in range(at, at + size) if original[i] != swapped[i])
        damaged[first] ^= 0xFF
        with open(path, "r+b") as f:
            f.write(damaged)
        with pytest.raises(BundleRejected) as e:
            lazy.read("data/noise.bin")
        assert e.value.code == "malformed_archive"
        assert agent_bundle.verify(path, trusted_keys=TEST_PUB).code == "malformed_archive"


def test_an_old_one_frame_bundle_is_read_from_its_start():
    path = HOSTILE / "ok.agent.bundle"
    with agent_bundle.open_verified(path, trusted_keys=TEST_PUB) as eager:
        with agent_bundle.open_verified(path, trusted_keys=TEST_PUB, lazy=True) as lazy:
            assert not lazy.seekable
            for p in lazy.paths():
                assert lazy.read(p) == eager.read(p), p


@pytest.mark.parametrize(
    "case", ["seek_table_mismatch-wrong-size", "seek_table_mismatch-overlapping", "seek_table_mismatch-fewer-frames"]
)
def test_a_seek_table_that_lies_gives_the_verifiers_code_never_other_bytes(case):
    with agent_bundle.open_verified(HOSTILE / "ok-seekable.agent.bundle", trusted_keys=TEST_PUB) as eager:
        try:
            lazy = agent_bundle.open_verified(HOSTILE / f"{case}.agent.bundle", trusted_keys=TEST_PUB, lazy=True)
        except BundleRejected as e:
            assert e.code == "seek_table_mismatch"
            return
        codes = []
        with lazy:
            for p in lazy.paths():
                try:
                    assert lazy.read(p) == eager.read(p), p
                except BundleRejected as e:
                    codes.append(e.code)
        assert codes and set(codes) == {"seek_table_mismatch"}, codes


def test_lazy_refuses_the_options_only_a_whole_pass_can_judge(noisy, tmp_path):
    path, _ = noisy
    for options in (
        {"state": tmp_path / "state.json"},
        {"baseline": tmp_path / "approved.toml"},
        {"require_provenance": True},
    ):
        with pytest.raises(VerificationError) as e:
            agent_bundle.open_verified(path, trusted_keys=TEST_PUB, lazy=True, **options)
        assert e.value.code == "usage", options
    with pytest.raises(VerificationError) as e:
        agent_bundle.open_verified(path.read_bytes(), trusted_keys=TEST_PUB, lazy=True)
    assert e.value.code == "usage"
    with pytest.raises(BundleRejected) as e:
        agent_bundle.open_verified(path, trusted_keys=TESTDATA / "keys" / "minisign-nopw.pub", lazy=True)
    assert e.value.code == "untrusted_key"
    with pytest.raises(BundleRejected) as e:
        agent_bundle.open_verified(path, trusted_keys=TEST_PUB, name="other", lazy=True)
    assert e.value.code == "name_mismatch"
