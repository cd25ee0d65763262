//! The seal/open layer: round trips around chunk boundaries, and every kind of tampering fails.

use super::*;
use proptest::prelude::*;

const NAME: &str = "packs/ab/abcdef0123456789abcdef0123456789.pack";

fn keys(seed: u8) -> Keys {
    Keys::derive(&[seed; 32])
}

fn data(n: usize) -> Vec<u8> {
    // Not all zeros, not periodic at the chunk size.
    (0..n)
        .map(|i| (i as u64).wrapping_mul(2654435761) as u8 ^ (i >> 13) as u8)
        .collect()
}

const SIZES: &[usize] = &[
    0,
    1,
    15,
    16,
    17,
    CHUNK - 1,
    CHUNK,
    CHUNK + 1,
    2 * CHUNK - 1,
    2 * CHUNK,
    2 * CHUNK + 1,
    3 * CHUNK + 12_345,
];

#[test]
fn round_trips_around_chunk_boundaries() {
    let k = keys(1);
    for &n in SIZES {
        let plain = data(n);
        let sealed = k.seal(NAME, &plain).unwrap();
        assert_eq!(sealed.len() as u64, sealed_len(n as u64), "size {n}");
        assert_eq!(plain_len(sealed.len() as u64), Some(n as u64), "size {n}");
        assert_eq!(&sealed[..8], MAGIC);
        assert_eq!(k.open(NAME, &sealed).unwrap(), plain, "size {n}");
        if n >= 64 {
            // No plaintext run survives.
            assert!(!sealed.windows(32).any(|w| w == &plain[..32]), "size {n}");
        }
    }
}

#[test]
fn sizes_map_both_ways_and_impossible_sizes_are_none() {
    for n in [
        0u64,
        1,
        100,
        CHUNK as u64,
        CHUNK as u64 + 1,
        5 * CHUNK as u64 + 7,
    ] {
        assert_eq!(plain_len(sealed_len(n)), Some(n));
    }
    for stored in 0..(HEADER + TAG) as u64 {
        assert_eq!(plain_len(stored), None, "{stored}");
    }
    // Between a full chunk and the next chunk's tag: no object has that size.
    let full = sealed_len(CHUNK as u64);
    for extra in 1..=TAG as u64 {
        assert_eq!(plain_len(full + extra), None, "{extra}");
    }
    assert_eq!(plain_len(full + TAG as u64 + 1), Some(CHUNK as u64 + 1));
}

#[test]
fn two_seals_of_the_same_bytes_differ() {
    let k = keys(1);
    let a = k.seal(NAME, b"same").unwrap();
    let b = k.seal(NAME, b"same").unwrap();
    assert_ne!(a, b, "a fresh nonce prefix each time");
}

#[test]
fn a_flipped_bit_in_any_part_fails() {
    let k = keys(2);
    let plain = data(2 * CHUNK + 100);
    let sealed = k.seal(NAME, &plain).unwrap();
    let c = CHUNK + TAG;
    let spots = [
        0,                   // magic
        7,                   // magic, last byte
        8,                   // nonce prefix
        HEADER - 1,          // nonce prefix, last byte
        HEADER,              // chunk 0 ciphertext
        HEADER + CHUNK - 1,  // chunk 0 ciphertext, last byte
        HEADER + CHUNK,      // chunk 0 tag
        HEADER + c - 1,      // chunk 0 tag, last byte
        HEADER + c,          // chunk 1
        HEADER + 2 * c + 50, // last chunk ciphertext
        sealed.len() - TAG,  // last chunk tag
        sealed.len() - 1,    // last byte
    ];
    for &at in &spots {
        for bit in [0u8, 7] {
            let mut bad = sealed.clone();
            bad[at] ^= 1 << bit;
            assert!(k.open(NAME, &bad).is_err(), "bit {bit} of byte {at}");
        }
    }
}

#[test]
fn truncation_anywhere_fails() {
    let k = keys(3);
    for &n in &[0, 1, CHUNK, CHUNK + 1, 2 * CHUNK + 5] {
        let sealed = k.seal(NAME, &data(n)).unwrap();
        let c = HEADER + CHUNK + TAG;
        let mut cuts = vec![0, 1, 8, HEADER, HEADER + TAG - 1, sealed.len() - 1];
        // At a chunk boundary: what is left is well-formed but its last chunk was not sealed
        // as the last.
        if sealed.len() > c {
            cuts.push(c);
        }
        if sealed.len() > c + CHUNK + TAG {
            cuts.push(c + CHUNK + TAG);
        }
        for cut in cuts.into_iter().filter(|&l| l < sealed.len()) {
            assert!(
                k.open(NAME, &sealed[..cut]).is_err(),
                "size {n} cut to {cut}"
            );
        }
        // Nor does anything appended open.
        let mut longer = sealed.clone();
        longer.extend_from_slice(&[0; TAG + 1]);
        assert!(k.open(NAME, &longer).is_err(), "size {n} extended");
    }
}

#[test]
fn reordered_dropped_or_repeated_chunks_fail() {
    let k = keys(4);
    let plain = data(3 * CHUNK);
    let sealed = k.seal(NAME, &plain).unwrap();
    let c = CHUNK + TAG;
    let chunk = |i: usize| &sealed[HEADER + i * c..HEADER + (i + 1) * c];
    let build = |order: &[usize]| {
        let mut v = sealed[..HEADER].to_vec();
        for &i in order {
            v.extend_from_slice(chunk(i));
        }
        v
    };
    assert_eq!(k.open(NAME, &build(&[0, 1, 2])).unwrap(), plain);
    for order in [
        &[1, 0, 2][..],
        &[0, 2, 1],
        &[2, 1, 0],
        &[0, 2],
        &[1, 2],
        &[0, 1],
        &[0, 0, 2],
        &[0, 1, 2, 2],
    ] {
        assert!(k.open(NAME, &build(order)).is_err(), "chunks {order:?}");
    }
    // A chunk swapped in from another object (same key, same name, other nonce prefix).
    let other = k.seal(NAME, &plain).unwrap();
    let mut mixed = sealed.clone();
    mixed[HEADER + c..HEADER + 2 * c].copy_from_slice(&other[HEADER + c..HEADER + 2 * c]);
    assert!(k.open(NAME, &mixed).is_err());
}

#[test]
fn another_name_or_key_fails() {
    let k = keys(5);
    for &n in &[0, 10, CHUNK + 1] {
        let sealed = k.seal(NAME, &data(n)).unwrap();
        assert!(
            k.open("packs/ab/another.pack", &sealed).is_err(),
            "size {n}"
        );
        assert!(k.open("", &sealed).is_err(), "size {n}");
        assert!(keys(6).open(NAME, &sealed).is_err(), "size {n}");
    }
}

#[test]
fn derived_keys_are_distinct_and_stable() {
    let a = keys(7);
    let b = keys(7);
    let c = keys(8);
    assert_eq!(a.key_check(), b.key_check());
    assert_ne!(a.key_check(), c.key_check());
    assert_eq!(a.key_check().len(), 64);
    assert_ne!(a.key_check(), hex::encode([7u8; 32]), "not the key");
    assert_eq!(a.content_name(b"x"), b.content_name(b"x"));
    assert_ne!(a.content_name(b"x"), c.content_name(b"x"));
    assert_ne!(
        a.content_name(b"x"),
        blake3::hash(b"x").to_hex().to_string()
    );
    assert_eq!(format!("{a:?}"), "(keys)");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn any_bytes_round_trip(
        len in 0usize..2 * CHUNK + 3,
        fill in any::<u64>(),
        name in "[a-z0-9/._-]{0,60}",
        seed in any::<u8>(),
    ) {
        let k = keys(seed);
        let plain: Vec<u8> = data(len).into_iter().map(|b| b ^ fill as u8).collect();
        let sealed = k.seal(&name, &plain).unwrap();
        prop_assert_eq!(sealed.len() as u64, sealed_len(plain.len() as u64));
        prop_assert_eq!(k.open(&name, &sealed).unwrap(), plain);
    }

    #[test]
    fn any_single_flip_fails(
        len in 0usize..(CHUNK + 300),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let k = keys(9);
        let mut sealed = k.seal(NAME, &data(len)).unwrap();
        let i = at.index(sealed.len());
        sealed[i] ^= 1 << bit;
        prop_assert!(k.open(NAME, &sealed).is_err());
    }
}
