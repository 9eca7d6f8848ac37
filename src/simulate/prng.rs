//! A tiny deterministic PRNG (SplitMix64) and a stateless mixer, so a seed
//! reproduces the same workload byte for byte without an extra crate.

/// SplitMix64: fast, good enough statistically for a workload generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`; a slight modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..hi` (empty range gives `lo`).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) as u64) as usize
    }
}

/// The SplitMix64 finaliser: a stateless hash of one word.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a seed, an index and a field tag into one word.
pub fn hash3(seed: u64, index: u64, tag: u64) -> u64 {
    mix(mix(seed ^ mix(index)) ^ tag)
}

/// `len` lower-case base-36 characters derived from `word` (ids like `pay_…`).
pub fn base36(mut word: u64, len: usize) -> String {
    const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(len);
    for i in 0..len {
        if i > 0 && i.is_multiple_of(12) {
            word = mix(word);
        }
        out.push(char::from(ALPHABET[(word % 36) as usize]));
        word /= 36;
    }
    out
}
