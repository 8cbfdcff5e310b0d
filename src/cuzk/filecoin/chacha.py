"""The ChaCha block function, vectorised over many independent blocks with numpy.

Two Filecoin users need it, with different state layouts:

* the SDR graph draws DRG parents from rand_chacha 0.3's `ChaCha8Rng::from_seed(seed)`: 8 rounds,
  key = seed, words 12..13 = a 64-bit block counter (from 0), words 14..15 = stream id 0. The RNG
  hands out the output words in order; a `u64` draw is two consecutive words, low word first.
* synthetic PoRep uses ChaCha20 in its IETF form (RFC 8439): 20 rounds, word 12 = 32-bit block
  counter, words 13..15 = the 96-bit nonce.

Every node of the SDR graph has its own key, so the key may differ per row; numpy evaluates the
quarter rounds on whole columns at once, which is what makes 2^18 graph nodes take a fraction of a second.
"""

from __future__ import annotations

import numpy as np

__all__ = ["chacha20_ietf_keystream", "chacha_blocks", "rand_chacha_words"]

_SIGMA = np.frombuffer(b"expand 32-byte k", dtype="<u4").astype(np.uint32)
_U32 = np.uint32


def _rotl(x: np.ndarray, k: int) -> np.ndarray:
    return (x << _U32(k)) | (x >> _U32(32 - k))


def _quarter(s: list[np.ndarray], a: int, b: int, c: int, d: int) -> None:
    s[a] = s[a] + s[b]
    s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = s[c] + s[d]
    s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = s[a] + s[b]
    s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = s[c] + s[d]
    s[b] = _rotl(s[b] ^ s[c], 7)


def chacha_blocks(key_words: np.ndarray, tail_words: np.ndarray, rounds: int) -> np.ndarray:
    """ChaCha blocks: row i uses key_words[i] (8 words) and tail_words[i] (state words 12..15).

    Either argument may have a single row, which is broadcast. Returns an (n, 16) uint32 array of
    output words (the keystream block read as little-endian words).
    """
    if rounds % 2:
        raise ValueError(f"ChaCha needs an even number of rounds, got {rounds}")
    key_words = np.asarray(key_words, dtype=np.uint32).reshape(-1, 8)
    tail_words = np.asarray(tail_words, dtype=np.uint32).reshape(-1, 4)
    n = max(key_words.shape[0], tail_words.shape[0])
    with np.errstate(over="ignore"):
        init = [np.full(n, _SIGMA[i], dtype=np.uint32) for i in range(4)]
        init += [np.broadcast_to(key_words[:, i], (n,)).copy() for i in range(8)]
        init += [np.broadcast_to(tail_words[:, i], (n,)).copy() for i in range(4)]
        s = [w.copy() for w in init]
        for _ in range(rounds // 2):
            _quarter(s, 0, 4, 8, 12)
            _quarter(s, 1, 5, 9, 13)
            _quarter(s, 2, 6, 10, 14)
            _quarter(s, 3, 7, 11, 15)
            _quarter(s, 0, 5, 10, 15)
            _quarter(s, 1, 6, 11, 12)
            _quarter(s, 2, 7, 8, 13)
            _quarter(s, 3, 4, 9, 14)
        return np.stack([s[i] + init[i] for i in range(16)], axis=1)


def rand_chacha_words(key_words: np.ndarray, n_words: int, rounds: int = 8) -> np.ndarray:
    """The first `n_words` u32 outputs of rand_chacha's ChaChaRng::from_seed(key) (stream 0), per row.

    Returns (rows, n_words) uint32. A u64 draw j is words 2j (low) and 2j+1 (high).
    """
    key_words = np.asarray(key_words, dtype=np.uint32).reshape(-1, 8)
    blocks = -(-n_words // 16)
    out = []
    for counter in range(blocks):
        tail = np.array([[counter & 0xFFFFFFFF, counter >> 32, 0, 0]], dtype=np.uint32)
        out.append(chacha_blocks(key_words, tail, rounds))
    return np.concatenate(out, axis=1)[:, :n_words]


def chacha20_ietf_keystream(key: bytes, nonce: bytes, offset: int, length: int) -> bytes:
    """`length` bytes of the RFC 8439 ChaCha20 keystream starting at byte `offset` (a seek)."""
    if len(key) != 32 or len(nonce) != 12:
        raise ValueError("ChaCha20 needs a 32-byte key and a 12-byte nonce")
    if length <= 0:
        return b""
    first, last = offset // 64, (offset + length - 1) // 64
    if last >= 1 << 32:
        raise ValueError("ChaCha20 IETF keystream is limited to 2^32 blocks")
    counters = np.arange(first, last + 1, dtype=np.uint64).astype(np.uint32)
    nonce_words = np.frombuffer(nonce, dtype="<u4").astype(np.uint32)
    tail = np.empty((counters.size, 4), dtype=np.uint32)
    tail[:, 0] = counters
    tail[:, 1:] = nonce_words
    key_words = np.frombuffer(key, dtype="<u4").astype(np.uint32)
    stream = chacha_blocks(key_words, tail, 20).astype("<u4").tobytes()
    start = offset - first * 64
    return stream[start:start + length]
