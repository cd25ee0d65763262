//! zstd compression with reused per-thread contexts.
//!
//! Why per-thread contexts: creating a zstd context costs more than compressing a few KiB, and
//! the research prototype doubled its cold-capture CPU time by making one per object. A capture
//! runs put_* on a rayon pool, so each worker thread keeps one compressor and one decompressor
//! for its lifetime.
//!
//! Why the 97% rule and the pre-checks: most bytes in a workspace that do not compress (media,
//! archives, build outputs) do not compress at all. Storing them raw saves the decompression on
//! every read, and a cheap look first avoids the wasted attempt:
//!
//! * for large objects, a 64 KiB sample compressed by zstd;
//! * for small ones, where even a failed zstd attempt costs about 10 µs (mostly resetting its
//!   tables), an order-0 entropy estimate over at most 2 KiB, about 4x cheaper (measured on
//!   random 1-8 KiB objects). It misses only data that is byte-random yet repeats itself within
//!   the object, which is rare and costs only space.

use std::cell::RefCell;
use std::sync::OnceLock;

/// Objects shorter than this are stored raw: a zstd frame header alone is about a dozen bytes.
const MIN_LEN: usize = 64;
/// Objects longer than twice this are sampled first.
const SAMPLE_LEN: usize = 64 << 10;

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// The most compressed bytes worth keeping for `len` raw bytes (97%).
fn worth(len: usize) -> usize {
    len / 100 * 97 + (len % 100) * 97 / 100
}

/// `data` compressed at `level`, or `None` when storing it raw is better (or zstd failed,
/// which is never a reason to fail a write).
pub(crate) fn compress(data: &[u8], level: i32) -> Option<Vec<u8>> {
    if data.len() < MIN_LEN {
        return None;
    }
    COMPRESSOR.with(|cell| {
        // Never re-entered: nothing below calls back into the store.
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(l, _)| *l != level) {
            *cell = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, c) = cell.as_mut()?;
        if data.len() > 2 * SAMPLE_LEN {
            bounded(c, &data[..SAMPLE_LEN])?;
        } else if looks_random(data) {
            return None;
        }
        bounded(c, data)
    })
}

/// Whether the bytes' order-0 entropy (estimated on up to four 512-byte pieces spread over the
/// data) says entropy coding could not reach 97%.
fn looks_random(data: &[u8]) -> bool {
    const PIECE: usize = 512;
    // Four interleaved histograms: consecutive increments of one counter would serialise.
    let mut hist = [[0u32; 256]; 4];
    let mut count = |s: &[u8]| {
        let mut quads = s.chunks_exact(4);
        for q in &mut quads {
            hist[0][q[0] as usize] += 1;
            hist[1][q[1] as usize] += 1;
            hist[2][q[2] as usize] += 1;
            hist[3][q[3] as usize] += 1;
        }
        for &b in quads.remainder() {
            hist[0][b as usize] += 1;
        }
    };
    let n = if data.len() <= 4 * PIECE {
        count(data);
        data.len()
    } else {
        let step = (data.len() - PIECE) / 3;
        for i in 0..4 {
            count(&data[i * step..i * step + PIECE]);
        }
        4 * PIECE
    };
    // Entropy in bits: n log2 n - sum(c log2 c). A table of c log2 c, because 256 calls to
    // log2 cost more than the histogram.
    static C_LOG_C: OnceLock<Vec<f32>> = OnceLock::new();
    let table = C_LOG_C.get_or_init(|| {
        (0..=4 * PIECE)
            .map(|c| match c {
                0 => 0.0,
                c => c as f32 * (c as f32).log2(),
            })
            .collect()
    });
    let [h0, h1, h2, h3] = &hist;
    let mut sum = 0.0f32;
    for (((a, b), c), d) in h0.iter().zip(h1).zip(h2).zip(h3) {
        sum += table[(a + b + c + d) as usize];
    }
    let n = n as f32;
    n * n.log2() - sum >= 0.97 * 8.0 * n
}

/// Compresses into a buffer of 97% of the input: zstd fails with "destination too small"
/// exactly when the result would not be worth keeping.
fn bounded(c: &mut zstd::bulk::Compressor<'static>, data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(worth(data.len()));
    c.compress_to_buffer(data, &mut out).ok()?;
    Some(out)
}

/// Decompresses `stored`, which must expand to exactly `raw_len` bytes.
pub(crate) fn decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    DECOMPRESSOR.with(|cell| {
        // Never re-entered: nothing below calls back into the store.
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        let d = slot.as_mut().ok_or("no zstd decompressor")?;
        let mut out = Vec::with_capacity(raw_len);
        d.decompress_to_buffer(stored, &mut out)
            .map_err(|e| format!("zstd: {e}"))?;
        if out.len() != raw_len {
            return Err(format!(
                "decompressed to {} bytes, expected {raw_len}",
                out.len()
            ));
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_round_trips_and_random_stays_raw() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(4000);
        let c = compress(&text, 3).expect("text compresses");
        assert!(c.len() < text.len() / 10);
        assert_eq!(decompress(&c, text.len()).unwrap(), text);
        assert!(decompress(&c, text.len() - 1).is_err());

        let mut random = vec![0u8; 300 << 10];
        blake3::Hasher::new().finalize_xof().fill(&mut random);
        assert!(compress(&random, 3).is_none());
        assert!(compress(&random[..4000], 3).is_none());
        assert!(compress(b"short", 3).is_none());
    }

    #[test]
    fn entropy_check_tells_random_from_text() {
        let mut random = vec![0u8; 8000];
        blake3::Hasher::new().finalize_xof().fill(&mut random);
        assert!(looks_random(&random));
        assert!(looks_random(&random[..3000]));
        let text = b"let x = compute(y); // a comment\n".repeat(200);
        assert!(!looks_random(&text));
        assert!(!looks_random(&[0u8; 5000]));
        // Random bytes in the middle of text: the spread pieces see the text.
        let mut mixed = text.clone();
        mixed[2000..4000].copy_from_slice(&random[..2000]);
        assert!(!looks_random(&mixed));
    }

    #[test]
    fn worth_is_97_percent() {
        assert_eq!(worth(100), 97);
        assert_eq!(worth(1000), 970);
        assert_eq!(worth(199), 193);
    }
}
